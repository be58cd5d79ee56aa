// Head interventions by their properties, on every model type (the random checkpoints of
// tests/data/interventions/): a head mask of ones and a patch with the run's own head outputs
// change nothing, bit for bit; a patch from another prompt moves the logits; a knocked-out
// edge has weight 0 and its row still sums to 1; a zeroed head's weights and outputs are 0;
// generate() with a head mask follows the masked forward; every bad argument is an Error
// naming the function, the argument and the shapes.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, api, argmax } from './model-helpers.js';

const qkv = await api();
const DATA = path.join(ROOT, 'tests', 'data', 'interventions');
const models = {};
before(async () => {
  for (const name of ['gpt2', 'llama', 'bert', 'bart']) models[name] = await qkv.loadModel(path.join(DATA, name));
});
after(() => qkv.dispose());

const ids = (L, V, seed) => Array.from({ length: L }, (_, i) => 5 + ((i * 7 + seed * 3) % (V - 5)));
const same = (a, b, what) => {
  assert.deepEqual(a.shape, b.shape, `${what}: shape`);
  assert.ok(a.data.every((x, i) => Object.is(x, b.data[i])), `${what}: bit for bit`);
};
const maxDiff = (a, b) => a.data.reduce((m, x, i) => Math.max(m, Math.abs(x - b.data[i])), 0);

/** [layers, heads] of a decoder or encoder model. */
function shape(model) {
  if (model.dims) return [model.dims.layers, model.dims.heads];
  return [model.layers, model.heads];
}
const L = 8;

