// The attention benchmark in Node: qkv (scalar, SIMD, SIMD + 2 threads, and their relaxed-SIMD twins), a naive JS loop and
// onnxruntime-web's wasm backend at 1 and 2 threads (each ORT thread count in its own process:
// ORT fixes its thread count at first use). Prints a table; writes bench/results/js-node.json.
//   node bench/js/node.mjs [--quick] [--sizes 128,512] [--rounds 3]
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import os from 'node:os';
import { Fastest, ROUNDS_METHOD, SIZES, benchNaive, benchOrt, benchQkvVariants, ratios, roundsFor, table } from './core.js';

const args = process.argv.slice(2);
const quick = args.includes('--quick') || process.env.QKV_BENCH_QUICK === '1';
const sizesArg = args.includes('--sizes') ? args[args.indexOf('--sizes') + 1] : process.env.QKV_BENCH_SIZES;
const sizes = sizesArg ? sizesArg.split(',').map(Number) : SIZES;
const part = args.includes('--part') ? args[args.indexOf('--part') + 1] : null;
const log = (r) => process.stderr.write(`  ${r.impl} t=${r.threads} L=${r.L} causal=${r.causal}: ${r.ms.toFixed(2)} ms, ${r.gflops.toFixed(2)} GFLOP/s\n`);

async function runPart(p) {
  if (p === 'qkv') {
    return benchQkvVariants(await import('../../dist/index.js'), { sizes, quick, log });
  }
  if (p.startsWith('ort')) {
    const ort = await import('onnxruntime-web');
    ort.env.wasm.numThreads = Number(p.slice(3));
    return benchOrt(ort, { sizes, quick, log });
  }
  if (p === 'naive') return benchNaive({ sizes, quick, log });
  throw new Error(`unknown part ${p}`);
}

if (part) {
  process.stdout.write(JSON.stringify(await runPart(part)));
  process.exit(0);
}

// Node 20 runs the relaxed-SIMD builds only with this V8 flag: the parts get it where accepted.
const relaxedFlag = spawnSync(process.execPath, ['--experimental-wasm-relaxed-simd', '-e', '0']).status === 0 ? ['--experimental-wasm-relaxed-simd'] : [];
const rounds = roundsFor(args, quick);
const fastest = new Fastest();
const runChild = (p) => {
  process.stderr.write(`bench (node): ${p}\n`);
  const r = spawnSync(process.execPath, [...relaxedFlag, fileURLToPath(import.meta.url), '--part', p, ...(quick ? ['--quick'] : []), '--sizes', sizes.join(',')],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`bench part ${p} failed (${r.status})`);
  fastest.add(JSON.parse(r.stdout));
};
for (let round = 0; round < rounds; round++) for (const p of ['qkv', 'ort1', 'ort2']) runChild(p);
runChild('naive');
const rows = fastest.rows();
const result = {
  runtime: `node ${process.version}`, cpus: os.cpus().length, cpu: os.cpus()[0]?.model, load: os.loadavg(),
  date: new Date().toISOString(), shape: { B: 1, H: 8, D: 64 }, quick, rounds,
  method: ROUNDS_METHOD, rows, ratios: ratios(rows),
};
const dir = new URL('../results/', import.meta.url);
mkdirSync(dir, { recursive: true });
writeFileSync(new URL('js-node.json', dir), JSON.stringify(result, null, 1) + '\n');
console.log(table(rows, `qkv attention benchmark — Node ${process.version}, ${os.cpus().length} CPUs (B=1, H=8, D=64; median ms)`));
