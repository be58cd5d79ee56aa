// Bad input: every row of the table raises the expected Error with the expected message,
// before reaching wasm; the module keeps working afterwards.
import assert from 'node:assert/strict';
import { test, after } from 'node:test';
import * as qkv from 'qkv';
import { checkInvalidCalls } from './shared/invalid.js';

after(() => qkv.dispose());

test('invalid calls raise the documented errors', async () => {
  await qkv.init();
  const before = qkv.env.numThreads;
  const { count, problems } = await checkInvalidCalls(qkv);
  qkv.env.numThreads = before;
  qkv.env.variant = 'auto';
  assert.ok(count >= 40, `table has ${count} rows`);
  assert.deepEqual(problems, []);
  // still working
  const t = new qkv.Tensor(new Float32Array(16).fill(1), [1, 1, 2, 8]);
  const { output } = await qkv.scaledDotProductAttention(t, t, t);
  assert.deepEqual(Array.from(output.data), new Array(16).fill(1));
});

test("backend 'webgpu' without WebGPU is a clear Error", async () => {
  const t = new qkv.Tensor(new Float32Array(8), [1, 1, 1, 8]);
  await assert.rejects(qkv.scaledDotProductAttention(t, t, t, { backend: 'webgpu' }), (e) => {
    assert.ok(e instanceof Error);
    assert.match(e.message, /^scaledDotProductAttention: options.backend 'webgpu'.*(not available|unavailable)/i);
    return true;
  });
});
