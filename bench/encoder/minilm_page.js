// The page of bench/encoder/minilm_browser.mjs: qkv's model.embed and onnxruntime-web (F32, q8)
// on the MiniLM-shaped model of build/bench-minilm/, one thread setting per page:
//   minilm_browser.html?threads=1&variant=simd&rounds=3&lengths=16,64,256&batches=1,32
// The loop and the cells are minilm_common.js's (as in Node). clock(): wall time and the
// renderer's CPU time over all its threads (GET /cpu-ms: the runner reads /proc).
// Result: window.__minilm = { cells, variant, threads, crossOriginIsolated } or { error }.
import { measure, ortRunner, wordsOf } from './minilm_common.js';

const p = new URLSearchParams(location.search);
const threads = Number(p.get('threads'));
const nums = (k) => p.get(k).split(',').map(Number);

async function run() {
  const qkv = await import('/dist/index.js');
  qkv.env.variant = threads > 1 ? `${p.get('variant')}-threads` : p.get('variant');
  qkv.env.numThreads = threads;
  await qkv.init();
  const model = await qkv.loadModel(new URL('/build/bench-minilm/minilm/', location.href).href);
  const ort = await import('/node_modules/onnxruntime-web/dist/ort.wasm.min.mjs');
  ort.env.wasm.wasmPaths = '/node_modules/onnxruntime-web/dist/';
  ort.env.wasm.numThreads = threads;
  const opts = { executionProviders: ['wasm'], graphOptimizationLevel: 'all' };
  const f32 = await ort.InferenceSession.create('/build/bench-minilm/minilm.onnx', opts);
  const q8 = await ort.InferenceSession.create('/build/bench-minilm/minilm-q8.onnx', opts);
  const tokenize = (t) => model.tokenizer.encode(t);
  const runtimes = {
    qkv: async (texts) => (await model.embed(texts)).data,
    'ort-f32': ortRunner(ort, f32, tokenize, model.hidden),
    'ort-q8': ortRunner(ort, q8, tokenize, model.hidden),
  };
  const words = wordsOf((await (await fetch('/build/bench-minilm/minilm/vocab.txt')).text()).split('\n'));
  const clock = async () => {
    const wall = performance.now();
    return { wall, cpu: Number(await (await fetch('/cpu-ms')).text()) };
  };
  const cells = await measure(runtimes, words, { rounds: Number(p.get('rounds')), clock, lengths: nums('lengths'), batches: nums('batches') });
  const out = { threads, variant: qkv.env.loadedVariant, qkv_threads: qkv.env.threads, ort_threads: ort.env.wasm.numThreads, crossOriginIsolated, cells };
  model.dispose();
  return out;
}

run().then((r) => { window.__minilm = r; }, (e) => { window.__minilm = { error: String(e?.stack ?? e) }; });
