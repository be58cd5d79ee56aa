// The measures over the residual stream (web/lib/interpret/lens.ts, attribution.ts, patching.ts
// over src/model/readout.*, patching.*) against the float64 PyTorch reference of
// tools/model/make_residual_reference.py (tests/data/residual/), with their identities: the
// lens's last layer is the model's own distribution, the attribution's parts sum to the
// forward's logit, a sweep's cells where the patch carries the whole difference are 1 and where
// it carries none 0. Progress, cancel and every bad argument.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';

import { ROOT, api, maxAbsErr } from './model-helpers.js';

const qkv = await api();
after(() => qkv.dispose());

const DATA = path.join(ROOT, 'tests', 'data', 'residual');
const manifest = JSON.parse(readFileSync(path.join(DATA, 'residual.json'), 'utf8'));
const readF32 = (name, file) => {
  const b = readFileSync(path.join(DATA, name, file));
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};
const OVER = { heads: (e) => [e.layers, 4], headPositions: (e) => [e.layers, 4, e.ids.length], residPre: (e) => [e.layers, e.ids.length], attnOut: (e) => [e.layers, e.ids.length], mlpOut: (e) => [e.layers, e.ids.length] };

/** log-softmax of z (float64). */
function logSoftmax(z) {
  let max = -Infinity;
  for (const v of z) max = Math.max(max, v);
  let s = 0;
  for (const v of z) s += Math.exp(v - max);
  const lse = max + Math.log(s);
  return Float64Array.from(z, (v) => v - lse);
}

for (const [name, e] of Object.entries(manifest)) {
  const T = e.ids.length;
  const V = e.vocab;
  describe(`${name}: the measures against the float64 PyTorch reference`, () => {
    test('logitLens: every cell\'s top tokens, probabilities, target and KL; the last layer is the model\'s own', async () => {
      const model = await qkv.loadModel(path.join(ROOT, e.dir));
      try {
        const target = e.ids.map((_, t) => e.ids[(t + 1) % T]);
        const steps = [];
        const lens = await qkv.logitLens(model, e.ids, { topK: 3, target, onProgress: (d, n) => steps.push([d, n]) });
        assert.equal(lens.numLayers, e.layers);
        assert.equal(lens.positions, T);
        assert.equal(lens.layers.length, e.layers + 1);
        assert.deepEqual(steps[0], [0, steps.at(-1)[1]]);
        assert.equal(steps.at(-1)[0], steps.at(-1)[1]);
        const ref = readF32(name, 'lens.bin');
        const logits = (await model.forward(e.ids)).logits.data;
        let worst = 0;
        for (let l = 0; l <= e.layers; l++) {
          for (let t = 0; t < T; t++) {
            const lp = logSoftmax(ref.subarray((l * T + t) * V, (l * T + t + 1) * V));
            const fp = logSoftmax(ref.subarray((e.layers * T + t) * V, (e.layers * T + t + 1) * V));
            const cell = lens.layers[l][t];
            const order = Array.from(lp.keys()).sort((a, b) => lp[b] - lp[a] || a - b);
            // the top ids, where the reference's ranks are not within float32 rounding of a tie
            cell.top.forEach((tk, i) => {
              if (Math.abs(lp[order[i]] - lp[order[i + 1]]) > 1e-4 && (i === 0 || Math.abs(lp[order[i - 1]] - lp[order[i]]) > 1e-4)) assert.equal(tk.id, order[i], `${l},${t} top[${i}]`);
              worst = Math.max(worst, Math.abs(tk.p - Math.exp(lp[tk.id])));
            });
            worst = Math.max(worst, Math.abs(cell.targetP - Math.exp(lp[target[t]])));
            const rank = order.indexOf(target[t]);
            if (Math.abs(lp[order[rank]] - lp[order[Math.max(0, rank - 1)]]) > 1e-4 || rank === 0) assert.equal(cell.targetRank, rank, `${l},${t} targetRank`);
            let kl = 0;
            for (let v = 0; v < V; v++) kl += Math.exp(fp[v]) * (fp[v] - lp[v]);
            worst = Math.max(worst, Math.abs(cell.kl - kl));
            if (l === e.layers) {
              // the last layer: the forward's own distribution, KL 0
              const own = logSoftmax(logits.subarray(t * V, (t + 1) * V));
              assert.equal(cell.kl, 0);
              cell.top.forEach((tk) => assert.ok(Math.abs(tk.p - Math.exp(own[tk.id])) <= 1e-6, 'last layer = the logits'));
            }
          }
        }
        assert.ok(worst <= 5e-5, `probabilities and KL: max abs err ${worst}`);
      } finally {
        model.dispose();
      }
    });

    test('logitAttribution: the parts against the reference, summing to the forward\'s logit', async () => {
      const model = await qkv.loadModel(path.join(ROOT, e.dir));
      try {
        const logits = (await model.forward(e.ids)).logits.data;
        for (const a of e.attribution) {
          const r = await qkv.logitAttribution(model, e.ids, { position: a.position, tokens: a.tokens });
          assert.deepEqual(r.parts.map((p) => p.name), a.names);
          const scale = Math.max(1, ...a.values.map(Math.abs));
          assert.ok(maxAbsErr(r.parts.map((p) => p.value), a.values) <= 2e-5 * scale, 'parts');
          const sum = r.parts.reduce((s, p) => s + p.value, 0);
          // the parts sum to the total within float32 rounding of the parts' sizes
          const mag = r.parts.reduce((s, p) => s + Math.abs(p.value), 0);
          assert.ok(Math.abs(sum - r.total) <= 1e-6 * mag + 1e-6, `sum ${sum} vs total ${r.total}`);
          assert.ok(Math.abs(r.total - a.total) <= 2e-5 * Math.max(1, Math.abs(a.total)), 'total against the reference');
          if (!model.config.final_logit_softcapping) {
            const row = logits.subarray(a.position * V, (a.position + 1) * V);
            const forward = a.tokens.length === 2 ? row[a.tokens[0]] - row[a.tokens[1]] : row[a.tokens[0]];
            assert.ok(Math.abs(r.total - forward) <= 1e-6 * Math.max(1, Math.abs(forward)), 'total = the forward\'s logit');
          }
        }
      } finally {
        model.dispose();
      }
    });

    test('activationPatching: every sweep against brute force; the identities', async () => {
      const model = await qkv.loadModel(path.join(ROOT, e.dir));
      try {
        const s = e.sweep;
        for (const over of Object.keys(OVER)) {
          const r = await qkv.activationPatching(model, { clean: s.clean, corrupted: s.corrupted, answer: s.answer, over });
          assert.equal(r.over, over);
          assert.deepEqual(r.shape, OVER[over](e).map((n, i) => (i === 1 && (over === 'heads' || over === 'headPositions') ? model.dims.heads : n)));
          const err = maxAbsErr(r.values, readF32(name, `sweep_${over}.bin`));
          assert.ok(err <= 1e-4, `${over}: max abs err ${err}`);
          assert.ok(Math.abs(r.cleanMetric - s.clean_metric) <= 2e-5 * Math.max(1, Math.abs(s.clean_metric)));
          if (over === 'residPre') {
            // the runs differ at position 3 only: resid_pre of block 0 there carries the whole
            // difference (1), elsewhere none (0)
            for (let t = 0; t < T; t++) assert.ok(Math.abs(r.values[t] - (t === 3 ? 1 : 0)) <= 1e-4, `residPre[0, ${t}] = ${r.values[t]}`);
          }
        }
      } finally {
        model.dispose();
      }
    });
  });
}

