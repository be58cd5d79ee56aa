// The encoder-decoder in JS (web/lib/model/seq2seq.ts over wasm/bindings_seq2seq.cpp):
// forward against the committed PyTorch float64 reference (tests/data/seq2seq/, written by
// tools/seq2seq/make_reference.py), KV-cached generation against full recompute, greedy
// output against Python's, the number speller's text and its cross-attention alignment.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, api, argmax, maxAbsErr } from './model-helpers.js';

const qkv = await api();
const DATA = path.join(ROOT, 'tests', 'data', 'seq2seq');
const manifest = (name) => JSON.parse(readFileSync(path.join(DATA, name), 'utf8'));
const readF32 = (rel) => {
  const b = readFileSync(path.join(DATA, rel));
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};

async function checkReference(name) {
  const m = manifest(name);
  const model = await qkv.loadModel(path.join(ROOT, m.model_dir));
  try {
    assert.ok(model instanceof qkv.Seq2SeqModel, `${m.model_dir} loads as a Seq2SeqModel (model_type bart), got ${model}`);
    const c = model.config;
    assert.ok(m.cases.length >= 2);
    for (const cs of m.cases) {
      const Ls = cs.input_ids.length, Lt = cs.decoder_input_ids.length;
      const out = await model.forward(cs.input_ids, { decoderInputIds: cs.decoder_input_ids, outputAttentions: true });
      assert.deepEqual(out.logits.shape, [1, Lt, c.vocab_size]);
      const el = maxAbsErr(out.logits.data, readF32(cs.logits.file));
      assert.ok(el <= 1e-4, `${name} ${cs.name}: logits max abs err ${el}`);
      const kinds = [
        ['encoderAttentions', 'encoder_attentions', c.encoder_layers, c.encoder_attention_heads, Ls, Ls],
        ['decoderAttentions', 'decoder_attentions', c.decoder_layers, c.decoder_attention_heads, Lt, Lt],
        ['crossAttentions', 'cross_attentions', c.decoder_layers, c.decoder_attention_heads, Lt, Ls],
      ];
      for (const [key, file, NL, H, Lq, Lk] of kinds) {
        const ref = readF32(cs[file].file);
        assert.equal(out[key].length, NL, `${key}: one per layer`);
        let worst = 0;
        for (let l = 0; l < NL; l++) {
          assert.deepEqual(out[key][l].shape, [1, H, Lq, Lk]);
          const per = H * Lq * Lk;
          worst = Math.max(worst, maxAbsErr(out[key][l].data, ref.subarray(l * per, (l + 1) * per)));
        }
        assert.ok(worst <= 1e-5, `${name} ${cs.name}: ${key} max abs err ${worst}`);
      }
    }
    // greedy generation equals PyTorch's
    assert.ok(m.greedy.length >= 2);
    for (const g of m.greedy) {
      const got = [];
      for await (const s of model.generate(g.input_ids, { maxNewTokens: g.output_ids.length, temperature: 0 })) got.push(s.token);
      assert.deepEqual(got, g.output_ids, `${name}: greedy output for input ${g.input_ids}`);
    }
  } finally {
    model.dispose();
  }
}

test('random BART checkpoint (1 + 3 layers, 2 / 4 heads): forward and greedy match PyTorch', () => checkReference('random-bart.json'));
test('the trained number speller: forward and greedy match PyTorch', () => checkReference('tiny-numbers.json'));

