// The demo's own small GPT-2 in plain TypeScript: safetensors + config checks with clear
// messages, the byte-level and GPT-2 BPE tokenizers, and a forward pass that also records each
// head's queries and keys (for the neuron view). The demo uses it when the qkv library's model
// is not available, and to recompute q and k for the neuron view; qkv's own model does the
// generating whenever it loads.

export interface GPT2Config {
  n_layer: number; n_head: number; n_embd: number; vocab_size: number; n_positions: number;
  layer_norm_epsilon: number; activation_function: string;
  [key: string]: unknown;
}

/** A file that is not what it claims: the message says which file and what is wrong. */
export class CheckpointError extends Error {}

const need = (ok: unknown, msg: string): void => { if (!ok) throw new CheckpointError(msg); };

export function parseConfig(text: string, name = 'config.json'): GPT2Config {
  let c: Record<string, unknown>;
  try { c = JSON.parse(text); } catch (e) { throw new CheckpointError(`${name} is not valid JSON (${(e as Error).message}).`); }
  need(c && typeof c === 'object' && !Array.isArray(c), `${name} must be a JSON object with GPT-2 keys.`);
  for (const k of ['n_layer', 'n_head', 'n_embd', 'vocab_size']) {
    need(Number.isInteger(c[k]) && (c[k] as number) > 0, `${name}: "${k}" must be a positive integer, got ${JSON.stringify(c[k])}. Is this a GPT-2 config?`);
  }
  const npos = (c.n_positions ?? c.n_ctx) as number;
  need(Number.isInteger(npos) && npos > 0, `${name}: "n_positions" must be a positive integer.`);
  need((c.n_embd as number) % (c.n_head as number) === 0, `${name}: n_embd (${c.n_embd}) is not divisible by n_head (${c.n_head}).`);
  if (c.model_type !== undefined) need(String(c.model_type).startsWith('gpt2'), `${name}: model_type is "${c.model_type}"; only GPT-2-family checkpoints are supported.`);
  return { layer_norm_epsilon: 1e-5, activation_function: 'gelu_new', ...c, n_positions: npos } as GPT2Config;
}

export interface SafeTensors { tensors: Map<string, { shape: number[]; data: Float32Array }> }

const DTYPE_BYTES: Record<string, number> = { F32: 4, F16: 2, BF16: 2 };

function f16(h: number): number {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
  if (e === 0) return s * 2 ** -14 * (f / 1024);
  if (e === 31) return f ? NaN : s * Infinity;
  return s * 2 ** (e - 15) * (1 + f / 1024);
}

/** Parses a .safetensors buffer (F32, F16, BF16 -> Float32Array), checking every offset. */
export function parseSafetensors(buf: ArrayBuffer, name = 'model.safetensors'): SafeTensors {
  need(buf.byteLength >= 8, `${name} is ${buf.byteLength} bytes: too short to be a safetensors file.`);
  const dv = new DataView(buf);
  const n = Number(dv.getBigUint64(0, true));
  need(n > 1 && 8 + n <= buf.byteLength, `${name} is not a safetensors file: its header claims ${n} bytes but the file has ${buf.byteLength - 8} after the length field.`);
  let header: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  try { header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array(buf, 8, n))); } catch {
    throw new CheckpointError(`${name} is not a safetensors file: its header is not JSON.`);
  }
  const base = 8 + n;
  const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [key, t] of Object.entries(header)) {
    if (key === '__metadata__') continue;
    need(t && Array.isArray(t.shape) && Array.isArray(t.data_offsets), `${name}: tensor "${key}" has no shape or data_offsets.`);
    const bytes = DTYPE_BYTES[t.dtype];
    need(bytes, `${name}: tensor "${key}" has dtype ${t.dtype}; the demo reads F32, F16 and BF16.`);
    const count = t.shape.reduce((a, b) => a * b, 1);
    const [b0, b1] = t.data_offsets;
    need(Number.isInteger(b0) && Number.isInteger(b1) && b1 - b0 === count * bytes && base + b1 <= buf.byteLength,
      `${name}: tensor "${key}" (${t.dtype} [${t.shape}]) points at bytes ${b0}–${b1} but the file has ${buf.byteLength - base} data bytes — the file is truncated or damaged.`);
    let data: Float32Array;
    if (t.dtype === 'F32') data = new Float32Array(buf.slice(base + b0, base + b1));
    else {
      const u = new Uint16Array(buf.slice(base + b0, base + b1));
      data = new Float32Array(count);
      if (t.dtype === 'F16') for (let i = 0; i < count; i++) data[i] = f16(u[i]);
      else { const w = new Uint32Array(1), f = new Float32Array(w.buffer); for (let i = 0; i < count; i++) { w[0] = u[i] << 16; data[i] = f[0]; } }
    }
    tensors.set(key.replace(/^transformer\./, ''), { shape: t.shape, data });
  }
  need(tensors.size > 0, `${name} holds no tensors.`);
  return { tensors };
}

