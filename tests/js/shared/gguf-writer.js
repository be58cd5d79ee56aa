// A GGUF writer for the tests, written from the format's specification (ggml's docs/gguf.md) and
// the block formats' definitions (ggml-quants.c's block structs and dequantizers): a Hugging
// Face checkpoint (config.json + safetensors, F32) -> a GGUF file as llama.cpp's converter lays
// it out (its tensor names, the "llama" architecture's q / k rows interleaved per head, GPT-2's
// matrices transposed, Gemma's norms stored as 1 + w), its matrices in any of F32, F16, BF16,
// Q8_0, Q4_0, Q4_K, Q5_K, Q6_K. The quantizers are simple (not llama.cpp's searches) but write
// valid blocks; dequantize() reads them back by the definitions, for the references.

import { buildSafetensors } from '../model-helpers.js';

const GGML = { F32: 0, F16: 1, Q4_0: 2, Q8_0: 8, Q4_K: 12, Q5_K: 13, Q6_K: 14, BF16: 30 };
const BLOCK = { F32: [1, 4], F16: [1, 2], BF16: [1, 2], Q8_0: [32, 34], Q4_0: [32, 18], Q4_K: [256, 144], Q5_K: [256, 176], Q6_K: [256, 210] };
export const TENSOR_TYPES = Object.keys(BLOCK);

// ---------------------------------------------------------------- halves

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** float -> IEEE half bits, round to nearest even. */
export function toHalf(v) {
  f32[0] = v;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let man = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (man ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    man |= 0x800000;
    const shift = 14 - e;
    let h = man >>> shift;
    const rem = man & ((1 << shift) - 1), half = 1 << (shift - 1);
    if (rem > half || (rem === half && (h & 1))) h++;
    return sign | h;
  }
  let h = (e << 10) | (man >>> 13);
  const rem = man & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++;
  return sign | h;
}

