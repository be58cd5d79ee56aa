// RoBERTa and XLM-RoBERTa (model_type roberta / xlm-roberta): random checkpoints in HF's layouts
// (roberta.*, lm_head.*), made at test time from the seed (tests/js/random-weights.js), against
// the float64 PyTorch forward (tools/model/make_roberta_reference.py): logits of a padded batch
// (positions from padding_idx + 1, pad tokens at padding_idx, no token types), mean-pooled
// embeddings, fill-mask with <mask>; their tokenizers (byte-level BPE + RobertaProcessing, Unigram
// + Precompiled) give the reference's ids and @lenml/tokenizers'.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, api } from './model-helpers.js';
import { referenceTokenizer } from './model-tokenizer-shared.js';
import { randomSafetensors } from './random-weights.js';

const qkv = await api();
const ENC = path.join(ROOT, 'tests', 'data', 'encoder');
const ref = JSON.parse(readFileSync(path.join(ENC, 'roberta.json'), 'utf8'));
const f32 = (rel) => {
  const b = readFileSync(path.join(ENC, rel));
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};
/** The file as @lenml/tokenizers reads it: it honours Metaspace's older add_prefix_space, not prepend_scheme. */
function forReference(text) {
  const j = JSON.parse(text);
  for (const m of [j.pre_tokenizer, j.decoder]) if (m?.type === 'Metaspace') m.add_prefix_space = m.prepend_scheme !== 'never';
  return JSON.stringify(j);
}
const tokenizerConfig = { bos_token: '<s>', eos_token: '</s>', sep_token: '</s>', cls_token: '<s>', unk_token: '<unk>', pad_token: '<pad>', mask_token: '<mask>' };

for (const [name, arch] of [['random-roberta', 'roberta'], ['random-xlm-roberta', 'xlm-roberta']]) {
  const m = ref.models[name];
  const tokenizerText = readFileSync(path.join(ENC, m.tokenizer), 'utf8');
  describe(`${name}: against the PyTorch reference`, () => {
    let model;
    before(async () => {
      model = await qkv.loadModel({ config: m.config, weights: randomSafetensors(m.seed, m.shapes), tokenizer: tokenizerText, tokenizerConfig });
    });
    after(() => model?.dispose());

    test('architecture from model_type; the MLM head (lm_head.*) found; 32 usable positions of 34', () => {
      assert.equal(model.architecture, arch);
      assert.equal(model.hasMaskedLmHead, true);
      assert.equal(model.maxPositions, 32);
      assert.equal(model.padTokenId, 1);
    });

    test('the tokenizer gives the reference\'s ids and @lenml/tokenizers\'', async () => {
      const lenml = await referenceTokenizer(forReference(tokenizerText), tokenizerConfig);
      ref.texts.forEach((t, i) => {
        assert.deepEqual(model.tokenizer.encode(t), m.ids[i], t);
        assert.deepEqual(model.tokenizer.encode(t), lenml.encode(t), t);
      });
      assert.deepEqual(model.tokenizer.encode(m.fill_mask.text), m.fill_mask.ids);
    });

    test('logits of each text of the padded batch <= 1e-4 of float64 PyTorch', async () => {
      const [B, L, V] = m.logits.shape;
      const want = f32(m.logits.file);
      let worst = 0;
      for (let b = 0; b < B; b++) {
        const ids = m.ids[b];
        // alone (positions 2, 3, ...) and padded to L with pad id 1 (pad positions at padding_idx)
        for (const padded of [false, true]) {
          const x = padded ? [...ids, ...Array(L - ids.length).fill(1)] : ids;
          const opts = padded ? { attentionMask: m.attention_mask[b] } : {};
          const { logits } = await model.forward(x, opts);
          for (let i = 0; i < ids.length; i++) {
            for (let v = 0; v < V; v++) worst = Math.max(worst, Math.abs(logits.data[i * V + v] - want[(b * L + i) * V + v]));
          }
          logits.dispose();
        }
      }
      assert.ok(worst <= 1e-4, `max |logit diff| ${worst}`);
    });

    test('positions count non-pad tokens: a left-padded text gives the unpadded logits (BERT\'s 0, 1, ... would not)', async () => {
      const [, , V] = m.logits.shape;
      const want = f32(m.logits.file);
      const ids = m.ids[1];
      const pad = 3;
      const { logits } = await model.forward([...Array(pad).fill(1), ...ids], { attentionMask: [...Array(pad).fill(0), ...ids.map(() => 1)] });
      let worst = 0;
      for (let i = 0; i < ids.length; i++) {
        for (let v = 0; v < V; v++) worst = Math.max(worst, Math.abs(logits.data[(pad + i) * V + v] - want[(m.logits.shape[1] + i) * V + v]));
      }
      assert.ok(worst <= 1e-4, `max |logit diff| ${worst}`);
    });

    test('embed (mean over each text\'s tokens, padded batch) <= 1e-4 of PyTorch; equal to one at a time', async () => {
      const want = f32(m.mean.file);
      const E = m.mean.shape[1];
      const out = await model.embed(ref.texts, { pooling: 'mean', normalize: false });
      for (let k = 0; k < want.length; k++) assert.ok(Math.abs(out.data[k] - want[k]) <= 1e-4, `${k}: ${out.data[k]} vs ${want[k]}`);
      for (let i = 0; i < ref.texts.length; i++) {
        const one = await model.embed(ref.texts[i], { pooling: 'mean', normalize: false });
        for (let e = 0; e < E; e++) assert.ok(Math.abs(one.data[e] - out.data[i * E + e]) <= 1e-6);
      }
    });

    test('fillMask with <mask>: the reference\'s top 5 and probabilities', async () => {
      const got = await model.fillMask(m.fill_mask.text, { topK: 5 });
      assert.deepEqual(got.map((p) => p.tokenId), m.fill_mask.top.map(([id]) => id));
      got.forEach((p, i) => assert.ok(Math.abs(p.score - m.fill_mask.top[i][1]) < 1e-5, `${p.score} vs ${m.fill_mask.top[i][1]}`));
      assert.ok(!got[0].sequence.includes('<mask>'));
    });

    test('outputHeadOutputs: one [1, H, L, hidden_size / H] per layer', async () => {
      const { headOutputs } = await model.forward(m.ids[1], { outputHeadOutputs: true });
      assert.equal(headOutputs.length, m.config.num_hidden_layers);
      const H = m.config.num_attention_heads;
      for (const t of headOutputs) assert.deepEqual(t.shape, [1, H, m.ids[1].length, m.config.hidden_size / H]);
    });

    test('no token types: tokenTypeIds of 1 is an Error; too many tokens is an Error naming the offset', async () => {
      await assert.rejects(model.forward(m.ids[1], { tokenTypeIds: m.ids[1].map(() => 1) }), /model\.forward: options\.tokenTypeIds\[0\] = 1/);
      await assert.rejects(model.forward(Array(33).fill(5)), /model\.forward: ids has 33 tokens, more than max_position_embeddings = 32/);
    });
  });
}