// ---------- tokenizers ----------

export interface Tokenizer {
  encode(text: string): number[];
  decode(ids: number[]): string;
  /** how one token looks on its own (bytes that are not whole UTF-8 characters shown as \xNN) */
  tokenText(id: number): string;
}

export const byteTokenizer: Tokenizer = {
  encode: (text) => Array.from(new TextEncoder().encode(text)),
  decode: (ids) => new TextDecoder().decode(Uint8Array.from(ids)),
  tokenText: (id) => (id < 128 ? String.fromCharCode(id) : `\\x${id.toString(16)}`),
};

/** GPT-2's byte <-> unicode table. */
function bytesToUnicode(): Map<number, string> {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
  return new Map(bs.map((b, i) => [b, String.fromCharCode(cs[i])]));
}

export function bpeTokenizer(vocabText: string, mergesText: string): Tokenizer {
  let vocab: Record<string, number>;
  try { vocab = JSON.parse(vocabText); } catch { throw new CheckpointError('vocab.json is not valid JSON.'); }
  need(vocab && typeof vocab === 'object' && Object.values(vocab).every((v) => Number.isInteger(v)), 'vocab.json must map token strings to integer ids.');
  const lines = mergesText.split('\n').filter((l) => l && !l.startsWith('#version'));
  need(lines.every((l) => l.trim().split(' ').length === 2), 'merges.txt must have one merge per line: two tokens separated by a space.');
  const ranks = new Map(lines.map((l, i) => [l.trim(), i]));
  const b2u = bytesToUnicode();
  const u2b = new Map([...b2u].map(([b, u]) => [u, b]));
  const inv = new Map(Object.entries(vocab).map(([t, i]) => [i, t]));
  const pat = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
  const cache = new Map<string, string[]>();
  const bpe = (word: string): string[] => {
    const hit = cache.get(word);
    if (hit) return hit;
    let parts = Array.from(word);
    while (parts.length > 1) {
      let best = -1, bestRank = Infinity;
      for (let i = 0; i < parts.length - 1; i++) {
        const r = ranks.get(parts[i] + ' ' + parts[i + 1]);
        if (r !== undefined && r < bestRank) { bestRank = r; best = i; }
      }
      if (best < 0) break;
      const merged = parts[best] + parts[best + 1];
      const next: string[] = [];
      for (let i = 0; i < parts.length; i++) {
        if (i < parts.length - 1 && parts[i] === parts[best] && parts[i + 1] === parts[best + 1]) { next.push(merged); i++; } else next.push(parts[i]);
      }
      parts = next;
    }
    cache.set(word, parts);
    return parts;
  };
  return {
    encode(text) {
      const ids: number[] = [];
      for (const m of text.matchAll(pat)) {
        const u = Array.from(new TextEncoder().encode(m[0]), (b) => b2u.get(b)!).join('');
        for (const t of bpe(u)) { const id = vocab[t]; if (id !== undefined) ids.push(id); }
      }
      return ids;
    },
    decode(ids) {
      const bytes = ids.flatMap((i) => Array.from(inv.get(i) ?? '', (ch) => u2b.get(ch) ?? 63));
      return new TextDecoder().decode(Uint8Array.from(bytes));
    },
    tokenText(id) {
      const bytes = Array.from(inv.get(id) ?? '?', (ch) => u2b.get(ch) ?? 63);
      const s = new TextDecoder('utf-8', { fatal: false }).decode(Uint8Array.from(bytes));
      return s.includes('\uFFFD') ? bytes.map((b) => (b < 128 ? String.fromCharCode(b) : `\\x${b.toString(16)}`)).join('') : s;
    },
  };
}

// ---------- the model ----------