describe('measures: progress, cancel and bad arguments', () => {
  const e = manifest.gpt2;
  const s = e.sweep;
  test('activationPatching reports progress and stops on abort', async () => {
    const model = await qkv.loadModel(path.join(ROOT, e.dir));
    try {
      const steps = [];
      await qkv.activationPatching(model, { clean: s.clean, corrupted: s.corrupted, answer: s.answer, over: 'headPositions', onProgress: (d, n) => steps.push([d, n]) });
      assert.deepEqual(steps[0], [0, 80]);
      assert.deepEqual(steps.at(-1), [80, 80]);
      assert.ok(steps.length > 3, 'several calls');
      const ac = new AbortController();
      const p = qkv.activationPatching(model, { clean: s.clean, corrupted: s.corrupted, answer: s.answer, over: 'headPositions', signal: ac.signal, onProgress: (d) => { if (d > 0) ac.abort(); } });
      await assert.rejects(p, { name: 'AbortError' });
      const again = await qkv.activationPatching(model, { clean: s.clean, corrupted: s.corrupted, answer: s.answer, over: 'heads' });
      assert.equal(again.values.length, 8, 'the model is usable after an abort');
      const ac2 = new AbortController();
      const lens = qkv.logitLens(model, e.ids, { signal: ac2.signal, onProgress: (d) => { if (d > 0) ac2.abort(); } });
      await assert.rejects(lens, { name: 'AbortError' });
    } finally {
      model.dispose();
    }
  });

  test('bad arguments are Errors naming the function, the option and the shape', async () => {
    const model = await qkv.loadModel(path.join(ROOT, e.dir));
    try {
      const base = { clean: s.clean, corrupted: s.corrupted, answer: s.answer, over: 'heads' };
      await assert.rejects(qkv.activationPatching(model, { ...base, corrupted: s.corrupted.slice(1) }), /activationPatching: options\.clean has 10 tokens and options\.corrupted 9: they must have the same length/);
      await assert.rejects(qkv.activationPatching(model, { ...base, over: 'neurons' }), /activationPatching: options\.over must be one of 'heads'/);
      await assert.rejects(qkv.activationPatching(model, { ...base, answer: [1] }), /activationPatching: options\.answer must be \[correctId, wrongId\]/);
      await assert.rejects(qkv.activationPatching(model, { ...base, answer: [1, 256] }), /activationPatching: options\.answer\[1\] = 256 is not a token id in \[0, 256\)/);
      await assert.rejects(qkv.activationPatching(model, { ...base, corrupted: s.clean }), /activationPatching: the clean and corrupted runs give the same metric/);
      await assert.rejects(qkv.activationPatching({}, base), /activationPatching: model must be a loaded decoder/);
      await assert.rejects(qkv.logitAttribution(model, e.ids, { tokens: [1], position: 10 }), /logitAttribution: options\.position = 10 is not a position in \[0, 10\)/);
      await assert.rejects(qkv.logitAttribution(model, e.ids, { tokens: [1, 2, 3] }), /logitAttribution: options\.tokens must be \[id\] or \[idA, idB\]/);
      await assert.rejects(qkv.logitAttribution(model, e.ids, { tokens: [-1] }), /logitAttribution: options\.tokens\[0\] = -1 is not a token id in \[0, 256\)/);
      await assert.rejects(qkv.logitLens(model, e.ids, { topK: 0 }), /logitLens: options\.topK/);
      await assert.rejects(qkv.logitLens(model, e.ids, { target: [1, 2] }), /logitLens: options\.target must be a token id or 10 token ids/);
      await assert.rejects(qkv.logitLens(model, [], {}), /logitLens: ids is empty/);
      await assert.rejects(qkv.logitLens(42, e.ids), /logitLens: model must be a loaded decoder/);
    } finally {
      model.dispose();
    }
  });
});
