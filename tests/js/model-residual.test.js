// The residual stream of the decoders (web/lib/model/residual.ts over src/model/residual.*):
// hidden states, named activations, patches and steering, against a float64 PyTorch forward
// whose hooks follow their definitions (tools/model/make_residual_reference.py ->
// tests/data/residual/), on GPT-2, Qwen2 (GQA, q/k/v biases, a windowed layer), a Llama with an
// output-projection bias, and Gemma 3 (its norms around attention and MLP, soft-capping).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';

import { ROOT, api, maxAbsErr } from './model-helpers.js';

const qkv = await api();
after(() => qkv.dispose());

const DATA = path.join(ROOT, 'tests', 'data', 'residual');
const manifest = JSON.parse(readFileSync(path.join(DATA, 'residual.json'), 'utf8'));
const SITES = ['hook_resid_pre', 'hook_attn_out', 'hook_resid_mid', 'hook_mlp_out', 'hook_resid_post'];
const readF32 = (name, file) => {
  const b = readFileSync(path.join(DATA, name, file));
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};
/** |a - b| max, relative to the reference's scale (the models' logits reach 50). */
const relErr = (a, ref) => maxAbsErr(a, ref) / Math.max(1, ...Array.from(ref, Math.abs));
const TOL = 2e-5;

for (const [name, e] of Object.entries(manifest)) {
  const T = e.ids.length;
  const per = T * e.d;
  describe(`${name}: the residual stream against the float64 PyTorch reference`, () => {
    test('hidden states, the five sites and ln_final.hook_scale; the logits unchanged bit for bit', async () => {
      const model = await qkv.loadModel(path.join(ROOT, e.dir));
      try {
        const plain = await model.forward(e.ids);
        const out = await model.forward(e.ids, { outputHiddenStates: true, outputActivations: true });
        assert.deepEqual(out.logits.data, plain.logits.data, 'the records leave the logits as they were');
        assert.ok(relErr(out.logits.data, readF32(name, 'logits.bin')) <= TOL, 'logits');
        const hidden = readF32(name, 'hidden.bin');
        assert.equal(out.hiddenStates.length, e.layers + 1);
        out.hiddenStates.forEach((h, l) => {
          assert.deepEqual(h.shape, [1, T, e.d]);
          const err = relErr(h.data, hidden.subarray(l * per, (l + 1) * per));
          assert.ok(err <= TOL, `hiddenStates[${l}]: ${err}`);
        });
        assert.equal(Object.keys(out.activations).length, 5 * e.layers + 1);
        for (const s of SITES) {
          const ref = readF32(name, `${s}.bin`);
          for (let l = 0; l < e.layers; l++) {
            const t = out.activations[`blocks.${l}.${s}`];
            assert.deepEqual(t.shape, [1, T, e.d]);
            const err = relErr(t.data, ref.subarray(l * per, (l + 1) * per));
            assert.ok(err <= TOL, `blocks.${l}.${s}: ${err}`);
          }
        }
        const scale = out.activations['ln_final.hook_scale'];
        assert.deepEqual(scale.shape, [1, T, 1]);
        assert.ok(relErr(scale.data, readF32(name, 'final_scale.bin')) <= TOL, 'ln_final.hook_scale');
        // identities: resid_post[l] = resid_pre[l + 1]; hidden[l] = resid_pre[l] (no steering)
        for (let l = 0; l + 1 < e.layers; l++) {
          assert.deepEqual(out.activations[`blocks.${l}.hook_resid_post`].data, out.activations[`blocks.${l + 1}.hook_resid_pre`].data);
          assert.deepEqual(out.hiddenStates[l + 1].data, out.activations[`blocks.${l + 1}.hook_resid_pre`].data);
        }
        // logits 'last': the hidden states still cover every row; the last row's logits as before
        const last = await model.forward(e.ids, { outputHiddenStates: true, logits: 'last' });
        assert.deepEqual(last.hiddenStates[e.layers].data, out.hiddenStates[e.layers].data);
        assert.deepEqual(last.logits.data, (await model.forward(e.ids, { logits: 'last' })).logits.data);
        // a pattern picks names; the chunked pass (KV cache, 3 tokens a call) gives the same rows
        const some = await model.forward(e.ids, { outputActivations: ['blocks.*.hook_mlp_out', 'ln_final.hook_scale'], outputHiddenStates: true, chunkSize: 3 });
        assert.deepEqual(Object.keys(some.activations), [...Array.from({ length: e.layers }, (_, l) => `blocks.${l}.hook_mlp_out`), 'ln_final.hook_scale']);
        for (const [k, t] of Object.entries(some.activations)) assert.ok(maxAbsErr(t.data, out.activations[k].data) <= 1e-4, `chunked ${k}`);
        some.hiddenStates.forEach((h, l) => assert.ok(maxAbsErr(h.data, out.hiddenStates[l].data) <= 1e-4, `chunked hiddenStates[${l}]`));
      } finally {
        model.dispose();
      }
    });

    test('patchActivations: the reference case; the run\'s own activations give the logits bit for bit', async () => {
      const model = await qkv.loadModel(path.join(ROOT, e.dir));
      try {
        const out = await model.forward(e.ids, { patchActivations: e.patch, outputActivations: ['blocks.*.hook_resid_post'] });
        assert.ok(relErr(out.logits.data, readF32(name, 'patched_logits.bin')) <= TOL, 'patched logits');
        const post = readF32(name, 'patched_resid_post.bin');
        for (let l = 0; l < e.layers; l++) {
          assert.ok(relErr(out.activations[`blocks.${l}.hook_resid_post`].data, post.subarray(l * per, (l + 1) * per)) <= TOL, `resid_post[${l}]`);
        }
        const plain = await model.forward(e.ids, { outputActivations: true });
        assert.ok(maxAbsErr(out.logits.data, plain.logits.data) > 1e-3, 'the patch moves the logits');
        const own = SITES.map((s) => ({ name: `blocks.${e.layers - 1}.${s}`, values: plain.activations[`blocks.${e.layers - 1}.${s}`] }));
        const same = await model.forward(e.ids, { patchActivations: own });
        assert.deepEqual(same.logits.data, plain.logits.data, 'own activations: bit for bit');
        const chunked = await model.forward(e.ids, { patchActivations: e.patch, chunkSize: 4 });
        assert.ok(maxAbsErr(chunked.logits.data, out.logits.data) <= 1e-4, 'chunked patch');
      } finally {
        model.dispose();
      }
    });

    test('steer on forward and generate; steeringVector', async () => {
      const model = await qkv.loadModel(path.join(ROOT, e.dir));
      try {
        const out = await model.forward(e.ids, { steer: e.steer });
        assert.ok(relErr(out.logits.data, readF32(name, 'steered_logits.bin')) <= TOL, 'steered logits');
        // generate steers every position: the first token is the steered forward's argmax
        const every = [{ layer: e.steer[0].layer, vector: e.steer[0].vector, scale: 4 }];
        const f = await model.forward(e.ids, { steer: every, logits: 'last' });
        let best = 0;
        for (let v = 1; v < e.vocab; v++) if (f.logits.data[v] > f.logits.data[best]) best = v;
        const steps = [];
        for await (const s of model.generate(e.ids, { maxNewTokens: 2, temperature: 0, steer: every })) steps.push(s.token);
        assert.equal(steps[0], best);
        const second = await model.forward([...e.ids, steps[0]], { steer: every, logits: 'last' });
        let best2 = 0;
        for (let v = 1; v < e.vocab; v++) if (second.logits.data[v] > second.logits.data[best2]) best2 = v;
        assert.equal(steps[1], best2, 'the generated position is steered too');
        const sv = await qkv.steeringVector(model, e.ids, e.steering_b, { layer: 1 });
        assert.ok(sv instanceof Float32Array && sv.length === e.d);
        assert.ok(relErr(sv, readF32(name, 'steering_vector.bin')) <= TOL, 'steeringVector');
      } finally {
        model.dispose();
      }
    });
  });
}

