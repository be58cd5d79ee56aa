// The shared cases (tests/data/sdpa/) through the public API on every wasm variant, async
// and sync: every mask kind, GQA/MQA, window, cross-attention, KV-cache decoding, MHA.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it, after } from 'node:test';
import * as qkv from 'qkv';
import { loadCases, runCases, OUTPUT_TOL, WEIGHTS_TOL } from './shared/cases.js';
import { VARIANTS, unsupported, threaded } from './shared/variants.js';

const dataDir = new URL('../data/sdpa/', import.meta.url);
const cases = await loadCases(async (p) => JSON.parse(await readFile(new URL(p, dataDir), 'utf8')));

after(() => qkv.dispose());

for (const variant of VARIANTS) {
  describe(`variant ${variant}`, { skip: unsupported(variant) }, () => {
    it('loads', async () => {
      qkv.dispose();
      qkv.env.variant = variant;
      qkv.env.numThreads = 2;
      const r = await qkv.init();
      assert.equal(r.variant, variant);
      assert.equal(qkv.env.loadedVariant, variant);
      assert.equal(r.threads, threaded(variant) ? 2 : 1);
    });
    for (const sync of [false, true]) {
      it(`matches PyTorch on ${cases.length} shared cases (${sync ? 'sync' : 'async'}; output <= ${OUTPUT_TOL}, weights <= ${WEIGHTS_TOL})`, async () => {
        const results = await runCases(qkv, cases, { sync });
        const bad = results.filter((r) => !r.ok);
        // every case of the kinds this mode runs ran (sync: SDPA only; async: SDPA, KV cache, MHA)
        const want = sync ? cases.filter((c) => c.kind === 'sdpa') : cases;
        assert.deepEqual(results.map((r) => r.name), want.map((c) => c.name));
        assert.ok(want.length >= 20, `only ${want.length} cases in this mode`);
        assert.deepEqual(bad, [], `failing cases:\n${JSON.stringify(bad, null, 1)}`);
      });
    }
  });
}
