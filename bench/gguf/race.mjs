// The GGUF race: qkv against llama.cpp's WebAssembly build (@wllama/wllama) in headless
// Chromium, on the same GGUF bytes (bench/gguf/make_checkpoints.mjs: SmolLM2-135M- and
// Qwen3-0.6B-shaped, random weights, Q8_0 and Q4_0). One command:
//
//   node bench/gguf/race.mjs [--models smollm2-135m,qwen3-0.6b] [--types Q8_0,Q4_0] [--threads 1,2]
//        [--runtimes qkv,wllama-2.3] [--reps 3] [--rounds 1] [--prompt 8] [--tokens 32] [--prefill 128] [--budget-s 20]
//        [--out gguf-race-chromium]
//
// --runtimes names pages: qkv (qkv_page.js: its fastest build, relaxed SIMD where Chromium has
// it) and wllama, wllama-compat, wllama-2.3 (wllama_page.js: wllama's three builds). A local
// server sends the files with COOP/COEP (crossOriginIsolated: both runtimes' threads run); each
// (model, type, threads, runtime) runs in a browser of its own, which loads the file, warms up,
// then times `reps` prefills of `prefill` tokens and `reps` greedy decodes of `tokens` tokens
// after a `prompt`-token prompt (the pages' comments say how each runtime is timed). Figures are
// tokens/s, 1 thread on the renderer's CPU time (all its threads, /proc schedstat, read at marks
// around every timed region: the machine is shared, as in gpt2_small_browser.mjs), 2 threads on
// wall time (both clocks in the JSON): the median of the reps and their spread (min..max). Beside them, in
// the same run: the machine's wasm read bandwidth and f32x4 mul+add peak (bench/matmul/,
// LIMITS: 1 thread; 2 threads' bandwidth before and after the runs), the load average around
// every browser, and the decode bound the bandwidth sets (bandwidth / the file's bytes).
// --rounds N runs every (model, type, runtime) N times, its thread counts back to back in each
// round, so that a machine whose speed drifts over minutes weighs on 1 and 2 threads alike: a
// figure is then the median of all rounds' reps, and thread_gains holds each round's 2-thread /
// 1-thread ratio (wall time) with their median and range.
// Prints a table; writes bench/results/<out>.json.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, launch, openPage, serve } from '../../tests/browser/harness.js';
import { MODELS, makeCheckpoint } from './make_checkpoints.mjs';
import { ourRenderers, processCpuMs } from '../renderers.mjs';

const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const list = (name, fallback) => arg(name, fallback).split(',');
const MODEL_NAMES = list('--models', 'smollm2-135m,qwen3-0.6b');
const TYPES = list('--types', 'Q8_0,Q4_0');
const THREADS = list('--threads', '1,2').map(Number);
const RUNTIMES = list('--runtimes', 'qkv,wllama-2.3');
const REPS = Number(arg('--reps', 3));
const ROUNDS = Number(arg('--rounds', 1));
const PROMPT = Number(arg('--prompt', 8)), TOKENS = Number(arg('--tokens', 32)), PREFILL = Number(arg('--prefill', 128));
const OUT = arg('--out', 'gguf-race-chromium');  // bench/results/<out>.json (a machine in the name: tools/bench-report/results.mjs)
const BUDGET_S = Number(arg('--budget-s', 20));  // a decode stops after the step that passes it (a loaded machine)
const DIR = path.join(ROOT, 'build', 'bench-gguf');

/** LIMITS of bench/matmul's wasm programs (Node): 1 thread, or `threads` reading at once. */
function limits(threads) {
  const prog = threads > 1 ? 'bench-threads.cjs' : 'bench-simd.cjs';
  const r = spawnSync(process.execPath, [path.join(ROOT, 'build/bench-matmul', prog), String(threads), '-', 'limits'], { encoding: 'utf8' });
  const line = r.stdout.split('\n').find((l) => l.startsWith('LIMITS '));
  if (!line) throw new Error(`race: the limits measurement failed:\n${r.stdout}${r.stderr}`);
  return JSON.parse(line.slice(7));
}