/** IEEE half bits -> float. */
export function fromHalf(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >>> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

const toBf16 = (v) => {
  f32[0] = v;
  const x = u32[0];
  return (x + 0x7fff + ((x >>> 16) & 1)) >>> 16;
};
const fromBf16 = (b) => {
  u32[0] = b << 16;
  return f32[0];
};
const halfRound = (v) => fromHalf(toHalf(v));

// ---------------------------------------------------------------- blocks

function q8_0(x, out, o) {
  let amax = 0;
  for (let i = 0; i < 32; i++) amax = Math.max(amax, Math.abs(x[i]));
  const dh = toHalf(amax / 127), d = fromHalf(dh);
  out[o] = dh & 0xff, out[o + 1] = dh >>> 8;
  for (let i = 0; i < 32; i++) out[o + 2 + i] = (d ? Math.max(-127, Math.min(127, Math.round(x[i] / d))) : 0) & 0xff;
}

function q4_0(x, out, o) {
  let m = 0;
  for (let i = 0; i < 32; i++) if (Math.abs(x[i]) > Math.abs(m)) m = x[i];
  const dh = toHalf(m / -8), d = fromHalf(dh);
  out[o] = dh & 0xff, out[o + 1] = dh >>> 8;
  const u = (v) => (d ? Math.max(0, Math.min(15, Math.floor(v / d + 8.5))) : 8);
  for (let j = 0; j < 16; j++) out[o + 2 + j] = u(x[j]) | (u(x[j + 16]) << 4);
}

// Q4_K / Q5_K (levels 15 / 31): 8 sub-blocks of 32, w ~ d sc q - dmin m, 6-bit sc and m.
function kAffine(x, out, o, levels) {
  const scale = new Float64Array(8), mins = new Float64Array(8);
  for (let s = 0; s < 8; s++) {
    let lo = 0, hi = 0;
    for (let l = 0; l < 32; l++) lo = Math.min(lo, x[32 * s + l]), hi = Math.max(hi, x[32 * s + l]);
    mins[s] = -lo;
    scale[s] = (hi - lo) / levels;
  }
  const dh = toHalf(Math.max(...scale) / 63), mh = toHalf(Math.max(...mins) / 63);
  const d = fromHalf(dh), dmin = fromHalf(mh);
  const sc = Array.from(scale, (v) => (d ? Math.min(63, Math.round(v / d)) : 0));
  const mn = Array.from(mins, (v) => (dmin ? Math.min(63, Math.round(v / dmin)) : 0));
  out[o] = dh & 0xff, out[o + 1] = dh >>> 8, out[o + 2] = mh & 0xff, out[o + 3] = mh >>> 8;
  for (let j = 0; j < 4; j++) {
    out[o + 4 + j] = sc[j] | ((sc[j + 4] >> 4) << 6);
    out[o + 8 + j] = mn[j] | ((mn[j + 4] >> 4) << 6);
    out[o + 12 + j] = (sc[j + 4] & 0xf) | ((mn[j + 4] & 0xf) << 4);
  }
  const q = new Uint8Array(256);
  for (let s = 0; s < 8; s++) {
    const ds = d * sc[s], ms = dmin * mn[s];
    for (let l = 0; l < 32; l++) q[32 * s + l] = ds ? Math.max(0, Math.min(levels, Math.round((x[32 * s + l] + ms) / ds))) : 0;
  }
  const five = levels === 31;
  const qs = o + (five ? 48 : 16);
  for (let j = 0; j < 4; j++) {
    for (let l = 0; l < 32; l++) {
      const a = q[64 * j + l], b = q[64 * j + 32 + l];
      out[qs + 32 * j + l] = (a & 0xf) | ((b & 0xf) << 4);
      if (five) out[o + 16 + l] |= ((a >> 4) << (2 * j)) | ((b >> 4) << (2 * j + 1));
    }
  }
}

// Q6_K: 16 sub-blocks of 16, w ~ d sc (q - 32), int8 sc, q in 0..63.
function q6_K(x, out, o) {
  const scale = new Float64Array(16);
  for (let s = 0; s < 16; s++) {
    let m = 0;
    for (let l = 0; l < 16; l++) if (Math.abs(x[16 * s + l]) > Math.abs(m)) m = x[16 * s + l];
    scale[s] = m / -32;
  }
  let big = 0;
  for (const v of scale) if (Math.abs(v) > Math.abs(big)) big = v;
  const dh = toHalf(big / -128), d = fromHalf(dh);
  const sc = Array.from(scale, (v) => (d ? Math.max(-128, Math.min(127, Math.round(v / d))) : 0));
  const q = new Uint8Array(256);
  for (let i = 0; i < 256; i++) {
    const ds = d * sc[i >> 4];
    q[i] = (ds ? Math.max(-32, Math.min(31, Math.round(x[i] / ds))) : 0) + 32;
  }
  for (let n = 0; n < 2; n++) {
    for (let l = 0; l < 32; l++) {
      const q1 = q[128 * n + l], q2 = q[128 * n + l + 32], q3 = q[128 * n + l + 64], q4 = q[128 * n + l + 96];
      out[o + 64 * n + l] = (q1 & 0xf) | ((q3 & 0xf) << 4);
      out[o + 64 * n + l + 32] = (q2 & 0xf) | ((q4 & 0xf) << 4);
      out[o + 128 + 32 * n + l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
    }
  }
  for (let s = 0; s < 16; s++) out[o + 192 + s] = sc[s] & 0xff;
  out[o + 208] = dh & 0xff, out[o + 209] = dh >>> 8;
}

/** Values (Float32Array, rows of K) as `type`'s bytes. */
export function quantize(values, type) {
  const [be, bb] = BLOCK[type];
  const n = values.length;
  if (n % be) throw new Error(`quantize: ${n} values are not whole ${type} blocks`);
  const out = new Uint8Array((n / be) * bb);
  const dv = new DataView(out.buffer);
  for (let b = 0; b < n / be; b++) {
    const x = values.subarray(b * be, (b + 1) * be), o = b * bb;
    if (type === 'F32') dv.setFloat32(o, x[0], true);
    else if (type === 'F16') dv.setUint16(o, toHalf(x[0]), true);
    else if (type === 'BF16') dv.setUint16(o, toBf16(x[0]), true);
    else if (type === 'Q8_0') q8_0(x, out, o);
    else if (type === 'Q4_0') q4_0(x, out, o);
    else if (type === 'Q4_K') kAffine(x, out, o, 15);
    else if (type === 'Q5_K') kAffine(x, out, o, 31);
    else q6_K(x, out, o);
  }
  return out;
}

/** The values `type`'s bytes hold, by the block definitions (Float32Array). */
export function dequantize(bytes, type, n) {
  const [be, bb] = BLOCK[type];
  const out = new Float32Array(n);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const h = (o) => fromHalf(dv.getUint16(o, true));
  for (let b = 0; b < n / be; b++) {
    const o = b * bb, y = b * be;
    if (type === 'F32') out[y] = dv.getFloat32(o, true);
    else if (type === 'F16') out[y] = h(o);
    else if (type === 'BF16') out[y] = fromBf16(dv.getUint16(o, true));
    else if (type === 'Q8_0') for (let i = 0; i < 32; i++) out[y + i] = h(o) * dv.getInt8(o + 2 + i);
    else if (type === 'Q4_0') {
      for (let j = 0; j < 16; j++) {
        out[y + j] = h(o) * ((bytes[o + 2 + j] & 0xf) - 8);
        out[y + j + 16] = h(o) * ((bytes[o + 2 + j] >> 4) - 8);
      }
    } else if (type === 'Q4_K' || type === 'Q5_K') {
      const d = h(o), dmin = h(o + 2), s = (k) => bytes[o + 4 + k];
      const pair = (j) => (j < 4 ? [s(j) & 63, s(j + 4) & 63] : [(s(j + 4) & 0xf) | ((s(j - 4) >> 6) << 4), (s(j + 4) >> 4) | ((s(j) >> 6) << 4)]);
      const five = type === 'Q5_K', qs = o + (five ? 48 : 16);
      for (let j = 0; j < 4; j++) {
        const [sc1, m1] = pair(2 * j), [sc2, m2] = pair(2 * j + 1);
        for (let l = 0; l < 32; l++) {
          const qh = five ? bytes[o + 16 + l] : 0;
          out[y + 64 * j + l] = d * sc1 * ((bytes[qs + 32 * j + l] & 0xf) + ((qh >> (2 * j)) & 1) * 16) - dmin * m1;
          out[y + 64 * j + 32 + l] = d * sc2 * ((bytes[qs + 32 * j + l] >> 4) + ((qh >> (2 * j + 1)) & 1) * 16) - dmin * m2;
        }
      }
    } else {  // Q6_K
      const d = h(o + 208);
      for (let i = 0; i < 256; i++) {
        const n2 = i >> 7, r = i & 127, t = r >> 5, l = r & 31;
        const lo = t & 1 ? bytes[o + 64 * n2 + l + 32] : bytes[o + 64 * n2 + l];
        const nib = t < 2 ? lo & 0xf : lo >> 4;
        const hi = (bytes[o + 128 + 32 * n2 + l] >> (2 * t)) & 3;
        out[y + i] = d * dv.getInt8(o + 192 + (i >> 4)) * ((nib | (hi << 4)) - 32);
      }
    }
  }
  return out;
}

export { halfRound };

// ---------------------------------------------------------------- the file

const VALUE = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12 };

class Bytes {
  constructor() { this.parts = []; this.length = 0; }
  push(u8) { this.parts.push(u8); this.length += u8.byteLength; }
  num(type, v) {
    const size = { u8: 1, i8: 1, bool: 1, u16: 2, i16: 2, u32: 4, i32: 4, f32: 4, u64: 8, i64: 8, f64: 8 }[type];
    const b = new Uint8Array(size), dv = new DataView(b.buffer);
    if (type === 'u8' || type === 'bool') dv.setUint8(0, Number(v));
    else if (type === 'i8') dv.setInt8(0, v);
    else if (type === 'u16') dv.setUint16(0, v, true);
    else if (type === 'i16') dv.setInt16(0, v, true);
    else if (type === 'u32') dv.setUint32(0, v, true);
    else if (type === 'i32') dv.setInt32(0, v, true);
    else if (type === 'f32') dv.setFloat32(0, v, true);
    else if (type === 'u64') dv.setBigUint64(0, BigInt(v), true);
    else if (type === 'i64') dv.setBigInt64(0, BigInt(v), true);
    else dv.setFloat64(0, v, true);
    this.push(b);
  }
  str(s) {
    const b = new TextEncoder().encode(s);
    this.num('u64', b.byteLength);
    this.push(b);
  }
  join() {
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const p of this.parts) out.set(p, at), (at += p.byteLength);
    return out;
  }
}

