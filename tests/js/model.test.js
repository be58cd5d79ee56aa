// The model in JS: forward against the committed PyTorch reference, KV-cache generation
// against full recompute, seeded sampling, per-step attention rows.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { DATA, api, argmax, manifest, maxAbsErr, readF32 } from './model-helpers.js';

const qkv = await api();

async function checkReference(name) {
  const m = manifest(name);
  const model = await qkv.loadModel(path.join(DATA, m.model_dir));
  const worst = { logits: 0, attentions: 0 };
  try {
    for (const k of ['n_layer', 'n_head', 'n_embd', 'vocab_size', 'n_positions']) assert.equal(model.config[k], m.config[k]);
    for (const c of m.cases) {
      const L = c.ids.length;
      const { n_layer: NL, n_head: H, vocab_size: V } = model.config;
      const { logits, attentions } = await model.forward(c.ids, { outputAttentions: true });
      assert.deepEqual(logits.shape, [1, L, V]);
      assert.equal(attentions.length, NL);
      const refL = readF32(c.logits.file);
      const refA = readF32(c.attentions.file);
      const el = maxAbsErr(logits.data, refL);
      let ea = 0;
      for (let l = 0; l < NL; l++) {
        assert.deepEqual(attentions[l].shape, [1, H, L, L]);
        ea = Math.max(ea, maxAbsErr(attentions[l].data, refA.subarray(l * H * L * L, (l + 1) * H * L * L)));
      }
      assert.ok(el <= 1e-4, `${name} ${c.name}: logits max abs err ${el}`);
      assert.ok(ea <= 1e-5, `${name} ${c.name}: attentions max abs err ${ea}`);
      assert.equal(argmax(logits.data, (L - 1) * V, V), c.last_logits_argmax);
      worst.logits = Math.max(worst.logits, el);
      worst.attentions = Math.max(worst.attentions, ea);

      // PyTorch's greedy continuation (where no step is a near-tie)
      if (c.greedy && c.greedy.min_margin > 1e-3 && L + c.greedy.new_ids.length <= model.config.n_positions) {
        const got = [];
        for await (const s of model.generate(c.ids, { maxNewTokens: c.greedy.new_ids.length, temperature: 0 })) got.push(s.token);
        assert.deepEqual(got, c.greedy.new_ids, `${name} ${c.name}: greedy continuation`);
      }
    }
  } finally {
    model.dispose();
  }
  console.log(`# ${name}: JS vs PyTorch: logits max abs err ${worst.logits.toExponential(2)}, attentions ${worst.attentions.toExponential(2)}`);
}

test('forward matches PyTorch: tiny-kjv', () => checkReference('tiny-kjv.json'));
test('forward matches PyTorch: tiny-kjv-bpe (the demo\'s default, BPE vocab 3000)', () => checkReference('tiny-kjv-bpe.json'));
test('forward matches PyTorch: random GPT-2 (3 layers, 6 heads, n_embd 192, BPE)', () => checkReference('random-gpt2.json'));

/** softmax(q k^T / sqrt(hd) + causal mask) from forward's queriesKeys vs its attentions: the worst abs error. */
async function checkQueriesKeys(model, ids) {
  const { n_layer: NL, n_head: H, n_embd: E } = model.config;
  const D = E / H, L = ids.length;
  const out = await model.forward(ids, { outputAttentions: true, outputQueriesKeys: true });
  const plain = await model.forward(ids, { outputAttentions: true });
  assert.deepEqual(out.logits.data, plain.logits.data, 'asking for q/k changes the logits');
  assert.equal(plain.queriesKeys, undefined);
  assert.equal(out.queriesKeys.length, NL);
  let worst = 0;
  for (let l = 0; l < NL; l++) {
    const { queries, keys } = out.queriesKeys[l];
    assert.deepEqual(queries.shape, [1, H, L, D]);
    assert.deepEqual(keys.shape, [1, H, L, D]);
    const q = queries.data, k = keys.data, a = out.attentions[l].data;
    for (let h = 0; h < H; h++) {
      for (let i = 0; i < L; i++) {
        const s = new Float64Array(L);
        let m = -Infinity, sum = 0;
        for (let j = 0; j <= i; j++) {
          let dot = 0;
          for (let d = 0; d < D; d++) dot += q[(h * L + i) * D + d] * k[(h * L + j) * D + d];
          s[j] = dot / Math.sqrt(D);
          m = Math.max(m, s[j]);
        }
        for (let j = 0; j <= i; j++) sum += (s[j] = Math.exp(s[j] - m));
        for (let j = 0; j < L; j++) {
          const want = j <= i ? s[j] / sum : 0;
          const d = Math.abs(want - a[(h * L + i) * L + j]);
          if (!(d <= worst)) worst = Number.isNaN(d) ? Infinity : d;
        }
      }
    }
  }
  return worst;
}

