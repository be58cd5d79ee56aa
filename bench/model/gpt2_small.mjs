// GPT-2 small (124M, random weights of its shape: make_gpt2_small.mjs) in Node: qkv's wasm model
// with its weights as F32, F16, int8 and int4, against onnxruntime-web on the same weights with past
// key/values (export_onnx_kv.py --last-logits), as F32 and as transformers.js's `q8` (the same
// graph through bench/onnx_q8.py (ort_q8.mjs): int8 per-tensor weights, DynamicQuantizeLinear
// + MatMulInteger, what onnxruntime's quantize_dynamic writes), 1 and 2 threads, each runtime and
// setting in a process of its own. Measured per process:
//  - load: loadModel / InferenceSession.create, seconds, and the process's peak RSS after it;
//  - prefill: a forward of 32 / 128 / 512 tokens to the last position's logits (what a
//    generation's prefill computes; ORT's export slices the last position before its LM head);
//  - decode: greedy tokens/s after an 8- and a 512-token prompt (KV cache, one token per step);
//  - peak RSS at the end.
// Decode is also given as a fraction of this machine's limit: read bandwidth (a SIMD sum over
// 512 MiB in wasm, bench/matmul/) / bytes read per token (the matrices as held, wte included,
// plus the KV cache read at that context); a 2-thread run's against what two threads read at
// once (bench-threads.cjs, taken before and after the runs: the lower).
// 1 thread: timed by the process's CPU time (the machine is shared; CPU time is what the code
// costs); 2 threads: wall time. Each figure is the best of a few runs (noise only slows).
//
//   node bench/model/gpt2_small.mjs [--dir build/gpt2-small] [--reps 3] [--tokens 24]
//                                   [--runs qkv-int8-1,ort-q8-1,...] [--json model-gpt2-small-node.json]
//
// --runs: a subset of the runs, named <runtime>-<weights>-<threads> (qkv-f32-1, qkv-f16-2,
// qkv-int8-1, ort-f32-1, ort-q8-2, ...), run in that order; targets whose runs are missing are left out.
// Writes bench/results/<--json> (default model-gpt2-small-node.json; an absolute path as given) and
// prints a table.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ensureGpt2Q8 } from './ort_q8.mjs';
import { machineLimits } from '../limits.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const DIR = path.resolve(ROOT, arg('--dir', 'build/gpt2-small'));
const REPS = Number(arg('--reps', 3));
const TOKENS = Number(arg('--tokens', 24));
const ONNX = path.join(DIR, 'gpt2-small-kv-last.onnx');
const ONNX_Q8 = path.join(DIR, 'gpt2-small-kv-last-q8.onnx');
const RUNS = arg('--runs', '');
const JSON_NAME = arg('--json', 'model-gpt2-small-node.json');
const DIST = process.env.QKV_DIST ? path.resolve(process.env.QKV_DIST) : path.join(ROOT, 'dist');
const PREFILL = [32, 128, 512];
const CONTEXTS = [8, 512];

// ---- child: one runtime, one setting ----------------------------------------------------

// Both clocks at once: { cpu, wall } in seconds. 1-thread figures are reported on CPU time,
// threaded ones on wall time; 1-thread wall times are kept too, so that 2 threads compare with
// 1 on the same clock.
function now() {
  const u = process.cpuUsage();
  return { cpu: (u.user + u.system) / 1e6, wall: performance.now() / 1000 };
}
const since = (t0) => {
  const t = now();
  return { cpu: t.cpu - t0.cpu, wall: t.wall - t0.wall };
};
// keeps the best (smallest) duration per clock
const best = (a, b) => (a ? { cpu: Math.min(a.cpu, b.cpu), wall: Math.min(a.wall, b.wall) } : b);
// out[key][k] on the run's clock (CPU time with 1 thread, wall with more), out[key + '_wall'][k] on wall time
function record(out, key, k, cpu, wall, threads) {
  (out[key] ??= {})[k] = threads > 1 ? wall : cpu;
  (out[key + '_wall'] ??= {})[k] = wall;
}
const rssMB = () => process.resourceUsage().maxRSS / 1024;  // peak so far (maxRSS is in KiB)
const idsOf = (L, V) => Array.from({ length: L }, (_, i) => (i * 7919 + 13) % V);

