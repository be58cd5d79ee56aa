// The race's checkpoints: GGUF files of random weights in two real shapes, as Q8_0 and Q4_0,
// written by the tests' GGUF writer (tests/js/shared/gguf-writer.js, streamGguf: one tensor made
// at a time, so a 0.6B file is never held whole):
//   smollm2-135m  `llama`: 30 layers, hidden 576, 9 heads, 3 KV heads, FFN 1536, vocab 49152, tied
//   qwen3-0.6b    `qwen3`: 28 layers, hidden 1024, 16 heads, 8 KV heads, head_dim 128, FFN 3072,
//                 vocab 151936, q / k norms, tied
// Weights uniform with std 0.02 (a xorshift stream, seeded per tensor), norms 1. The tokenizer is
// a byte-level BPE (`tokenizer.ggml.model` gpt2) of the model's vocabulary size that both qkv and
// llama.cpp read (tokenizer() says how it is built). Not the real vocabularies (not on this machine); the
// benchmark feeds token ids, so only the sizes matter.
//
//   node bench/gguf/make_checkpoints.mjs [--out build/bench-gguf] [--models smollm2-135m,qwen3-0.6b] [--types Q8_0,Q4_0]
//
// Writes <out>/<model>-<type>.gguf (skipped when present); never commit them.
import { closeSync, existsSync, mkdirSync, openSync, renameSync, writeSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { quantize, streamGguf } from '../../tests/js/shared/gguf-writer.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The two shapes (Hugging Face config names). */
export const MODELS = {
  'smollm2-135m': {
    arch: 'llama', pre: 'smollm', layers: 30, hidden: 576, heads: 9, kvHeads: 3, headDim: 64, ffn: 1536, vocab: 49152,
    ropeTheta: 100000, eps: 1e-5, context: 8192, special: ['<|endoftext|>', '<|im_start|>', '<|im_end|>'], bos: 1, eos: 2,
  },
  'qwen3-0.6b': {
    arch: 'qwen3', pre: 'qwen2', layers: 28, hidden: 1024, heads: 16, kvHeads: 8, headDim: 128, ffn: 3072, vocab: 151936,
    ropeTheta: 1000000, eps: 1e-6, context: 40960, special: ['<|endoftext|>', '<|im_start|>', '<|im_end|>'], bos: 0, eos: 2, qkNorm: true,
  },
};

/** GPT-2's byte -> character map (bytes_to_unicode). */
function byteChars() {
  const keep = [];
  for (let b = 33; b <= 126; b++) keep.push(b);
  for (let b = 161; b <= 172; b++) keep.push(b);
  for (let b = 174; b <= 255; b++) keep.push(b);
  const out = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) out[b] = String.fromCodePoint(keep.includes(b) ? b : 256 + extra++);
  return out;
}

/**
 * tokenizer.ggml.* for a byte-level BPE of `vocab` tokens: the control tokens, the 256 byte
 * characters, then tokens of two and three printable ASCII characters, each with the merge that
 * makes it. Every token but the single bytes 0x80..0xff decodes to valid UTF-8 on its own;
 * those are typed unused (5), so llama.cpp renders them as nothing and its server's JSON answer
 * (which rejects invalid UTF-8) holds whatever a random model generates.
 */
function tokenizer(m) {
  const chars = byteChars();
  const ascii = chars.slice(33, 127);  // '!'..'~' map to themselves
  const tokens = [...m.special, ...chars], merges = [];
  for (const a of ascii) for (const b of ascii) if (tokens.length < m.vocab) tokens.push(a + b), merges.push(`${a} ${b}`);
  const pairs = tokens.length;
  for (let i = m.special.length + 256; i < pairs && tokens.length < m.vocab; i++) {
    for (const c of ascii) if (tokens.length < m.vocab) tokens.push(tokens[i] + c), merges.push(`${tokens[i]} ${c}`);
  }
  if (tokens.length < m.vocab) throw new Error(`make_checkpoints: a vocabulary of ${m.vocab} needs more than three characters a token`);
  const S = m.special.length;
  const types = tokens.map((_, i) => (i < S ? 3 : i >= S + 0x80 && i < S + 256 ? 5 : 1));
  return [
    ['tokenizer.ggml.model', 'string', 'gpt2'], ['tokenizer.ggml.pre', 'string', m.pre],
    ['tokenizer.ggml.tokens', ['array', 'string'], tokens], ['tokenizer.ggml.token_type', ['array', 'i32'], types],
    ['tokenizer.ggml.merges', ['array', 'string'], merges],
    ['tokenizer.ggml.bos_token_id', 'u32', m.bos], ['tokenizer.ggml.eos_token_id', 'u32', m.eos],
    ['tokenizer.ggml.padding_token_id', 'u32', 0], ['tokenizer.ggml.add_bos_token', 'bool', false],
  ];
}