/** The bytes of a tensor of `type` and dims `ne` (ggml order). */
export function tensorByteLength(type, ne) {
  const [be, bb] = BLOCK[type];
  const n = ne.reduce((a, b) => a * b, 1);
  if (ne[0] % be) throw new Error(`tensorByteLength: rows of ${ne[0]} are not whole ${type} blocks`);
  return (n / be) * bb;
}

/**
 * A GGUF file, passed to `write(Uint8Array)` part by part in order: metadata [[key, type, value]]
 * (type 'u32', 'f32', 'string', ..., or ['array', elementType] with an array value), tensors
 * [{ name, type, ne (ggml order: ne[0] the row), bytes }], `bytes` a Uint8Array or a function
 * that makes it when the tensor is written (so a large file is never held whole). Version 3.
 */
export function streamGguf(metadata, tensors, write, alignment = 32) {
  const b = new Bytes();
  b.push(new TextEncoder().encode('GGUF'));
  b.num('u32', 3);
  b.num('u64', tensors.length);
  b.num('u64', metadata.length);
  for (const [key, type, value] of metadata) {
    b.str(key);
    if (Array.isArray(type)) {
      b.num('u32', VALUE.array);
      b.num('u32', VALUE[type[1]]);
      b.num('u64', value.length);
      for (const v of value) type[1] === 'string' ? b.str(v) : b.num(type[1], v);
    } else {
      b.num('u32', VALUE[type]);
      type === 'string' ? b.str(value) : b.num(type, value);
    }
  }
  const size = (t) => (typeof t.bytes === 'function' ? tensorByteLength(t.type, t.ne) : t.bytes.byteLength);
  let offset = 0;
  for (const t of tensors) {
    b.str(t.name);
    b.num('u32', t.ne.length);
    for (const d of t.ne) b.num('u64', d);
    b.num('u32', GGML[t.type]);
    b.num('u64', offset);
    offset += Math.ceil(size(t) / alignment) * alignment;
  }
  const pad = (n) => new Uint8Array((alignment - (n % alignment)) % alignment);
  b.push(pad(b.length));
  write(b.join());
  for (const t of tensors) {
    const bytes = typeof t.bytes === 'function' ? t.bytes() : t.bytes;
    if (bytes.byteLength !== size(t)) throw new Error(`streamGguf: ${t.name} made ${bytes.byteLength} bytes, not ${size(t)}`);
    write(bytes);
    write(pad(bytes.byteLength));
  }
}