test('forward outputQueriesKeys: softmax(q k^T / sqrt(hd) + causal mask) reproduces the attentions', async () => {
  for (const name of ['tiny-kjv.json', 'random-gpt2.json']) {
    const m = manifest(name);
    const model = await qkv.loadModel(path.join(DATA, m.model_dir));
    try {
      const worst = await checkQueriesKeys(model, m.cases[m.cases.length - 1].ids);
      assert.ok(worst <= 1e-5, `${name}: softmax(q k^T) vs attentions: max abs err ${worst}`);
    } finally {
      model.dispose();
    }
  }
  // a bad value is an Error naming the option
  const model = await qkv.loadModel(path.join(DATA, manifest('tiny-kjv.json').model_dir));
  try {
    await assert.rejects(model.forward([1, 2], { outputQueriesKeys: 1 }), /model\.forward: options\.outputQueriesKeys must be a boolean/);
  } finally {
    model.dispose();
  }
});

describe('generation on the tiny model', () => {
  let model;
  before(async () => {
    model = await qkv.loadModel(path.join(DATA, manifest('tiny-kjv.json').model_dir));
  });
  after(() => model?.dispose());

  async function collect(prompt, options) {
    const steps = [];
    for await (const s of model.generate(prompt, options)) steps.push(s);
    return steps;
  }

  test('KV-cache greedy == greedy by full recompute, 64 tokens', async () => {
    const prompt = 'In the beginning';
    const steps = await collect(prompt, { maxNewTokens: 64, temperature: 0 });
    assert.equal(steps.length, 64);
    const ids = model.tokenizer.encode(prompt);
    const V = model.config.vocab_size;
    for (let k = 0; k < 64; k++) {
      const { logits } = await model.forward(ids);
      const next = argmax(logits.data, (ids.length - 1) * V, V);
      assert.equal(steps[k].token, next, `step ${k}`);
      assert.equal(steps[k].position, ids.length);
      assert.equal(steps[k].index, k);
      ids.push(next);
    }
    // the texts of the steps concatenate to the decoded tokens
    assert.equal(steps.map((s) => s.text).join(''), model.tokenizer.decode(steps.map((s) => s.token)));
  });

  test('seeded sampling is deterministic', async () => {
    const opts = { maxNewTokens: 48, temperature: 0.8, topK: 40, seed: 1234 };
    const a = (await collect('And the LORD said', opts)).map((s) => s.token);
    const b = (await collect('And the LORD said', opts)).map((s) => s.token);
    const c = (await collect('And the LORD said', { ...opts, seed: 1235 })).map((s) => s.token);
    assert.deepEqual(a, b);
    assert.notDeepEqual(a, c);
    // topK 1 = greedy
    const g = (await collect('And the LORD said', { maxNewTokens: 16, temperature: 0 })).map((s) => s.token);
    const k1 = (await collect('And the LORD said', { maxNewTokens: 16, temperature: 2, topK: 1, seed: 5 })).map((s) => s.token);
    assert.deepEqual(k1, g);
  });

  test('each step carries the attention rows that produced its token', async () => {
    const prompt = 'For God so loved';
    const steps = await collect(prompt, { maxNewTokens: 6, temperature: 0, outputAttentions: true });
    const ids = [...model.tokenizer.encode(prompt), ...steps.map((s) => s.token)];
    const { attentions } = await model.forward(ids.slice(0, -1), { outputAttentions: true });
    const { n_layer: NL, n_head: H } = model.config;
    const L = ids.length - 1;
    for (const s of steps) {
      assert.equal(s.attentions.length, NL);
      const q = s.position - 1; // the query that predicted this token
      for (let l = 0; l < NL; l++) {
        assert.deepEqual(s.attentions[l].shape, [H, q + 1]);
        for (let h = 0; h < H; h++) {
          const want = attentions[l].data.subarray((h * L + q) * L, (h * L + q) * L + q + 1);
          const got = s.attentions[l].data.subarray(h * (q + 1), (h + 1) * (q + 1));
          assert.ok(maxAbsErr(got, want) <= 1e-6, `layer ${l} head ${h} position ${q}`);
          const sum = got.reduce((a, b) => a + b, 0);
          assert.ok(Math.abs(sum - 1) < 1e-5);
        }
      }
    }
  });

  test('breaking out of a generation frees it; a newer generation supersedes a suspended one', async () => {
    const it = model.generate('In', { maxNewTokens: 10, temperature: 0 });
    await it.next();
    await it.return();
    const want = await collect('In the', { maxNewTokens: 6, temperature: 0 });
    // a dropped generator (never resumed, never returned) does not lock the model
    const dropped = model.generate('And God said', { maxNewTokens: 10, temperature: 0 });
    await dropped.next();
    const after = await collect('In the', { maxNewTokens: 6, temperature: 0 });
    assert.deepEqual(after.map((s) => s.token), want.map((s) => s.token), 'the new generation is right');
    assert.deepEqual(await dropped.next(), { done: true, value: undefined }, 'the superseded one is done');
    // two generators interleaved by hand: each new one supersedes the other
    const a = model.generate('In the', { maxNewTokens: 6, temperature: 0 });
    const a0 = await a.next();
    const b = model.generate('In the', { maxNewTokens: 6, temperature: 0 });
    const b0 = await b.next();
    assert.equal(a0.value.token, want[0].token);
    assert.equal(b0.value.token, want[0].token);
    assert.deepEqual(await a.next(), { done: true, value: undefined });
    const rest = [b0.value];
    for (let s = await b.next(); !s.done; s = await b.next()) rest.push(s.value);
    assert.deepEqual(rest.map((s) => s.token), want.map((s) => s.token), 'b ran to the end, unaffected by a');
    assert.deepEqual(await a.next(), { done: true, value: undefined });
    // heap: superseded generations freed their buffers (no growth over many dropped ones)
    for (let i = 0; i < 50; i++) await model.generate('In', { maxNewTokens: 4, outputAttentions: true }).next();
    const heap = model.memoryUsage().wasmHeap;
    for (let i = 0; i < 200; i++) await model.generate('In', { maxNewTokens: 4, outputAttentions: true }).next();
    assert.equal(model.memoryUsage().wasmHeap, heap);
    const again = await collect('In', { maxNewTokens: 2, temperature: 0 });
    assert.equal(again.length, 2);
  });

  test('prompts longer than the context are a clear Error', async () => {
    const P = model.config.n_positions;
    const long = 'x'.repeat(P + 1);
    await assert.rejects(model.forward(model.tokenizer.encode(long)), {
      name: 'RangeError',
      message: `model.forward: ids has ${P + 1} tokens, more than the model's context (n_positions = ${P})`,
    });
    await assert.rejects(collect('x'.repeat(P - 10), { maxNewTokens: 11 }), {
      message: `model.generate: the prompt (${P - 10} tokens) + maxNewTokens (11) = ${P + 1} exceed the context of n_positions = ${P}`,
    });
    await assert.rejects(model.forward([]), /model\.forward: ids is empty/);
    await assert.rejects(model.forward([1, 256]), /model\.forward: ids\[1\] = 256 is not a token id in \[0, 256\)/);
    await assert.rejects(model.forward([1.5]), /ids\[0\] = 1.5/);
    await assert.rejects(model.forward('abc'), /model\.forward: ids must be an array of token ids/);
    await assert.rejects(collect('', { maxNewTokens: 1 }), /model\.generate: prompt is empty/);
    await assert.rejects(collect([1, 999], { maxNewTokens: 1 }), /model\.generate: prompt\[1\] = 999 is not a token id/);
    await assert.rejects(collect('a', { maxNewTokens: 0 }), /options\.maxNewTokens must be an integer in \[1, 256\], got 0/);
    await assert.rejects(collect('a', { temperature: -1 }), /options\.temperature must be a finite number >= 0/);
    await assert.rejects(collect('a', { topk: 3 }), /unknown option 'topk'/);
    await assert.rejects(model.forward([1], { outputAttention: true }), /unknown option 'outputAttention'/);
  });

  test('byte-level tokenizer round-trips UTF-8', () => {
    const s = 'café — 日本 🙂';
    const ids = model.tokenizer.encode(s);
    assert.deepEqual(ids, [...Buffer.from(s, 'utf8')]);
    assert.equal(model.tokenizer.decode(ids), s);
    assert.equal(model.tokenizer.kind, 'bytes');
  });
});
