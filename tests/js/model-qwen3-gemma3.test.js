// Qwen3 and Gemma 3 through loadModel (LlamaModel over wasm/bindings_llama.cpp) against the
// float64 PyTorch forward of tools/model/make_qwen3_gemma3_reference.py (tests/data/llama/):
// logits, attentions, queries and keys after the q/k norms and the rotation, greedy KV-cache
// generation = the reference's full recompute, the KV-cache session = a full forward at every
// step, Gemma's local/global layers (windows, their own rotary base), the gemma3 layout
// (text_config, tensors under language_model.model.), converted weights, damaged configs.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';

import { ROOT, api, maxAbsErr } from './model-helpers.js';

const qkv = await api();
after(() => qkv.dispose());

const DATA = path.join(ROOT, 'tests', 'data', 'llama');
const MODELS = ['qwen3-tied', 'qwen3-window', 'gemma3-text', 'gemma3-mm'];
const ref = (name) => JSON.parse(readFileSync(path.join(DATA, `${name}-ref`, 'ref.json'), 'utf8'));
const f32 = (name, file) => {
  const b = readFileSync(path.join(DATA, `${name}-ref`, file));
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};
const configOf = (name) => JSON.parse(readFileSync(path.join(DATA, name, 'config.json'), 'utf8'));
const files = (name, config = configOf(name)) => ({
  config: JSON.stringify(config),
  weights: readFileSync(path.join(DATA, name, 'model.safetensors')),
});

for (const name of MODELS) {
  test(`${name}: forward matches the float64 PyTorch reference`, async () => {
    const r = ref(name);
    const model = await qkv.loadModel(path.join(DATA, name));
    try {
      assert.ok(model instanceof qkv.LlamaModel);
      assert.equal(model.architecture, model.config.model_type);
      const { logits, attentions, queriesKeys } = await model.forward(r.ids, { outputAttentions: true, outputQueriesKeys: true });
      const [NL, H, L] = r.attentions_shape;
      const [, Hkv, , D] = r.keys_shape;
      assert.deepEqual([model.dims.layers, model.dims.heads, model.dims.kvHeads, model.dims.headDim], [NL, H, Hkv, D]);
      assert.deepEqual(logits.shape, [1, L, r.logits_shape[1]]);
      const torch = r.torch_f32_error;
      const err = maxAbsErr(logits.data, f32(name, 'logits.bin'));
      assert.ok(err <= Math.max(1e-4, torch.logits), `logits error ${err}`);
      const refAtt = f32(name, 'attentions.bin');
      const refQ = f32(name, 'queries.bin');
      const refK = f32(name, 'keys.bin');
      for (let l = 0; l < NL; l++) {
        assert.deepEqual(attentions[l].shape, [1, H, L, L]);
        const e = maxAbsErr(attentions[l].data, refAtt.subarray(l * H * L * L, (l + 1) * H * L * L));
        assert.ok(e <= Math.max(1e-5, torch.attentions), `layer ${l} attentions error ${e}`);
        assert.deepEqual(queriesKeys[l].keys.shape, [1, Hkv, L, D]);
        assert.ok(maxAbsErr(queriesKeys[l].queries.data, refQ.subarray(l * H * L * D, (l + 1) * H * L * D)) <= 1e-5);
        assert.ok(maxAbsErr(queriesKeys[l].keys.data, refK.subarray(l * Hkv * L * D, (l + 1) * Hkv * L * D)) <= 1e-5);
      }
      // the windows each layer ran with, as the reference resolved them from the config
      assert.deepEqual(model.slidingWindows, r.windows);
      // greedy generation through the KV cache = the float64 reference's full-recompute continuation
      const got = [];
      for await (const step of model.generate(r.greedy_prompt, { maxNewTokens: 8, temperature: 0 })) got.push(step.token);
      assert.deepEqual(got, r.greedy_ids.slice(r.greedy_prompt.length));
    } finally {
      model.dispose();
    }
  });
}

