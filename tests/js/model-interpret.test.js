// The measures on a real model's attentions, end to end: web/models/tiny-kjv-bpe loaded with
// loadModel, a verse through forward(ids, { outputAttentions: true }), then attentionRollout,
// attentionFlow and headProbes against the float64 PyTorch values of
// tools/interpret/make_reference.py (its own forward of the same weights, with HF head_mask
// semantics for the ablations).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, api } from './model-helpers.js';

const qkv = await api();
const ref = JSON.parse(readFileSync(path.join(ROOT, 'tests', 'data', 'interpret', 'reference.json'), 'utf8'));
const real = ref.cases.find((c) => c.name === 'tiny-kjv-bpe');
const P = ref.probes;
let model;
before(async () => { model = await qkv.loadModel(path.join(ROOT, 'web', 'models', 'tiny-kjv-bpe')); });
after(() => { model?.dispose(); qkv.dispose(); });

const maxDiff = (a, b) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

test('the reference ids are the verse (they decode to it)', () => {
  assert.equal(model.tokenizer.decode(real.ids), real.text);
});

test('rollout and flow of the model\'s own attentions match the reference', async () => {
  const { attentions } = await model.forward(real.ids, { outputAttentions: true });
  const L = real.ids.length;
  const r = await qkv.attentionRollout(attentions, { cumulative: true });
  assert.ok(maxDiff([...r.data], real.rollout_cumulative) < 2e-5, `rollout: ${maxDiff([...r.data], real.rollout_cumulative)}`);
  const f = await qkv.attentionFlow(attentions);
  assert.deepEqual(f.shape, [L, L]);
  assert.ok(maxDiff([...f.data], real.flow) < 2e-5, `flow: ${maxDiff([...f.data], real.flow)}`);
});

// the engine's headMask (DESIGN.md) may not be in this build yet: the ablation part says so
async function hasHeadMask() {
  try {
    await model.forward([1, 2], { headMask: new qkv.Tensor(new Float32Array(16).fill(1), [4, 4]) });
    return true;
  } catch (e) {
    if (/unknown option 'headMask'/.test(e.message)) return false;
    throw e;
  }
}

test('headProbes: previous-token, sink, entropy and induction match the reference', async () => {
  const r = await qkv.headProbes(model, { ids: P.ids, inductionTokens: [P.induction_tokens], ablation: false });
  for (const k of ['previousToken', 'sink', 'entropy', 'induction']) {
    const key = { previousToken: 'previous_token' }[k] ?? k;
    const err = maxDiff(r[k].flat(), P[key]);
    assert.ok(err < 1e-5, `${k}: max |diff| ${err}`);
  }
  // a GPT's maps are causal: no next-token score (0 by construction)
  assert.equal(r.nextToken, null);
});

test('headProbes: each head\'s ablation effect matches the reference (needs headMask in model.forward)', async (t) => {
  if (!(await hasHeadMask())) {
    t.skip('model.forward has no headMask option in this build');
    return;
  }
  const r = await qkv.headProbes(model, { ids: P.ids, inductionTokens: [P.induction_tokens] });
  assert.ok(Math.abs(r.baseLoss - P.base_loss) < 1e-4, `base loss ${r.baseLoss} vs ${P.base_loss}`);
  const err = maxDiff(r.ablation.flat(), P.ablation);
  assert.ok(err < 1e-4, `ablation: max |diff| ${err}`);
});
