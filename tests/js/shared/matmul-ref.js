// The matmul tests' JS side (tests/js/matmul.test.js in Node, tests/browser/matmul-q4 in the
// page): a seeded generator, random stored matrices, the layouts' Q8 and Q4 decoders written
// independently of the C++ code, and y = x W + b in float64.
export function rng(seed) {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 4294967296;
}
export function normal(r) {
  return Math.sqrt(-2 * Math.log(r() + 1e-12)) * Math.cos(2 * Math.PI * r());
}

// 16-bit floats, decoded independently of the C++ code
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
export function bf16ToF32(h) {
  u32[0] = h << 16;
  return f32[0];
}
export function f16ToF32(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f, m = h & 0x3ff;
  return sign * (e === 0 ? m * 2 ** -24 : (1 + m / 1024) * 2 ** (e - 15));
}

// A random stored matrix: F32 values, or random finite 16-bit patterns (subnormals included)
export function makeWeights(type, K, N, r) {
  const n = K * N;
  if (type === 'F32' || type === 'Q8' || type === 'Q4') {
    const v = new Float32Array(n);
    for (let i = 0; i < n; i++) v[i] = i % 7 === 0 ? 0 : normal(r) * (i % 13 === 5 ? 300 : 0.5);
    return { bytes: new Uint8Array(v.buffer), value: (i) => v[i], f32: v };
  }
  const h = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    let bits;
    do bits = Math.floor(r() * 65536);
    while (type === 'F16' ? ((bits >> 10) & 0x1f) === 0x1f || ((bits >> 10) & 0x1f) > 20 : ((bits >> 7) & 0xff) === 0xff || ((bits >> 7) & 0xff) > 134);
    h[i] = bits;
  }
  const decode = type === 'F16' ? f16ToF32 : bf16ToF32;
  return { bytes: new Uint8Array(h.buffer), value: (i) => decode(h[i]) };
}

/** y = x W + b in float64, W[k, n] from w(k, n). Also the magnitudes sum |x W| + |b|, sum |W|. */
export function reference(M, K, N, x, w, bias) {
  const y = new Float64Array(M * N), mag = new Float64Array(M * N), wsum = new Float64Array(N);
  for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) wsum[n] += Math.abs(w(k, n));
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let acc = bias[n], a = Math.abs(bias[n]);
      for (let k = 0; k < K; k++) {
        const p = x[m * K + k] * w(k, n);
        acc += p;
        a += Math.abs(p);
      }
      y[m * N + n] = acc;
      mag[m * N + n] = a;
    }
  }
  return { y, mag, wsum };
}

// The Q8 layout (src/matmul/weights.hpp): data [N/4][K/32][16 pairs][4 columns][2], scales [N/4][K/32][4]
// IEEE halves
export function q8Weight(data, scales, K) {
  const blocks = Math.ceil(K / 32);
  return (k, n) => {
    const g = Math.floor(n / 4), c = n % 4, b = Math.floor(k / 32), p = Math.floor((k % 32) / 2);
    return f16ToF32(scales[(g * blocks + b) * 4 + c]) * data[((g * blocks + b) * 16 + p) * 8 + c * 2 + (k % 2)];
  };
}

// The Q4 layout (src/matmul/weights.hpp): data [N/16 sets][K/32][8 quads][2 halves][16 bytes],
// byte 4 c + i of half h holding u = q + 8 at k = 4 quad + i of column c of group 2h (low nibble)
// and of group 2h + 1 (high nibble), group g being the set's columns 4 g .. 4 g + 3;
// scales [N/16][K/32][16] IEEE halves
export function q4Weight(data, scales, K) {
  const blocks = Math.ceil(K / 32);
  return (k, n) => {
    const set = Math.floor(n / 16), g = Math.floor((n % 16) / 4), c = n % 4, b = Math.floor(k / 32), quad = Math.floor((k % 32) / 4);
    const byte = data[((set * blocks + b) * 8 + quad) * 32 + Math.floor(g / 2) * 16 + 4 * c + (k % 4)];
    const u = (byte >> (4 * (g % 2))) & 15;
    return f16ToF32(scales[(set * blocks + b) * 16 + (n % 16)]) * (u - 8);
  };
}

