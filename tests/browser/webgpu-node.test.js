// Node has no WebGPU: 'auto' is simply wasm there, 'webgpu' is a clear Error. (Runs in Node,
// next to the browser tests of the WebGPU backend.)
import test from 'node:test';
import assert from 'node:assert/strict';

import * as qkv from 'qkv';

test("Node: 'auto' runs on wasm even above the threshold; 'webgpu' rejects clearly", async () => {
  const L = 64, D = 16;
  const x = new qkv.Tensor(Float32Array.from({ length: 2 * L * D }, (_, i) => Math.sin(i)), [1, 2, L, D]);
  const prev = qkv.env.webgpuThreshold;
  qkv.env.webgpuThreshold = 0;
  try {
    assert.equal(await qkv.webgpuAvailable(), false);
    const a = await qkv.scaledDotProductAttention(x, x, x, { isCausal: true });
    assert.equal(qkv.env.lastBackend, 'wasm');
    const w = await qkv.scaledDotProductAttention(x, x, x, { isCausal: true, backend: 'wasm' });
    assert.deepEqual(a.output.data, w.output.data);
    await assert.rejects(qkv.scaledDotProductAttention(x, x, x, { backend: 'webgpu' }),
      /scaledDotProductAttention: options\.backend 'webgpu': WebGPU is not available: navigator\.gpu is absent/);
  } finally {
    qkv.env.webgpuThreshold = prev;
    qkv.dispose();
  }
});
