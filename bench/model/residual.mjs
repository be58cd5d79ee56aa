// What the residual stream's API costs (docs/residual.md), on a GPT-2-small-shaped checkpoint with
// random weights (bench/model/gpt2_small_memory.mjs), Node, 1 thread, `simd` build, in one run:
//   forward    model.forward at T tokens: plain, with outputActivations: true, with
//              outputHiddenStates: true (and plain from --before, another build's dist/, if given):
//              the ratios to the plain forward of the same round (target: <= 1.1x)
//   lens       logitLens at T = 64: its one unembedding product ((12 + 1) x 64 rows through the
//              final norm and the [768, 50257] LM head) timed alone, in GFLOP/s (2 R K N), against
//              the library's GEMM (matmulRun 'gemm', F32 in panels, as the model holds wte) on [R, 768] x [768, 3072] in the same
//              run (target: >= 80 %), and the whole logitLens call (the statistics in JS beside)
//   sweeps     activationPatching at T = 16: 'heads' (144 patched runs) against 144 plain
//              forwards (target <= 0.6x), 'headPositions' (2,304) against 2,304 forwards (target
//              <= 0.35x), the forwards' time from the median plain forward of the same length
//              (logits 'last', what a patched run reads; and 'all', the default), with progress
// Timed by the process's CPU time (the machine is shared: CPU time is what the code costs);
// forward and lens figures are medians over --reps rounds, with the spread (min-max) of the
// ratios; a sweep runs --sweep-reps times.
//
//   node bench/model/residual.mjs [--reps 7] [--sweep-reps 1] [--tokens 64] [--before DIR]
//                                 [--skip-head-positions] [--out bench/results/model-residual-node.json]
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { checkpoint } from './gpt2_small_memory.mjs';
import { machineLimits } from '../limits.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const REPS = Number(arg('--reps', 7));
const SWEEP_REPS = Number(arg('--sweep-reps', 1));
const T_FWD = Number(arg('--tokens', 64));
const BEFORE = arg('--before', null);
const SKIP_HP = args.includes('--skip-head-positions');
const OUT = path.resolve(ROOT, arg('--out', 'bench/results/model-residual-node.json'));
const DIST = process.env.QKV_DIST ? path.resolve(process.env.QKV_DIST) : path.join(ROOT, 'dist');
const NL = 12, H = 12, E = 768, V = 50257;

const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e3; }; // ms
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const ids = (T, seed) => Array.from({ length: T }, (_, i) => (i * 7919 + seed * 104729 + 13) % V);

async function load(dist, files) {
  const qkv = await import(pathToFileURL(path.join(dist, 'index.js')).href);
  qkv.env.variant = 'simd';
  qkv.env.numThreads = 1;
  const model = await qkv.loadModel(files, { weights: 'f32' });
  return { qkv, model };
}

/** Runs each named call once per round (interleaved), REPS rounds: median ms and per-round ratios to `base`. */
async function rounds(calls, base, reps = REPS) {
  for (const [, f] of calls) await f(); // warm-up
  const times = Object.fromEntries(calls.map(([n]) => [n, []]));
  const ratios = Object.fromEntries(calls.map(([n]) => [n, []]));
  for (let r = 0; r < reps; r++) {
    const round = {};
    for (const [name, f] of calls) {
      const c0 = cpu();
      await f();
      round[name] = cpu() - c0;
      times[name].push(round[name]);
    }
    for (const [name] of calls) ratios[name].push(round[name] / round[base]);
  }
  return calls.map(([name]) => ({
    name, ms: median(times[name]), min_ms: Math.min(...times[name]),
    ratio: median(ratios[name]), ratio_min: Math.min(...ratios[name]), ratio_max: Math.max(...ratios[name]),
  }));
}

function print(title, rows) {
  console.log(`\n${title}`);
  console.log('what                              ms (median)   ms (best)   x base (median; min-max over rounds)');
  for (const r of rows) {
    console.log(`${r.name.padEnd(33)} ${r.ms.toFixed(1).padStart(11)} ${r.min_ms.toFixed(1).padStart(11)}   ${r.ratio.toFixed(3)} (${r.ratio_min.toFixed(3)}-${r.ratio_max.toFixed(3)})`);
  }
}