test('KV-cache generation equals a full recompute at every step (windows sliding past the cache)', async () => {
  for (const name of ['gemma3-text', 'gemma3-mm', 'qwen3-window']) {
    const r = ref(name);
    const model = await qkv.loadModel(files(name));
    try {
      // a 10-token prompt and 10 steps: past every sliding window (4, 5) twice over
      const prompt = r.ids.slice(0, 10);
      const seq = [...prompt];
      for await (const step of model.generate(prompt, { maxNewTokens: 10, temperature: 0, outputAttentions: true })) {
        // the full forward over everything so far: its last row's argmax is the token, and its
        // last query's attention (every layer) the step's
        const { logits, attentions } = await model.forward(seq, { outputAttentions: true });
        const V = logits.shape[2];
        const n = seq.length;
        const last = logits.data.subarray((n - 1) * V, n * V);
        assert.equal(step.token, last.indexOf(Math.max(...last)), `${name} step ${step.index}`);
        for (let l = 0; l < attentions.length; l++) {
          const H = attentions[l].shape[1];
          for (let h = 0; h < H; h++) {
            const row = attentions[l].data.subarray(((h * n) + n - 1) * n, ((h * n) + n) * n);
            const got = step.attentions[l].data.subarray(h * n, (h + 1) * n);
            assert.ok(maxAbsErr(got, row) <= 1e-5, `${name} step ${step.index} layer ${l} head ${h}`);
          }
        }
        seq.push(step.token);
      }
      assert.equal(seq.length, 20);
      // chunked forward (through the session, chunks of 3) = the single full call
      const full = await model.forward(seq, { outputAttentions: true });
      const chunked = await model.forward(seq, { outputAttentions: true, chunkSize: 3 });
      assert.ok(maxAbsErr(chunked.logits.data, full.logits.data) <= 1e-5, name);
      for (let l = 0; l < full.attentions.length; l++) {
        assert.ok(maxAbsErr(chunked.attentions[l].data, full.attentions[l].data) <= 1e-6, `${name} layer ${l}`);
      }
    } finally {
      model.dispose();
    }
  }
});

test('Gemma 3: local layers attend within the window, the global layer to every earlier token', async () => {
  const r = ref('gemma3-text');
  const model = await qkv.loadModel(files('gemma3-text'));
  try {
    assert.deepEqual(model.slidingWindows, [4, 4, 0]);
    const L = r.ids.length;
    const { attentions } = await model.forward(r.ids, { outputAttentions: true });
    for (let l = 0; l < 3; l++) {
      const w = model.slidingWindows[l];
      let outside = 0;
      for (let h = 0; h < 4; h++) {
        for (let i = 0; i < L; i++) {
          for (let j = 0; j < L; j++) {
            const p = attentions[l].data[(h * L + i) * L + j];
            if (j > i || (w && j <= i - w)) outside += p === 0 ? 0 : 1;
            else assert.ok(p > 0, `layer ${l} head ${h} (${i}, ${j}) visible but 0`);
          }
        }
      }
      assert.equal(outside, 0, `layer ${l}: weight outside the window`);
    }
  } finally {
    model.dispose();
  }
});

test('each Gemma 3 / Qwen3 part changes the output (so the reference comparison covers it)', async () => {
  // a config edit the C++ honours moves the logits away from the reference: each is read
  const base = configOf('gemma3-text');
  const want = f32('gemma3-text', 'logits.bin');
  const r = ref('gemma3-text');
  const edits = {
    'no soft-capping': { final_logit_softcapping: null },
    'attention scale 1/sqrt(head_dim)': { query_pre_attn_scalar: 8 },
    'global rotary base on local layers': { rope_local_base_freq: 1000000.0 },
    'all layers full': { layer_types: ['full_attention', 'full_attention', 'full_attention'] },
  };
  for (const [what, edit] of Object.entries(edits)) {
    const model = await qkv.loadModel(files('gemma3-text', { ...base, ...edit }));
    try {
      const { logits } = await model.forward(r.ids);
      assert.ok(maxAbsErr(logits.data, want) > 1e-3, `${what}: the logits did not change`);
    } finally {
      model.dispose();
    }
  }
});

test('converted weights (f32, f16, int8, int4) run the same path', async () => {
  for (const name of MODELS) {
    const r = ref(name);
    const want = f32(name, 'logits.bin');
    const scale = want.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
    // 'f32' on the 16-bit Gemma checkpoints (BF16, F16) is the same weights, but Gemma's embedding scale follows the
    // held dtype (embed_scale.to(weight.dtype)): sqrt(32) in float32, not 5.65625 (its bfloat16 and half roundings), a
    // relative 1.1e-4 on the embeddings (and the reason 'auto' matching the reference checks the rounding)
    const f32tol = name.startsWith('gemma3') ? 1e-3 : 1e-5;
    // int4: measured 0.35-0.39 (Qwen3) and 0.53-0.60 (Gemma 3) on 2026-12-02, 15x int8's 0.023-0.040, as a
    // block's 1/16 against 1/254 of its largest weight predicts
    for (const [weights, dtype, tol] of [['f32', 'F32', f32tol], ['f16', 'F16', 3e-3], ['int8', 'Q8', 6e-2], ['int4', 'Q4', 0.9]]) {
      const model = await qkv.loadModel(files(name), { weights });
      try {
        assert.equal(model.memoryUsage().dtype, dtype);
        const { logits } = await model.forward(r.ids);
        const e = maxAbsErr(logits.data, want) / scale;
        assert.ok(e <= tol, `${name} ${weights}: relative error ${e}`);
      } finally {
        model.dispose();
      }
    }
  }
});

