// The measures of an induction head on a tiny KJV GPT, with qkv (dist/): shared by
// tools/interpret/induction_ablation.mjs, tools/interpret/probe_table.mjs and
// tests/js/model-induction.test.js.
//
// - heldOutText(): the last 5 % of the KJV bytes, from the committed fixture
//   tests/data/model/tiny-kjv-bpe/heldout.txt.gz (checked against its sha256).
// - repeatedFirsts(): sequences of distinct tokens drawn (seeded) from a token list; each is
//   repeated twice to make "A B C ... A B C ...".
// - copyLoss(): the mean next-token loss (nats/token) on the second copy, predicted from its
//   first token on (the second copy's first token follows the first copy's last and cannot be
//   predicted), with an optional headMask; firstCopyLoss(): the same on the first copy.
// - ablationTable(): that loss with every head, and its change with each single head removed.
// - heldOutBitsPerByte(): train_tiny.heldout_bits_per_byte (eval_heldout.py) in qkv: windows of
//   n_positions + 1 tokens overlapping by one, every token but the first predicted once; total
//   nats / the UTF-8 bytes of the predicted tokens / ln 2.
// - randomWeights(): a safetensors file with a trained file's tensors at train_tiny.py's
//   initialisation (the random-weight control).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The held-out KJV text (the fixture tools/model/make_reference.py wrote). */
export function heldOutText() {
  const dir = path.join(ROOT, 'tests', 'data', 'model');
  const m = JSON.parse(readFileSync(path.join(dir, 'tiny-kjv-bpe.json'), 'utf8')).heldout;
  const text = gunzipSync(readFileSync(path.join(dir, m.file))).toString('utf8');
  if (createHash('sha256').update(text).digest('hex') !== m.sha256) throw new Error('induction: held-out fixture sha256 differs');
  return text;
}

/** A seeded uniform draw in (0, 1) (mulberry32, as probe_table.mjs). */
export function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
  };
}

/** `count` sequences of `length` distinct tokens drawn from `tokens` (seeded). */
export function repeatedFirsts(tokens, count, length, seed = 0) {
  const uniform = rng(seed);
  return Array.from({ length: count }, () => {
    const pool = tokens.slice();
    return Array.from({ length }, () => pool.splice(Math.floor(uniform() * pool.length), 1)[0]);
  });
}

/** Mean loss (nats/token) on the second copies of `firsts` repeated, with `headMask` if given. */
export async function copyLoss(qkv, model, firsts, headMask = undefined) {
  let total = 0;
  for (const x of firsts) {
    const T = x.length;
    const { logits } = await model.forward([...x, ...x], headMask ? { headMask } : {});
    const V = logits.shape[2];
    // positions T..2T-1 (the second copy) predict its tokens 1..T-1
    total += qkv.nextTokenLoss(new qkv.Tensor(logits.data.slice(T * V), [1, T, V]), x);
  }
  return total / firsts.length;
}

/** Mean loss (nats/token) on the first copies of `firsts` (its tokens 1..T-1: nothing before predicts them). */
export async function firstCopyLoss(qkv, model, firsts) {
  let total = 0;
  for (const x of firsts) {
    const T = x.length;
    const { logits } = await model.forward(x);
    total += qkv.nextTokenLoss(new qkv.Tensor(logits.data.slice(0, T * logits.shape[2]), [1, T, logits.shape[2]]), x);
  }
  return total / firsts.length;
}

/** { base, rows: [{ layer, head, loss, delta }] }: the second-copy loss, and with each head removed. */
export async function ablationTable(qkv, model, firsts) {
  const { layers, heads } = model.dims;
  const base = await copyLoss(qkv, model, firsts);
  const rows = [];
  for (let l = 0; l < layers; l++) {
    for (let h = 0; h < heads; h++) {
      const mask = Array.from({ length: layers }, (_, i) => Array.from({ length: heads }, (_, j) => (i === l && j === h ? 0 : 1)));
      const loss = await copyLoss(qkv, model, firsts, mask);
      rows.push({ layer: l, head: h, loss, delta: loss - base });
    }
  }
  return { base, rows };
}

/** Bits per byte of `ids` (the held-out text's tokens) as train_tiny.heldout_bits_per_byte. */
export async function heldOutBitsPerByte(model, ids) {
  const P = model.config.n_positions;
  const bytes = new Map();
  const tokenBytes = (t) => {
    if (!bytes.has(t)) bytes.set(t, model.tokenizer.decodeBytes([t]).length);
    return bytes.get(t);
  };
  let nats = 0;
  let nbytes = 0;
  for (let s = 0; s + 1 < ids.length; s += P) {
    const w = ids.slice(s, s + P + 1);                       // up to P inputs and their next tokens
    const x = w.slice(0, -1);
    const { logits } = await model.forward(x);
    const V = logits.shape[2];
    const d = logits.data;
    for (let p = 0; p < x.length; p++) {
      const o = p * V;
      let m = -Infinity;
      for (let v = 0; v < V; v++) if (d[o + v] > m) m = d[o + v];
      let z = 0;
      for (let v = 0; v < V; v++) z += Math.exp(d[o + v] - m);
      nats += m + Math.log(z) - d[o + w[p + 1]];
      nbytes += tokenBytes(w[p + 1]);
    }
  }
  return nats / nbytes / Math.LN2;
}

/** The tensors of safetensors `file` (names, shapes) with train_tiny.py's initial values, as a safetensors file. */
export function randomWeights(file, nLayer, seed) {
  const uniform = rng(seed);
  const normal = () => Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
  const bytes = readFileSync(file);
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8'));
  const names = Object.keys(header).filter((k) => k !== '__metadata__');
  const out = {};
  let off = 0;
  const datas = [];
  for (const name of names) {
    const { shape } = header[name];
    const size = shape.reduce((a, b) => a * b, 1);
    const d = new Float32Array(size);
    const base = name.replace(/^transformer\./, '');
    if (/ln_\d\.weight|ln_f\.weight/.test(base)) d.fill(1);
    else if (base.endsWith('.bias')) d.fill(0);
    else {
      const std = base === 'wpe.weight' ? 0.01 : base.endsWith('c_proj.weight') ? 0.02 / Math.sqrt(2 * nLayer) : 0.02;
      for (let i = 0; i < size; i++) d[i] = std * normal();
    }
    out[name] = { dtype: 'F32', shape, data_offsets: [off, off + d.byteLength] };
    off += d.byteLength;
    datas.push(d);
  }
  let json = JSON.stringify({ __metadata__: { format: 'pt' }, ...out });
  while ((8 + json.length) % 8) json += ' ';
  const buf = new Uint8Array(8 + json.length + off);
  new DataView(buf.buffer).setBigUint64(0, BigInt(json.length), true);
  buf.set(new TextEncoder().encode(json), 8);
  let p = 8 + json.length;
  for (const d of datas) {
    buf.set(new Uint8Array(d.buffer), p);
    p += d.byteLength;
  }
  return buf;
}

/** The files of a model folder with its weights replaced by randomWeights (seed 1234), for loadModel. */
export function randomControlFiles(dir) {
  const config = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8'));
  const files = { config, weights: randomWeights(path.join(dir, 'model.safetensors'), config.n_layer, 1234) };
  if (config.qkv?.tokenizer === 'bpe') {
    files.vocab = readFileSync(path.join(dir, 'vocab.json'), 'utf8');
    files.merges = readFileSync(path.join(dir, 'merges.txt'), 'utf8');
  }
  return files;
}