describe('the residual options: every bad argument is an Error naming the function, the option and the shape', () => {
  const e = manifest.gpt2;
  const cases = [
    [{ outputActivations: ['blocks.7.hook_resid_pre'] }, /model\.forward: options\.outputActivations names 'blocks\.7\.hook_resid_pre', which matches no activation/],
    [{ outputActivations: 'all' }, /model\.forward: options\.outputActivations must be true or an array of names/],
    [{ patchActivations: [{ name: 'blocks.0.hook_q', values: [] }] }, /options\.patchActivations\[0\]\.name = "blocks\.0\.hook_q" is not a site/],
    [{ patchActivations: [{ name: 'blocks.0.hook_attn_out', positions: [1], values: new Float32Array(31) }] }, /patchActivations\[0\]\.values has 31 values, need 1 positions x 32 \(d_model\) = 32 values, or a Tensor \[1, 10, 32\]/],
    [{ patchActivations: [{ name: 'blocks.0.hook_attn_out', positions: [10], values: new Float32Array(32) }] }, /patchActivations\[0\]\.positions\[0\] = 10 is not a position in \[0, 10\)/],
    [{ patchActivations: [{ name: 'blocks.0.hook_attn_out', values: new Float32Array(320).fill(NaN) }] }, /values\[0\] = NaN is not a finite number/],
    [{ steer: [{ layer: 2, vector: new Float32Array(32) }] }, /options\.steer\[0\]\.layer = 2 is not a layer in \[0, 2\)/],
    [{ steer: [{ layer: 0, vector: new Float32Array(8) }] }, /options\.steer\[0\]\.vector has 8 values, need d_model = 32/],
    [{ steer: [{ layer: 0, vector: new Float32Array(32), scale: 'x' }] }, /options\.steer\[0\]\.scale must be a finite number/],
    [{ steer: [{ layer: 0, vector: new Float32Array(32), where: 1 }] }, /options\.steer\[0\] has unknown key 'where'/],
  ];
  for (const [options, re] of cases) {
    test(JSON.stringify(options).slice(0, 90), async () => {
      const model = await qkv.loadModel(path.join(ROOT, e.dir));
      try {
        await assert.rejects(model.forward(e.ids, options), re);
      } finally {
        model.dispose();
      }
    });
  }
  test('generate: steer positions are not taken; steeringVector: layer and ids', async () => {
    const model = await qkv.loadModel(path.join(ROOT, e.dir));
    try {
      const gen = model.generate(e.ids, { maxNewTokens: 1, steer: [{ layer: 0, vector: new Float32Array(32), positions: [0] }] });
      await assert.rejects(gen.next(), /model\.generate: options\.steer\[0\]\.positions is not taken here/);
      await assert.rejects(qkv.steeringVector(model, e.ids, e.ids, { layer: 5 }), /steeringVector: options\.layer = 5 is not a layer in \[0, 2\)/);
      await assert.rejects(qkv.steeringVector(model, e.ids, [], { layer: 0 }), /steeringVector: idsB: .*empty/);
    } finally {
      model.dispose();
    }
  });
});
