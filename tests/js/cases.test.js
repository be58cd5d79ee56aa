// The shared cases (tests/data/sdpa/) through the public API on every wasm variant, async
// and sync: every mask kind, GQA/MQA, window, cross-attention, KV-cache decoding, MHA.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it, after } from 'node:test';
import * as qkv from '../../dist/index.js';
import { loadCases, runCases, OUTPUT_TOL, WEIGHTS_TOL } from './shared/cases.js';

const dataDir = new URL('../data/sdpa/', import.meta.url);
const cases = await loadCases(async (p) => JSON.parse(await readFile(new URL(p, dataDir), 'utf8')));

after(() => qkv.dispose());

for (const variant of ['scalar', 'simd', 'simd-threads']) {
  describe(`variant ${variant}`, () => {
    it('loads', async () => {
      qkv.dispose();
      qkv.env.variant = variant;
      qkv.env.numThreads = 2;
      const r = await qkv.init();
      assert.equal(r.variant, variant);
      assert.equal(qkv.env.loadedVariant, variant);
      assert.equal(r.threads, variant === 'simd-threads' ? 2 : 1);
    });
    for (const sync of [false, true]) {
      it(`matches PyTorch on ${cases.length} shared cases (${sync ? 'sync' : 'async'}; output <= ${OUTPUT_TOL}, weights <= ${WEIGHTS_TOL})`, async () => {
        const results = await runCases(qkv, cases, { sync });
        const bad = results.filter((r) => !r.ok);
        assert.ok(results.length >= (sync ? 20 : cases.length), `ran ${results.length} cases`);
        assert.deepEqual(bad, [], `failing cases:\n${JSON.stringify(bad, null, 1)}`);
      });
    }
  });
}
