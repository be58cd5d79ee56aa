// WebGPU limits: a call beyond the device's maxStorageBufferBindingSize / maxBufferSize /
// maxComputeWorkgroupsPerDimension is split into pieces (and gives the same result), or,
// when even one piece cannot fit, rejected with a clear Error (and 'auto' runs it on wasm);
// never a driver validation error turned into garbage output.
import test from 'node:test';
import assert from 'node:assert/strict';
import { openSession, pageProblems } from './webgpu/session.js';

const HELPERS = '/tests/browser/webgpu/page-helpers.js';

test('WebGPU limits', async (t) => {
  const s = await openSession();
  const ev = (fn, arg) => s.page.evaluate(fn, arg);
  try {
    const info = await ev(async (HELPERS) => {
      const h = await import(HELPERS);
      return h.gpu.webgpuInfo();
    }, HELPERS);
    t.diagnostic(`adapter ${JSON.stringify(info.adapter)} limits ${JSON.stringify(info.limits)} timestamp-query ${info.timestampQuery}`);

    await t.test('the planner splits what exceeds the real device limits and rejects what cannot fit', async () => {
      const r = await ev(async (HELPERS) => {
        const h = await import(HELPERS);
        const { limits } = await h.gpu.webgpuInfo();
        const shape = (s) => ({ B: 1, H: 1, Hkv: 1, D: 64, Dv: 64, causal: false, window: 0, scale: 1, returnWeights: false, ...s });
        const out = {};
        // weights [1, 8, 20000, 20000] are 12.8 GB: split per head and per block of query rows
        const big = shape({ H: 8, Hkv: 8, Lq: 20000, Lk: 20000, returnWeights: true });
        const pieces = h.gpu.planPieces(big, limits);
        out.bigPieces = pieces.length;
        out.bigCover = pieces.reduce((a, p) => a + p.nb * p.nh * p.nq, 0) === 8 * 20000;
        out.whole = h.gpu.planPieces(shape({ H: 8, Hkv: 8, Lq: 4096, Lk: 4096 }), limits).length;
        // one head's keys alone beyond the limit: nothing to split
        const cap = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
        try { h.gpu.planPieces(shape({ Lq: 1, Lk: Math.ceil(cap / 4 / 64) + 1 }), limits); out.tooBig = 'planned'; } catch (e) { out.tooBig = `${e.name}: ${e.message}`; }
        return out;
      }, HELPERS);
      t.diagnostic(JSON.stringify(r));
      assert.ok(r.bigPieces > 8 && r.bigCover);
      assert.equal(r.whole, 1);
      assert.match(r.tooBig, /^WebGPULimitError: scaledDotProductAttention: the request is too large for this WebGPU device.*key needs \d+ bytes/);
    });

    await t.test('calls over (lowered) limits are split and match wasm', async () => {
      const r = await ev(async (HELPERS) => {
        const h = await import(HELPERS);
        const { describe } = await import('/tests/browser/webgpu/cases.js');
        const out = [];
        const configs = [
          // [limits, sizes]: every one exceeds its limits as a whole, so it must be split
          [{ maxStorageBufferBindingSize: 64 * 1024, maxBufferSize: 96 * 1024 }, { B: 2, H: 4, Hkv: 2, Lq: 70, Lk: 90, D: 33, Dv: 20 }],
          [{ maxStorageBufferBindingSize: 64 * 1024 }, { B: 1, H: 3, Hkv: 1, Lq: 130, Lk: 61, D: 16, Dv: 48 }],
          [{ maxStorageBufferBindingSize: 16 * 1024 }, { B: 3, H: 2, Hkv: 2, Lq: 64, Lk: 64, D: 12, Dv: 12 }],
          [{ maxStorageBufferBindingSize: 16 * 1024 }, { B: 1, H: 2, Hkv: 1, Lq: 200, Lk: 100, D: 24, Dv: 5 }],
          [{ maxComputeWorkgroupsPerDimension: 8 }, { B: 3, H: 10, Hkv: 5, Lq: 40, Lk: 100, D: 16, Dv: 16 }],
          [{ maxComputeWorkgroupsPerDimension: 8 }, { B: 1, H: 2, Hkv: 1, Lq: 300, Lk: 120, D: 16, Dv: 16 }],
        ];
        for (const [li, [lim, sizes]] of configs.entries()) {
          for (let n = 0; n < 4; n++) {
            const c = h.sizedCase(100 + 10 * li + n, { ...sizes, returnWeights: n % 2 === 0, causal: n === 1, window: n === 3 ? 17 : 0 });
            if (n === 1) {
              const dims = [c.B, 1, c.Lq, c.Lk], len = dims.reduce((a, b) => a * b);
              c.boolMask = { data: Uint8Array.from({ length: len }, (_, i) => ((i * 7) % 5 !== 0 ? 1 : 0)), dims };
            }
            if (n >= 2) {
              const dims = n === 2 ? [1, c.H, c.Lq, c.Lk] : [c.B, 1, 1, c.Lk], len = dims.reduce((a, b) => a * b);
              c.floatMask = { data: Float32Array.from({ length: len }, (_, i) => (i % 11 === 0 ? -Infinity : ((i * 13) % 7) - 3)), dims };
            }
            h.gpu.setWebGPULimitsForTesting(lim);
            const rec = { li, n, what: describe(c) };
            try {
              const [q, k, v, o] = h.apiArgs(c);
              const problem = { B: c.B, H: c.H, Hkv: c.Hkv, Lq: c.Lq, Lk: c.Lk, D: c.D, Dv: c.Dv, query: c.query, key: c.key, value: c.value,
                boolMask: c.boolMask, floatMask: c.floatMask, causal: c.causal, window: c.window, scale: c.scale, returnWeights: c.returnWeights };
              const direct = await h.gpu.webgpuAttention(problem);
              rec.pieces = direct.pieces;
              const g = await h.run(c, 'webgpu');
              h.gpu.setWebGPULimitsForTesting(null);
              const w = await h.run(c, 'wasm');
              Object.assign(rec, h.diff(g, w));
              rec.directOut = h.diff({ output: { data: direct.output } }, w).out;
            } catch (e) {
              rec.error = `${e.name}: ${e.message}`;
            }
            h.gpu.setWebGPULimitsForTesting(null);
            out.push(rec);
          }
        }
        return out;
      }, HELPERS);
      const bad = r.filter((x) => x.error || !(x.out <= 1e-4 && x.w <= 1e-4 && x.directOut <= 1e-4) || !(x.pieces > 1));
      t.diagnostic(`pieces per case: ${r.map((x) => x.pieces).join(' ')}`);
      assert.deepEqual(bad, []);
    });

    await t.test("a call that cannot fit: 'webgpu' rejects with a clear Error, 'auto' runs it on wasm", async () => {
      const r = await ev(async (HELPERS) => {
        const h = await import(HELPERS);
        const c = h.sizedCase(12, { B: 1, H: 2, Hkv: 1, Lq: 64, Lk: 300, D: 64, Dv: 64 });
        h.gpu.setWebGPULimitsForTesting({ maxBufferSize: 32 * 1024 });  // key of one head is 75 KiB
        const out = {};
        try { await h.run(c, 'webgpu'); out.webgpu = 'resolved'; } catch (e) { out.webgpu = `${e.name}: ${e.message}`; }
        h.setThreshold(0);
        h.allowSoftware(true);
        const a = await h.run(c, 'auto');
        out.auto = h.lastBackend();
        h.gpu.setWebGPULimitsForTesting(null);
        h.setThreshold(h.qkv.WEBGPU_THRESHOLD);
        h.allowSoftware(false);
        out.autoDiff = h.diff(a, await h.run(c, 'wasm')).out;
        return out;
      }, HELPERS);
      t.diagnostic(JSON.stringify(r));
      assert.match(r.webgpu, /^WebGPULimitError: scaledDotProductAttention: the request is too large for this WebGPU device/);
      assert.match(r.webgpu, /key needs 76800 bytes > 32768/);
      assert.equal(r.auto, 'wasm');
      assert.equal(r.autoDiff, 0);
    });
    assert.deepEqual(pageProblems(s.page), []);
  } finally {
    await s.close();
  }
});