// ---- CPU time: the renderer's threads, read from /proc around every timed region ---------------

const FLAG = '--qkv-gguf-race';
/** CPU ms of all threads of the browser's renderers (schedstat: the page, its workers, wasm threads). */
const rendererCpuMs = () => ourRenderers(FLAG).reduce((ms, pid) => { try { return ms + processCpuMs(pid); } catch { return ms; } }, 0);
let marks = [];  // GET /mark: the renderers' CPU ms, by the index the page gets back
const mark = () => { marks.push(rendererCpuMs()); return marks.length - 1; };

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
/**
 * tokens/s per rep of regions { wall, from, to[, steps][, minus: a region to subtract] } (`n` tokens each, or `steps`), on the
 * CPU time between the marks with 1 thread and on wall time with more (clock: which); median,
 * min, max and the reps.
 */
function rate(regions, n, threads) {
  const clock = threads > 1 || regions.some((r) => r.from === undefined) ? 'wall' : 'cpu';
  const cpu = (r) => marks[r.to] - marks[r.from] - (r.minus ? cpu(r.minus) : 0);
  const ms = (r) => (clock === 'cpu' ? cpu(r) : r.wall);
  const tps = regions.map((r) => (1000 * (r.steps ?? n)) / ms(r));
  const wall = regions.map((r) => (1000 * (r.steps ?? n)) / r.wall);
  return summary(clock, tps, wall);
}
const summary = (clock, tps, wall) => ({ clock, median: median(tps), min: Math.min(...tps), max: Math.max(...tps), reps: tps, wall_median: median(wall), wall_reps: wall });
/** One rate over the reps of several rounds' rates. */
const merged = (rates) => summary(rates[0].clock, rates.flatMap((x) => x.reps), rates.flatMap((x) => x.wall_reps));

async function runOne(origin, spec) {
  marks = [];
  const load = os.loadavg()[0];
  const browser = await launch(['--renderer-process-limit=1', FLAG]);
  const t0 = performance.now();
  try {
    const page = spec.runtime === 'qkv' ? 'qkv.html' : 'wllama.html';
    const q = new URLSearchParams({
      build: spec.runtime, file: `/gguf/${spec.model}-${spec.type}.gguf`, vocab: MODELS[spec.model].vocab, threads: spec.threads,
      reps: REPS, prompt: PROMPT, tokens: TOKENS, prefill: PREFILL, budget: BUDGET_S * 1000, ...(process.env.RACE_DEBUG ? { debug: 1 } : {}),
    });
    const p = await openPage(browser, `${origin}/bench/gguf/${page}?${q}`);
    if (process.env.RACE_DEBUG) p.on('console', (m) => console.error(`    [page] ${m.type()}: ${m.text()}`));
    await p.waitForFunction(() => window.__race !== undefined, null, { timeout: 0, polling: 500 });
    const r = await p.evaluate(() => window.__race);
    if (r.error) throw new Error(`race: ${JSON.stringify(spec)}: ${r.error}`);
    return {
      ...spec, ...r, page_problems: p.problems.length ? p.problems.slice(0, 10) : undefined, browser: browser.version(),
      load_average: [load, os.loadavg()[0]], run_s: (performance.now() - t0) / 1000,
      prefill_tps: rate(r.prefill, PREFILL, spec.threads), decode_tps: rate(r.decode, 0, spec.threads),
      marks_cpu_ms: marks,
    };
  } finally {
    await browser.close();
  }
}

