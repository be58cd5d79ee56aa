// What 8-bit weights cost in accuracy: the same model loaded with weights 'int8' and as stored
// (F32), run over real text (the King James Bible's last chapters, held out from the tiny
// model's training: tools/model/train_tiny.py keeps the last 5% for validation), compared at
// every position: top-1 agreement of the next-token distributions and their mean KL divergence
// KL(p_f32 || p_int8), in nats; also each model's cross-entropy on the text.
//
//   node bench/model/int8_accuracy.mjs [--gpt2 build/gpt2-small/f32] [--positions 2048]
//
// Models: web/models/tiny-kjv (trained, byte-level, windows of 256 bytes) and the GPT-2-small-
// shaped checkpoint of make_gpt2_small.mjs (random weights, GPT-2's BPE, windows of 512 tokens)
// when present. forward(ids, { logits: 'all' }) (the prefill path: x quantized to int16 per row and
// block of 32, int8 x int16 dot products, src/matmul/gemm_q8.cpp).
// The peer, measured the same way on the same windows: onnxruntime-web's F32 graph against its
// q8 graph (export_onnx_kv.py, all positions' logits, through bench/onnx_q8.py (ort_q8.mjs): int8
// weights per tensor, activations uint8 per tensor, as transformers.js's q8 exports). --no-ort skips it.
// Writes bench/results/model-int8-accuracy.json and prints a table.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ensureGpt2Q8 } from './ort_q8.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const GPT2 = path.resolve(ROOT, arg('--gpt2', 'build/gpt2-small/f32'));
const POSITIONS = Number(arg('--positions', 2048));
const ORT = !args.includes('--no-ort');
const DIST = process.env.QKV_DIST ? path.resolve(process.env.QKV_DIST) : path.join(ROOT, 'dist');

const qkv = await import(pathToFileURL(path.join(DIST, 'index.js')).href);
qkv.env.variant = 'simd';

// The end of the KJV, as train_tiny.py's kjv_text() lays it out (headings, "N verse" lines).
function kjvTail() {
  const raw = execFileSync('bible', ['-l100000', 'Rev12:1-Rev22:21'], { encoding: 'utf8', maxBuffer: 1 << 24 });
  return raw.split('\n').map((l) => l.trim()).filter(Boolean).join('\n') + '\n';
}

/** log-softmax of a row of logits into out (float64). */
function logSoftmax(row, out) {
  let m = -Infinity;
  for (let i = 0; i < row.length; i++) m = Math.max(m, row[i]);
  let z = 0;
  for (let i = 0; i < row.length; i++) z += Math.exp(row[i] - m);
  const lz = m + Math.log(z);
  for (let i = 0; i < row.length; i++) out[i] = row[i] - lz;
}

// The measures over windows of ids: logitsOf(which, w) gives [w.length, V] logits of the
// reference ('f32') or the quantized ('int8') model.
async function measure(name, V, ids, window, logitsOf) {
  const lp = new Float64Array(V), lq = new Float64Array(V);
  let positions = 0, agree = 0, kl = 0, klMax = 0, ceF32 = 0, ceInt8 = 0, targets = 0;
  for (let start = 0; positions < POSITIONS && start + 2 <= ids.length; start += window) {
    const w = ids.slice(start, start + window);
    const [a, b] = [await logitsOf('f32', w), await logitsOf('int8', w)];
    for (let t = 0; t < w.length && positions < POSITIONS; t++, positions++) {
      const ra = a.subarray(t * V, (t + 1) * V), rb = b.subarray(t * V, (t + 1) * V);
      logSoftmax(ra, lp);
      logSoftmax(rb, lq);
      let am = 0, bm = 0, d = 0;
      for (let i = 0; i < V; i++) {
        if (ra[i] > ra[am]) am = i;
        if (rb[i] > rb[bm]) bm = i;
        d += Math.exp(lp[i]) * (lp[i] - lq[i]);
      }
      agree += am === bm;
      kl += d;
      klMax = Math.max(klMax, d);
      if (t + 1 < w.length) {
        ceF32 -= lp[w[t + 1]];
        ceInt8 -= lq[w[t + 1]];
        targets++;
      }
    }
  }
  return {
    model: name, positions, window, top1_agreement: agree / positions, mean_kl_nats: kl / positions, max_kl_nats: klMax,
    cross_entropy_nats: { f32: ceF32 / targets, int8: ceInt8 / targets },
  };
}