/** n uniform values of std `std` (xorshift32 from `seed`). */
function random(n, seed, std) {
  const out = new Float32Array(n), a = std * Math.sqrt(3) * 2 / 2 ** 32;
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >>> 17, x ^= x << 5;
    out[i] = (x >>> 0) * a - std * Math.sqrt(3);
  }
  return out;
}

/** The tensors of a model, each made (random, quantized) when the writer reaches it. */
function tensors(m, type) {
  const out = [];
  const matrix = (name, rows, cols) => {
    const seed = out.length + 1;
    out.push({ name, type, ne: [cols, rows], bytes: () => quantize(random(rows * cols, seed, 0.02), type) });
  };
  const ones = (name, n) => out.push({ name, type: 'F32', ne: [n], bytes: () => new Uint8Array(new Float32Array(n).fill(1).buffer) });
  const q = m.heads * m.headDim, kv = m.kvHeads * m.headDim;
  matrix('token_embd.weight', m.vocab, m.hidden);
  for (let l = 0; l < m.layers; l++) {
    const b = `blk.${l}.`;
    ones(`${b}attn_norm.weight`, m.hidden);
    matrix(`${b}attn_q.weight`, q, m.hidden);
    matrix(`${b}attn_k.weight`, kv, m.hidden);
    matrix(`${b}attn_v.weight`, kv, m.hidden);
    if (m.qkNorm) ones(`${b}attn_q_norm.weight`, m.headDim), ones(`${b}attn_k_norm.weight`, m.headDim);
    matrix(`${b}attn_output.weight`, m.hidden, q);
    ones(`${b}ffn_norm.weight`, m.hidden);
    matrix(`${b}ffn_gate.weight`, m.ffn, m.hidden);
    matrix(`${b}ffn_up.weight`, m.ffn, m.hidden);
    matrix(`${b}ffn_down.weight`, m.hidden, m.ffn);
  }
  ones('output_norm.weight', m.hidden);
  return out;
}

/** The metadata of a model (config keys as llama.cpp's converter writes them, and the tokenizer). */
function metadata(name, m) {
  const a = (k, t, v) => [`${m.arch}.${k}`, t, v];
  return [
    ['general.architecture', 'string', m.arch], ['general.name', 'string', `${name} (random weights)`],
    a('block_count', 'u32', m.layers), a('context_length', 'u32', m.context), a('embedding_length', 'u32', m.hidden),
    a('feed_forward_length', 'u32', m.ffn), a('attention.head_count', 'u32', m.heads), a('attention.head_count_kv', 'u32', m.kvHeads),
    a('attention.key_length', 'u32', m.headDim), a('attention.value_length', 'u32', m.headDim),
    a('attention.layer_norm_rms_epsilon', 'f32', m.eps), a('rope.freq_base', 'f32', m.ropeTheta), a('vocab_size', 'u32', m.vocab),
    ...tokenizer(m),
  ];
}

/** Writes <out>/<model>-<type>.gguf unless it exists; returns its path. */
export function makeCheckpoint(out, model, type) {
  const file = path.join(out, `${model}-${type}.gguf`);
  if (existsSync(file)) return file;
  mkdirSync(out, { recursive: true });
  const m = MODELS[model];
  if (!m) throw new Error(`make_checkpoints: unknown model ${model} (${Object.keys(MODELS).join(', ')})`);
  const fd = openSync(`${file}.part`, 'w');
  try {
    streamGguf(metadata(model, m), tensors(m, type), (u8) => writeSync(fd, u8));
  } finally {
    closeSync(fd);
  }
  renameSync(`${file}.part`, file);
  return file;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const arg = (n, d) => (args.includes(n) ? args[args.indexOf(n) + 1] : d);
  const out = path.resolve(ROOT, arg('--out', 'build/bench-gguf'));
  for (const model of arg('--models', Object.keys(MODELS).join(',')).split(',')) {
    for (const type of arg('--types', 'Q8_0,Q4_0').split(',')) {
      const t0 = performance.now();
      const file = makeCheckpoint(out, model, type);
      console.log(`${path.relative(ROOT, file)} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
    }
  }
}
