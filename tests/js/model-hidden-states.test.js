// Hidden states (forward's outputHiddenStates) of BERT, DistilBERT, RoBERTa and BART, and the
// masked-LM logit lens (encoderLogitLens, web/lib/interpret/lens-encoder.ts), against float64
// PyTorch (tools/model/make_hidden_reference.py: random std-0.2 checkpoints, made again here from
// their seeds by tests/js/random-weights.js). Identities: the logits keep their bits when the
// hidden states are asked for; the head on the last hidden state is the forward's logits, bit for
// bit; the lens's last layer is the model's own prediction (KL 0). Bad arguments: an Error naming
// the function, the option and the shape.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, test } from 'node:test';

import { ROOT, api, maxAbsErr } from './model-helpers.js';
import { randomSafetensors } from './random-weights.js';

const qkv = await api();
const DIST = process.env.QKV_DIST ? path.resolve(process.env.QKV_DIST) : path.join(ROOT, 'dist');
const { encoderLogitLens } = await import(pathToFileURL(path.join(DIST, 'interpret', 'lens-encoder.js')).href);
const ENC = path.join(ROOT, 'tests', 'data', 'encoder');
const S2S = path.join(ROOT, 'tests', 'data', 'seq2seq');
const ref = JSON.parse(readFileSync(path.join(ENC, 'hidden-lens.json'), 'utf8'));
const f32 = (dir, rel) => {
  const b = readFileSync(path.join(dir, rel));
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};
const robertaTokenizerConfig = { bos_token: '<s>', eos_token: '</s>', sep_token: '</s>', cls_token: '<s>', unk_token: '<unk>', pad_token: '<pad>', mask_token: '<mask>' };

/** A reference model's files: its weights from the seed, its tokenizer. */
function source(m, shapes = m.shapes) {
  const weights = randomSafetensors(m.seed, shapes);
  if (m.vocab) return { config: m.config, weights, vocabTxt: m.vocab.join('\n') + '\n' };
  return { config: m.config, weights, tokenizer: readFileSync(path.join(ENC, m.tokenizer), 'utf8'), tokenizerConfig: robertaTokenizerConfig };
}

/** softmax(row) in double, max-shifted, as probabilities. */
function softmax(row) {
  let mx = -Infinity;
  for (const x of row) mx = Math.max(mx, x);
  let sum = 0;
  for (const x of row) sum += Math.exp(x - mx);
  return Array.from(row, (x) => Math.exp(x - mx) / sum);
}

