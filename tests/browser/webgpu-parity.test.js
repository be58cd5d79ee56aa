// WebGPU vs WASM parity: >= 200 seeded random cases through the public API
// (scaledDotProductAttention with backend 'webgpu' and with backend 'wasm'), covering every
// option (see tests/browser/webgpu/cases.js), odd sizes and L up to 2048; max abs difference
// <= 1e-4 on outputs and weights, and no NaN anywhere.
//   QKV_WEBGPU_SEED=n     another seed (default 1)
//   QKV_WEBGPU_CASES=n    short cases (default 210; QKV_WEBGPU_LONG_CASES=4 long ones, L 1024..2048, are added)
import test from 'node:test';
import assert from 'node:assert/strict';
import { openSession, pageProblems } from './webgpu/session.js';

const SEED = Number(process.env.QKV_WEBGPU_SEED ?? 1);
const SHORT = Number(process.env.QKV_WEBGPU_CASES ?? 210);
const LONG = Number(process.env.QKV_WEBGPU_LONG_CASES ?? 4);
const TOL = 1e-4;
const BATCH = 15;

// Runs cases [from, to) in the page; returns one record per case plus option coverage.
async function runCases(page, seed, from, to, long) {
  return page.evaluate(async ({ seed, from, to, long }) => {
    const qkv = await import(`${globalThis.QKV_DIST ?? '/dist'}/index.js`);
    const { makeCase, describe, maxAbsDiff } = await import('/tests/browser/webgpu/cases.js');
    const records = [];
    for (let n = from; n < to; n++) {
      const c = makeCase(seed, n, { long });
      const T = (data, shape) => new qkv.Tensor(data, shape);
      const q = T(c.query, [c.B, c.H, c.Lq, c.D]);
      const k = T(c.key, [c.B, c.Hkv, c.Lk, c.D]);
      const v = T(c.value, [c.B, c.Hkv, c.Lk, c.Dv]);
      const mask = c.boolMask ?? c.floatMask;
      const opts = {
        isCausal: c.causal, window: c.window, enableGqa: c.H !== c.Hkv, returnWeights: c.returnWeights,
        attnMask: mask ? T(mask.data, mask.dims) : undefined,
      };
      if (c.scaleGiven) opts.scale = c.scale;
      const rec = { n, what: describe(c), long };
      try {
        const w = await qkv.scaledDotProductAttention(q, k, v, { ...opts, backend: 'wasm' });
        const t0 = performance.now();
        const g = await qkv.scaledDotProductAttention(q, k, v, { ...opts, backend: 'webgpu' });
        rec.ms = performance.now() - t0;
        rec.out = maxAbsDiff(g.output.data, w.output.data);
        rec.shapeOk = JSON.stringify(g.output.shape) === JSON.stringify(w.output.shape);
        if (c.returnWeights) {
          rec.w = maxAbsDiff(g.weights.data, w.weights.data);
          let worst = 0;  // rows of returned weights sum to 1 or are all 0
          for (let r = 0; r < c.B * c.H * c.Lq; r++) {
            let s = 0;
            for (let j = 0; j < c.Lk; j++) s += g.weights.data[r * c.Lk + j];
            worst = Math.max(worst, Math.min(Math.abs(s - 1), Math.abs(s)));
          }
          rec.rowSum = worst;
        }
      } catch (e) {
        rec.error = String(e?.stack ?? e);
      }
      // coverage
      const f = c.floatMask?.data;
      rec.cov = {
        causal: c.causal, window: c.window > 0, bool: !!c.boolMask, float: !!c.floatMask,
        boolBroadcast: !!c.boolMask && c.boolMask.dims.some((d, i) => d === 1 && [c.B, c.H, c.Lq, c.Lk][i] > 1),
        floatBroadcast: !!c.floatMask && c.floatMask.dims.some((d, i) => d === 1 && [c.B, c.H, c.Lq, c.Lk][i] > 1),
        negInf: !!f && f.some((x) => x === -Infinity), posInf: !!f && f.some((x) => x === Infinity),
        gqa: c.H > c.Hkv, mqa: c.Hkv === 1 && c.H > 1, cross: c.Lq !== c.Lk, dvNeD: c.Dv !== c.D,
        dOdd: c.D % 4 !== 0, d256: c.D >= 256, dv300: c.Dv > 256, batch: c.B > 1, weights: c.returnWeights,
        scale: c.scaleGiven, L2048: Math.max(c.Lq, c.Lk) >= 2048, decode: c.Lq === 1,
      };
      records.push(rec);
    }
    return records;
  }, { seed, from, to, long });
}

test(`WebGPU matches WASM on ${SHORT + LONG} seeded random cases (seed ${SEED}, tol ${TOL})`, async (t) => {
  const s = await openSession();
  try {
    const records = [];
    for (let from = 0; from < SHORT; from += BATCH) {
      records.push(...await runCases(s.page, SEED, from, Math.min(SHORT, from + BATCH), false));
    }
    for (let n = 0; n < LONG; n++) records.push(...await runCases(s.page, SEED, n, n + 1, true));
    const bad = records.filter((r) => r.error || !r.shapeOk || !(r.out <= TOL) || (r.w !== undefined && !(r.w <= TOL)) ||
      (r.rowSum !== undefined && !(r.rowSum <= 1e-4)));
    const cov = {};
    for (const r of records) for (const [k, v] of Object.entries(r.cov)) cov[k] = (cov[k] ?? 0) + (v ? 1 : 0);
    const worstOut = Math.max(...records.map((r) => r.out ?? 0));
    const worstW = Math.max(...records.map((r) => r.w ?? 0));
    const gpuMs = records.reduce((a, r) => a + (r.ms ?? 0), 0);
    t.diagnostic(`${records.length} cases, worst |out| diff ${worstOut.toExponential(2)}, worst |weights| diff ${worstW.toExponential(2)}, WebGPU time ${(gpuMs / 1000).toFixed(1)} s`);
    t.diagnostic(`coverage (cases per option): ${JSON.stringify(cov)}`);
    for (const r of bad.slice(0, 10)) {
      t.diagnostic(`case ${r.long ? 'long ' : ''}${r.n}: ${r.error ?? `out ${r.out} weights ${r.w} rowSum ${r.rowSum}`} :: ${r.what}`);
    }
    assert.equal(bad.length, 0, `${bad.length} of ${records.length} cases differ (first: ${JSON.stringify(bad[0])})`);
    assert.ok(records.length >= 200);
    for (const [k, v] of Object.entries(cov)) assert.ok(v > 0, `no case covers ${k}`);
    assert.deepEqual(pageProblems(s.page), []);
  } finally {
    await s.close();
  }
});
