// The 4-bit matmul kernels in the page (?variant=): Q4 weights quantized by the module, the
// matrix-vector and the matrix-matrix kernel against y = x W + b in float64 over the dequantized
// weights (tests/js/shared/matmul-ref.js), within x's rounding (int8 where the relaxed int8 dot
// runs, else int16), and the two kernels' rows the same bits. Leaves the result in
// window.__qkvResult for tests/browser/matmul-q4.test.js.
import * as qkv from '/dist/index.js';
import { heapU8 } from '/dist/wasm/heap.js';
import { getModule, relaxedDotComputes } from '/dist/wasm/loader.js';
import { makeWeights, normal, q4Weight, reference, rng } from '/tests/js/shared/matmul-ref.js';

const SHAPES = [[1, 32, 16], [3, 33, 29], [1, 300, 97], [5, 257, 130], [2, 768, 256]];

async function main() {
  qkv.env.variant = new URLSearchParams(location.search).get('variant') || 'auto';
  qkv.env.numThreads = 1;
  const loaded = await qkv.init();
  const m = getModule();
  const int8x = m.relaxedInt8Dot();
  const r = rng(7);
  const failures = [];
  let worst = 0;
  for (const layout of ['InOut', 'OutIn']) {
    for (const [M, K, N] of SHAPES) {
      const ptrs = [];
      const alloc = (bytes) => { const p = m._malloc(Math.max(bytes, 4)); ptrs.push(p); return p; };
      const put = (arr) => { const p = alloc(arr.byteLength); heapU8(m).set(new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength), p); return p; };
      try {
        const st = makeWeights('Q4', K, N, r);
        const pData = alloc(m.q4DataBytes(K, N)), pScales = alloc(2 * m.q4ScaleCount(K, N));
        const err = m.matmulQuantizeQ4('F32', layout, K, N, put(st.bytes), pData, pScales);
        if (err) throw new Error(err);
        const w = q4Weight(new Uint8Array(heapU8(m).buffer.slice(pData, pData + m.q4DataBytes(K, N))),
          new Uint16Array(heapU8(m).buffer.slice(pScales, pScales + 2 * m.q4ScaleCount(K, N))), K);
        const x = Float32Array.from({ length: M * K }, () => normal(r)), bias = Float32Array.from({ length: N }, () => normal(r));
        const ref = reference(M, K, N, x, w, bias);
        const pX = put(x), pB = put(bias), pY = alloc(4 * M * N);
        const run = (kernel) => {
          const e = m.matmulRun('Q4', layout, M, K, N, pData, pScales, pX, pB, pY, 1, kernel);
          if (e) throw new Error(e);
          return new Float32Array(heapU8(m).buffer.slice(pY, pY + 4 * M * N));
        };
        const yv = run('gemv'), yg = run('gemm');
        const name = `${layout} M=${M} K=${K} N=${N}`;
        if (yv.some((v, i) => !Object.is(v, yg[i]))) failures.push(`${name}: gemm rows are not gemv's bits`);
        for (let i = 0; i < M * N; i++) {
          const row = Math.floor(i / N), n = i % N;
          let xmax = 0;
          for (let k = 0; k < K; k++) xmax = Math.max(xmax, Math.abs(x[row * K + k]));
          // |x - d xq| <= d / 2: d = max|x| / 127 (int8) or / 32767
          const tol = (2e-6 * Math.sqrt(K) + 1e-6) * ref.mag[i] + (int8x ? 1 / 254 : 1 / 65534) * ref.wsum[n] * xmax + 1e-30;
          const e = Math.abs(yv[i] - ref.y[i]);
          worst = Math.max(worst, e / tol);
          if (!(e <= tol)) { failures.push(`${name}: y[${i}] = ${yv[i]}, want ${ref.y[i]} (tol ${tol})`); break; }
        }
      } finally {
        for (const p of ptrs) m._free(p);
      }
    }
  }
  return { loaded, relaxedDotComputes: relaxedDotComputes(), int8x, worst, failures };
}

main().then(
  (res) => { window.__qkvResult = res; document.getElementById('log').textContent = JSON.stringify(res, null, 1); },
  (e) => { window.__qkvResult = { error: `${e?.name}: ${e?.message}\n${e?.stack}` }; },
);