test('gemma3: text_config defaults, the tensors under model.language_model. too', async () => {
  // transformers >= 4.52 saves Gemma3ForConditionalGeneration as model.language_model.*: the same model
  const r = ref('gemma3-mm');
  const { weights } = files('gemma3-mm');
  const len = Number(Buffer.from(weights.subarray(0, 8)).readBigUInt64LE());
  const header = JSON.parse(Buffer.from(weights.subarray(8, 8 + len)).toString('utf8'));
  const renamed = Object.fromEntries(Object.entries(header).map(([k, v]) => [k.replace(/^language_model\.model\./, 'model.language_model.'), v]));
  let h = Buffer.from(JSON.stringify(renamed));
  h = Buffer.concat([h, Buffer.alloc((8 - (h.length % 8)) % 8, 0x20)]);
  const size = Buffer.alloc(8);
  size.writeBigUInt64LE(BigInt(h.length));
  const moved = Buffer.concat([size, h, weights.subarray(8 + len)]);
  const model = await qkv.loadModel({ config: JSON.stringify(configOf('gemma3-mm')), weights: moved });
  try {
    const { logits } = await model.forward(r.ids);
    assert.ok(maxAbsErr(logits.data, f32('gemma3-mm', 'logits.bin')) <= 1e-4);
  } finally {
    model.dispose();
  }
});

test('damaged or unsupported Qwen3 / Gemma 3 configs are clear Errors', async () => {
  const gemma = configOf('gemma3-text');
  const mm = configOf('gemma3-mm');
  const load = (name, config) => qkv.loadModel(files(name, config));
  await assert.rejects(load('gemma3-text', { ...gemma, attn_logit_softcapping: 50.0 }), /"attn_logit_softcapping" is not supported/);
  await assert.rejects(load('gemma3-text', { ...gemma, hidden_activation: 'gelu' }), /"hidden_activation" must be "gelu_pytorch_tanh"/);
  await assert.rejects(load('gemma3-text', { ...gemma, layer_types: ['sliding_attention'] }), /"layer_types" must be an array of num_hidden_layers \(3\)/);
  await assert.rejects(load('gemma3-text', { ...gemma, layer_types: ['sliding_attention', 'local', 'full_attention'] }), /layer_types\[1\] must be/);
  await assert.rejects(load('gemma3-text', { ...gemma, query_pre_attn_scalar: 0 }), /"query_pre_attn_scalar" must be a positive number/);
  await assert.rejects(load('gemma3-text', { ...gemma, rope_scaling: { rope_type: 'yarn', factor: 2 } }), /rope_scaling type "yarn" is not supported/);
  await assert.rejects(load('gemma3-mm', { ...mm, text_config: { ...mm.text_config, model_type: 'llama' } }), /text_config\.model_type must be "gemma3_text"/);
  // a tensor the config needs is missing: the gemma3 checkpoint read as gemma3_text (tensors under model.)
  await assert.rejects(load('gemma3-mm', { ...mm.text_config }), /missing tensor .*model\.embed_tokens\.weight/);
  // Qwen3: q_norm is required
  const qwen = configOf('qwen3-tied');
  await assert.rejects(load('qwen3-tied', { ...qwen, head_dim: 8 }), /self_attn\.q_proj\.weight/);
});

test('head interventions reach Gemma 3 and Qwen3 layers (headMask: ones = plain, a zeroed head changes only later layers)', async () => {
  for (const name of ['gemma3-text', 'qwen3-tied']) {
    const r = ref(name);
    const model = await qkv.loadModel(files(name));
    try {
      const NL = model.dims.layers, H = model.dims.heads;
      const plain = await model.forward(r.ids, { outputAttentions: true });
      const ones = await model.forward(r.ids, { outputAttentions: true, headMask: Array.from({ length: NL }, () => new Array(H).fill(1)) });
      assert.ok(maxAbsErr(ones.logits.data, plain.logits.data) === 0, `${name}: all-ones mask`);
      const mask = Array.from({ length: NL }, (_, l) => Array.from({ length: H }, (_, h) => (l === 0 && h === 1 ? 0 : 1)));
      const cut = await model.forward(r.ids, { outputAttentions: true, headMask: mask });
      assert.ok(maxAbsErr(cut.logits.data, plain.logits.data) > 1e-3, `${name}: zeroing layer 0 head 1 changes the logits`);
      // layer 0's other heads are untouched; later layers see a different residual stream
      const L = r.ids.length;
      assert.equal(maxAbsErr(cut.attentions[0].data.subarray(0, L * L), plain.attentions[0].data.subarray(0, L * L)), 0);
      assert.ok(maxAbsErr(cut.attentions[1].data, plain.attentions[1].data) > 1e-4, `${name}: layer 1 changes`);
    } finally {
      model.dispose();
    }
  }
});
