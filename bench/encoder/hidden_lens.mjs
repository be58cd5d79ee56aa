// What the encoders' hidden states and the masked-LM logit lens cost, in Node, 1 thread (simd):
// a forward with outputHiddenStates against the plain forward (interleaved, the same ids), and
// encoderLogitLens against its parts (the forward, the MLM head over every layer's rows in one
// wasm call, the softmax / top-k / KL in JS), on a MiniLM-shaped BertForMaskedLM (6 layers,
// hidden 384, 12 heads, intermediate 1536, BERT's 30522-token vocabulary, std-0.2 weights made
// from a seed by tests/js/random-weights.js; nothing to download).
//
//   node bench/encoder/hidden_lens.mjs [--rounds 7] [--lengths 16,64,128] [--no-limits]
//
// The machine's wasm mul+add peak (bench/matmul, 1 thread) is measured in the same run (unless
// --no-limits). Writes bench/results/encoder-hidden-lens-node.json and prints a table.
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { randomSafetensors } from '../../tests/js/random-weights.js';
import { machineLimits } from '../limits.mjs';
import { bertModelShapes } from '../../tests/browser/encoder-checkpoint.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DIST = process.env.QKV_DIST ? path.resolve(process.env.QKV_DIST) : path.join(ROOT, 'dist');
const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const ROUNDS = Number(arg('--rounds', 7));
const LENGTHS = arg('--lengths', '16,64,128').split(',').map(Number);
const C = { V: 30522, E: 384, L: 6, H: 12, I: 1536, P: 512 };

// BertForMaskedLM's tensors: BertModel's (no pooler) under bert., then the MLM head
function shapes() {
  const { V, E, L, I, P } = C;
  const bert = bertModelShapes({ hidden_size: E, intermediate_size: I, vocab_size: V, max_position_embeddings: P, type_vocab_size: 2, num_hidden_layers: L });
  const s = Object.fromEntries(Object.entries(bert).filter(([n]) => !n.startsWith('pooler.')).map(([n, shape]) => [`bert.${n}`, shape]));
  return Object.assign(s, {
    'cls.predictions.transform.dense.weight': [E, E], 'cls.predictions.transform.dense.bias': [E],
    'cls.predictions.transform.LayerNorm.weight': [E], 'cls.predictions.transform.LayerNorm.bias': [E], 'cls.predictions.bias': [V],
  });
}

const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const time = async (f) => {
  const t0 = performance.now();
  await f();
  return performance.now() - t0;
};

const loadBefore = os.loadavg();
// this machine's wasm mul+add peak and read bandwidth, 1 thread
const machine = args.includes('--no-limits') ? null : machineLimits({ who: 'hidden_lens', required: false });
const qkv = await import(pathToFileURL(path.join(DIST, 'index.js')).href);
const { encoderLogitLens } = await import(pathToFileURL(path.join(DIST, 'interpret', 'lens-encoder.js')).href);
qkv.env.variant = 'simd';
qkv.env.numThreads = 1;
const config = {
  model_type: 'bert', architectures: ['BertForMaskedLM'], vocab_size: C.V, hidden_size: C.E, num_hidden_layers: C.L, num_attention_heads: C.H,
  intermediate_size: C.I, max_position_embeddings: C.P, type_vocab_size: 2, hidden_act: 'gelu', layer_norm_eps: 1e-12, position_embedding_type: 'absolute',
};
const vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', ...Array.from({ length: C.V - 5 }, (_, i) => `w${i}`)];
const model = await qkv.loadModel({ config, weights: randomSafetensors(9, shapes()), vocabTxt: vocab.join('\n') + '\n' });
const rows = [];
for (const T of LENGTHS) {
  const ids = [2, ...Array.from({ length: T - 2 }, (_, i) => 5 + ((i * 7919) % (C.V - 5))), 3];
  await model.forward(ids);  // warm-up
  await model.forward(ids, { outputHiddenStates: true });
  await encoderLogitLens(model, ids);
  const plain = [], hidden = [], lens = [], head = [];
  const { hiddenStates } = await model.forward(ids, { outputHiddenStates: true });
  const stacked = new Float32Array((C.L + 1) * T * C.E);
  hiddenStates.forEach((h, l) => stacked.set(h.data, l * T * C.E));
  const x = new qkv.Tensor(stacked, [C.L + 1, T, C.E]);
  for (let r = 0; r < ROUNDS; r++) {  // interleaved, so a load change hits all alike
    plain.push(await time(() => model.forward(ids)));
    hidden.push(await time(() => model.forward(ids, { outputHiddenStates: true })));
    head.push(await time(() => model.maskedLmHead(x)));
    lens.push(await time(() => encoderLogitLens(model, ids)));
  }
  const headRows = (C.L + 1) * T;
  const headFlop = 2 * headRows * C.E * (C.E + C.V);
  const row = {
    tokens: T, plain_ms: median(plain), hidden_states_ms: median(hidden), lens_ms: median(lens), head_ms: median(head),
    head_rows: headRows, head_gflops: headFlop / median(head) / 1e6,
    spread: { plain: [Math.min(...plain), Math.max(...plain)], hidden_states: [Math.min(...hidden), Math.max(...hidden)], lens: [Math.min(...lens), Math.max(...lens)], head: [Math.min(...head), Math.max(...head)] },
  };
  row.hidden_over_plain = row.hidden_states_ms / row.plain_ms;
  row.lens_over_plain = row.lens_ms / row.plain_ms;
  rows.push(row);
}
model.dispose();
const out = {
  benchmark: 'encoder-hidden-lens-node',
  date: new Date().toISOString(),
  machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, node: process.version, load_average: { before: loadBefore, after: os.loadavg() }, wasm_limits_1t: machine },
  model: 'BertForMaskedLM, MiniLM shape (6 layers, hidden 384, 12 heads, intermediate 1536, vocab 30522), std-0.2 random weights (seed 9)',
  method: `wall ms, median of ${ROUNDS} interleaved rounds after a warm-up, simd build, 1 thread: model.forward(ids) (MLM logits), the same with outputHiddenStates, ` +
    'model.maskedLmHead on the 7 x T rows of every hidden state (one wasm call), encoderLogitLens(model, ids) (topK 5: forward, head, softmax / top-k / KL in JS)',
  rows,
};
mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
writeFileSync(path.join(ROOT, 'bench', 'results', 'encoder-hidden-lens-node.json'), JSON.stringify(out, null, 2) + '\n');
console.log('| tokens | forward ms | + hidden states ms | ratio | head on 7T rows ms | head GFLOP/s | lens ms | lens / forward |');
console.log('|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const r of rows) {
  console.log(`| ${r.tokens} | ${r.plain_ms.toFixed(1)} | ${r.hidden_states_ms.toFixed(1)} | ${r.hidden_over_plain.toFixed(3)}x | ${r.head_ms.toFixed(1)} | ${r.head_gflops.toFixed(1)} | ${r.lens_ms.toFixed(1)} | ${r.lens_over_plain.toFixed(2)}x |`);
}
if (machine) console.log(`machine: wasm mul+add peak ${JSON.stringify(machine)}`);
console.log(`load average ${loadBefore.map((x) => x.toFixed(1)).join(' ')} -> ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}; wrote bench/results/encoder-hidden-lens-node.json`);
