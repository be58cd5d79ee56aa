// Shared by tests/js/model*.test.js: where the package is, the reference data, and writers
// for safetensors files and random GPT-2 checkpoints.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const DATA = path.join(ROOT, 'tests', 'data', 'model');

// The built package (npm run build -> dist/); QKV_DIST points elsewhere (a private build).
const DIST = process.env.QKV_DIST ? path.resolve(process.env.QKV_DIST) : path.join(ROOT, 'dist');

/** The package's public API (its entry point, as a user imports it). */
export async function api() {
  const qkv = await import(pathToFileURL(path.join(DIST, 'index.js')).href);
  // 'simd' unless the caller set QKV_VARIANT (threads variants are measured by the bench)
  qkv.env.variant = process.env.QKV_VARIANT || 'simd';
  return qkv;
}

export function manifest(name) {
  return JSON.parse(readFileSync(path.join(DATA, name), 'utf8'));
}

export function readF32(rel) {
  const b = readFileSync(path.join(DATA, rel));
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

// The same comparison the shared SDPA cases use.
export { maxAbsDiff as maxAbsErr } from './shared/cases.js';

export function argmax(a, from = 0, n = a.length) {
  let best = 0;
  for (let i = 1; i < n; i++) if (a[from + i] > a[from + best]) best = i;
  return best;
}

/** A safetensors file from a raw header string and data bytes (for damaged files). */
export function rawSafetensors(header, data = new Uint8Array(0), headerLen = undefined) {
  const h = new TextEncoder().encode(header);
  const out = new Uint8Array(8 + h.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLen ?? h.length), true);
  out.set(h, 8);
  out.set(data, 8 + h.length);
  return out;
}

/** A well-formed safetensors file: [{ name, dtype, shape, bytes }] laid out in order. */
export function buildSafetensors(tensors) {
  const header = { __metadata__: { format: 'pt' } };
  let off = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + t.bytes.length] };
    off += t.bytes.length;
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8) json += ' ';
  const data = new Uint8Array(off);
  off = 0;
  for (const t of tensors) {
    data.set(t.bytes, off);
    off += t.bytes.length;
  }
  return rawSafetensors(json, data);
}

/** Seeded N(0, std) floats (mulberry32 + Box-Muller). */
export function randn(n, seed, std = 1, mean = 0) {
  let s = seed >>> 0;
  const u = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
  };
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = mean + std * Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u());
  return out;
}

export function gpt2Config({ n_layer = 2, n_head = 2, n_embd = 16, n_positions = 32, vocab_size = 50 } = {}) {
  return {
    model_type: 'gpt2', n_layer, n_head, n_embd, n_positions, n_ctx: n_positions, vocab_size, n_inner: null,
    activation_function: 'gelu_new', layer_norm_epsilon: 1e-5,
  };
}

/** Every tensor of a random GPT-2 (HF names, Conv1D layout, F32). */
export function randomGpt2Tensors(cfg, seed = 1, prefix = '') {
  const E = cfg.n_embd;
  const I = 4 * E;
  const out = [];
  let k = 0;
  const add = (name, shape, mean = 0) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const v = randn(n, seed * 1000 + k++, 0.2, mean);
    out.push({ name: prefix + name, dtype: 'F32', shape, bytes: new Uint8Array(v.buffer) });
  };
  add('wte.weight', [cfg.vocab_size, E]);
  add('wpe.weight', [cfg.n_positions, E]);
  for (let l = 0; l < cfg.n_layer; l++) {
    const p = `h.${l}.`;
    add(p + 'ln_1.weight', [E], 1);
    add(p + 'ln_1.bias', [E]);
    add(p + 'attn.c_attn.weight', [E, 3 * E]);
    add(p + 'attn.c_attn.bias', [3 * E]);
    add(p + 'attn.c_proj.weight', [E, E]);
    add(p + 'attn.c_proj.bias', [E]);
    add(p + 'ln_2.weight', [E], 1);
    add(p + 'ln_2.bias', [E]);
    add(p + 'mlp.c_fc.weight', [E, I]);
    add(p + 'mlp.c_fc.bias', [I]);
    add(p + 'mlp.c_proj.weight', [I, E]);
    add(p + 'mlp.c_proj.bias', [E]);
  }
  add('ln_f.weight', [E], 1);
  add('ln_f.bias', [E]);
  return out;
}

/**
 * config.json of a small random Llama-family model (HF keys). `windows`: Qwen2's sliding window
 * on layers >= maxWindowLayers (use_sliding_window), or Mistral's on every layer.
 */