async function qkvChild(weights, threads) {
  const qkv = await import(pathToFileURL(path.join(DIST, 'index.js')).href);
  qkv.env.variant = threads > 1 ? 'simd-threads' : 'simd';
  qkv.env.numThreads = threads;
  await qkv.init();
  const folder = path.join(DIR, weights === 'f16' ? 'f16' : 'f32');
  const w0 = performance.now();
  const model = await qkv.loadModel(folder, { weights: weights === 'f16' ? 'auto' : weights });
  const load_s = (performance.now() - w0) / 1000;
  const load_rss_mb = rssMB();
  const mem = model.memoryUsage();
  const V = model.config.vocab_size;
  const out = { runtime: 'qkv', weights, threads, variant: qkv.env.loadedVariant, load_s, load_rss_mb, memory: mem, prefill_ms: {}, decode: {} };
  await model.forward(idsOf(32, V), { logits: 'last' });  // warm-up: V8 tiers the wasm up
  for (const L of PREFILL) {
    let b;
    for (let r = 0; r < (L >= 512 ? Math.max(1, REPS - 1) : REPS); r++) {
      const t0 = now();
      await model.forward(idsOf(L, V), { logits: 'last' });
      b = best(b, since(t0));
    }
    record(out, 'prefill_ms', L, b.cpu * 1000, b.wall * 1000, threads);
  }
  for (const ctx of CONTEXTS) {
    let b, n = 0;
    for (let r = 0; r < REPS; r++) {
      let t0;
      n = 0;
      for await (const s of model.generate(idsOf(ctx, V), { maxNewTokens: TOKENS, temperature: 0 })) {
        if (s.index === 0) t0 = now();  // the prefill is done; time the steps after it
        else n++;
      }
      b = best(b, since(t0));
    }
    record(out, 'decode', ctx, n / b.cpu, n / b.wall, threads);
  }
  out.end_rss_mb = rssMB();
  model.dispose();
  return out;
}

