// A checkpoint with GPT-2 small's shape and init (n_embd 768, 12 heads, vocab 50257, 1024
// positions, N(0, 0.02); NL layers), built in memory as loadModel's { config, weights, vocab,
// merges } (the random test GPT-2's tokenizer: the benches give ids directly). Shared by
// bench/model/interventions.mjs and residual.mjs.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const E = 768, H = 12, P = 1024, V = 50257, I = 4 * E;

/** N(0, std^2) floats from a seeded xorshift + Box-Muller (fast enough for 124M values). */
export function normal(n, seed, std) {
  const out = new Float32Array(n);
  let s = (seed * 2654435761) >>> 0 || 1;
  const u = () => {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    return (s + 0.5) / 4294967296;
  };
  for (let i = 0; i < n; i += 2) {
    const r = Math.sqrt(-2 * Math.log(u())) * std, t = 2 * Math.PI * u();
    out[i] = r * Math.cos(t);
    if (i + 1 < n) out[i + 1] = r * Math.sin(t);
  }
  return out;
}

export function checkpoint(NL = 12) {
  const tensors = [['wte.weight', [V, E], 'n'], ['wpe.weight', [P, E], 'n']];
  for (let l = 0; l < NL; l++) {
    const p = `h.${l}.`;
    tensors.push([p + 'ln_1.weight', [E], 1], [p + 'ln_1.bias', [E], 0], [p + 'attn.c_attn.weight', [E, 3 * E], 'n'],
      [p + 'attn.c_attn.bias', [3 * E], 0], [p + 'attn.c_proj.weight', [E, E], 'n'], [p + 'attn.c_proj.bias', [E], 0],
      [p + 'ln_2.weight', [E], 1], [p + 'ln_2.bias', [E], 0], [p + 'mlp.c_fc.weight', [E, I], 'n'], [p + 'mlp.c_fc.bias', [I], 0],
      [p + 'mlp.c_proj.weight', [I, E], 'n'], [p + 'mlp.c_proj.bias', [E], 0]);
  }
  tensors.push(['ln_f.weight', [E], 1], ['ln_f.bias', [E], 0]);
  const header = {};
  let off = 0;
  for (const [name, shape] of tensors) {
    const bytes = 4 * shape.reduce((a, b) => a * b, 1);
    header[name] = { dtype: 'F32', shape, data_offsets: [off, off + bytes] };
    off += bytes;
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8) json += ' ';
  const file = new Uint8Array(8 + json.length + off);
  new DataView(file.buffer).setBigUint64(0, BigInt(json.length), true);
  file.set(new TextEncoder().encode(json), 8);
  const data = new Float32Array(file.buffer, 8 + json.length, off / 4);
  tensors.forEach(([name, shape, init], k) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const at = header[name].data_offsets[0] / 4;
    if (init === 'n') data.set(normal(n, k + 1, 0.02), at);
    else data.fill(init, at, at + n);
  });
  const config = {
    model_type: 'gpt2', n_layer: NL, n_head: H, n_embd: E, n_positions: P, n_ctx: P, vocab_size: V, n_inner: null,
    activation_function: 'gelu_new', layer_norm_epsilon: 1e-5,
  };
  // a tokenizer is required for vocab != 256: the random test GPT-2's (300 tokens); ids are given directly
  const tok = path.join(ROOT, 'tests', 'data', 'model', 'random-gpt2');
  return { config, weights: file, vocab: readFileSync(path.join(tok, 'vocab.json'), 'utf8'), merges: readFileSync(path.join(tok, 'merges.txt'), 'utf8') };
}