const t0 = performance.now();
for (const m of MODEL_NAMES) for (const t of TYPES) makeCheckpoint(DIR, m, t);
execFileSync('bash', [path.join(ROOT, 'bench/matmul/run.sh'), '--build-only'], { stdio: 'inherit' });
const machine = { cpu: os.cpus()[0]?.model, cores: os.availableParallelism?.() ?? os.cpus().length, load_average: { before: os.loadavg() } };
const limits1 = limits(1);
const twoThreads = THREADS.some((t) => t > 1) ? [limits(2).read_bandwidth_all_threads_gbs] : [];
const server = await serve({ mounts: { '/gguf/': DIR }, dynamic: { '/mark': mark } });
const rounds = [];  // every browser's run, in order
// one round: the thread counts outermost (a single round: as before); several: each (model, type,
// runtime)'s thread counts back to back
const order = ROUNDS > 1
  ? MODEL_NAMES.flatMap((model) => TYPES.flatMap((type) => RUNTIMES.flatMap((runtime) => THREADS.map((threads) => ({ model, type, threads, runtime })))))
  : THREADS.flatMap((threads) => MODEL_NAMES.flatMap((model) => TYPES.flatMap((type) => RUNTIMES.map((runtime) => ({ model, type, threads, runtime })))));
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const spec of order) {
      const { model, type, threads, runtime } = spec;
      console.error(`  ${ROUNDS > 1 ? `round ${round + 1}: ` : ''}${model} ${type} ${threads}t ${runtime} ...`);
      const r = await runOne(server.url, spec);
      console.error(`  ${model} ${type} ${threads}t ${runtime} (${r.build}): decode ${r.decode_tps.median.toFixed(1)} tok/s, prefill ${r.prefill_tps.median.toFixed(0)} tok/s, load ${r.load_average.map((x) => x.toFixed(1)).join('->')} (${r.run_s.toFixed(0)} s)`);
      rounds.push({ round, ...r });
      writeFileSync(path.join(DIR, `${OUT}.partial.json`), JSON.stringify(rounds) + '\n');
    }
  }
} finally {
  await server.close();
}
const same = (a, b) => a.model === b.model && a.type === b.type && a.threads === b.threads && a.runtime === b.runtime;
// per (model, type, threads, runtime): the first round's run, its figures over every round's reps
const runs = rounds.filter((r) => r.round === 0).map((first) => {
  const all = rounds.filter((r) => same(r, first));
  if (all.length === 1) return { ...first, round: undefined };
  return {
    ...first, round: undefined, rounds: all.map((r) => ({ decode_tps: r.decode_tps, prefill_tps: r.prefill_tps, load_average: r.load_average, run_s: r.run_s, marks_cpu_ms: r.marks_cpu_ms })),
    marks_cpu_ms: undefined, load_average: [Math.min(...all.flatMap((r) => r.load_average)), Math.max(...all.flatMap((r) => r.load_average))],
    run_s: all.reduce((t, r) => t + r.run_s, 0), prefill_tps: merged(all.map((r) => r.prefill_tps)), decode_tps: merged(all.map((r) => r.decode_tps)),
  };
});
// each round's 2-thread / 1-thread gain per (model, type, runtime), on wall time
const ratioSpread = (xs) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs), rounds: xs });
const threadGains = THREADS.includes(1) && THREADS.includes(2) ? MODEL_NAMES.flatMap((model) => TYPES.flatMap((type) => RUNTIMES.flatMap((runtime) => {
  const pairs = [...Array(ROUNDS).keys()].map((round) => [1, 2].map((threads) => rounds.find((r) => r.round === round && same(r, { model, type, threads, runtime }))));
  const gain = (k) => pairs.map(([a, b]) => b[k].wall_median / a[k].wall_median);
  return pairs.every(([a, b]) => a && b) ? [{ model, type, runtime, decode: ratioSpread(gain('decode_tps')), prefill: ratioSpread(gain('prefill_tps')) }] : [];
}))) : [];
if (twoThreads.length) twoThreads.push(limits(2).read_bandwidth_all_threads_gbs);
machine.load_average.after = os.loadavg();
const files = Object.fromEntries(MODEL_NAMES.flatMap((m) => TYPES.map((t) => [`${m}-${t}`, statSync(path.join(DIR, `${m}-${t}.gguf`)).size])));
// decode reads every weight once a token: the bandwidth bounds it at bandwidth / file bytes
for (const r of runs) {
  const gbs = r.threads > 1 && twoThreads.length ? Math.min(...twoThreads) : limits1.read_bandwidth_gbs;
  r.decode_bound_tps = (gbs * 1e9) / files[`${r.model}-${r.type}`];
}
const out = {
  benchmark: 'gguf-race-chromium',
  date: new Date().toISOString(),
  browser: runs[0]?.browser,
  machine,
  limits: { ...limits1, read_bandwidth_2_threads_gbs: twoThreads },
  models: Object.fromEntries(MODEL_NAMES.map((m) => [m, MODELS[m]])),
  file_bytes: files,
  method: `one browser per (model, type, threads, runtime), the GGUF fetched from a local COOP/COEP server; a warm-up, then ${REPS} prefills of ${PREFILL} token ids ` +
    `and ${REPS} greedy decodes of ${TOKENS} tokens after ${PROMPT} (tokens/s over the ${TOKENS - 1} steps after the prompt's token); 1 thread: the renderer's CPU time ` +
    '(all its threads, /proc schedstat), 2 threads: wall time (runs[].*_tps.clock; wall_median beside); median and min..max of the reps' +
    (ROUNDS > 1 ? `; ${ROUNDS} rounds, each (model, type, runtime)'s thread counts back to back in each, the figures over all rounds' reps, thread_gains per round on wall time` : ''),
  reps: REPS, rounds: ROUNDS, prompt: PROMPT, tokens: TOKENS, prefill: PREFILL, decode_budget_s: BUDGET_S,
  runs,
  thread_gains: threadGains,
  total_s: (performance.now() - t0) / 1000,
};
mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
const file = path.join(ROOT, 'bench', 'results', `${OUT}.json`);
writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
rmSync(path.join(DIR, `${OUT}.partial.json`), { force: true });