export function llamaConfig({
  model_type = 'llama', layers = 2, hidden = 16, heads = 4, kvHeads = 2, headDim = undefined, intermediate = 24,
  vocab = 64, positions = 64, tied = true, window = 0, maxWindowLayers = 1,
} = {}) {
  const cfg = {
    model_type, hidden_size: hidden, intermediate_size: intermediate, num_hidden_layers: layers,
    num_attention_heads: heads, num_key_value_heads: kvHeads, vocab_size: vocab, max_position_embeddings: positions,
    rms_norm_eps: 1e-5, rope_theta: 10000, tie_word_embeddings: tied, hidden_act: 'silu',
  };
  if (headDim !== undefined) cfg.head_dim = headDim;
  if (model_type === 'mistral') cfg.sliding_window = window || null;
  if (model_type === 'qwen2' && window) Object.assign(cfg, { use_sliding_window: true, sliding_window: window, max_window_layers: maxWindowLayers });
  return cfg;
}

/**
 * Every tensor of a random Llama-family model (HF names, [out, in] layout, F32; Qwen2: q/k/v
 * biases; Qwen3 and gemma3_text: q/k norms over head_dim; gemma3_text: its four norms a layer,
 * drawn around 0 as Gemma's x * (1 + w) wants).
 */
export function randomLlamaTensors(cfg, seed = 1) {
  const E = cfg.hidden_size, H = cfg.num_attention_heads, Hkv = cfg.num_key_value_heads ?? H;
  const D = cfg.head_dim ?? E / H, I = cfg.intermediate_size, V = cfg.vocab_size;
  const out = [];
  let k = 0;
  const add = (name, shape, std = 0.3, mean = 0) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const v = randn(n, seed * 1000 + k++, std, mean);
    out.push({ name, dtype: 'F32', shape, bytes: new Uint8Array(v.buffer) });
  };
  add('model.embed_tokens.weight', [V, E], 1);
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`;
    add(p + 'input_layernorm.weight', [E], 0.1, 1);
    add(p + 'self_attn.q_proj.weight', [H * D, E]);
    add(p + 'self_attn.k_proj.weight', [Hkv * D, E]);
    add(p + 'self_attn.v_proj.weight', [Hkv * D, E]);
    if (cfg.model_type === 'qwen2') {
      add(p + 'self_attn.q_proj.bias', [H * D]);
      add(p + 'self_attn.k_proj.bias', [Hkv * D]);
      add(p + 'self_attn.v_proj.bias', [Hkv * D]);
    }
    const gemma = cfg.model_type === 'gemma3_text';
    if (gemma || cfg.model_type === 'qwen3') {
      add(p + 'self_attn.q_norm.weight', [D], 0.1, gemma ? 0 : 1);
      add(p + 'self_attn.k_norm.weight', [D], 0.1, gemma ? 0 : 1);
    }
    add(p + 'self_attn.o_proj.weight', [E, H * D]);
    add(p + 'post_attention_layernorm.weight', [E], 0.1, gemma ? 0 : 1);
    if (gemma) {
      add(p + 'pre_feedforward_layernorm.weight', [E], 0.1);
      add(p + 'post_feedforward_layernorm.weight', [E], 0.1);
    }
    add(p + 'mlp.gate_proj.weight', [I, E]);
    add(p + 'mlp.up_proj.weight', [I, E]);
    add(p + 'mlp.down_proj.weight', [E, I]);
  }
  add('model.norm.weight', [E], 0.1, 1);
  if (!cfg.tie_word_embeddings) add('lm_head.weight', [V, E]);
  return out;
}

/**
 * Splits [{ name, dtype, shape, bytes }] into shards by huggingface_hub's rule
 * (split_state_dict_into_shards_factory): tensors in order, a new shard when the next would
 * take the current one past maxShardBytes (a tensor bigger than that gets a shard of its own);
 * files named model-00001-of-0000N.safetensors, and the index transformers' save_pretrained
 * writes: { metadata: { total_size }, weight_map } with sorted keys.
 * Returns { index (text), files: { name: bytes } }.
 */
export function shardSafetensors(tensors, maxShardBytes) {
  const groups = [];
  let size = 0;
  for (const t of tensors) {
    if (!groups.length || (size + t.bytes.length > maxShardBytes && size > 0)) {
      groups.push([]);
      size = 0;
    }
    groups.at(-1).push(t);
    size += t.bytes.length;
  }
  const n = groups.length;
  const name = (i) => `model-${String(i + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.safetensors`;
  const files = {};
  const weightMap = {};
  groups.forEach((g, i) => {
    files[name(i)] = buildSafetensors(g);
    for (const t of g) weightMap[t.name] = name(i);
  });
  const total = tensors.reduce((a, t) => a + t.bytes.length, 0);
  const sorted = Object.fromEntries(Object.keys(weightMap).sort().map((k) => [k, weightMap[k]]));
  return { index: JSON.stringify({ metadata: { total_size: total }, weight_map: sorted }, null, 2), files };
}

/** The logits of `ids` through the model loadModel(source, options) gives, as hex (bit-exact comparisons); disposed after. */
export async function logitsHex(qkv, ids, source, options) {
  const model = await qkv.loadModel(source, options);
  try {
    return Buffer.from((await model.forward(ids)).logits.data.buffer).toString('hex');
  } finally {
    model.dispose();
  }
}
