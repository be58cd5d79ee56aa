// The 4 GB wasm heap (-sMAXIMUM_MEMORY=4GB, wasm/CMakeLists.txt): one block of 2.1 GB is taken
// (heapAlloc; a bare malloc refuses 2 GB and more, wasm/heap_alloc.hpp), so every buffer the
// calls after it allocate lies above 2^31, where an address read as a signed 32-bit int would
// be negative. Attention (with weights), a Llama checkpoint loaded there (F32 read in place and
// converted to int8), its forward (logits, attentions, queries/keys copied out of the heap) and
// greedy generation give bit for bit what the same calls gave below 2 GB, and a C++ exception
// there is the bindings' RangeError. One variant without
// threads and one with (a shared memory grown past 2 GB). The block is never written, so it
// costs address space, not RAM, and is freed at the end.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, test } from 'node:test';
import * as qkv from 'qkv';
import { getModule } from '../../dist/wasm/loader.js';
import { ROOT } from './model-helpers.js';

after(() => qkv.dispose());

const LLAMA = path.join(ROOT, 'tests', 'data', 'llama', 'llama-rope3');
const GB = 2 ** 30;

// random floats in [-1, 1) from a seed (an LCG), as a Tensor of `shape`
function tensor(shape, seed) {
  const a = new Float32Array(shape.reduce((x, y) => x * y, 1));
  let s = seed;
  for (let i = 0; i < a.length; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    a[i] = (s / 2 ** 32) * 2 - 1;
  }
  return new qkv.Tensor(a, shape);
}

// every result the calls return, as plain arrays: the same calls must give the same bits
async function calls() {
  const q = tensor([1, 4, 7, 16], 1), k = tensor([1, 2, 9, 16], 2), v = tensor([1, 2, 9, 16], 3);
  const att = await qkv.scaledDotProductAttention(q, k, v, { isCausal: true, enableGqa: true, returnWeights: true });
  const out = { output: Array.from(att.output.data), weights: Array.from(att.weights.data) };
  for (const weights of ['auto', 'int8']) {
    const model = await qkv.loadModel(LLAMA, { weights });
    try {
      const ids = [3, 14, 15, 9, 2, 6, 5];
      const f = await model.forward(ids, { outputAttentions: true, outputQueriesKeys: true });
      out[`${weights} logits`] = Array.from(f.logits.data);
      out[`${weights} attentions`] = f.attentions.map((a) => Array.from(a.data));
      out[`${weights} keys`] = f.queriesKeys.map((x) => Array.from(x.keys.data));
      const tokens = [];
      for await (const step of model.generate(ids, { maxNewTokens: 6, temperature: 0 })) tokens.push(step.token);
      out[`${weights} generated`] = tokens;
    } finally {
      model.dispose();
    }
  }
  return out;
}

for (const variant of ['simd', 'simd-threads']) {
  test(`buffers above 2 GB of heap give what they gave below (${variant})`, async () => {
    qkv.dispose();
    qkv.env.variant = variant;
    qkv.env.numThreads = 2;
    await qkv.init();
    const below = await calls();
    assert.ok(getModule().heapBytes() < 2 ** 31, `the first calls ran below 2 GB (heap ${getModule().heapBytes()} bytes)`);
    // a fresh module for the rest, so that little below 2 GB is free for what comes next
    qkv.dispose();
    await qkv.init();
    const m = getModule();
    // 1. 2.1 GB in one block, at the bottom of what the heap had free
    const block = m.heapAlloc(2.1 * GB) >>> 0;
    assert.notEqual(block, 0, 'heapAlloc(2.1 GB) on a 4 GB heap');
    try {
      assert.ok(m.heapBytes() > 2.1 * GB, `the heap grew past 2.1 GB (${m.heapBytes()} bytes)`);
      // 2. a C++ exception thrown up there (a KV cache whose 2 GB key block the heap refuses)
      // comes out as the bindings' RangeError (the threads glue once indexed the exception's
      // reference count with a signed address: tools/wasm/unsign-glue.mjs)
      await assert.rejects(qkv.KVCache.create({ numKvHeads: 1, maxLength: 2 ** 25 - 64, headDim: 16, valueDim: 16 }),
        /^RangeError: KVCache: out of wasm memory/);
      // 3. what is allocated now comes from above it, past 2^31
      const probe = m._malloc(1 << 20) >>> 0;
      assert.ok(probe >= 2 ** 31, `a block after it lies above 2^31 (at ${probe})`);
      m._free(probe);
      // 4. the same calls there
      const above = await calls();
      assert.deepEqual(Object.keys(above), Object.keys(below));
      for (const key of Object.keys(below)) assert.deepEqual(above[key], below[key], key);
    } finally {
      m._free(block);
    }
  });
}