async function ortChild(threads, graph) {
  const ort = await import('onnxruntime-web');
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.simd = true;
  const w0 = performance.now();
  const sess = await ort.InferenceSession.create(graph === 'q8' ? ONNX_Q8 : ONNX, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
  const load_s = (performance.now() - w0) / 1000;
  const load_rss_mb = rssMB();
  const cfg = JSON.parse(readFileSync(path.join(DIR, 'f32', 'config.json'), 'utf8'));
  const { vocab_size: V, n_layer: NL, n_head: H, n_embd: E } = cfg;
  const D = E / H;
  const ids = (a) => new ort.Tensor('int64', BigInt64Array.from(a, BigInt), [1, a.length]);
  const empty = () => new ort.Tensor('float32', new Float32Array(0), [NL, 2, 1, H, 0, D]);
  const out = { runtime: 'onnxruntime-web', weights: graph, threads, load_s, load_rss_mb, prefill_ms: {}, decode: {} };
  await sess.run({ input_ids: ids(idsOf(32, V)), past: empty() });
  for (const L of PREFILL) {
    let b;
    for (let r = 0; r < (L >= 512 ? Math.max(1, REPS - 1) : REPS); r++) {
      const t0 = now();
      await sess.run({ input_ids: ids(idsOf(L, V)), past: empty() });
      b = best(b, since(t0));
    }
    record(out, 'prefill_ms', L, b.cpu * 1000, b.wall * 1000, threads);
  }
  const argmax = (a) => {
    let b = 0;
    for (let i = 1; i < a.length; i++) if (a[i] > a[b]) b = i;
    return b;
  };
  for (const ctx of CONTEXTS) {
    let b;
    for (let r = 0; r < REPS; r++) {
      let res = await sess.run({ input_ids: ids(idsOf(ctx, V)), past: empty() });
      let tok = argmax(res.logits.data);
      const t0 = now();
      for (let k = 1; k < TOKENS; k++) {
        res = await sess.run({ input_ids: ids([tok]), past: res.present });
        tok = argmax(res.logits.data);
      }
      b = best(b, since(t0));
    }
    record(out, 'decode', ctx, (TOKENS - 1) / b.cpu, (TOKENS - 1) / b.wall, threads);
  }
  out.end_rss_mb = rssMB();
  await sess.release();
  return out;
}

// ---- parent -------------------------------------------------------------------------------

function prepare() {
  if (!existsSync(path.join(DIR, 'f32', 'done')) || !existsSync(path.join(DIR, 'f16', 'done'))) {
    execFileSync(process.execPath, [path.join(ROOT, 'bench/model/make_gpt2_small.mjs'), '--out', DIR], { stdio: 'inherit' });
  }
  const weights = path.join(DIR, 'f32', 'model.safetensors');
  if (!existsSync(ONNX) || statSync(ONNX).mtimeMs < statSync(weights).mtimeMs) {
    execFileSync('/usr/bin/python3', [path.join(ROOT, 'bench/model/export_onnx_kv.py'), '--model', path.join(DIR, 'f32'),
      '--out', ONNX, '--last-logits'], { stdio: 'inherit' });
  }
  ensureGpt2Q8(ONNX, ONNX_Q8);
  // this machine's read bandwidth and mul+add peak, in wasm (bench/limits.mjs)
  return machineLimits({ who: 'gpt2_small' });
}

// threads > 1: also what that many threads read at once (read_bandwidth_all_threads_gbs), which on
// a shared host moves from run to run (40-61 GB/s within an hour on the Zen 5 of docs/benchmarks.md),
// so it is taken before and after the runs
const probeLimits = (threads) => machineLimits({ who: 'gpt2_small', threads, build: false });

function child(spec) {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', JSON.stringify(spec), ...args], {
    encoding: 'utf8', maxBuffer: 1 << 24,
  });
  const line = (r.stdout || '').split('\n').find((l) => l.startsWith('RESULT '));
  if (r.status !== 0 || !line) {
    process.stderr.write(r.stdout + r.stderr);
    throw new Error(`gpt2_small: the run ${JSON.stringify(spec)} failed (exit ${r.status})`);
  }
  const res = JSON.parse(line.slice(7));
  res.process_s = (performance.now() - t0) / 1000;
  console.error(`  ${spec.runtime} ${spec.weights} ${spec.threads}t: ${res.process_s.toFixed(0)} s`);
  return res;
}