export interface ForwardOut {
  logits: Float32Array; // [L, V]
  /** attn[layer][head][q] = Float32Array(L) of softmax weights */
  attn: Float32Array[][][];
  /** q[layer][head] = Float32Array(L * headDim), same for k */
  q: Float32Array[][];
  k: Float32Array[][];
}

export class TinyGPT2 {
  readonly headDim: number;
  private w: (name: string) => Float32Array;
  constructor(readonly config: GPT2Config, st: SafeTensors) {
    const c = config, E = c.n_embd;
    this.headDim = E / c.n_head;
    const expect: [string, number[]][] = [['wte.weight', [c.vocab_size, E]], ['wpe.weight', [c.n_positions, E]], ['ln_f.weight', [E]], ['ln_f.bias', [E]]];
    for (let l = 0; l < c.n_layer; l++) {
      const p = `h.${l}.`;
      expect.push([p + 'ln_1.weight', [E]], [p + 'ln_1.bias', [E]], [p + 'attn.c_attn.weight', [E, 3 * E]], [p + 'attn.c_attn.bias', [3 * E]],
        [p + 'attn.c_proj.weight', [E, E]], [p + 'attn.c_proj.bias', [E]], [p + 'ln_2.weight', [E]], [p + 'ln_2.bias', [E]]);
      const fcW = st.tensors.get(p + 'mlp.c_fc.weight');
      const inner = fcW?.shape[1] ?? 4 * E;
      expect.push([p + 'mlp.c_fc.weight', [E, inner]], [p + 'mlp.c_fc.bias', [inner]], [p + 'mlp.c_proj.weight', [inner, E]], [p + 'mlp.c_proj.bias', [E]]);
    }
    for (const [name, shape] of expect) {
      const t = st.tensors.get(name);
      need(t, `model.safetensors has no tensor "${name}" — is this a GPT-2 checkpoint matching config.json (n_layer ${c.n_layer}, n_embd ${E})?`);
      need(t!.shape.join() === shape.join(), `model.safetensors: "${name}" has shape [${t!.shape}] but config.json implies [${shape}].`);
    }
    this.w = (name) => st.tensors.get(name)!.data;
  }

  forward(ids: number[]): ForwardOut {
    const c = this.config, E = c.n_embd, H = c.n_head, Dh = this.headDim, L = ids.length, V = c.vocab_size;
    need(L > 0 && L <= c.n_positions, `forward: ${L} tokens; the model takes 1 to ${c.n_positions}.`);
    const x = new Float32Array(L * E);
    const wte = this.w('wte.weight'), wpe = this.w('wpe.weight');
    for (let t = 0; t < L; t++) for (let e = 0; e < E; e++) x[t * E + e] = wte[ids[t] * E + e] + wpe[t * E + e];
    const attn: Float32Array[][][] = [], qs: Float32Array[][] = [], ks: Float32Array[][] = [];
    const eps = c.layer_norm_epsilon;
    for (let l = 0; l < c.n_layer; l++) {
      const p = `h.${l}.`;
      const h1 = layerNorm(x, L, E, this.w(p + 'ln_1.weight'), this.w(p + 'ln_1.bias'), eps);
      const qkv = linear(h1, L, E, 3 * E, this.w(p + 'attn.c_attn.weight'), this.w(p + 'attn.c_attn.bias'));
      const y = new Float32Array(L * E);
      const layerAttn: Float32Array[][] = [], lq: Float32Array[] = [], lk: Float32Array[] = [];
      const scale = c.scale_attn_weights === false ? 1 : 1 / Math.sqrt(Dh);
      for (let h = 0; h < H; h++) {
        const q = new Float32Array(L * Dh), k = new Float32Array(L * Dh), v = new Float32Array(L * Dh);
        for (let t = 0; t < L; t++) for (let d = 0; d < Dh; d++) {
          q[t * Dh + d] = qkv[t * 3 * E + h * Dh + d];
          k[t * Dh + d] = qkv[t * 3 * E + E + h * Dh + d];
          v[t * Dh + d] = qkv[t * 3 * E + 2 * E + h * Dh + d];
        }
        const rows: Float32Array[] = [];
        for (let i = 0; i < L; i++) {
          const r = new Float32Array(L);
          let m = -Infinity;
          for (let j = 0; j <= i; j++) {
            let s = 0;
            for (let d = 0; d < Dh; d++) s += q[i * Dh + d] * k[j * Dh + d];
            r[j] = s * scale;
            if (r[j] > m) m = r[j];
          }
          let sum = 0;
          for (let j = 0; j <= i; j++) { r[j] = Math.exp(r[j] - m); sum += r[j]; }
          for (let j = 0; j <= i; j++) {
            r[j] /= sum;
            for (let d = 0; d < Dh; d++) y[i * E + h * Dh + d] += r[j] * v[j * Dh + d];
          }
          rows.push(r);
        }
        layerAttn.push(rows); lq.push(q); lk.push(k);
      }
      attn.push(layerAttn); qs.push(lq); ks.push(lk);
      const o = linear(y, L, E, E, this.w(p + 'attn.c_proj.weight'), this.w(p + 'attn.c_proj.bias'));
      for (let i = 0; i < x.length; i++) x[i] += o[i];
      const h2 = layerNorm(x, L, E, this.w(p + 'ln_2.weight'), this.w(p + 'ln_2.bias'), eps);
      const inner = this.w(p + 'mlp.c_fc.bias').length;
      const f = linear(h2, L, E, inner, this.w(p + 'mlp.c_fc.weight'), this.w(p + 'mlp.c_fc.bias'));
      for (let i = 0; i < f.length; i++) { const z = f[i]; f[i] = 0.5 * z * (1 + Math.tanh(0.7978845608028654 * (z + 0.044715 * z * z * z))); }
      const m2 = linear(f, L, inner, E, this.w(p + 'mlp.c_proj.weight'), this.w(p + 'mlp.c_proj.bias'));
      for (let i = 0; i < x.length; i++) x[i] += m2[i];
    }
    const hf = layerNorm(x, L, E, this.w('ln_f.weight'), this.w('ln_f.bias'), eps);
    // logits only for the last position (what generation needs); earlier rows left 0
    const logits = new Float32Array(L * V);
    for (let v = 0; v < V; v++) {
      let s = 0;
      for (let e = 0; e < E; e++) s += hf[(L - 1) * E + e] * wte[v * E + e];
      logits[(L - 1) * V + v] = s;
    }
    return { logits, attn, q: qs, k: ks };
  }
}