async function compare(name, dir, ids, window) {
  const f32 = await qkv.loadModel(dir);
  const int8 = await qkv.loadModel(dir, { weights: 'int8' });
  const models = { f32, int8 };
  const r = await measure(name, f32.config.vocab_size, ids, window, async (which, w) => (await models[which].forward(w)).logits.data);
  const mem = [f32.memoryUsage(), int8.memoryUsage()];
  f32.dispose();
  int8.dispose();
  return { ...r, runtime: 'qkv', weights_bytes: { f32: mem[0].weights, int8: mem[1].weights } };
}

// onnxruntime-web F32 vs q8 on the same weights and windows: the all-positions export of `dir`
// (export_onnx_kv.py) and its q8 twin (bench/onnx_q8.py), made into `cache` on first use
async function compareOrt(name, dir, ids, window, cache) {
  const ort = await import('onnxruntime-web');
  ort.env.wasm.numThreads = 1;
  mkdirSync(path.dirname(cache), { recursive: true });
  const q8 = cache.replace(/\.onnx$/, '-q8.onnx');
  if (!existsSync(cache)) {
    execFileSync('/usr/bin/python3', [path.join(ROOT, 'bench/model/export_onnx_kv.py'), '--model', dir, '--out', cache], { stdio: 'inherit' });
  }
  ensureGpt2Q8(cache, q8);
  const cfg = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8'));
  const { vocab_size: V, n_layer: NL, n_head: H, n_embd: E } = cfg;
  const opts = { executionProviders: ['wasm'], graphOptimizationLevel: 'all' };
  const sessions = { f32: await ort.InferenceSession.create(cache, opts), int8: await ort.InferenceSession.create(q8, opts) };
  const r = await measure(name, V, ids, window, async (which, w) => {
    const res = await sessions[which].run({
      input_ids: new ort.Tensor('int64', BigInt64Array.from(w, BigInt), [1, w.length]),
      past: new ort.Tensor('float32', new Float32Array(0), [NL, 2, 1, H, 0, E / H]),
    });
    return res.logits.data;
  });
  for (const s of Object.values(sessions)) await s.release();
  return { ...r, runtime: 'onnxruntime-web', weights_bytes: { f32: statSync(cache).size, int8: statSync(q8).size } };
}

const text = kjvTail();
const results = [];
{
  const dir = path.join(ROOT, 'web/models/tiny-kjv');
  const ids = Array.from(new TextEncoder().encode(text));
  results.push(await compare('tiny-kjv (trained, 0.86M parameters)', dir, ids, 256));
  if (ORT) results.push(await compareOrt('tiny-kjv (trained, 0.86M parameters)', dir, ids, 256, path.join(ROOT, 'build/bench-model/tiny-kjv-kv-all.onnx')));
}
if (existsSync(path.join(GPT2, 'model.safetensors'))) {
  const m = await qkv.loadModel(GPT2);
  const ids = m.tokenizer.encode(text.repeat(2));
  m.dispose();
  results.push(await compare('GPT-2 small shape (random weights, std 0.02)', GPT2, ids, 512));
  if (ORT) results.push(await compareOrt('GPT-2 small shape (random weights, std 0.02)', GPT2, ids, 512, path.join(path.dirname(GPT2), 'gpt2-small-kv-all.onnx')));
} else {
  console.log(`(no ${path.relative(ROOT, GPT2)}: node bench/model/make_gpt2_small.mjs writes it)`);
}

const out = { benchmark: 'model-int8-accuracy', date: new Date().toISOString(), text: 'KJV Revelation 12-22 (bible -l100000 Rev12:1-Rev22:21)', results };
mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
writeFileSync(path.join(ROOT, 'bench', 'results', 'model-int8-accuracy.json'), JSON.stringify(out, null, 2) + '\n');
console.log('| model | runtime | positions | top-1 agreement int8 vs F32 | mean KL (nats) | max KL | cross-entropy F32 / int8 (nats) | weights F32 / int8 |');
console.log('|---|---|---|---|---|---|---|---|');
for (const r of results) {
  console.log(`| ${r.model} | ${r.runtime === 'qkv' ? 'qkv int8' : 'onnxruntime-web q8'} | ${r.positions} | ${(100 * r.top1_agreement).toFixed(2)}% | ${r.mean_kl_nats.toExponential(2)} | ${r.max_kl_nats.toExponential(2)} | ` +
    `${r.cross_entropy_nats.f32.toFixed(4)} / ${r.cross_entropy_nats.int8.toFixed(4)} | ${(r.weights_bytes.f32 / 1e6).toFixed(1)} / ${(r.weights_bytes.int8 / 1e6).toFixed(1)} MB |`);
}
console.log('wrote bench/results/model-int8-accuracy.json');
process.exit(0);  // onnxruntime-web's runtime would keep the process alive
