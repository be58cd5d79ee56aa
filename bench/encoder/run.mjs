// Encoder benchmark in Node: qkv's wasm BERT forward against onnxruntime-web on the same weights.
//
//   node bench/encoder/run.mjs [--reps 9] [--threads 2]
//
// The model: bench/encoder/make_bench_model.py writes build/bench-encoder/bench-bert (the tiny
// encoder's shape, 512 positions, seeded random weights) and its torch.onnx export (run on first
// use). For each thread setting (1 with the simd build, N with simd-threads) a child process per
// runtime times forward of L = 32, 128, 512 tokens -> MLM logits [1, L, 4096] (medians after a
// warm-up), wall and CPU time (user + system). The 1-thread run also checks both runtimes give
// the same logits. Writes bench/results/encoder-node.json and prints a table.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const REPS = Number(arg('--reps', 9));
const LENGTHS = [32, 128, 512];
const OUT_DIR = path.join(ROOT, 'build', 'bench-encoder');
const MODEL = path.join(OUT_DIR, 'bench-bert');
const ONNX = path.join(OUT_DIR, 'bench-bert.onnx');
const DIST = process.env.QKV_DIST ? path.resolve(process.env.QKV_DIST) : path.join(ROOT, 'dist');
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function child(threads, which) {
  const V = 4096;
  const idsOf = (L) => Array.from({ length: L }, (_, i) => 5 + ((i * 7 + 3) % (V - 5)));
  const now = () => performance.now();
  let run;
  let cleanup;
  if (which === 'qkv') {
    const qkv = await import(pathToFileURL(path.join(DIST, 'index.js')).href);
    qkv.env.variant = threads > 1 ? 'simd-threads' : 'simd';
    qkv.env.numThreads = threads;
    const model = await qkv.loadModel(MODEL);
    run = async (ids) => (await model.forward(ids)).logits.data;
    cleanup = () => model.dispose();
  } else {
    const ort = await import('onnxruntime-web');
    ort.env.wasm.numThreads = threads;
    ort.env.wasm.simd = true;
    const sess = await ort.InferenceSession.create(ONNX, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
    run = async (ids) => (await sess.run({ input_ids: new ort.Tensor('int64', BigInt64Array.from(ids, BigInt), [1, ids.length]) })).logits.data;
    cleanup = () => sess.release();
  }
  for (const t0 = now(); now() - t0 < 1500;) for (const L of LENGTHS) await run(idsOf(L));   // warm-up
  const result = { threads, which, forward: {}, sample: {} };
  for (const L of LENGTHS) {
    const ids = idsOf(L);
    const calls = Math.max(1, Math.round(128 / L));
    const wall = [];
    const cpu = [];
    for (let r = 0; r < REPS; r++) {
      await run(ids);
      const c0 = process.cpuUsage();
      const t0 = now();
      for (let i = 0; i < calls; i++) await run(ids);
      const c = process.cpuUsage(c0);
      wall.push((now() - t0) / calls);
      cpu.push((c.user + c.system) / 1000 / calls);
    }
    result.forward[L] = { ms: median(wall), cpu_ms: median(cpu) };
    const out = await run(ids);
    result.sample[L] = Array.from(out.subarray(0, 512));   // the start of the first row, for the comparison
  }
  await cleanup();
  process.stdout.write('RESULT ' + JSON.stringify(result) + '\n', () => process.exit(0));  // ORT's threads would keep it alive
}

function parent() {
  if (!existsSync(ONNX)) execFileSync('/usr/bin/python3', [path.join(ROOT, 'bench/encoder/make_bench_model.py')], { stdio: 'inherit' });
  const many = Number(arg('--threads', 2));
  const childRun = (t, which) => {
    const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', String(t), which, ...args], {
      encoding: 'utf8', maxBuffer: 1 << 26,
    });
    const line = (r.stdout || '').split('\n').find((l) => l.startsWith('RESULT '));
    if (r.status !== 0 || !line) {
      process.stderr.write(r.stdout + r.stderr);
      throw new Error(`bench/encoder: the ${t}-thread ${which} run failed (exit ${r.status})`);
    }
    return JSON.parse(line.slice(7));
  };
  const runs = [];
  for (const t of many > 1 ? [1, many] : [1]) {
    const q = childRun(t, 'qkv');
    const o = childRun(t, 'ort');
    const row = { threads: t, forward: {} };
    for (const L of LENGTHS) {
      let d = 0;
      for (let i = 0; i < q.sample[L].length; i++) d = Math.max(d, Math.abs(q.sample[L][i] - o.sample[L][i]));
      row.forward[L] = { qkv_ms: q.forward[L].ms, qkv_cpu_ms: q.forward[L].cpu_ms, ort_ms: o.forward[L].ms,
        ort_cpu_ms: o.forward[L].cpu_ms, max_abs_logit_diff: d };
    }
    runs.push(row);
  }
  const require = createRequire(import.meta.url);
  let ortVersion = null;
  try {
    ortVersion = JSON.parse(readFileSync(require.resolve('onnxruntime-web/package.json'), 'utf8')).version;
  } catch { /* not resolvable as a file */ }
  const out = {
    benchmark: 'encoder',
    date: new Date().toISOString(),
    machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, load_average: os.loadavg(), node: process.version },
    model: 'build/bench-encoder/bench-bert: BERT vocab 4096, hidden 128, 2 layers, 4 heads, intermediate 512, random weights',
    onnxruntime_web: ortVersion,
    method: `forward ids [1, L] -> MLM logits [1, L, 4096]; one child process per runtime and thread count; 1.5 s warm-up; ` +
      `median of ${REPS} batches of max(1, 128/L) calls, each batch after one untimed call`,
    runs,
  };
  mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
  writeFileSync(path.join(ROOT, 'bench', 'results', 'encoder-node.json'), JSON.stringify(out, null, 2) + '\n');
  console.log(`encoder forward, ${out.machine.cpu}, load ${out.machine.load_average.map((x) => x.toFixed(1)).join(' ')}`);
  console.log('| threads | L | qkv ms (cpu ms) | ORT ms (cpu ms) | ORT/qkv (cpu) | max |Δlogits| |');
  console.log('|---:|---:|---:|---:|---:|---:|');
  for (const r of runs) {
    for (const L of LENGTHS) {
      const p = r.forward[L];
      console.log(`| ${r.threads} | ${L} | ${p.qkv_ms.toFixed(2)} (${p.qkv_cpu_ms.toFixed(2)}) | ${p.ort_ms.toFixed(2)} (${p.ort_cpu_ms.toFixed(2)}) | ` +
        `${(p.ort_ms / p.qkv_ms).toFixed(2)}x (${(p.ort_cpu_ms / p.qkv_cpu_ms).toFixed(2)}x) | ${p.max_abs_logit_diff.toExponential(1)} |`);
    }
  }
  console.log('wrote bench/results/encoder-node.json');
}

if (args[0] === '--child') await child(Number(args[1]), args[2]);
else parent();