function parent() {
  const t0 = performance.now();
  const limits = prepare();
  const cfg = JSON.parse(readFileSync(path.join(DIR, 'f32', 'config.json'), 'utf8'));
  const all = [1, 2].flatMap((threads) => [
    ...['f32', 'f16', 'int8', 'int4'].map((weights) => ({ runtime: 'qkv', weights, threads })),
    ...['f32', 'q8'].map((weights) => ({ runtime: 'ort', weights, threads })),
  ]);
  const wanted = RUNS ? RUNS.split(',') : null;
  const name = (s) => `${s.runtime}-${s.weights}-${s.threads}`;
  // in the order --runs gives them (ORT first, say, to see whether the order matters)
  const specs = wanted ? wanted.map((w) => all.find((s) => name(s) === w)).filter(Boolean) : all;
  if (wanted && specs.length !== wanted.length) throw new Error(`gpt2_small: --runs ${RUNS}: runs are ${all.map(name).join(', ')}`);
  console.error(`gpt2_small: ${specs.length} runs, one process each`);
  const threaded = specs.some((sp) => sp.threads > 1);
  const twoThreads = [];  // GB/s two threads read at once, before and after the runs
  if (threaded) twoThreads.push(probeLimits(2).read_bandwidth_all_threads_gbs);
  const runs = specs.map(child);
  if (threaded) twoThreads.push(probeLimits(2).read_bandwidth_all_threads_gbs);
  if (threaded) limits.read_bandwidth_2_threads_gbs = twoThreads;
  // bytes read per decoded token: the matmuls' matrices (wte is the LM head; wpe gives one row)
  // plus the KV cache up to the context
  const { n_layer: NL, n_embd: E, n_positions: P, vocab_size: V } = cfg;
  const kvBytes = (ctx) => NL * 2 * ctx * E * 4;
  for (const r of runs.filter((x) => x.runtime === 'qkv')) {
    const wpe = r.weights === 'f16' ? P * E * 2 : P * E * 4;
    r.bytes_per_token = r.memory.weights - wpe;
    r.decode_fraction_of_bandwidth = {};
    // against what as many threads read at once (2 threads: the lower of the two probes)
    const bandwidth = r.threads > 1 ? Math.min(...twoThreads) : limits.read_bandwidth_gbs;
    for (const ctx of CONTEXTS) {
      const limit = (bandwidth * 1e9) / (r.bytes_per_token + kvBytes(ctx));
      r.decode_fraction_of_bandwidth[ctx] = r.decode[ctx] / limit;
    }
  }
  const find = (rt, w, t) => runs.find((x) => x.runtime === rt && x.weights === w && x.threads === t);
  const ort1 = find('onnxruntime-web', 'f32', 1), ortq8 = find('onnxruntime-web', 'q8', 1);
  const q = (w, t) => find('qkv', w, t);
  // a target's figure, or undefined where one of its runs was not in this invocation
  const got = (f) => {
    try {
      const v = f();
      return Number.isFinite(v) ? v : undefined;
    } catch {
      return undefined;
    }
  };
  // matmul FLOPs of a prefill of L tokens (2 per multiply-add; the LM head for one position)
  const flops = (L) => 2 * L * NL * (E * 3 * E + E * E + 2 * E * 4 * E) + 2 * E * V + 4 * NL * E * (L * (L + 1)) / 2;
  const targets = Object.fromEntries(Object.entries({
    decode_f32_fraction_of_bandwidth: { target: 0.85, got: got(() => q('f32', 1).decode_fraction_of_bandwidth[8]) },
    decode_f32_vs_ort: { target: 1.1, got: got(() => q('f32', 1).decode[8] / ort1.decode[8]) },
    decode_f16_vs_f32: { target: 1.8, got: got(() => q('f16', 1).decode[8] / q('f32', 1).decode[8]) },
    decode_int8_vs_f32: { target: 3.0, got: got(() => q('int8', 1).decode[8] / q('f32', 1).decode[8]) },
    decode_int4_vs_int8: { target: 1.7, got: got(() => q('int4', 1).decode[8] / q('int8', 1).decode[8]) },
    prefill_128_int4_vs_int8: { target: 1.0, got: got(() => q('int8', 1).prefill_ms[128] / q('int4', 1).prefill_ms[128]) },
    prefill_32_vs_ort: { target: 1.1, got: got(() => ort1.prefill_ms[32] / q('f32', 1).prefill_ms[32]) },
    prefill_128_vs_ort: { target: 1.1, got: got(() => ort1.prefill_ms[128] / q('f32', 1).prefill_ms[128]) },
    // int8 prefill against onnxruntime-web's q8 on the same weights
    int8_prefill_32_vs_ort_q8: { target: 1.1, got: got(() => ortq8.prefill_ms[32] / q('int8', 1).prefill_ms[32]) },
    int8_prefill_128_vs_ort_q8: { target: 1.1, got: got(() => ortq8.prefill_ms[128] / q('int8', 1).prefill_ms[128]) },
    int8_decode_vs_ort_q8: { target: 1.0, got: got(() => q('int8', 1).decode[8] / ortq8.decode[8]) },
    // threads against one thread on the same clock (wall)
    decode_2t_vs_1t: { target: 1.6, got: got(() => q('f32', 2).decode_wall[8] / q('f32', 1).decode_wall[8]) },
    prefill_128_2t_vs_1t: { target: 1.8, got: got(() => q('f32', 1).prefill_ms_wall[128] / q('f32', 2).prefill_ms_wall[128]) },
    peak_rss_mb_limit: { target: (1.3 * statSync(path.join(DIR, 'f32', 'model.safetensors')).size) / 2 ** 20 + 200, got: got(() => q('f32', 1).end_rss_mb) },
  }).filter(([, t]) => t.got !== undefined));
  const out = {
    benchmark: 'model-gpt2-small',
    date: new Date().toISOString(),
    machine: { cpu: os.cpus()[0]?.model, cores: os.availableParallelism?.() ?? os.cpus().length, load_average: os.loadavg(), node: process.version },
    model: { ...cfg, qkv: undefined, file_mb: statSync(path.join(DIR, 'f32', 'model.safetensors')).size / 2 ** 20 },
    onnxruntime_web: JSON.parse(readFileSync(path.join(ROOT, 'node_modules/onnxruntime-web/package.json'), 'utf8')).version,
    limits,
    method: '1 thread: process CPU time (wall time too, in *_wall); 2 threads: wall time; 2t vs 1t on wall time; best of runs; one process per runtime and setting; ' +
      `prefill = forward to the last position's logits; decode = greedy, ${TOKENS} tokens after the prompt, steps only`,
    runs,
    prefill_gflops_1t: Object.fromEntries(runs.filter((r) => r.threads === 1).map((r) =>
      [`${r.runtime} ${r.weights}`, Object.fromEntries(PREFILL.map((L) => [L, flops(L) / (r.prefill_ms[L] / 1000) / 1e9]))])),
    targets,
    total_s: (performance.now() - t0) / 1000,
  };
  const file = path.resolve(ROOT, 'bench', 'results', JSON_NAME);  // a path of its own (absolute) as given
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(out, null, 2) + '\n');

  const rows = [];
  const fmt = (x, d = 1) => (x === undefined ? '' : x.toFixed(d));
  for (const r of runs) {
    const name = `${r.runtime} ${r.weights}`;
    rows.push([`${name}, ${r.threads}t`, fmt(r.load_s, 2), fmt(r.load_rss_mb, 0), ...PREFILL.map((L) => fmt(r.prefill_ms[L], 0)),
      ...CONTEXTS.map((c) => fmt(r.decode[c], 1)), r.decode_fraction_of_bandwidth ? fmt(r.decode_fraction_of_bandwidth[8], 2) : '', fmt(r.end_rss_mb, 0)]);
  }
  const head = ['run', 'load s', 'RSS after load MB', 'prefill 32 ms', '128 ms', '512 ms', 'decode tok/s @8', '@512', 'of bandwidth @8', 'peak RSS MB'];
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r) => '| ' + r.map((c, i) => c.padEnd(w[i])).join(' | ') + ' |';
  console.log(`GPT-2 small (random weights), Node ${process.version}, ${out.machine.cores} cores, load ${os.loadavg()[0].toFixed(1)}; ` +
    `read bandwidth ${limits.read_bandwidth_gbs.toFixed(2)} GB/s, mul+add peak ${limits.mul_add_peak_gflops.toFixed(1)} GFLOP/s (wasm, 1 thread)` +
    (threaded ? `; 2 threads at once read ${twoThreads.map((g) => g.toFixed(1)).join(' (before), ')} (after) GB/s: the 2t rows' "of bandwidth" is of the lower` : ''));
  console.log(line(head));
  console.log('|' + w.map((x) => '-'.repeat(x + 2)).join('|') + '|');
  for (const r of rows) console.log(line(r));
  for (const [name, g] of Object.entries(out.prefill_gflops_1t)) {
    console.log(`${name} 1t prefill matmul GFLOP/s: ${PREFILL.map((L) => `${L}: ${g[L].toFixed(1)}`).join(', ')}`);
  }
  for (const [k, t] of Object.entries(targets)) {
    const ok = k.startsWith('peak') ? t.got <= t.target : t.got >= t.target;
    console.log(`target ${k}: ${k.startsWith('peak') ? '<=' : '>='} ${t.target.toFixed(2)}: ${t.got.toFixed(2)} ${ok ? 'MET' : 'NOT MET'}`);
  }
  console.log(`wrote ${path.relative(ROOT, file)} (${out.total_s.toFixed(0)} s)`);
}

if (args[0] === '--child') {
  const spec = JSON.parse(args[1]);
  const res = spec.runtime === 'qkv' ? await qkvChild(spec.weights, spec.threads) : await ortChild(spec.threads, spec.weights);
  process.stdout.write('RESULT ' + JSON.stringify(res) + '\n');
  process.exit(0);  // ORT's and the pool's threads would keep the process alive
} else {
  parent();
}
