// The matmul kernels as the shipped wasm module compiled them (wasm/bindings_matmul.cpp), on
// every weight type and layout, against plain loops written here in JS (float64): odd sizes,
// the matrix-vector and the matrix-matrix kernel, 1 and 3 threads (the same bits), every variant
// (the relaxed-SIMD ones where the engine has relaxed SIMD).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import * as qkv from '../../dist/index.js';
import { heapU8 } from '../../dist/wasm/heap.js';
import { getModule, relaxedDotComputes, relaxedSimdSupported } from '../../dist/wasm/loader.js';
import { makeWeights, normal, q4Weight, q8Weight, reference, rng } from './shared/matmul-ref.js';

after(() => qkv.dispose());

const SHAPES = [[1, 1, 1], [1, 5, 3], [2, 7, 13], [3, 33, 29], [5, 31, 9], [7, 67, 50], [1, 300, 97], [13, 257, 37], [4, 513, 130], [1, 130, 801]];

// the relaxed-SIMD builds where the engine has relaxed SIMD (Node 20: --experimental-wasm-relaxed-simd,
// which stage 30 passes): their GEMM and exp2 are f32x4.relaxed_madd, held to the same tolerance
const relaxed = relaxedSimdSupported() ? ['simd-relaxed', 'simd-relaxed-threads'] : [];
// storage index of W[k, n] per layout (Panels: matmul/weights.hpp, 16 columns per panel, the last N % 16; F32, F16, BF16)
const LAYOUT_INDEX = {
  InOut: (K, N) => (k, n) => k * N + n,
  OutIn: (K) => (k, n) => n * K + k,
  Panels: (K, N) => (k, n) => {
    const first = n - (n % 16), width = Math.min(16, N - first);
    return first * K + k * width + (n - first);
  },
};

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
      for (const layout of type === 'Q8' || type === 'Q4' ? ['InOut', 'OutIn'] : ['InOut', 'OutIn', 'Panels']) {
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
            const idx = LAYOUT_INDEX[layout](K, N);
            let pData, pScales = 0, w;
            if (type === 'Q8') {
              // quantized by the module from F32; the JS side checks the result against the rule
              const pSrc = put(st.bytes);
              pData = alloc(m.q8DataBytes(K, N));
              pScales = alloc(2 * m.q8ScaleCount(K, N));
              assert.equal(m.matmulQuantize('F32', layout, K, N, pSrc, pData, pScales), '');
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
              assert.equal(m.matmulQuantizeQ4('F32', layout, K, N, pSrc, pData, pScales), '');
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
              assert.equal(m.matmulRun(type, layout, M, K, N, pData, pScales, pX, pB, pY, threads, kernel), '');
              return new Float32Array(heapU8(m).buffer.slice(pY, pY + 4 * M * N));
            };
            const quantized = type === 'Q8' || type === 'Q4';
            for (const kernel of ['gemm', 'gemv', ...(quantized ? ['gemm-float'] : [])]) {
              const y = run(kernel, 1);
              // Q8 and Q4 gemm and gemv: x quantized to int16 per row and block of 32 (error <= max|x| / 65534);
              // Q4 with the relaxed int8 dot (where the loader found it right): to int8 (max|x| / 254)
              const int8x = type === 'Q4' && m.relaxedInt8Dot();
              const xRel = quantized && kernel !== 'gemm-float' ? (int8x ? 1 / 254 : 1 / 65534) : 0;
              for (let i = 0; i < M * N; i++) {
                const row = Math.floor(i / N), n = i % N;
                let xmax = 0;
                for (let k = 0; k < K; k++) xmax = Math.max(xmax, Math.abs(x[row * K + k]));
                const tol = (2e-6 * Math.sqrt(K) + 1e-6) * ref.mag[i] + xRel * ref.wsum[n] * xmax + 1e-30;
                const err = Math.abs(y[i] - ref.y[i]);
                worst = Math.max(worst, err / tol);
                assert.ok(err <= tol, `${type} ${layout} ${kernel} M=${M} K=${K} N=${N}: y[${i}] = ${y[i]}, want ${ref.y[i]} (tol ${tol})`);
              }
              assert.deepEqual(run(kernel, 3), y, `${type} ${kernel}: 3 threads change the bits`);
              if (kernel === 'gemv' && quantized) assert.deepEqual(run('gemm', 1), y, `${type}: gemm rows differ from gemv's bits`);
              // float weights in panels (what the loader makes): a decoded row gets the bits the matrix
              // product gives it, the relaxed builds' fused madd included
              if (kernel === 'gemv' && layout === 'Panels')
                assert.deepEqual(run('gemm', 1), y, `${type} Panels: gemm rows differ from gemv's bits`);
            }
            cases++;
          } finally {
            for (const p of ptrs) m._free(p);
          }
        }
      }
    }
    assert.equal(cases, (5 * 2 + 3) * SHAPES.length);
    // the relaxed builds take the int8 dot exactly where the engine computes it right
    assert.equal(m.relaxedInt8Dot(), variant.startsWith('simd-relaxed') && relaxedDotComputes());
    console.log(`# ${variant}: ${cases} cases, worst error ${worst.toFixed(3)} of the tolerance, 4-bit x as ${m.relaxedInt8Dot() ? 'int8 (relaxed dot)' : 'int16'}`);
  });
}

test('matmul binding: a bad weight type is an error, not a trap', async () => {
  await qkv.init();
  const m = getModule();
  assert.match(m.matmulRun('F64', 'InOut', 1, 1, 1, 8, 0, 8, 0, 8, 1, 'auto'), /^invalid_argument\|matmul: weight type must be/);
  assert.match(m.matmulRun('F32', 'InOut', 1, 0, 1, 8, 0, 8, 0, 8, 1, 'auto'), /^invalid_argument\|matmul: shapes x \[1, 0\]/);
  assert.match(m.matmulRun('F32', 'panels', 1, 1, 1, 8, 0, 8, 0, 8, 1, 'auto'), /^invalid_argument\|matmul: layout must be InOut, OutIn or Panels, got 'panels'/);
  assert.match(m.matmulRun('Q8', 'Panels', 1, 4, 4, 8, 8, 8, 0, 8, 1, 'auto'), /^invalid_argument\|matmul: W Q8 \[4, 4\] in Panels: that layout is for F32, F16 and BF16/);
});
