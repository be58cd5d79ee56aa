// BERT-family encoders in JS (web/lib/model/encoder.ts over wasm/bindings_encoder.cpp): loadModel
// picks the architecture from model_type; forward against the float64 PyTorch reference
// (tests/data/encoder/, tools/model/make_bert_reference.py) for BERT and DistilBERT; the padding
// mask; fillMask on the trained model against what the model in Python says; bad input.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, api, maxAbsErr } from './model-helpers.js';

const qkv = await api();
const ENC = path.join(ROOT, 'tests', 'data', 'encoder');
const manifest = JSON.parse(readFileSync(path.join(ENC, 'encoder.json'), 'utf8'));
const f32 = (rel) => {
  const b = readFileSync(path.join(ENC, rel));
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};

for (const [name, arch] of [['random-bert', 'bert'], ['random-distilbert', 'distilbert']]) {
  describe(`${name}: forward against the PyTorch reference`, () => {
    let model;
    before(async () => {
      model = await qkv.loadModel(path.join(ENC, name));
    });
    after(() => model.dispose());

    test('loadModel picks the architecture from model_type', () => {
      assert.equal(model.architecture, arch);
      assert.ok(model instanceof qkv.EncoderModel);
      assert.equal(model.tokenizer.kind, 'wordpiece');
    });

    test('logits <= 1e-4 and attentions <= 1e-5 (unpadded, and each row of the padded batch)', async () => {
      const m = manifest.models[name];
      for (const [cname, c] of Object.entries(m.cases)) {
        const [NL, B, H, L] = c.attentions.shape;
        const V = c.logits.shape[2];
        const refL = f32(c.logits.file);
        const refA = f32(c.attentions.file);
        for (let b = 0; b < B; b++) {
          const opts = { outputAttentions: true, attentionMask: c.attention_mask[b] };
          if (arch === 'bert') opts.tokenTypeIds = c.token_type_ids[b];
          const { logits, attentions } = await model.forward(c.ids[b], opts);
          assert.deepEqual(logits.shape, [1, L, V]);
          const el = maxAbsErr(logits.data, refL.subarray(b * L * V, (b + 1) * L * V));
          assert.ok(el <= 1e-4, `${cname}[${b}]: max |dlogits| ${el}`);
          assert.equal(attentions.length, NL);
          for (let l = 0; l < NL; l++) {
            assert.deepEqual(attentions[l].shape, [1, H, L, L]);
            const at = ((l * B + b) * H) * L * L;
            const ea = maxAbsErr(attentions[l].data, refA.subarray(at, at + H * L * L));
            assert.ok(ea <= 1e-5, `${cname}[${b}] layer ${l}: max |dattentions| ${ea}`);
          }
        }
      }
    });

    test('bidirectional: weights above the diagonal are non-zero', async () => {
      const c = manifest.models[name].cases.single;
      const { attentions } = await model.forward(c.ids[0], { outputAttentions: true });
      const L = c.ids[0].length;
      let above = 0;
      for (let i = 0; i < L; i++) for (let j = i + 1; j < L; j++) above += attentions[0].data[i * L + j];
      assert.ok(above > 1, `sum above the diagonal, head 0: ${above}`);
    });
  });
}

describe('the padding mask', () => {
  test('padded keys get weight 0 and do not change the real tokens', async () => {
    const model = await qkv.loadModel(path.join(ENC, 'random-bert'));
    try {
      const c = manifest.models['random-bert'].cases.padded;
      const ids = c.ids[1], types = c.token_type_ids[1], mask = c.attention_mask[1];
      const n = mask.reduce((a, b) => a + b, 0);
      const L = ids.length, V = model.config.vocab_size;
      const padded = await model.forward(ids, { tokenTypeIds: types, attentionMask: mask, outputAttentions: true });
      for (const att of padded.attentions)
        for (let h = 0; h < model.heads; h++)
          for (let i = 0; i < L; i++) for (let j = n; j < L; j++) assert.equal(att.data[(h * L + i) * L + j], 0);
      const alone = await model.forward(ids.slice(0, n), { tokenTypeIds: types.slice(0, n) });
      assert.ok(maxAbsErr(alone.logits.data, padded.logits.data.subarray(0, n * V)) <= 1e-5);
      // without the mask the padding changes them (so the check above can fail)
      const seen = await model.forward(ids, { tokenTypeIds: types });
      assert.ok(maxAbsErr(alone.logits.data, seen.logits.data.subarray(0, n * V)) > 1e-3);
    } finally {
      model.dispose();
    }
  });
});