for (const name of ['gpt2', 'llama', 'bert']) {
  describe(`${name}: interventions by their properties`, () => {
    const V = () => models[name].config.vocab_size;
    test('a head mask of ones equals no mask, bit for bit; a patch with the run\'s own head outputs too', async () => {
      const model = models[name];
      const [NL, H] = shape(model);
      const x = ids(L, V(), 1);
      const plain = await model.forward(x, { outputAttentions: true, outputHeadOutputs: true });
      const ones = await model.forward(x, { outputAttentions: true, headMask: Array.from({ length: NL }, () => new Array(H).fill(1)) });
      same(ones.logits, plain.logits, 'logits');
      plain.attentions.forEach((a, l) => same(ones.attentions[l], a, `attentions[${l}]`));
      const patchHeadOutputs = [];
      for (let l = 0; l < NL; l++) for (let h = 0; h < H; h++) patchHeadOutputs.push({ layer: l, head: h, values: plain.headOutputs[l] });
      const patched = await model.forward(x, { patchHeadOutputs, outputHeadOutputs: true });
      same(patched.logits, plain.logits, 'logits patched with their own head outputs');
      plain.headOutputs.forEach((o, l) => same(patched.headOutputs[l], o, `headOutputs[${l}]`));
    });

    test('patching from another prompt moves the logits, from the patched layer on only', async () => {
      const model = models[name];
      const [NL, H] = shape(model);
      const clean = await model.forward(ids(L, V(), 1), { outputHeadOutputs: true });
      const corrupt = await model.forward(ids(L, V(), 2), { outputHeadOutputs: true });
      const D = clean.headOutputs[0].shape[3];
      const last = NL - 1;
      // one head of the last layer at the last position, from the clean run
      const head = H - 1;
      const row = clean.headOutputs[last].data.slice(((head * L) + L - 1) * D, (head * L + L) * D);
      const patched = await model.forward(ids(L, V(), 2), {
        patchHeadOutputs: [{ layer: last, head, positions: [L - 1], values: row }], outputHeadOutputs: true,
      });
      assert.ok(maxDiff(patched.logits, corrupt.logits) > 1e-4, 'the patched run\'s logits moved');
      // earlier layers' head outputs are the corrupted run's; the patched row is the clean one
      for (let l = 0; l < last; l++) same(patched.headOutputs[l], corrupt.headOutputs[l], `headOutputs[${l}] before the patch`);
      const got = patched.headOutputs[last].data.slice(((head * L) + L - 1) * D, (head * L + L) * D);
      assert.deepEqual(Array.from(got), Array.from(row));
      if (name !== 'bert') {
        // causal: positions before the patched one keep the corrupted run's logits, bit for bit
        const Vn = V();
        assert.deepEqual(Array.from(patched.logits.data.slice(0, (L - 1) * Vn)), Array.from(corrupt.logits.data.slice(0, (L - 1) * Vn)));
      }
    });

    test('knockout: a blocked edge has weight 0, its row sums to 1; a zeroed head gives weights and outputs 0', async () => {
      const model = models[name];
      const [NL, H] = shape(model);
      const x = ids(L, V(), 3);
      const q = L - 1;
      const block = new Uint8Array(L * L);
      block[q * L + 2] = 1;
      block[q * L + 4] = 1;
      const mask = Array.from({ length: NL }, () => new Array(H).fill(1));
      mask[NL - 1][0] = 0;
      const out = await model.forward(x, {
        outputAttentions: true, outputHeadOutputs: true, headMask: mask,
        knockout: [{ layer: 0, heads: [1], block: new qkv.Tensor(block, [L, L]) }],
      });
      const a = out.attentions[0].data;
      const row = (h) => a.subarray((h * L + q) * L, (h * L + q + 1) * L);
      assert.equal(row(1)[2], 0);
      assert.equal(row(1)[4], 0);
      assert.ok(Math.abs(row(1).reduce((s, v) => s + v, 0) - 1) < 1e-5, 'the row renormalises over the keys left');
      assert.ok(row(0)[2] > 0 && row(0)[4] > 0, 'other heads keep the edge');
      const z = out.attentions[NL - 1].data.subarray(0, L * L);
      assert.ok(z.every((v) => v === 0), 'a head masked with 0: its weights are 0 (HF returns the masked probabilities)');
      const D = out.headOutputs[0].shape[3];
      assert.ok(out.headOutputs[NL - 1].data.subarray(0, L * D).every((v) => v === 0), 'and its outputs are 0');
    });

    test('every bad argument is an Error naming the function, the argument and the shapes', async () => {
      const model = models[name];
      const [NL, H] = shape(model);
      const x = ids(L, V(), 1);
      const bad = [
        [{ headMask: new Array(H + 1).fill(1) }, new RegExp(`model\\.forward: options\\.headMask has ${H + 1} values, need \\[${H}\\] \\(numHeads\\) or \\[${NL}, ${H}\\]`)],
        [{ headMask: new qkv.Tensor(new Float32Array(3 * H), [3, H]) }, new RegExp(`options\\.headMask has shape \\[3, ${H}\\], need \\[${H}\\]`)],
        [{ headMask: [[1, 1], [1]] }, /options\.headMask is 2 rows of 2, 1 values/],
        [{ headMask: new Array(H).fill(NaN) }, /options\.headMask holds NaN, not a finite number/],
        [{ knockout: [{ layer: NL, block: [[0, 0]] }] }, new RegExp(`options\\.knockout\\[0\\]\\.layer = ${NL} is not a layer in \\[0, ${NL}\\)`)],
        [{ knockout: [{ layer: 0, heads: [H], block: [[0, 0]] }] }, new RegExp(`options\\.knockout\\[0\\]\\.heads\\[0\\] = ${H} is not a head in \\[0, ${H}\\)`)],
        [{ knockout: [{ layer: 0, block: new qkv.Tensor(new Uint8Array(L * (L - 1)), [L, L - 1]) }] }, new RegExp(`options\\.knockout\\[0\\]\\.block has shape \\[${L}, ${L - 1}\\], need a bool mask \\[${L}, ${L}\\]`)],
        [{ knockout: [{ layer: 0, block: [[0, L]] }] }, new RegExp(`options\\.knockout\\[0\\]\\.block\\[0\\]\\[1\\] \\(key\\) = ${L} is not a key position in \\[0, ${L}\\)`)],
        [{ knockout: [{ layer: 0, block: [[0]] }] }, /options\.knockout\[0\]\.block\[0\] must be a \[query, key\] pair/],
        [{ knockout: [{ layer: 0, block: [[0, 0]], head: 1 }] }, /options\.knockout\[0\] has unknown key 'head'/],
        [{ knockout: { layer: 0 } }, /options\.knockout must be an array of \{ layer, heads\?, block \}/],
        [{ patchHeadOutputs: [{ layer: 0, head: H, values: [] }] }, new RegExp(`options\\.patchHeadOutputs\\[0\\]\\.head = ${H} is not a head in \\[0, ${H}\\)`)],
        [{ patchHeadOutputs: [{ layer: 0, head: 0, positions: [L], values: new Float32Array(8) }] }, new RegExp(`options\\.patchHeadOutputs\\[0\\]\\.positions\\[0\\] = ${L} is not a query position in \\[0, ${L}\\)`)],
        [{ patchHeadOutputs: [{ layer: 0, head: 0, positions: [1, 2], values: new Float32Array(5) }] }, /options\.patchHeadOutputs\[0\]\.values has 5 values, need 2 positions x 8 \(head_dim\) = 16 values, or a layer's headOutputs Tensor \[1, \d+, 8, 8\]/],
        [{ patchHeadOutputs: [{ layer: 0, head: 0 }] }, /options\.patchHeadOutputs\[0\]\.values must be a Tensor, a Float32Array or an array of numbers, got undefined/],
        [{ outputHeadOutputs: 1 }, /options\.outputHeadOutputs must be a boolean/],
      ];
      for (const [opts, re] of bad) {
        await assert.rejects(model.forward(x, opts), (e) => e instanceof Error && re.test(e.message) && e.message.startsWith('model.forward: '), `${JSON.stringify(opts)} -> ${re}`);
      }
    });
  });
}

describe('decoders: generate() with a head mask', () => {
  for (const name of ['gpt2', 'llama']) {
    test(`${name}: greedy tokens are the masked forward's argmax, and the mask changes them`, async () => {
      const model = models[name];
      const [NL, H] = shape(model);
      const V = model.config.vocab_size;
      const prompt = ids(4, V, 5);
      const headMask = Array.from({ length: NL }, (_, l) => Array.from({ length: H }, (_, h) => ((l + h) % 3 === 0 ? 0 : 1)));
      const gen = async (opts) => {
        const out = [];
        for await (const s of model.generate(prompt, { maxNewTokens: 6, temperature: 0, ...opts })) out.push(s.token);
        return out;
      };
      const masked = await gen({ headMask });
      const seq = [...prompt, ...masked];
      const fwd = await model.forward(seq.slice(0, -1), { headMask });
      for (let k = 0; k < masked.length; k++) {
        assert.equal(masked[k], argmax(fwd.logits.data, (prompt.length - 1 + k) * V, V), `token ${k} is the masked forward's argmax`);
      }
      const plainFwd = await model.forward(seq.slice(0, -1));
      assert.ok(maxDiff(fwd.logits, plainFwd.logits) > 1e-3, 'the mask moves the logits');
      await assert.rejects(async () => { for await (const s of model.generate(prompt, { knockout: [] })) void s; }, /model\.generate: unknown option 'knockout'/);
      await assert.rejects(async () => { for await (const s of model.generate(prompt, { headMask: [1] })) void s; }, /model\.generate: options\.headMask has 1 values, need \[4\]/);
    });
  }
});

describe('encoder-decoder: interventions by their properties', () => {
  const src = [5, 9, 13, 17, 21, 25, 29];
  const tgt = [2, 7, 11, 15, 19, 23];
  test('ones masks and self-patches change nothing, bit for bit; a zeroed cross head gives 0 weights', async () => {
    const model = models.bart;
    const c = model.config;
    const ones = (NL, H) => Array.from({ length: NL }, () => new Array(H).fill(1));
    const plain = await model.forward(src, { decoderInputIds: tgt, outputAttentions: true, outputHeadOutputs: true });
    const masked = await model.forward(src, {
      decoderInputIds: tgt, headMask: ones(c.encoder_layers, c.encoder_attention_heads),
      decoderHeadMask: ones(c.decoder_layers, c.decoder_attention_heads), crossAttnHeadMask: ones(c.decoder_layers, c.decoder_attention_heads),
    });
    same(masked.logits, plain.logits, 'logits with masks of ones');
    const patches = (outs) => outs.flatMap((o, l) => Array.from({ length: o.shape[1] }, (_, h) => ({ layer: l, head: h, values: o })));
    const patched = await model.forward(src, {
      decoderInputIds: tgt, patchHeadOutputs: patches(plain.encoderHeadOutputs),
      decoderPatchHeadOutputs: patches(plain.decoderHeadOutputs), crossAttnPatchHeadOutputs: patches(plain.crossHeadOutputs),
    });
    same(patched.logits, plain.logits, 'logits patched with their own head outputs');
    // another input's cross-attention head outputs move the logits
    const other = await model.forward([6, 10, 14, 18, 22, 26, 30], { decoderInputIds: tgt, outputHeadOutputs: true });
    const moved = await model.forward(src, { decoderInputIds: tgt, crossAttnPatchHeadOutputs: [{ layer: 1, head: 2, values: other.crossHeadOutputs[1] }] });
    assert.ok(maxDiff(moved.logits, plain.logits) > 1e-4, 'a patch from another input moves the logits');
    const zero = await model.forward(src, { decoderInputIds: tgt, outputAttentions: true, crossAttnHeadMask: [1, 0, 1, 1] });
    const Lt = tgt.length, Ls = src.length;
    for (let l = 0; l < c.decoder_layers; l++) {
      assert.ok(zero.crossAttentions[l].data.subarray(Lt * Ls, 2 * Lt * Ls).every((v) => v === 0), `cross head 1 of layer ${l}: weights 0`);
    }
    same(zero.encoderAttentions[0], plain.encoderAttentions[0], 'the encoder is untouched by a cross-attention mask');
    await assert.rejects(model.forward(src, { decoderInputIds: tgt, crossAttnHeadMask: [1, 1] }), /model\.forward: options\.crossAttnHeadMask has 2 values, need \[4\] \(numHeads\) or \[2, 4\]/);
    await assert.rejects(model.forward(src, { decoderInputIds: tgt, crossAttnKnockout: [{ layer: 0, block: [[0, Ls]] }] }),
      new RegExp(`model\\.forward: options\\.crossAttnKnockout\\[0\\]\\.block\\[0\\]\\[1\\] \\(key\\) = ${Ls} is not a key position in \\[0, ${Ls}\\)`));
  });

  test('generate() with head masks: the steps follow the masked forward', async () => {
    const model = models.bart;
    const crossAttnHeadMask = [[1, 0, 1, 0], [0, 1, 1, 1]];
    const headMask = [0.5, 1, 0, 1];
    const steps = [];
    for await (const s of model.generate(src, { maxNewTokens: 5, headMask, crossAttnHeadMask })) steps.push(s.token);
    const V = model.config.vocab_size;
    const dec = [model.config.decoder_start_token_id, ...steps.slice(0, -1)];
    const fwd = await model.forward(src, { decoderInputIds: dec, headMask, crossAttnHeadMask });
    steps.forEach((t, k) => assert.equal(t, argmax(fwd.logits.data, k * V, V), `step ${k}`));
  });
});
