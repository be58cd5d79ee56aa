// The matmul kernels as the shipped wasm module compiled them (wasm/bindings_matmul.cpp), on
// every weight type and layout, against plain loops written here in JS (float64): odd sizes,
// the matrix-vector and the matrix-matrix kernel, 1 and 3 threads (the same bits), every variant
// (the relaxed-SIMD ones where the engine has relaxed SIMD).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import * as qkv from '../../dist/index.js';
import { heapU8 } from '../../dist/wasm/heap.js';
import { getModule, relaxedSimdSupported } from '../../dist/wasm/loader.js';

after(() => qkv.dispose());

function rng(seed) {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 4294967296;
}
function normal(r) {
  return Math.sqrt(-2 * Math.log(r() + 1e-12)) * Math.cos(2 * Math.PI * r());
}

// 16-bit floats, decoded independently of the C++ code
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function bf16ToF32(h) {
  u32[0] = h << 16;
  return f32[0];
}
function f16ToF32(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f, m = h & 0x3ff;
  return sign * (e === 0 ? m * 2 ** -24 : (1 + m / 1024) * 2 ** (e - 15));
}

// A random stored matrix: F32 values, or random finite 16-bit patterns (subnormals included)
function makeWeights(type, K, N, r) {
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
function reference(M, K, N, x, w, bias) {
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
function q8Weight(data, scales, K) {
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
function q4Weight(data, scales, K) {
  const blocks = Math.ceil(K / 32);
  return (k, n) => {
    const set = Math.floor(n / 16), g = Math.floor((n % 16) / 4), c = n % 4, b = Math.floor(k / 32), quad = Math.floor((k % 32) / 4);
    const byte = data[((set * blocks + b) * 8 + quad) * 32 + Math.floor(g / 2) * 16 + 4 * c + (k % 4)];
    const u = (byte >> (4 * (g % 2))) & 15;
    return f16ToF32(scales[(set * blocks + b) * 16 + (n % 16)]) * (u - 8);
  };
}

const SHAPES = [[1, 1, 1], [1, 5, 3], [2, 7, 13], [3, 33, 29], [5, 31, 9], [7, 67, 50], [1, 300, 97], [13, 257, 37], [4, 513, 130], [1, 130, 801]];

// the relaxed-SIMD builds where the engine has relaxed SIMD (Node 20: --experimental-wasm-relaxed-simd,
// which stage 30 passes): their GEMM and exp2 are f32x4.relaxed_madd, held to the same tolerance
const relaxed = relaxedSimdSupported() ? ['simd-relaxed', 'simd-relaxed-threads'] : [];
for (const variant of ['simd', 'simd-threads', 'scalar', ...relaxed]) {
  test(`matmul kernels == JS plain loops, every weight type and layout, odd sizes (${variant})`, async () => {
    qkv.dispose();
    qkv.env.variant = variant;
    qkv.env.numThreads = 3;
    await qkv.init();
    const m = getModule();
    const r = rng(2024);
    let worst = 0, cases = 0;
    for (const type of ['F32', 'F16', 'BF16', 'Q8', 'Q4']) {
      for (const outIn of [false, true]) {
        for (const [M, K, N] of SHAPES) {
          const ptrs = [];
          const alloc = (bytes) => {
            const p = m._malloc(Math.max(bytes, 4));
            assert.ok(p, 'malloc');
            ptrs.push(p);
            return p;
          };
          const put = (arr) => {
            const p = alloc(arr.byteLength);
            heapU8(m).set(new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength), p);
            return p;
          };
          try {
            const st = makeWeights(type, K, N, r);
            const idx = outIn ? (k, n) => n * K + k : (k, n) => k * N + n;
            let pData, pScales = 0, w;
            if (type === 'Q8') {
              // quantized by the module from F32; the JS side checks the result against the rule
              const pSrc = put(st.bytes);
              pData = alloc(m.q8DataBytes(K, N));
              pScales = alloc(2 * m.q8ScaleCount(K, N));
              assert.equal(m.matmulQuantize('F32', outIn, K, N, pSrc, pData, pScales), '');
              const data = new Int8Array(heapU8(m).buffer.slice(pData, pData + m.q8DataBytes(K, N)));
              const scales = new Uint16Array(heapU8(m).buffer.slice(pScales, pScales + 2 * m.q8ScaleCount(K, N)));
              w = q8Weight(data, scales, K);
              for (let n = 0; n < N; n++) {
                for (let b = 0; b * 32 < K; b++) {
                  let amax = 0;
                  for (let k = b * 32; k < Math.min(K, b * 32 + 32); k++) amax = Math.max(amax, Math.abs(st.value(idx(k, n))));
                  for (let k = b * 32; k < Math.min(K, b * 32 + 32); k++) {
                    // d / 2, d = amax / 127 rounded to a half (at least 2^-14)
                    const bound = amax > 0 ? Math.max((amax / 254) * (1 + 2 ** -11), 2 ** -15) : 0;
                    assert.ok(Math.abs(w(k, n) - st.value(idx(k, n))) <= bound + 1e-30, `Q8 [${k}, ${n}]`);
                  }
                }
              }
            } else if (type === 'Q4') {
              const pSrc = put(st.bytes);
              pData = alloc(m.q4DataBytes(K, N));
              pScales = alloc(2 * m.q4ScaleCount(K, N));
              assert.equal(m.matmulQuantizeQ4('F32', outIn, K, N, pSrc, pData, pScales), '');
              const data = new Uint8Array(heapU8(m).buffer.slice(pData, pData + m.q4DataBytes(K, N)));
              const scales = new Uint16Array(heapU8(m).buffer.slice(pScales, pScales + 2 * m.q4ScaleCount(K, N)));
              w = q4Weight(data, scales, K);
              for (let n = 0; n < N; n++) {
                for (let b = 0; b * 32 < K; b++) {
                  let amax = 0;
                  for (let k = b * 32; k < Math.min(K, b * 32 + 32); k++) amax = Math.max(amax, Math.abs(st.value(idx(k, n))));
                  for (let k = b * 32; k < Math.min(K, b * 32 + 32); k++) {
                    // |d| = amax / 8 rounded to a half (at least 2^-14): error <= |d| / 2, or where a weight of
                    // the largest one's opposite sign clamps 8 to 7, |w| - 7 |d| <= amax (1 - 7 / 8 (1 - 2^-11))
                    const d = amax > 0 ? Math.max((amax / 8) * (1 + 7 * 2 ** -11), 2 ** -14) : 0;
                    assert.ok(Math.abs(w(k, n) - st.value(idx(k, n))) <= d + 1e-30, `Q4 [${k}, ${n}]`);
                  }
                }
              }
            } else {
              pData = put(st.bytes);
              w = (k, n) => st.value(idx(k, n));
            }
            const x = Float32Array.from({ length: M * K }, () => normal(r));
            const bias = Float32Array.from({ length: N }, () => normal(r));
            const ref = reference(M, K, N, x, w, bias);
            const pX = put(x), pB = put(bias), pY = alloc(4 * M * N);
            const run = (kernel, threads) => {
              assert.equal(m.matmulRun(type, outIn, M, K, N, pData, pScales, pX, pB, pY, threads, kernel), '');
              return new Float32Array(heapU8(m).buffer.slice(pY, pY + 4 * M * N));
            };
            const quantized = type === 'Q8' || type === 'Q4';
            for (const kernel of ['gemm', 'gemv', ...(quantized ? ['gemm-float'] : [])]) {
              const y = run(kernel, 1);
              // Q8 and Q4 gemm and gemv: x quantized to int16 per row and block of 32 (error <= max|x| / 65534)
              const xRel = quantized && kernel !== 'gemm-float' ? 1 / 65534 : 0;
              for (let i = 0; i < M * N; i++) {
                const row = Math.floor(i / N), n = i % N;
                let xmax = 0;
                for (let k = 0; k < K; k++) xmax = Math.max(xmax, Math.abs(x[row * K + k]));
                const tol = (2e-6 * Math.sqrt(K) + 1e-6) * ref.mag[i] + xRel * ref.wsum[n] * xmax + 1e-30;
                const err = Math.abs(y[i] - ref.y[i]);
                worst = Math.max(worst, err / tol);
                assert.ok(err <= tol, `${type} ${outIn ? 'OutIn' : 'InOut'} ${kernel} M=${M} K=${K} N=${N}: y[${i}] = ${y[i]}, want ${ref.y[i]} (tol ${tol})`);
              }
              assert.deepEqual(run(kernel, 3), y, `${type} ${kernel}: 3 threads change the bits`);
              if (kernel === 'gemv' && quantized) assert.deepEqual(run('gemm', 1), y, `${type}: gemm rows differ from gemv's bits`);
            }
            cases++;
          } finally {
            for (const p of ptrs) m._free(p);
          }
        }
      }
    }
    assert.equal(cases, 5 * 2 * SHAPES.length);
    console.log(`# ${variant}: ${cases} cases, worst error ${worst.toFixed(3)} of the tolerance`);
  });
}

test('matmul binding: a bad weight type is an error, not a trap', async () => {
  await qkv.init();
  const m = getModule();
  assert.match(m.matmulRun('F64', false, 1, 1, 1, 8, 0, 8, 0, 8, 1, 'auto'), /^invalid_argument\|matmul: weight type must be/);
  assert.match(m.matmulRun('F32', false, 1, 0, 1, 8, 0, 8, 0, 8, 1, 'auto'), /^invalid_argument\|matmul: shapes x \[1, 0\]/);
});
