// Two builds of the package in one process, calls alternating: time per scaledDotProductAttention
// call (1 thread, wasm SIMD) at small and large L, to compare a change against the build before it.
//   node bench/js/compare-builds.mjs <dist A> <dist B> [--sizes 16,128,1024] [--rounds 5] [--decode]
// --decode: one query row per head against L cached keys, SmolLM2-135M's heads (9 query heads
// sharing 3 kv heads, D 64, GQA) with the weights returned, as a decode step of the demo.
// Prints a table (median ms per call of each round's batch, fastest round kept) and writes
// bench/results/compare-builds.json (compare-builds-decode.json with --decode).
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const [distA, distB] = args.filter((a, i) => !a.startsWith('--') && !args[i - 1]?.startsWith('--'));
if (!distA || !distB) throw new Error('usage: node bench/js/compare-builds.mjs <dist A> <dist B> [--sizes 16,128,1024] [--rounds 5]');
const sizes = opt('--sizes', '16,128,1024').split(',').map(Number);
const rounds = Number(opt('--rounds', '5'));
const decode = args.includes('--decode');
const shape = decode ? { H: 9, Hkv: 3, D: 64 } : { H: 8, Hkv: 8, D: 64 };

async function load(dist) {
  const qkv = await import(pathToFileURL(path.resolve(dist, 'index.js')).href + `?${dist}`);
  await qkv.init({ variant: 'simd', numThreads: 1 });
  return qkv;
}
const builds = [{ name: distA, qkv: await load(distA) }, { name: distB, qkv: await load(distB) }];

function inputs(qkv, L) {
  const { H, Hkv, D } = shape;
  const x = (heads, rows) => new qkv.Tensor(Float32Array.from({ length: heads * rows * D }, (_, i) => Math.sin(i * 0.37)), [1, heads, rows, D]);
  return [x(H, decode ? 1 : L), x(Hkv, L), x(Hkv, L)];
}

/** Median ms per call over a batch sized to ~150 ms. */
async function time(qkv, L) {
  const [q, k, v] = inputs(qkv, L);
  const opts = decode ? { isCausal: true, enableGqa: true, returnWeights: true } : { isCausal: true };
  const call = () => qkv.scaledDotProductAttention(q, k, v, opts);
  const t0 = performance.now();
  await call();
  const once = Math.max(0.001, performance.now() - t0);
  const n = Math.max(5, Math.min(2000, Math.round(150 / once)));
  const ts = [];
  for (let i = 0; i < n; i++) {
    const s = performance.now();
    await call();
    ts.push(performance.now() - s);
  }
  ts.sort((a, b) => a - b);
  return ts[n >> 1];
}

const best = new Map();
for (let r = 0; r < rounds; r++) {
  for (const L of sizes) {
    for (const b of r % 2 ? [...builds].reverse() : builds) {
      const ms = await time(b.qkv, L);
      const key = `${b.name}|${L}`;
      best.set(key, Math.min(best.get(key) ?? Infinity, ms));
    }
  }
}
const rows = sizes.map((L) => {
  const a = best.get(`${distA}|${L}`), b = best.get(`${distB}|${L}`);
  return { L, Lq: decode ? 1 : L, ...shape, causal: true, msA: a, msB: b, bOverA: a / b };
});
console.log(`| L | ${distA} ms/call | ${distB} ms/call | speed B / A |\n|---|---|---|---|`);
for (const r of rows) console.log(`| ${r.L} | ${r.msA.toFixed(4)} | ${r.msB.toFixed(4)} | ${r.bOverA.toFixed(3)} |`);
mkdirSync('bench/results', { recursive: true });
writeFileSync(`bench/results/compare-builds${decode ? '-decode' : ''}.json`, JSON.stringify({ date: new Date().toISOString(), node: process.version, rounds, a: distA, b: distB, rows }, null, 1));
for (const b of builds) b.qkv.dispose();