async function main() {
  const files = checkpoint(NL);
  const now = await load(DIST, files);
  const before = BEFORE ? await load(path.resolve(BEFORE), files) : null;
  files.weights = null;
  const { qkv, model } = now;
  const result = {
    what: 'the residual stream: forward records, the logit lens, patching sweeps (bench/model/residual.mjs)',
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, node: process.version, loadavg: os.loadavg() },
    // the wasm mul+add peak and read bandwidth, 1 thread, in the same run
    limits: machineLimits({ who: 'residual', required: false }),
    model: { shape: 'GPT-2 small (random weights, N(0, 0.02))', layers: NL, heads: H, n_embd: E, vocab: V },
    threads: 1, variant: 'simd', clock: 'process CPU time', reps: REPS, before: BEFORE,
  };

  // ---- 9: the forward with records ------------------------------------------------------------
  const x = ids(T_FWD, 1);
  const fwd = [
    ['plain', () => model.forward(x)],
    ['outputActivations: true', () => model.forward(x, { outputActivations: true })],
    ['outputHiddenStates: true', () => model.forward(x, { outputHiddenStates: true })],
  ];
  if (before) fwd.splice(1, 0, ['plain (before)', () => before.model.forward(x)]);
  result.forward = { tokens: T_FWD, logits: 'all', rows: await rounds(fwd, 'plain') };
  print(`model.forward, ${T_FWD} tokens, logits 'all' (target: records <= 1.1x plain)`, result.forward.rows);

  // ---- 10: the lens's one product against the library's GEMM ----------------------------------
  const TL = 64, R = (NL + 1) * TL;
  const w = model._wasm('bench');
  const m = w.m;
  const alloc = (floats) => { const p = m._malloc(4 * floats); if (!p) throw new Error('bench: malloc failed'); return p; };
  const pRows = alloc(R * E), pLogits = alloc(R * V);
  const heapF32 = () => new Float32Array(m.qkvMemory().buffer);
  heapF32().set(qkvRandom(R * E, 7), pRows >>> 2);
  const K = E, N = 3072;
  const pW = alloc(K * N), pX = alloc(R * K), pY = alloc(R * N);
  heapF32().set(qkvRandom(K * N, 8, 0.02), pW >>> 2);
  heapF32().set(qkvRandom(R * K, 9), pX >>> 2);
  const lensIds = ids(TL, 2);
  const lensRows = await rounds([
    ['gemm [832, 768] x [768, 3072]', () => { const e = m.matmulRun('F32', 'Panels', R, K, N, pW, 0, pX, 0, pY, 1, 'gemm'); if (e) throw new Error(e); }],
    ['unembed [832, 768] -> [832, 50257]', () => { const e = model._wasm('bench').handle.unembed(pRows, R, pLogits); if (e) throw new Error(e); }],
    ['logitLens (whole call)', () => qkv.logitLens(model, lensIds, { topK: 5 })],
  ], 'gemm [832, 768] x [768, 3072]', Math.max(3, Math.ceil(REPS / 2)));
  const gflops = (r, flops) => flops / (r.ms * 1e6);
  const gemmRate = gflops(lensRows[0], 2 * R * K * N);
  const lensRate = gflops(lensRows[1], 2 * R * E * V);
  [pRows, pLogits, pW, pX, pY].forEach((p) => m._free(p));
  result.lens = {
    tokens: TL, rows: R, calls: lensRows, gemm_gflops: gemmRate, unembed_gflops: lensRate,
    fraction_of_gemm: lensRate / gemmRate,
    unembed_gflops_best: gflops({ ms: lensRows[1].min_ms }, 2 * R * E * V), gemm_gflops_best: gflops({ ms: lensRows[0].min_ms }, 2 * R * K * N),
  };
  print(`the logit lens at T = ${TL}: ${R} rows`, lensRows);
  console.log(`unembed ${lensRate.toFixed(2)} GFLOP/s vs gemm ${gemmRate.toFixed(2)} GFLOP/s: ${(100 * lensRate / gemmRate).toFixed(1)} % (target >= 80 %)`);

  // ---- 11: the sweeps ------------------------------------------------------------------------
  const TS = 16;
  const clean = ids(TS, 3);
  const corrupted = [...clean];
  corrupted[5] = (corrupted[5] + 1) % V;
  const last = (await model.forward(clean, { logits: 'last' })).logits.data;
  let correct = 0;
  for (let v = 1; v < V; v++) if (last[v] > last[correct]) correct = v;
  const answer = [correct, (correct + 1) % V];
  const base = await rounds([
    ["forward (logits 'last')", () => model.forward(corrupted, { logits: 'last' })],
    ["forward (logits 'all')", () => model.forward(corrupted)],
  ], "forward (logits 'last')");
  print(`one plain forward at T = ${TS}`, base);
  result.sweeps = { tokens: TS, forward: base, runs: [] };
  const kinds = [['heads', NL * H, 0.6]];
  if (!SKIP_HP) kinds.push(['headPositions', NL * H * TS, 0.35]);
  for (const [over, cells, target] of kinds) {
    const times = [];
    let progress = 0;
    for (let r = 0; r < SWEEP_REPS; r++) {
      const c0 = cpu();
      await qkv.activationPatching(model, { clean, corrupted, answer, over, onProgress: () => progress++ });
      times.push(cpu() - c0);
    }
    const ms = median(times);
    const vsLast = ms / (cells * base[0].ms);
    const vsAll = ms / (cells * base[1].ms);
    const row = { over, cells, ms, ms_runs: times, per_cell_ms: ms / cells, x_forwards_last: vsLast, x_forwards_all: vsAll, target, progress_calls: progress / SWEEP_REPS };
    result.sweeps.runs.push(row);
    console.log(`activationPatching over '${over}' (${cells} patched runs): ${(ms / 1000).toFixed(1)} s CPU, ${(ms / cells).toFixed(1)} ms a cell = ` +
      `${vsLast.toFixed(3)}x ${cells} forwards (logits 'last'), ${vsAll.toFixed(3)}x (logits 'all'); target <= ${target}x; runs ${times.map((t) => (t / 1000).toFixed(1)).join(', ')} s`);
  }
  writeFileSync(OUT, JSON.stringify(result, null, 1) + '\n');
  console.log(`\nwrote ${path.relative(ROOT, OUT)}`);
  model.dispose();
  before?.model.dispose();
}

/** n values in [-scale, scale) from a seeded LCG. */
function qkvRandom(n, seed, scale = 1) {
  let s = seed >>> 0;
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = ((((s = (s * 1664525 + 1013904223) >>> 0) / 4294967296) - 0.5) * 2) * scale;
  return a;
}

await main();
