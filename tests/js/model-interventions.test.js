// Head interventions on model.forward (web/lib/model/interventions.ts over
// src/model/interventions.*): headMask, knockout, patchHeadOutputs and outputHeadOutputs
// against a float64 PyTorch forward that applies them by their definitions
// (tools/model/make_interventions_reference.py -> tests/data/interventions/), for GPT-2, a
// Llama (GQA), BERT and the encoder-decoder; the chunked (KV-cache) pass with the same
// options against the single call.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';

import { ROOT, api, maxAbsErr } from './model-helpers.js';

const qkv = await api();
after(() => qkv.dispose());

const DATA = path.join(ROOT, 'tests', 'data', 'interventions');
const manifest = JSON.parse(readFileSync(path.join(DATA, 'interventions.json'), 'utf8'));
const readF32 = (rel) => {
  const b = readFileSync(path.join(DATA, rel));
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};
/** Per-layer Tensors against a [layers, ...] reference: the largest |difference|. */
function layersErr(tensors, ref, what) {
  assert.ok(tensors, `${what} returned`);
  assert.equal(tensors.length, ref.shape[0], `${what}: one per layer`);
  const all = readF32(ref.file);
  const per = all.length / ref.shape[0];
  let worst = 0;
  tensors.forEach((t, l) => {
    assert.deepEqual(t.shape, [1, ...ref.shape.slice(1)], `${what}[${l}] shape`);
    worst = Math.max(worst, maxAbsErr(t.data, all.subarray(l * per, (l + 1) * per)));
  });
  return worst;
}

const TOL = { logits: 1e-4, attentions: 1e-5, headOutputs: 1e-4 };

for (const name of ['gpt2', 'llama', 'bert']) {
  const m = manifest.models[name];
  describe(`${name}: interventions against the float64 PyTorch reference`, () => {
    for (const cs of m.cases) {
      test(cs.name, async () => {
        const model = await qkv.loadModel(path.join(DATA, m.dir));
        try {
          const out = await model.forward(m.ids, { ...cs.options, outputAttentions: true });
          const el = maxAbsErr(out.logits.data, readF32(cs.logits.file));
          assert.ok(el <= TOL.logits, `${cs.name}: logits max abs err ${el}`);
          const ea = layersErr(out.attentions, cs.self_attentions, 'attentions');
          assert.ok(ea <= TOL.attentions, `${cs.name}: attentions max abs err ${ea}`);
          if (cs.self_head_outputs) {
            const eh = layersErr(out.headOutputs, cs.self_head_outputs, 'headOutputs');
            assert.ok(eh <= TOL.headOutputs, `${cs.name}: head outputs max abs err ${eh}`);
          } else {
            assert.equal(out.headOutputs, undefined, 'no headOutputs unless asked');
          }
          // the plain forward differs from every intervened one: the reference tells them apart
          if (cs.name !== 'plain') {
            const plain = readF32(m.cases[0].logits.file);
            assert.ok(maxAbsErr(out.logits.data, plain) > 1e-3, `${cs.name} moves the logits`);
          }
          if (name !== 'bert') {
            // the chunked pass (KV cache, 4 tokens a call) applies the same options row by row
            const chunked = await model.forward(m.ids, { ...cs.options, outputAttentions: true, chunkSize: 4 });
            assert.ok(maxAbsErr(chunked.logits.data, out.logits.data) <= 1e-5, `${cs.name}: chunked logits`);
            for (let l = 0; l < out.attentions.length; l++) {
              assert.ok(maxAbsErr(chunked.attentions[l].data, out.attentions[l].data) <= 1e-6, `${cs.name}: chunked attentions[${l}]`);
              if (out.headOutputs) {
                assert.ok(maxAbsErr(chunked.headOutputs[l].data, out.headOutputs[l].data) <= 1e-5, `${cs.name}: chunked headOutputs[${l}]`);
              }
            }
          }
        } finally {
          model.dispose();
        }
      });
    }
  });
}

describe('encoder-decoder: head masks and knockout per attention kind against the reference', () => {
  const m = manifest.models.bart;
  const [src, tgt] = m.ids;
  for (const cs of m.cases) {
    test(cs.name, async () => {
      const model = await qkv.loadModel(path.join(DATA, m.dir));
      try {
        const out = await model.forward(src, { ...cs.options, decoderInputIds: tgt, outputAttentions: true });
        const el = maxAbsErr(out.logits.data, readF32(cs.logits.file));
        assert.ok(el <= TOL.logits, `${cs.name}: logits max abs err ${el}`);
        for (const [key, ref] of [['encoderAttentions', 'encoder'], ['decoderAttentions', 'decoder'], ['crossAttentions', 'cross']]) {
          const e = layersErr(out[key], cs[`${ref}_attentions`], key);
          assert.ok(e <= TOL.attentions, `${cs.name}: ${key} max abs err ${e}`);
        }
        if (cs.options.outputHeadOutputs) {
          for (const [key, ref] of [['encoderHeadOutputs', 'encoder'], ['decoderHeadOutputs', 'decoder'], ['crossHeadOutputs', 'cross']]) {
            const e = layersErr(out[key], cs[`${ref}_head_outputs`], key);
            assert.ok(e <= TOL.headOutputs, `${cs.name}: ${key} max abs err ${e}`);
          }
        }
        if (cs.name !== 'plain') {
          assert.ok(maxAbsErr(out.logits.data, readF32(m.cases[0].logits.file)) > 1e-3, `${cs.name} moves the logits`);
        }
      } finally {
        model.dispose();
      }
    });
  }
});