for (const [name, arch] of [['bert', 'bert'], ['distilbert', 'distilbert'], ['roberta', 'roberta']]) {
  const m = ref.models[name];
  const [S, T, E] = m.states.shape;
  const NL = S - 1;
  describe(`${name}: hidden states and the masked-LM lens against float64 PyTorch`, () => {
    let model;
    before(async () => {
      model = await qkv.loadModel(source(m));
    });
    after(() => model?.dispose());

    test('outputHiddenStates: numLayers + 1 Tensors [1, T, hidden] <= 1e-4 of HF\'s hidden_states; the logits keep their bits', async () => {
      assert.equal(model.architecture, arch);
      assert.equal(model.layers, NL);
      const want = f32(ENC, m.states.file);
      const plain = await model.forward(m.ids);
      const out = await model.forward(m.ids, { outputHiddenStates: true });
      assert.deepEqual(out.logits.data, plain.logits.data);
      assert.equal(out.hiddenStates.length, NL + 1);
      for (let l = 0; l <= NL; l++) {
        assert.deepEqual(out.hiddenStates[l].shape, [1, T, E]);
        const err = maxAbsErr(out.hiddenStates[l].data, want.subarray(l * T * E, (l + 1) * T * E));
        assert.ok(err <= 1e-4, `hidden_states[${l}]: max |diff| ${err}`);
      }
      // each entry is its own: no two layers alike, the embeddings' output differs from layer 0's
      for (let l = 0; l < NL; l++) assert.ok(maxAbsErr(out.hiddenStates[l].data, out.hiddenStates[l + 1].data) > 0.01);
      assert.equal((await model.forward(m.ids)).hiddenStates, undefined);
    });

    test('maskedLmHead on the last hidden state is the forward\'s logits, bit for bit; on every layer at once, the same rows', async () => {
      const { logits, hiddenStates } = await model.forward(m.ids, { outputHiddenStates: true });
      const last = await model.maskedLmHead(hiddenStates[NL]);
      assert.deepEqual(last.shape, logits.shape);
      assert.deepEqual(last.data, logits.data);
      const stacked = new Float32Array((NL + 1) * T * E);
      hiddenStates.forEach((h, l) => stacked.set(h.data, l * T * E));
      const all = await model.maskedLmHead(new qkv.Tensor(stacked, [NL + 1, T, E]));
      const V = model.config.vocab_size;
      assert.deepEqual(all.shape, [NL + 1, T, V]);
      assert.deepEqual(all.data.subarray(NL * T * V), logits.data);
    });

    test('encoderLogitLens: top 5, KL(final || layer), target probability and rank as PyTorch\'s, every layer and position', async () => {
      const lens = await encoderLogitLens(model, m.ids, { target: m.target });
      // the package's logitLens reads a masked-LM encoder through this lens
      assert.deepEqual(await qkv.logitLens(model, m.ids, { target: m.target }), lens);
      assert.equal(lens.numLayers, NL);
      assert.equal(lens.positions, T);
      assert.equal(lens.layers.length, NL + 1);
      let worstP = 0, worstKl = 0, checkedTop = 0;
      for (let l = 0; l <= NL; l++) {
        assert.equal(lens.layers[l].length, T);
        for (let t = 0; t < T; t++) {
          const got = lens.layers[l][t], want = m.lens[l][t];
          assert.equal(got.top.length, 5);
          // the order is compared where no two of the reference's top 6 are within 1e-6 (float32 could swap them)
          const margin = Math.min(want.gap, ...want.top.slice(1).map(([, p], i) => want.top[i][1] - p));
          if (margin > 1e-6) {
            assert.deepEqual(got.top.map((x) => x.id), want.top.map(([id]) => id), `layer ${l}, position ${t}`);
            checkedTop++;
          }
          got.top.forEach((x, i) => (worstP = Math.max(worstP, Math.abs(x.p - want.top[i][1]))));
          worstP = Math.max(worstP, Math.abs(got.targetP - want.target_p));
          worstKl = Math.max(worstKl, Math.abs(got.kl - want.kl) / Math.max(1, want.kl));
          assert.equal(got.targetRank, want.target_rank, `target rank, layer ${l}, position ${t}`);
          assert.equal(typeof got.top[0].token, 'string');
        }
      }
      assert.ok(checkedTop >= 0.9 * (NL + 1) * T, `top 5 compared in ${checkedTop} of ${(NL + 1) * T} cells`);
      assert.ok(worstP <= 1e-5, `max |dp| ${worstP}`);
      assert.ok(worstKl <= 1e-4, `max |dKL| (relative above 1) ${worstKl}`);
      // the layers do disagree with the final one before it
      assert.ok(lens.layers[0].some((c) => c.kl > 0.1));
    });

    test('the lens\'s last layer is the model\'s own MLM prediction: KL 0, the forward\'s softmax', async () => {
      const lens = await encoderLogitLens(model, m.ids, { topK: 7 });
      const { logits } = await model.forward(m.ids);
      const V = model.config.vocab_size;
      for (let t = 0; t < T; t++) {
        const cell = lens.layers[NL][t];
        assert.equal(cell.kl, 0);
        assert.equal(cell.targetP, undefined);
        const p = softmax(logits.data.subarray(t * V, (t + 1) * V));
        const order = p.map((_, v) => v).sort((a, b) => p[b] - p[a] || a - b);
        assert.deepEqual(cell.top.map((x) => x.id), order.slice(0, 7));
        cell.top.forEach((x) => assert.ok(Math.abs(x.p - p[x.id]) <= 1e-12, `${x.p} vs ${p[x.id]}`));
        assert.equal(cell.top[0].token, model.tokenizer.decode([cell.top[0].id]));
      }
    });
  });
}