const f = (x, d = 1) => x.toFixed(d);
const cell = (s, d) => `${f(s.median, d)} (${f(s.min, d)}..${f(s.max, d)})`;
const head = ['model', 'type', 'threads', 'runtime', 'build', 'decode tok/s', 'prefill tok/s', 'decode bound tok/s', 'load avg'];
const rows = runs.map((r) => [r.model, r.type, String(r.threads), r.runtime, r.build, cell(r.decode_tps, 1), cell(r.prefill_tps, 0), f(r.decode_bound_tps, 0), r.load_average.map((x) => f(x)).join('->')]);
const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
const line = (r) => '| ' + r.map((c, i) => c.padEnd(w[i])).join(' | ') + ' |';
console.log(`GGUF race, ${out.browser} (headless), ${machine.cores} cores (${machine.cpu}); wasm read bandwidth ${f(limits1.read_bandwidth_gbs, 2)} GB/s` +
  `${twoThreads.length ? ` (2 threads ${twoThreads.map((x) => f(x, 2)).join(', ')})` : ''}, f32x4 mul+add peak ${f(limits1.mul_add_peak_gflops)} GFLOP/s (1 thread)`);
console.log(line(head));
console.log('|' + w.map((x) => '-'.repeat(x + 2)).join('|') + '|');
for (const r of rows) console.log(line(r));
const find = (m, t, th, rt) => runs.find((r) => r.model === m && r.type === t && r.threads === th && r.runtime === rt);
for (const m of MODEL_NAMES) {
  for (const t of TYPES) {
    for (const th of THREADS) {
      const [a, ...others] = RUNTIMES.map((rt) => find(m, t, th, rt));
      for (const b of others.filter(Boolean)) {
        if (a) console.log(`${m} ${t} ${th}t: ${a.runtime} / ${b.runtime}: decode ${f(a.decode_tps.median / b.decode_tps.median, 2)}x, prefill ${f(a.prefill_tps.median / b.prefill_tps.median, 2)}x`);
      }
    }
    for (const g of threadGains.filter((x) => x.model === m && x.type === t)) {
      const c = (x) => `${f(x.median, 2)}x (${f(x.min, 2)}..${f(x.max, 2)})`;
      console.log(`${m} ${t} ${g.runtime}: 2 threads / 1, wall, per round: decode ${c(g.decode)}, prefill ${c(g.prefill)}`);
    }
  }
}
console.log(`wrote ${path.relative(ROOT, file)} (${f(out.total_s, 0)} s)`);