/** A GGUF file (streamGguf's arguments) as one Uint8Array. Version 3, alignment 32. */
export function writeGguf(metadata, tensors, alignment = 32) {
  const b = new Bytes();
  streamGguf(metadata, tensors, (u8) => b.push(u8), alignment);
  return b.join();
}

// ---------------------------------------------------------------- a checkpoint as GGUF

/** The tensors of a safetensors file (F32, F16, BF16): { name: { shape, data: Float32Array } }. */
export function readSafetensors(bytes) {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  const out = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const [a, e] = t.data_offsets;
    const raw = Uint8Array.prototype.slice.call(bytes, 8 + n + a, 8 + n + e);  // a copy (Buffer's slice is a view)
    let data;
    if (t.dtype === 'F32') data = new Float32Array(raw.buffer);
    else if (t.dtype === 'F16' || t.dtype === 'BF16') {
      const h = new Uint16Array(raw.buffer);
      data = Float32Array.from(h, t.dtype === 'F16' ? fromHalf : fromBf16);
    } else throw new Error(`readSafetensors: ${name} is ${t.dtype}`);
    out[name] = { shape: t.shape, data };
  }
  return out;
}

const LLAMA_PARTS = [
  ['input_layernorm', 'attn_norm'], ['self_attn.q_proj', 'attn_q'], ['self_attn.k_proj', 'attn_k'],
  ['self_attn.v_proj', 'attn_v'], ['self_attn.o_proj', 'attn_output'], ['self_attn.q_norm', 'attn_q_norm'],
  ['self_attn.k_norm', 'attn_k_norm'], ['mlp.gate_proj', 'ffn_gate'], ['mlp.up_proj', 'ffn_up'], ['mlp.down_proj', 'ffn_down'],
];
const GEMMA_NORMS = [
  ['post_attention_layernorm', 'post_attention_norm'], ['pre_feedforward_layernorm', 'ffn_norm'],
  ['post_feedforward_layernorm', 'post_ffw_norm'],
];
const GPT2_PARTS = [
  ['ln_1', 'attn_norm'], ['attn.c_attn', 'attn_qkv'], ['attn.c_proj', 'attn_output'], ['ln_2', 'ffn_norm'],
  ['mlp.c_fc', 'ffn_up'], ['mlp.c_proj', 'ffn_down'],
];

