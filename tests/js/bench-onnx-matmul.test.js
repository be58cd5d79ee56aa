// The relaxed benchmark's onnxruntime-web MatMul graph (bench/js/relaxed-onnx.js): ORT reads
// it, M stays symbolic (one session, several M), and it computes x W as plain loops do; a W of
// the wrong size is an Error naming the function.
import test from 'node:test';
import assert from 'node:assert/strict';
import * as ort from 'onnxruntime-web';
import { matmulModel } from '../../bench/js/relaxed-onnx.js';

test('relaxed-onnx: Y = MatMul(X, W) with W an initializer, any M, matches plain loops', async () => {
  ort.env.wasm.numThreads = 1;
  const K = 67, N = 45; // not multiples of a vector or a tile
  const W = Float32Array.from({ length: K * N }, (_, i) => Math.sin(i * 0.37));
  const session = await ort.InferenceSession.create(matmulModel(W, K, N), { executionProviders: ['wasm'] });
  try {
    for (const M of [1, 5]) {
      const X = Float32Array.from({ length: M * K }, (_, i) => Math.cos(i * 0.11));
      const { Y } = await session.run({ X: new ort.Tensor('float32', X, [M, K]) });
      assert.deepEqual(Y.dims, [M, N]);
      for (let m = 0; m < M; m++) {
        for (let n = 0; n < N; n++) {
          let y = 0;
          for (let k = 0; k < K; k++) y += X[m * K + k] * W[k * N + n];
          assert.ok(Math.abs(Y.data[m * N + n] - y) <= 1e-5 * K, `Y[${m}, ${n}] = ${Y.data[m * N + n]}, plain loops ${y}`);
        }
      }
    }
  } finally {
    await session.release();
  }
  assert.throws(() => matmulModel(new Float32Array(5), 2, 3), /matmulModel: W has 5 elements, not K \* N = 2 \* 3/);
});