function layerNorm(x: Float32Array, L: number, E: number, g: Float32Array, b: Float32Array, eps: number): Float32Array {
  const out = new Float32Array(L * E);
  for (let t = 0; t < L; t++) {
    let mean = 0, v = 0;
    for (let e = 0; e < E; e++) mean += x[t * E + e];
    mean /= E;
    for (let e = 0; e < E; e++) { const d = x[t * E + e] - mean; v += d * d; }
    const inv = 1 / Math.sqrt(v / E + eps);
    for (let e = 0; e < E; e++) out[t * E + e] = (x[t * E + e] - mean) * inv * g[e] + b[e];
  }
  return out;
}

/** x [L, I] times Conv1D weight [I, O] plus bias. */
function linear(x: Float32Array, L: number, I: number, O: number, w: Float32Array, b: Float32Array): Float32Array {
  const out = new Float32Array(L * O);
  for (let t = 0; t < L; t++) {
    const o = out.subarray(t * O, (t + 1) * O);
    o.set(b);
    for (let i = 0; i < I; i++) {
      const xi = x[t * I + i];
      if (xi === 0) continue;
      const wr = w.subarray(i * O, (i + 1) * O);
      for (let j = 0; j < O; j++) o[j] += xi * wr[j];
    }
  }
  return out;
}

/** Seeded sampling with temperature and top-k (temperature 0 = greedy). */
export function sample(logits: Float32Array, temperature: number, topK: number, rand: () => number): number {
  const n = logits.length;
  if (temperature <= 0) { let best = 0; for (let i = 1; i < n; i++) if (logits[i] > logits[best]) best = i; return best; }
  let idx = Array.from({ length: n }, (_v, i) => i);
  if (topK > 0 && topK < n) idx = idx.sort((a, b) => logits[b] - logits[a]).slice(0, topK);
  const m = Math.max(...idx.map((i) => logits[i]));
  const p = idx.map((i) => Math.exp((logits[i] - m) / temperature));
  const total = p.reduce((a, b) => a + b, 0);
  let r = rand() * total;
  for (let i = 0; i < idx.length; i++) { r -= p[i]; if (r <= 0) return idx[i]; }
  return idx[idx.length - 1];
}