describe('encoderLogitLens: options, progress, cancel and bad arguments', () => {
  const m = ref.models.bert;
  let model;
  before(async () => {
    model = await qkv.loadModel(source(m));
  });
  after(() => model?.dispose());

  test('one target id for every position; progress from 0 to numLayers + 2; a cancelled lens rejects with the reason', async () => {
    const calls = [];
    const lens = await encoderLogitLens(model, m.ids, { target: 7, topK: 2, onProgress: (d, n) => calls.push([d, n]) });
    const total = model.layers + 2;
    assert.deepEqual(calls, Array.from({ length: total + 1 }, (_, i) => [i, total]));
    for (const row of lens.layers) {
      for (const c of row) {
        assert.equal(c.top.length, 2);
        assert.ok(c.targetP > 0 && c.targetP < 1);
        assert.equal(c.targetRank === 0, c.top[0].id === 7);
      }
    }
    const ac = new AbortController();
    ac.abort(new Error('stop here'));
    await assert.rejects(encoderLogitLens(model, m.ids, { signal: ac.signal }), /stop here/);
    const late = new AbortController();
    const p = encoderLogitLens(model, m.ids, { signal: late.signal, onProgress: (d) => d === 1 && late.abort(new Error('stopped after the forward')) });
    await assert.rejects(p, /stopped after the forward/);
  });

  test('bad arguments are Errors naming the function, the option and the shape', async () => {
    const V = model.config.vocab_size, T = m.ids.length;
    await assert.rejects(encoderLogitLens({}, m.ids), /encoderLogitLens: model must be an EncoderModel/);
    await assert.rejects(encoderLogitLens(model, []), /encoderLogitLens: ids is empty/);
    await assert.rejects(encoderLogitLens(model, [2, V, 3]), /encoderLogitLens: ids\[1\] = 90/);
    await assert.rejects(encoderLogitLens(model, Array(25).fill(5)), /encoderLogitLens: ids has 25 tokens, more than the model's 24 positions/);
    await assert.rejects(encoderLogitLens(model, m.ids, { topK: 0 }), /encoderLogitLens: options\.topK/);
    await assert.rejects(encoderLogitLens(model, m.ids, { target: [1, 2, 3] }), new RegExp(`encoderLogitLens: options\\.target has 3 ids, ids has ${T} positions`));
    await assert.rejects(encoderLogitLens(model, m.ids, { target: V }), /encoderLogitLens: options\.target must be a token id in \[0, 90\)/);
    await assert.rejects(encoderLogitLens(model, m.ids, { layer: 1 }), /encoderLogitLens: unknown option 'layer'/);
    await assert.rejects(encoderLogitLens(model, m.ids, { signal: 'no' }), /encoderLogitLens: options\.signal must be an AbortSignal/);
    await assert.rejects(model.forward(m.ids, { outputHiddenStates: 1 }), /model\.forward: options\.outputHiddenStates must be a boolean/);
    await assert.rejects(model.maskedLmHead(new qkv.Tensor(new Float32Array(15), [1, 3, 5])), /model\.maskedLmHead: hiddenStates has shape \[1, 3, 5\]; need \[\.\.\., 48\]/);
    await assert.rejects(model.maskedLmHead(new Float32Array(48)), /model\.maskedLmHead: hiddenStates must be a Tensor/);
  });

  test('a checkpoint without the MLM head (an embedder): the lens and the head name what is missing', async () => {
    const shapes = Object.fromEntries(Object.entries(m.shapes).filter(([k]) => !k.startsWith('cls.')));
    const embedder = await qkv.loadModel(source(m, shapes));
    try {
      assert.equal(embedder.hasMaskedLmHead, false);
      await assert.rejects(encoderLogitLens(embedder, m.ids), /encoderLogitLens: this bert checkpoint has no masked-LM head/);
      await assert.rejects(embedder.maskedLmHead(new qkv.Tensor(new Float32Array(48), [1, 48])), /model\.maskedLmHead: this bert checkpoint has no masked-LM head/);
    } finally {
      embedder.dispose();
    }
  });
});

describe('BART: encoderHiddenStates and decoderHiddenStates against float64 PyTorch', () => {
  const m = JSON.parse(readFileSync(path.join(S2S, 'bart-hidden.json'), 'utf8'));
  let model;
  before(async () => {
    const vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', ...Array.from({ length: m.config.vocab_size - 5 }, (_, i) => `w${i}`)];
    model = await qkv.loadModel({ config: m.config, weights: randomSafetensors(m.seed, m.shapes), vocabTxt: vocab.join('\n') + '\n' });
  });
  after(() => model?.dispose());

  test('encoder_layers + 1 and decoder_layers + 1 Tensors <= 1e-4 of HF\'s; the logits keep their bits', async () => {
    const opts = { decoderInputIds: m.decoder_input_ids };
    const plain = await model.forward(m.input_ids, opts);
    const out = await model.forward(m.input_ids, { ...opts, outputHiddenStates: true });
    assert.deepEqual(out.logits.data, plain.logits.data);
    assert.ok(maxAbsErr(out.logits.data, f32(S2S, m.logits.file)) <= 1e-4);
    for (const [key, r] of [['encoderHiddenStates', m.encoder_hidden_states], ['decoderHiddenStates', m.decoder_hidden_states]]) {
      const [S, L, E] = r.shape;
      const want = f32(S2S, r.file);
      assert.equal(out[key].length, S, key);
      for (let l = 0; l < S; l++) {
        assert.deepEqual(out[key][l].shape, [1, L, E]);
        const err = maxAbsErr(out[key][l].data, want.subarray(l * L * E, (l + 1) * L * E));
        assert.ok(err <= 1e-4, `${key}[${l}]: max |diff| ${err}`);
      }
    }
    assert.equal(out.encoderHiddenStates.length, m.config.encoder_layers + 1);
    assert.equal(out.decoderHiddenStates.length, m.config.decoder_layers + 1);
    assert.equal(plain.encoderHiddenStates, undefined);
    await assert.rejects(model.forward(m.input_ids, { outputHiddenStates: 'yes' }), /model\.forward: options\.outputHiddenStates must be a boolean/);
  });
});
