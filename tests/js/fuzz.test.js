// Thousands of random valid and invalid calls per variant: no trap, every invalid call an
// Error, and 10 000 calls leave the wasm heap exactly where it started.
import assert from 'node:assert/strict';
import { test, after } from 'node:test';
import * as qkv from 'qkv';
import { fuzz } from './shared/fuzz.js';
import { VARIANTS, unsupported } from './shared/variants.js';

after(() => qkv.dispose());

for (const variant of VARIANTS) {
  test(`10 000 mixed calls on ${variant}: no trap, no heap growth`, { skip: unsupported(variant) }, async () => {
    qkv.dispose();
    qkv.env.variant = variant;
    qkv.env.numThreads = 2;
    await qkv.init();
    const s = await fuzz(qkv, { calls: 10000, seed: 7 + variant.length });
    assert.deepEqual(s.problems, []);
    assert.ok(s.valid > 3000 && s.invalid > 2500 && s.kv > 400 && s.mha > 300, JSON.stringify(s));
    assert.equal(s.after.inUseBytes, s.before.inUseBytes, 'bytes in use changed');
    assert.equal(s.after.heapBytes, s.before.heapBytes, 'linear memory grew');
    assert.equal(s.after.liveObjects, 0);
  });
}
