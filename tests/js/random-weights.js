// Seeded random weights, bit for bit the same as tools/model/random_weights.py (read its
// docstring for the scheme): a checkpoint too big to commit is made again at test time.
export function lowbias32(x) {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

export function fnv1a32(name) {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(name)) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h >>> 0;
}

const isLayerNormWeight = (name) => name.endsWith('LayerNorm.weight') || name.endsWith('layer_norm.weight');

/** Float32Array of prod(shape) values for tensor `name`. */
export function randomTensor(seed, name, shape, std = 0.2) {
  const n = shape.reduce((a, b) => a * b, 1);
  const salt = lowbias32((fnv1a32(name) ^ seed) >>> 0);
  const scale = Math.sqrt(3) * std;
  const one = isLayerNormWeight(name) ? 1 : 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const u = (lowbias32(lowbias32(i) ^ salt) >>> 8) / 16777216;
    out[i] = (2 * u - 1) * scale + one;
  }
  return out;
}

/** A safetensors file (F32) of { name: shape } made by randomTensor, tensors in the given order. */
export function randomSafetensors(seed, shapes, std = 0.2) {
  const names = Object.keys(shapes);
  const header = { __metadata__: { format: 'pt' } };
  let off = 0;
  for (const k of names) {
    const bytes = 4 * shapes[k].reduce((a, b) => a * b, 1);
    header[k] = { dtype: 'F32', shape: shapes[k], data_offsets: [off, off + bytes] };
    off += bytes;
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8) json += ' ';
  const h = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + h.length + off);
  new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
  out.set(h, 8);
  let at = 8 + h.length;
  for (const k of names) {
    const t = randomTensor(seed, k, shapes[k], std);
    out.set(new Uint8Array(t.buffer), at);
    at += t.byteLength;
  }
  return out;
}
