// Sentence embeddings on the all-MiniLM-L6-v2 shape in Node: qkv's model.embed against
// onnxruntime-web (F32, and q8 as transformers.js ships it) on the same weights.
//
//   node bench/encoder/minilm.mjs [--rounds 3] [--threads 1,2] [--lengths 16,64,256] [--batches 1,32] [--no-int8] [--tag T]
//
// The model: bench/encoder/make_minilm.py writes build/bench-minilm/ on first use (the
// sentence-transformers folder, its torch.onnx export and the q8 graph of bench/onnx_q8.py).
// One child process per thread count (1: the simd build and ORT numThreads 1; 2: simd-threads
// and numThreads 2) loads all three runtimes and interleaves them (minilm_common.js: the cells,
// the peer's pooling, the loop), and qkv a second time with weights: 'int8' (the same checkpoint
// quantized on load, blocks of 32: its prefill is the integer GEMM, gemm_q8.cpp), beside ORT q8,
// the peer of the same precision (--no-int8 leaves it out). ms per sentence, the median of the rounds, on wall and CPU time
// (process user + system, all threads); the spread (min..max of the rounds) is in the JSON.
// Each cell also checks the runtimes agree: the lowest cosine between qkv's and ORT's embeddings
// over the batch. The machine's wasm mul+add peak (bench/matmul, 1 thread) is measured in the
// same run. Writes bench/results/encoder-minilm-node.json (--tag T: encoder-minilm-node-T.json) and prints a table.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BATCHES, LENGTHS, measure, ortRunner, wordsOf } from './minilm_common.js';
import { printTable } from './minilm_table.js';
import { machineLimits } from '../limits.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const nums = (name, fallback) => arg(name, fallback.join(',')).split(',').map(Number);
const ROUNDS = Number(arg('--rounds', 3));
const OUT_DIR = path.join(ROOT, 'build', 'bench-minilm');
const MODEL = path.join(OUT_DIR, 'minilm');
const DIST = process.env.QKV_DIST ? path.resolve(process.env.QKV_DIST) : path.join(ROOT, 'dist');

async function child(threads) {
  const qkv = await import(pathToFileURL(path.join(DIST, 'index.js')).href);
  qkv.env.variant = threads > 1 ? 'simd-threads' : 'simd';
  qkv.env.numThreads = threads;
  const model = await qkv.loadModel(MODEL);
  const model8 = args.includes('--no-int8') ? null : await qkv.loadModel(MODEL, { weights: 'int8' });
  const ort = await import('onnxruntime-web');
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.simd = true;
  const opts = { executionProviders: ['wasm'], graphOptimizationLevel: 'all' };
  const f32 = await ort.InferenceSession.create(path.join(OUT_DIR, 'minilm.onnx'), opts);
  const q8 = await ort.InferenceSession.create(path.join(OUT_DIR, 'minilm-q8.onnx'), opts);
  const E = model.hidden ?? model.config.hidden_size;
  const tokenize = (t) => model.tokenizer.encode(t);
  const runtimes = {
    qkv: async (texts) => (await model.embed(texts)).data,
    ...(model8 ? { 'qkv-int8': async (texts) => (await model8.embed(texts)).data } : {}),
    'ort-f32': ortRunner(ort, f32, tokenize, E),
    'ort-q8': ortRunner(ort, q8, tokenize, E),
  };
  const vocab = readFileSync(path.join(MODEL, 'vocab.txt'), 'utf8').split('\n');
  const words = wordsOf(vocab);
  for (const L of nums('--lengths', LENGTHS)) {
    const n = model.tokenizer.encode(words.slice(0, L - 2).join(' ')).length;
    if (n !== L) throw new Error(`minilm: ${L - 2} words gave ${n} tokens, not ${L}`);
  }
  const clock = () => {
    const c = process.cpuUsage();
    return { wall: performance.now(), cpu: (c.user + c.system) / 1000 };
  };
  const cells = await measure(runtimes, words, {
    rounds: ROUNDS, clock, lengths: nums('--lengths', LENGTHS), batches: nums('--batches', BATCHES),
    log: (m) => process.stderr.write(`  ${threads}t ${m}\n`),
  });
  const result = { threads, variant: qkv.env.loadedVariant, ort_threads: ort.env.wasm.numThreads, cells };
  model.dispose();
  model8?.dispose();
  process.stdout.write('RESULT ' + JSON.stringify(result) + '\n', () => process.exit(0));   // ORT's workers would keep it alive
}


function parent() {
  if (!existsSync(path.join(OUT_DIR, 'done'))) execFileSync('/usr/bin/python3', [path.join(ROOT, 'bench/encoder/make_minilm.py')], { stdio: 'inherit' });
  const t0 = performance.now();
  const loadBefore = os.loadavg();
  const machine = machineLimits({ who: 'minilm', required: false });   // wasm mul+add peak and read bandwidth, 1 thread
  const runs = [];
  for (const t of nums('--threads', [1, 2])) {
    const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', String(t), ...args], {
      encoding: 'utf8', maxBuffer: 1 << 26, stdio: ['ignore', 'pipe', 'inherit'],
    });
    const line = (r.stdout || '').split('\n').find((l) => l.startsWith('RESULT '));
    if (r.status !== 0 || !line) {
      process.stderr.write(r.stdout ?? '');
      throw new Error(`minilm: the ${t}-thread run failed (exit ${r.status})`);
    }
    runs.push(JSON.parse(line.slice(7)));
  }
  const require = createRequire(import.meta.url);
  const ortVersion = JSON.parse(readFileSync(path.join(path.dirname(require.resolve('onnxruntime-web')), '..', 'package.json'), 'utf8')).version;
  const out = {
    benchmark: 'encoder-minilm-node',
    date: new Date().toISOString(),
    machine: {
      cpu: os.cpus()[0]?.model, cores: os.cpus().length, node: process.version,
      load_average: { before: loadBefore, after: os.loadavg() },
      wasm_limits_1t: machine,
    },
    model: 'build/bench-minilm/minilm (bench/encoder/make_minilm.py): all-MiniLM-L6-v2 shape (BertModel, 6 layers, hidden 384, 12 heads, ' +
      'intermediate 1536, vocab 30522 = bert-base-uncased\'s), random weights; minilm.onnx (torch.onnx, opset 14) and minilm-q8.onnx (bench/onnx_q8.py)',
    onnxruntime_web: ortVersion,
    method: 'ms per sentence; qkv = model.embed(texts) (tokenize + forward + mean pool + normalize); ORT = session.run on pre-tokenized ids ' +
      '+ mean pool + normalize in JS; qkv-int8 = the same with loadModel(..., { weights: \'int8\' }); one process per thread count, runtimes interleaved; warm-up pass, then the median of ' +
      `${ROUNDS} rounds, each max(1, 512 / (B L)) calls; wall and process CPU time; cos = lowest cosine to qkv over the batch`,
    runs,
    total_s: (performance.now() - t0) / 1000,
  };
  mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
  const file = `encoder-minilm-node${arg('--tag', '') ? `-${arg('--tag')}` : ''}.json`;
  writeFileSync(path.join(ROOT, 'bench', 'results', file), JSON.stringify(out, null, 2) + '\n');
  printTable(out, 'Node');
  console.log(`wrote bench/results/${file}`);
}

if (args[0] === '--child') await child(Number(args[1]));
else parent();