describe('fillMask on the trained model', () => {
  test('top-1 and its probability are what the model in Python says', async () => {
    const fm = manifest.fill_mask;
    assert.ok(fm, 'encoder.json has fill_mask (make_bert_reference.py --trained)');
    const model = await qkv.loadModel(path.resolve(ENC, fm.model_dir));
    try {
      for (const c of fm.cases) {
        assert.deepEqual(model.tokenizer.encode(c.text), c.ids, `tokens of ${c.text}`);
        const preds = await model.fillMask(c.text, { topK: 5 });
        assert.equal(preds.length, 5);
        assert.equal(preds[0].tokenId, c.top[0].token_id, c.text);
        assert.equal(preds[0].token, c.top[0].token);
        assert.ok(Math.abs(preds[0].score - c.top[0].score) < 1e-4, `${preds[0].score} vs ${c.top[0].score}`);
        for (let i = 1; i < 5; i++) assert.ok(preds[i].score <= preds[i - 1].score);
        assert.ok(!preds[0].sequence.includes('[MASK]') && preds[0].sequence.includes(preds[0].token.replace(/^##/, '')));
      }
    } finally {
      model.dispose();
    }
  });
});

describe('interventions through fillMask, and the masked-LM ablation of headProbes (tiny-bert-kjv)', () => {
  const TEXT = 'In the beginning God created the [MASK] and the earth.';
  let model, ids, at;
  before(async () => {
    model = await qkv.loadModel(path.join(ROOT, 'web', 'models', 'tiny-bert-kjv'));
    ids = model.tokenizer.encode(TEXT);
    at = ids.indexOf(model.tokenizer.specialTokens.mask);
  });
  after(() => model.dispose());
  /** softmax of logits [1, L, V] at position p, float64 */
  const probs = (logits, p) => {
    const V = logits.shape[2], row = logits.data.subarray(p * V, (p + 1) * V);
    const m = Math.max(...row), e = Array.from(row, (x) => Math.exp(x - m)), s = e.reduce((a, b) => a + b, 0);
    return e.map((x) => x / s);
  };

  test('fillMask with headMask / knockout = the softmax of forward with them at the [MASK]', async () => {
    const headMask = [[1, 1, 1, 1], [1, 0, 1, 1], [1, 1, 1, 1], [0, 1, 1, 1]];
    const knockout = [{ layer: 2, heads: [0, 3], block: [[at, 1], [at, 2]] }];
    for (const iv of [{ headMask }, { knockout }, { headMask, knockout }]) {
      const preds = await model.fillMask(TEXT, { topK: 5, ...iv });
      const p = probs((await model.forward(ids, iv)).logits, at);
      const order = [...p.keys()].sort((a, b) => p[b] - p[a]).slice(0, 5);
      assert.deepEqual(preds.map((x) => x.tokenId), order, JSON.stringify(iv));
      preds.forEach((x, i) => assert.ok(Math.abs(x.score - p[order[i]]) < 1e-6, `${x.score} vs ${p[order[i]]}`));
    }
    // and differs from the plain prediction (the options reach the forward)
    const plain = await model.fillMask(TEXT, { topK: 1 }), removed = await model.fillMask(TEXT, { topK: 1, headMask });
    assert.ok(Math.abs(plain[0].score - removed[0].score) > 1e-4 || plain[0].tokenId !== removed[0].tokenId);
    await assert.rejects(model.fillMask(TEXT, { headMask: [1, 1] }), /model\.fillMask: options\.headMask has 2 values, need \[4\] \(numHeads\) or \[4, 4\]/);
    await assert.rejects(model.fillMask(TEXT, { knockouts: [] }), /model\.fillMask: unknown option 'knockouts'/);
  });

  test('headProbes ablation: true = the masked-token loss of forward with each head removed, on the text masked from the seed', async () => {
    const r = await qkv.headProbes(model, { ids, inductionSequences: 1, ablation: true });
    const [masked] = r.ablationIds, [targets] = r.ablationTargets;
    assert.ok(targets.length >= 1 && targets.every(([p, id]) => masked[p] === model.tokenizer.specialTokens.mask && ids[p] === id && p !== at));
    const loss = async (headMask) => {
      const { logits } = await model.forward(masked, { headMask });
      return targets.reduce((a, [p, id]) => a - Math.log(probs(logits, p)[id]), 0) / targets.length;
    };
    const all = Array.from({ length: model.layers }, () => new Array(model.heads).fill(1));
    const base = await loss(all);
    assert.ok(Math.abs(r.baseLoss - base) < 1e-5, `base ${r.baseLoss} vs ${base}`);
    for (const s of r.scores) {
      const m = all.map((row, l) => row.map((v, h) => (l === s.layer && h === s.head ? 0 : 1)));
      const want = (await loss(m)) - base;
      assert.ok(Math.abs(s.ablation - want) < 1e-5, `${s.layer}.${s.head}: ${s.ablation} vs ${want}`);
    }
    assert.ok(r.scores.some((s) => Math.abs(s.ablation) > 1e-3), 'some head matters for the masked words');
    // bidirectional maps: each head's next-token score, a plain float64 loop over the text's own maps
    const { attentions } = await model.forward(ids, { outputAttentions: true });
    const L = ids.length;
    for (const s of r.scores) {
      const a = attentions[s.layer].data;
      let sum = 0;
      for (let i = 0; i + 1 < L; i++) sum += a[(s.head * L + i) * L + i + 1];
      assert.ok(typeof s.nextToken === 'number' && Math.abs(s.nextToken - sum / (L - 1)) < 1e-6, `${s.layer}.${s.head}: next-token ${s.nextToken} vs ${sum / (L - 1)}`);
    }
  });
});

describe('bad input', () => {
  let model;
  before(async () => {
    model = await qkv.loadModel(path.join(ENC, 'random-bert'));
  });
  after(() => model.dispose());

  test('clear errors naming the function and argument', async () => {
    await assert.rejects(model.forward([3, 120]), /model\.forward: ids\[1\] = 120 is not an integer in \[0, 120\)/);
    await assert.rejects(model.forward([3, 4], { tokenTypeIds: [0] }), /options\.tokenTypeIds has 1 entries, ids has 2/);
    await assert.rejects(model.forward([3, 4], { tokenTypeIds: [0, 2] }), /options\.tokenTypeIds\[1\] = 2/);
    await assert.rejects(model.forward([3, 4], { attentionMask: [0, 0] }), /attentionMask hides every token/);
    await assert.rejects(model.forward(new Array(41).fill(5)), /41 tokens, more than max_position_embeddings = 40/);
    await assert.rejects(model.forward([3], { outputAttention: true }), /outputAttention/);
    await assert.rejects(model.fillMask('the lord'), /exactly one \[MASK\], found 0/);
    await assert.rejects(model.fillMask('[MASK] and [MASK]'), /exactly one \[MASK\], found 2/);
    await assert.rejects(model.fillMask('the [MASK]', { topK: 0 }), /topK/);
  });

  test('a damaged checkpoint names the tensor', async () => {
    const config = JSON.parse(readFileSync(path.join(ENC, 'random-bert', 'config.json'), 'utf8'));
    const weights = readFileSync(path.join(ENC, 'random-bert', 'model.safetensors'));
    const vocabTxt = readFileSync(path.join(ENC, 'random-bert', 'vocab.txt'), 'utf8');
    await assert.rejects(qkv.loadModel({ config: { ...config, num_hidden_layers: 3 }, weights, vocabTxt }),
      /missing tensor "bert\.encoder\.layer\.2\.attention\.self\.query\.weight"/);
    await assert.rejects(qkv.loadModel({ config: { ...config, hidden_act: 'relu' }, weights, vocabTxt }), /"hidden_act" must be "gelu"/);
    await assert.rejects(qkv.loadModel(path.join(ENC, 'random-bert'), { weights: 'f16' }), /options\.weights 'f16' is not supported for model_type "bert" \(only 'auto', 'f32' and 'int8'\)/);
    const m32 = await qkv.loadModel({ config, weights: new Blob([weights]), vocabTxt }, { weights: 'f32' });   // a Blob streams too
    assert.equal(m32.architecture, 'bert');
    m32.dispose();
  });
});
