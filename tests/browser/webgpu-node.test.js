// Node has no WebGPU: 'auto' is simply wasm there, 'webgpu' is a clear Error. (Runs in Node,
// next to the browser tests of the WebGPU backend.)
import test from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL(`../..${process.env.QKV_DIST ?? '/dist'}/`, import.meta.url));
const qkv = await import(`${dist}index.js`);
const gpu = await import(`${dist}webgpu/index.js`);
const backend = await import(`${dist}backend.js`);
const lastBackend = () => ('lastBackend' in qkv.env ? qkv.env.lastBackend : backend.lastBackend());

test("Node: 'auto' runs on wasm even above the threshold; 'webgpu' rejects clearly", async () => {
  const L = 64, D = 16;
  const x = new qkv.Tensor(Float32Array.from({ length: 2 * L * D }, (_, i) => Math.sin(i)), [1, 2, L, D]);
  const prev = gpu.webgpuConfig.threshold;
  if ('webgpuThreshold' in qkv.env) qkv.env.webgpuThreshold = 0; else gpu.webgpuConfig.threshold = 0;
  try {
    assert.equal(await gpu.webgpuAvailable(), false);
    const a = await qkv.scaledDotProductAttention(x, x, x, { isCausal: true });
    assert.equal(lastBackend(), 'wasm');
    const w = await qkv.scaledDotProductAttention(x, x, x, { isCausal: true, backend: 'wasm' });
    assert.deepEqual(a.output.data, w.output.data);
    await assert.rejects(qkv.scaledDotProductAttention(x, x, x, { backend: 'webgpu' }),
      /scaledDotProductAttention: options\.backend 'webgpu': WebGPU is not available: navigator\.gpu is absent/);
  } finally {
    if ('webgpuThreshold' in qkv.env) qkv.env.webgpuThreshold = prev; else gpu.webgpuConfig.threshold = prev;
    qkv.dispose();
  }
});