function ggufName(arch, name) {
  const gpt2 = arch === 'gpt2';
  const fixed = gpt2
    ? { 'wte.weight': 'token_embd.weight', 'wpe.weight': 'position_embd.weight', 'ln_f.weight': 'output_norm.weight', 'ln_f.bias': 'output_norm.bias' }
    : { 'model.embed_tokens.weight': 'token_embd.weight', 'model.norm.weight': 'output_norm.weight', 'lm_head.weight': 'output.weight' };
  const n = name.replace(/^transformer\./, '');
  if (fixed[n]) return fixed[n];
  const m = gpt2 ? /^h\.(\d+)\.(.+)\.(weight|bias)$/.exec(n) : /^model\.layers\.(\d+)\.(.+)\.(weight|bias)$/.exec(n);
  if (!m) return null;
  const parts = gpt2 ? GPT2_PARTS : [...LLAMA_PARTS, ...(arch === 'gemma3' ? GEMMA_NORMS : [['post_attention_layernorm', 'ffn_norm']])];
  const p = parts.find(([hf]) => hf === m[2]);
  return p ? `blk.${m[1]}.${p[1]}.${m[3]}` : null;
}

// llama.cpp's permute() of q / k rows: within each head, HF row h * D/2 + i becomes row 2 i + h.
function permuteRows(data, rows, K, heads) {
  const D = rows / heads, out = new Float32Array(data.length);
  for (let head = 0; head < heads; head++) {
    for (let r = 0; r < D; r++) {
      const to = head * D + 2 * (r % (D / 2)) + Math.floor(r / (D / 2));
      out.set(data.subarray((head * D + r) * K, (head * D + r + 1) * K), to * K);
    }
  }
  return out;
}

/**
 * An HF checkpoint (config object, safetensors bytes, F32) as a GGUF file whose matrices are
 * `type` (a matrix whose rows are not whole blocks of it falls back to F16, as llama.cpp's
 * converter does; 1-D tensors stay F32). Returns { gguf, dequantized }: the file, and the HF
 * checkpoint of the values it holds (an F32 safetensors twin: the reference's weights).
 * `extraMetadata`: more [key, type, value] entries (a tokenizer).
 */