test('a RoBERTa checkpoint without lm_head (RobertaModel) embeds, and fillMask names lm_head', async () => {
  const m = ref.models['random-roberta'];
  const shapes = Object.fromEntries(Object.entries(m.shapes).filter(([k]) => !k.startsWith('lm_head.')).map(([k, v]) => [k.replace(/^roberta\./, ''), v]));
  const seedShapes = Object.fromEntries(Object.entries(m.shapes).filter(([k]) => !k.startsWith('lm_head.')));
  // the same values under the prefix-less names: rebuild the file from the prefixed tensors' bytes
  const full = randomSafetensors(m.seed, seedShapes);
  const n = Number(new DataView(full.buffer).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(full.subarray(8, 8 + n)));
  const renamed = Object.fromEntries(Object.entries(header).map(([k, v]) => [k.replace(/^roberta\./, ''), v]));
  let json = JSON.stringify(renamed);
  while ((8 + json.length) % 8) json += ' ';
  const h = new TextEncoder().encode(json);
  const file = new Uint8Array(8 + h.length + full.length - 8 - n);
  new DataView(file.buffer).setBigUint64(0, BigInt(h.length), true);
  file.set(h, 8);
  file.set(full.subarray(8 + n), 8 + h.length);
  assert.equal(Object.keys(shapes).length, Object.keys(renamed).length - 1);
  const model = await qkv.loadModel({ config: { ...m.config, architectures: ['RobertaModel'] }, weights: file, tokenizer: readFileSync(path.join(ENC, m.tokenizer), 'utf8'), tokenizerConfig });
  try {
    assert.equal(model.hasMaskedLmHead, false);
    const out = await model.embed(ref.texts, { pooling: 'mean', normalize: false });
    const want = f32(m.mean.file);
    for (let k = 0; k < want.length; k++) assert.ok(Math.abs(out.data[k] - want[k]) <= 1e-4);
    await assert.rejects(model.fillMask('a <mask>'), /this roberta checkpoint has no masked-LM head \(no lm_head\.\* tensors/);
  } finally {
    model.dispose();
  }
});
