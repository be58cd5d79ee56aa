// Relaxed SIMD vs plain SIMD, one thread, in one Node process with the calls alternating
// (both builds loaded side by side from two imports of the package), so both see the same
// machine load: SDPA non-causal and causal at B=1, H=8, D=64. Needs relaxed SIMD (Node 20:
// node --experimental-wasm-relaxed-simd bench/js/relaxed.mjs [--sizes 512,1024] [--rounds 5]).
// Prints a table; writes bench/results/relaxed-node.json.
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import os from 'node:os';
import { H, D, flops } from './core.js';

const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const sizes = opt('--sizes', '512,1024').split(',').map(Number);
const rounds = Number(opt('--rounds', '5'));

// Two instances of the package, each with its own module loaded: the second is a copy of dist/
// (a query string on index.js would not reach the modules it imports, which hold the state).
const copy = mkdtempSync(path.join(os.tmpdir(), 'qkv-dist-'));
cpSync(fileURLToPath(new URL('../../dist/', import.meta.url)), copy, { recursive: true });
const builds = [];
for (const [variant, dir] of [['simd', fileURLToPath(new URL('../../dist/', import.meta.url))], ['simd-relaxed', copy]]) {
  const qkv = await import(pathToFileURL(path.join(dir, 'index.js')).href);
  if ((await qkv.init({ variant, numThreads: 1 })).variant !== variant) throw new Error(`${variant} did not load`);
  builds.push({ variant, qkv });
}

function inputs(qkv, L) {
  const x = (f) => new qkv.Tensor(Float32Array.from({ length: H * L * D }, (_, i) => Math.sin(i * f)), [1, H, L, D]);
  return [x(0.37), x(0.11), x(0.05)];
}

/**
 * Median wall ms of a batch of calls sized to ~200 ms (after one warm-up batch), and the
 * process's CPU ms per call over that batch: on a shared machine the CPU time is what the
 * kernel itself took (one thread; the wall clock also counts the time others held the core).
 */
function time(qkv, L, causal) {
  const [q, k, v] = inputs(qkv, L);
  const call = () => qkv.scaledDotProductAttentionSync(q, k, v, { isCausal: causal });
  const t0 = performance.now();
  call();
  const n = Math.max(3, Math.min(200, Math.round(200 / Math.max(0.01, performance.now() - t0))));
  for (let i = 0; i < n; i++) call();
  const ts = [];
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const s = performance.now();
    call();
    ts.push(performance.now() - s);
  }
  const c = process.cpuUsage(c0);
  ts.sort((a, b) => a - b);
  return { ms: ts[Math.floor(n / 2)], cpuMs: (c.user + c.system) / 1000 / n };
}

const best = new Map();
for (let round = 0; round < rounds; round++) {
  for (const L of sizes) {
    for (const causal of [false, true]) {
      for (const { variant, qkv } of round % 2 ? [...builds].reverse() : builds) {
        const t = time(qkv, L, causal);
        for (const [what, ms] of [['wall', t.ms], ['cpu', t.cpuMs]]) {
          const key = `${variant}/${what}/${L}/${causal}`;
          if (!best.has(key) || ms < best.get(key)) best.set(key, ms);
        }
      }
    }
  }
}
for (const { qkv } of builds) qkv.dispose();
rmSync(copy, { recursive: true, force: true });
const rows = [];
for (const L of sizes) {
  for (const causal of [false, true]) {
    const g = (variant, what) => best.get(`${variant}/${what}/${L}/${causal}`);
    const row = { L, causal };
    for (const what of ['wall', 'cpu']) {
      const simd = g('simd', what), relaxed = g('simd-relaxed', what);
      Object.assign(row, { [`${what}SimdGflops`]: flops(L) / simd / 1e6, [`${what}RelaxedGflops`]: flops(L) / relaxed / 1e6, [`${what}RelaxedVsSimd`]: simd / relaxed });
    }
    rows.push(row);
  }
}
const result = { runtime: `node ${process.version} ${process.execArgv.join(' ')}`, cpu: os.cpus()[0]?.model, load: os.loadavg(), date: new Date().toISOString(), rounds, method: 'per row: the fastest of `rounds` (wall: medians; cpu: process CPU ms per call over the batch), builds alternating', rows };
mkdirSync(new URL('../results/', import.meta.url), { recursive: true });
writeFileSync(new URL('../results/relaxed-node.json', import.meta.url), JSON.stringify(result, null, 1) + '\n');
console.log(`relaxed vs plain SIMD, 1 thread — ${result.runtime} (B=1, H=8, D=64; GFLOP/s, load ${result.load.map((x) => x.toFixed(1)).join(' ')})`);
console.log('                 wall clock                 CPU time');
console.log('    L causal   SIMD  relaxed  ratio     SIMD  relaxed  ratio');
const f = (x, w) => x.toFixed(1).padStart(w);
for (const r of rows) {
  console.log(`${String(r.L).padStart(5)} ${String(r.causal).padStart(6)} ${f(r.wallSimdGflops, 6)} ${f(r.wallRelaxedGflops, 8)} ${r.wallRelaxedVsSimd.toFixed(2).padStart(6)}   ${f(r.cpuSimdGflops, 6)} ${f(r.cpuRelaxedGflops, 8)} ${r.cpuRelaxedVsSimd.toFixed(2).padStart(6)}`);
}