export function checkpointToGguf(config, safetensors, type, extraMetadata = []) {
  const text = config.text_config ?? config;
  const mt = text.model_type ?? 'gpt2';
  const arch = mt === 'gemma3_text' ? 'gemma3' : mt;
  const tensors = readSafetensors(safetensors);
  const meta = [['general.architecture', 'string', arch]];
  const a = (k, t, v) => meta.push([`${arch}.${k}`, t, v]);
  if (arch === 'gpt2') {
    a('block_count', 'u32', text.n_layer); a('embedding_length', 'u32', text.n_embd); a('attention.head_count', 'u32', text.n_head);
    a('context_length', 'u32', text.n_positions); a('feed_forward_length', 'u32', text.n_inner ?? 4 * text.n_embd);
    a('attention.layer_norm_epsilon', 'f32', text.layer_norm_epsilon ?? 1e-5);
  } else {
    const H = text.num_attention_heads;
    a('block_count', 'u32', text.num_hidden_layers); a('embedding_length', 'u32', text.hidden_size);
    a('attention.head_count', 'u32', H); a('attention.head_count_kv', 'u32', text.num_key_value_heads ?? H);
    a('context_length', 'u32', text.max_position_embeddings); a('feed_forward_length', 'u32', text.intermediate_size);
    a('attention.layer_norm_rms_epsilon', 'f32', text.rms_norm_eps ?? 1e-6);
    a('rope.freq_base', 'f32', text.rope_theta ?? (arch === 'gemma3' ? 1e6 : 10000));
    a('attention.key_length', 'u32', text.head_dim ?? text.hidden_size / H);
    a('attention.value_length', 'u32', text.head_dim ?? text.hidden_size / H);
    if (arch === 'gemma3') {
      a('attention.sliding_window', 'u32', text.sliding_window);
      const types = text.layer_types;
      a('attention.sliding_window_pattern', 'u32', types ? types.indexOf('full_attention') + 1 : text.sliding_window_pattern ?? 6);
      if (text.rope_scaling?.factor) a('rope.scaling.factor', 'f32', text.rope_scaling.factor);
      if (text.final_logit_softcapping) a('final_logit_softcapping', 'f32', text.final_logit_softcapping);
    }
  }
  meta.push(...extraMetadata);
  const out = [], twin = [];
  const tied = arch === 'gpt2' || (text.tie_word_embeddings ?? arch === 'gemma3');
  for (const [hf, t] of Object.entries(tensors)) {
    const g = ggufName(arch, hf);
    if (!g || (tied && g === 'output.weight')) continue;
    let data = t.data, shape = t.shape;
    if (shape.length === 2 && arch === 'gpt2' && g.startsWith('blk.')) {  // Conv1D [K, N] -> [N, K]
      const [K, N] = shape, tr = new Float32Array(data.length);
      for (let k = 0; k < K; k++) for (let n = 0; n < N; n++) tr[n * K + k] = data[k * N + n];
      data = tr;
      shape = [N, K];
    }
    // the "llama" architecture's q and k (weights and biases): rows interleaved per head
    const permuted = arch === 'llama' && /attn_[qk]\.(weight|bias)$/.test(g);
    const heads = g.includes('attn_q') ? text.num_attention_heads : text.num_key_value_heads ?? text.num_attention_heads;
    const rowLength = shape.length === 2 ? shape[1] : 1;
    if (permuted) data = permuteRows(data, shape[0], rowLength, heads);
    const norm = arch === 'gemma3' && shape.length === 1 && g.includes('norm');
    if (norm) data = data.map((v) => v + 1);
    const K = shape[shape.length - 1];
    const ty = shape.length === 1 ? 'F32' : K % BLOCK[type][0] === 0 ? type : 'F16';
    const bytes = quantize(data, ty);
    out.push({ name: g, type: ty, ne: [...shape].reverse(), bytes });
    // the twin holds what the file does, in HF's layout and order
    let back = dequantize(bytes, ty, data.length);
    if (norm) back = back.map((v) => v - 1);
    if (permuted) {
      const D = shape[0] / heads, K2 = rowLength, un = new Float32Array(back.length);
      for (let head = 0; head < heads; head++) {
        for (let r = 0; r < D; r++) {
          const from = head * D + 2 * (r % (D / 2)) + Math.floor(r / (D / 2));
          un.set(back.subarray(from * K2, (from + 1) * K2), (head * D + r) * K2);
        }
      }
      back = un;
    }
    if (t.shape.length === 2 && arch === 'gpt2' && g.startsWith('blk.')) {
      const [K2, N] = t.shape, tr = new Float32Array(back.length);
      for (let k = 0; k < K2; k++) for (let n = 0; n < N; n++) tr[k * N + n] = back[n * K2 + k];
      back = tr;
    }
    twin.push({ name: hf, shape: t.shape, data: back });
  }
  const dequantized = buildSafetensors(twin.map((t) => ({
    name: t.name, dtype: 'F32', shape: t.shape, bytes: new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength),
  })));
  return { gguf: writeGguf(meta, out), dequantized };
}