describe('the number speller (web/models/tiny-numbers)', () => {
  let model;
  before(async () => {
    model = await qkv.loadModel(path.join(ROOT, 'web', 'models', 'tiny-numbers'));
  });
  after(() => model?.dispose());

  test('loads as a Seq2SeqModel with its WordPiece tokenizer; tokenizer.json and vocab.txt agree', async () => {
    assert.ok(model instanceof qkv.Seq2SeqModel);
    assert.equal(model.tokenizer.kind, 'wordpiece');
    const t = model.tokenizer;
    assert.deepEqual(t.encode('1907').map((i) => t.token(i)), ['[CLS]', '1', '##9', '##0', '##7', '[SEP]']);
    const dir = path.join(ROOT, 'web', 'models', 'tiny-numbers');
    const read = (f) => readFileSync(path.join(dir, f), 'utf8');
    const fromTxt = await qkv.tokenizerFromFiles({ vocabTxt: read('vocab.txt'), tokenizerConfig: read('tokenizer_config.json') });
    const fromJson = await qkv.tokenizerFromFiles({ tokenizerJson: read('tokenizer.json'), tokenizerConfig: read('tokenizer_config.json') });
    for (const s of ['1907', '0', '42', '9999', '12 34', 'one thousand']) assert.deepEqual(fromJson.encode(s), fromTxt.encode(s), s);
    assert.equal(fromTxt.decode(fromTxt.encode('one thousand nine'), { skipSpecialTokens: true }), 'one thousand nine');
  });

  test('spells numbers as the Python model does (text from the streamed steps)', async () => {
    for (const g of manifest('tiny-numbers.json').greedy) {
      let text = '';
      const steps = [];
      for await (const s of model.generate(String(g.number), { temperature: 0 })) {
        text += s.text;
        steps.push(s);
      }
      assert.equal(text.trim(), g.text, `${g.number}`);
      assert.ok(steps.at(-1).done, 'ends with eos');
      assert.equal(steps.at(-1).token, model.config.eos_token_id);
    }
  });

  test('per-step attentions equal the rows of a full forward (cross K/V once, self-attention through the KV cache)', async () => {
    const c = model.config;
    const steps = [];
    for await (const s of model.generate('3018', { temperature: 0, outputAttentions: true })) steps.push(s);
    const dec = [c.decoder_start_token_id, ...steps.slice(0, -1).map((s) => s.token)];
    const full = await model.forward('3018', { decoderInputIds: dec, outputAttentions: true });
    const Ls = 6, Lt = dec.length, H = c.decoder_attention_heads;
    for (const [k, s] of steps.entries()) {
      assert.equal(s.encoderAttentions.length, c.encoder_layers);
      assert.ok(maxAbsErr(s.encoderAttentions[0].data, full.encoderAttentions[0].data) <= 1e-6);
      for (let l = 0; l < c.decoder_layers; l++) {
        assert.deepEqual(s.decoderAttentions[l].shape, [H, k + 1]);
        assert.deepEqual(s.crossAttentions[l].shape, [H, Ls]);
        for (let h = 0; h < H; h++) {
          const selfRow = full.decoderAttentions[l].data.subarray((h * Lt + k) * Lt, (h * Lt + k) * Lt + k + 1);
          const crossRow = full.crossAttentions[l].data.subarray((h * Lt + k) * Ls, (h * Lt + k + 1) * Ls);
          assert.ok(maxAbsErr(s.decoderAttentions[l].data.subarray(h * (k + 1), (h + 1) * (k + 1)), selfRow) <= 1e-5);
          assert.ok(maxAbsErr(s.crossAttentions[l].data.subarray(h * Ls, (h + 1) * Ls), crossRow) <= 1e-5);
        }
      }
      // the logits of the full forward at row k choose the same token
      assert.equal(argmax(full.logits.data, k * c.vocab_size, c.vocab_size), s.token);
    }
  });

  test('sampled generation is reproducible from its seed', async () => {
    const run = async () => {
      const out = [];
      for await (const s of model.generate('4242', { temperature: 1.5, seed: 9 })) out.push(s.token);
      return out;
    };
    assert.deepEqual(await run(), await run());
  });

  test('a dropped generation does not lock the model: the next generate() supersedes it', async () => {
    const run = async () => {
      const out = [];
      for await (const s of model.generate('4242', { temperature: 1.5, seed: 9 })) out.push(s.token);
      return out;
    };
    const want = await run();
    const dropped = model.generate('1907', { temperature: 0, outputAttentions: true });
    await dropped.next();
    assert.deepEqual(await run(), want);
    assert.deepEqual(await dropped.next(), { done: true, value: undefined });
  });

  test('the cross-attention of a digit word peaks on its digit ("1907": one -> 1, nine -> ##9, seven -> ##7)', async () => {
    const c = model.config;
    const t = model.tokenizer;
    const src = t.encode('1907');
    const want = { one: 1, nine: 2, seven: 4 };  // encoder positions of [CLS] 1 ##9 ##0 ##7 [SEP]
    const H = c.decoder_attention_heads, l = c.decoder_layers - 1;
    let checked = 0;
    for await (const s of model.generate(src, { temperature: 0, outputAttentions: true })) {
      const word = t.token(s.token);
      if (!(word in want)) continue;
      const mean = new Float64Array(src.length);  // the last decoder layer, averaged over heads
      for (let h = 0; h < H; h++) for (let j = 0; j < src.length; j++) mean[j] += s.crossAttentions[l].data[h * src.length + j] / H;
      assert.equal(argmax(mean), want[word], `"${word}": cross-attention ${Array.from(mean, (x) => x.toFixed(2))}`);
      checked++;
    }
    assert.equal(checked, 3);
  });

  test('bad input: errors name the function and the argument', async () => {
    await assert.rejects(qkv.loadModel(path.join(ROOT, 'web', 'models', 'tiny-numbers'), { weights: 'int8' }),
      /loadModel: options\.weights 'int8' is not supported for model_type "bart"/);
    await assert.rejects(model.forward([2, 999, 3]), /model\.forward: input\[1\] = 999 is not a token id in \[0, 55\)/);
    await assert.rejects(model.forward([2, 3], { decoderInputIds: [] }), /model\.forward: options\.decoderInputIds is empty/);
    await assert.rejects(model.forward([2, 3], { bogus: 1 }), /bogus/);
    await assert.rejects(model.forward(new Array(17).fill(5)), /input has 17 tokens, more than max_position_embeddings = 16/);
    await assert.rejects(async () => { for await (const _ of model.generate('12', { maxNewTokens: 17 })) ; }, /maxNewTokens/);
  });
});
