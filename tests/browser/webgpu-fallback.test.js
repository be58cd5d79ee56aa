// WebGPU fallbacks and dispatch: no navigator.gpu; requestAdapter() returning null; the
// device destroyed between calls and during a call (under 'webgpu' and under 'auto');
// 'auto' below and above the threshold; concurrent calls.
import test from 'node:test';
import assert from 'node:assert/strict';
import { openSession, pageProblems } from './webgpu/session.js';

const HELPERS = '/tests/browser/webgpu/page-helpers.js';

// Both "no WebGPU" situations must behave alike: 'auto' runs on wasm, 'webgpu' is a clear Error.
async function checkNoWebGPU(t, initScript, expectReason) {
  const s = await openSession({ initScript });
  try {
    const r = await s.page.evaluate(async (HELPERS) => {
      const h = await import(HELPERS);
      const c = h.sizedCase(3, { B: 1, H: 2, Hkv: 2, Lq: 40, Lk: 40, D: 16, Dv: 16 });
      const out = { available: await h.gpu.webgpuAvailable(), reason: await h.gpu.webgpuUnavailableReason() };
      h.setThreshold(0);  // 'auto' would pick WebGPU for anything if it were there
      h.allowSoftware(true);
      const a = await h.run(c, 'auto');
      out.autoBackend = h.lastBackend();
      const w = await h.run(c, 'wasm');
      out.autoDiff = h.diff(a, w).out;
      try { await h.run(c, 'webgpu'); out.webgpu = 'resolved'; } catch (e) { out.webgpu = `${e.name}: ${e.message}`; }
      return out;
    }, HELPERS);
    t.diagnostic(JSON.stringify(r));
    assert.equal(r.available, false);
    assert.match(r.reason, expectReason);
    assert.equal(r.autoBackend, 'wasm');
    assert.equal(r.autoDiff, 0);
    assert.match(r.webgpu, /^Error|WebGPUUnavailableError/);
    assert.match(r.webgpu, /scaledDotProductAttention: options\.backend 'webgpu': WebGPU is not available/);
    assert.match(r.webgpu, expectReason);
    assert.deepEqual(pageProblems(s.page), []);
  } finally {
    await s.close();
  }
}

test('navigator.gpu absent: auto runs on wasm, webgpu rejects clearly', (t) =>
  checkNoWebGPU(t, () => { delete Navigator.prototype.gpu; delete navigator.gpu; }, /navigator\.gpu is absent/));

test('requestAdapter() returns null: auto runs on wasm, webgpu rejects clearly', (t) =>
  checkNoWebGPU(t, () => { if (self.GPU) GPU.prototype.requestAdapter = async () => null; }, /requestAdapter\(\) returned null/));

test('device loss, auto threshold, concurrency', async (t) => {
  const s = await openSession();
  const ev = (fn, arg) => s.page.evaluate(fn, arg);
  try {
    await t.test('device.destroy() between calls: the next call gets a fresh device', async () => {
      const r = await ev(async (HELPERS) => {
        const h = await import(HELPERS);
        const c = h.sizedCase(4, { B: 2, H: 2, Hkv: 1, Lq: 70, Lk: 70, D: 24, Dv: 20, causal: true, returnWeights: true });
        const w = await h.run(c, 'wasm');
        const a = await h.run(c, 'webgpu');
        const d1 = h.gpu.currentWebGPUDevice();
        d1.destroy();                     // then at once, without waiting for device.lost
        const b = await h.run(c, 'webgpu');
        const d2 = h.gpu.currentWebGPUDevice();
        d2.destroy();
        await new Promise((ok) => setTimeout(ok, 50));  // and after device.lost resolved
        const c3 = await h.run(c, 'webgpu');
        const d3 = h.gpu.currentWebGPUDevice();
        return { a: h.diff(a, w), b: h.diff(b, w), c: h.diff(c3, w), fresh: d1 !== d2 && d2 !== d3 && !!d3 };
      }, HELPERS);
      assert.ok(r.a.out <= 1e-4 && r.a.w <= 1e-4, JSON.stringify(r));
      assert.ok(r.b.out <= 1e-4 && r.b.w <= 1e-4, JSON.stringify(r));
      assert.ok(r.c.out <= 1e-4 && r.c.w <= 1e-4, JSON.stringify(r));
      assert.ok(r.fresh);
    });

    await t.test('device.destroy() during a call: webgpu rejects clearly, auto falls back to wasm, then WebGPU works again', async () => {
      const r = await ev(async (HELPERS) => {
        const h = await import(HELPERS);
        const big = h.sizedCase(5, { B: 1, H: 2, Hkv: 2, Lq: 160, Lk: 160, D: 32, Dv: 32 });
        const small = h.sizedCase(6, { B: 1, H: 1, Hkv: 1, Lq: 33, Lk: 33, D: 8, Dv: 8 });
        await h.run(small, 'webgpu');  // a device and compiled pipelines
        const out = {};
        // destroys the device right after the next submit: the call's work is queued, its readback not done
        const destroyAfterSubmit = () => {
          const d = h.gpu.currentWebGPUDevice();
          const submit = d.queue.submit.bind(d.queue);
          d.queue.submit = (commands) => { submit(commands); d.queue.submit = submit; d.destroy(); };
        };
        // (1) destroyed while the GPU works on the call
        destroyAfterSubmit();
        let p = h.run(big, 'webgpu');
        try { await p; out.during = 'resolved'; } catch (e) { out.during = `${e.name}: ${e.message}`; }
        // (2) destroyed right after the call starts (before its work is submitted)
        await h.run(small, 'webgpu');
        p = h.run(small, 'webgpu');
        h.gpu.currentWebGPUDevice()?.destroy();
        try { await p; out.early = 'resolved'; } catch (e) { out.early = `${e.name}: ${e.message}`; }
        // (3) under 'auto' the call falls back to wasm and is right
        h.setThreshold(0);
        h.allowSoftware(true);
        await h.run(small, 'webgpu');
        destroyAfterSubmit();
        const a = await h.run(big, 'auto');
        out.autoBackend = h.lastBackend();
        out.autoDiff = h.diff(a, await h.run(big, 'wasm')).out;
        // (4) the next call gets a new device and works
        const n = await h.run(small, 'auto');
        out.nextBackend = h.lastBackend();
        out.nextDiff = h.diff(n, await h.run(small, 'wasm')).out;
        h.setThreshold(h.qkv.WEBGPU_THRESHOLD);
        h.allowSoftware(false);
        return out;
      }, HELPERS);
      t.diagnostic(JSON.stringify(r));
      for (const k of ['during', 'early']) {
        assert.match(r[k], /^WebGPUDeviceLostError: scaledDotProductAttention: the WebGPU device was lost during the call/, k);
      }
      assert.equal(r.autoBackend, 'wasm');
      assert.equal(r.autoDiff, 0);
      assert.equal(r.nextBackend, 'webgpu');
      assert.ok(r.nextDiff <= 1e-4);
    });

    await t.test("'auto' picks wasm at or below WEBGPU_THRESHOLD, WebGPU above it, never a software adapter unless allowed", async () => {
      const r = await ev(async (HELPERS) => {
        const h = await import(HELPERS);
        const T = h.qkv.WEBGPU_THRESHOLD;
        h.setThreshold(T);
        const out = { T, software: (await h.gpu.webgpuInfo()).software };
        // B*H*Lq*Lk*(D+Dv) = 2^25 at L = 256 (not above: wasm) and just above at Lk = 257
        const at = h.sizedCase(7, { B: 1, H: 4, Hkv: 4, Lq: 256, Lk: 256, D: 64, Dv: 64, causal: true });
        const above = h.sizedCase(8, { B: 1, H: 4, Hkv: 4, Lq: 256, Lk: 257, D: 64, Dv: 64, causal: true });
        out.workAt = h.gpu.attentionWorkSize(at);
        out.workAbove = h.gpu.attentionWorkSize(above);
        h.allowSoftware(false);  // the default: SwiftShader is far slower than wasm
        await h.run(above, 'auto'); out.aboveSoftwareOff = h.lastBackend();
        h.allowSoftware(true);
        await h.run(at, 'auto'); out.at = h.lastBackend();
        const g = await h.run(above, 'auto'); out.above = h.lastBackend();
        out.aboveDiff = h.diff(g, await h.run(above, 'wasm')).out;
        const tiny = h.sizedCase(9, { B: 1, H: 1, Hkv: 1, Lq: 5, Lk: 5, D: 4, Dv: 4 });
        await h.run(tiny, 'auto'); out.tiny = h.lastBackend();
        h.setThreshold(0);
        await h.run(tiny, 'auto'); out.tinyThreshold0 = h.lastBackend();
        h.setThreshold(Infinity);
        await h.run(above, 'auto'); out.aboveInfinity = h.lastBackend();
        h.setThreshold(T);
        h.allowSoftware(false);
        return out;
      }, HELPERS);
      t.diagnostic(JSON.stringify(r));
      assert.equal(r.T, 2 ** 25);
      assert.equal(r.software, true, 'SwiftShader is recognised as a software adapter');
      assert.ok(r.workAt <= r.T && r.workAbove > r.T);
      assert.equal(r.aboveSoftwareOff, 'wasm');
      assert.equal(r.at, 'wasm');
      assert.equal(r.above, 'webgpu');
      assert.ok(r.aboveDiff <= 1e-4);
      assert.equal(r.tiny, 'wasm');
      assert.equal(r.tinyThreshold0, 'webgpu');
      assert.equal(r.aboveInfinity, 'wasm');
    });

    await t.test('concurrent calls do not corrupt each other', async () => {
      const r = await ev(async (HELPERS) => {
        const h = await import(HELPERS);
        const { makeCase } = await import('/tests/browser/webgpu/cases.js');
        const cases = Array.from({ length: 10 }, (_, n) => makeCase(42, n));
        const gpuRes = await Promise.all(cases.map((c) => h.run(c, 'webgpu')));
        const worst = [];
        for (let n = 0; n < cases.length; n++) {
          const d = h.diff(gpuRes[n], await h.run(cases[n], 'wasm'));
          worst.push(Math.max(d.out, d.w));
        }
        return worst;
      }, HELPERS);
      assert.ok(r.every((x) => x <= 1e-4), JSON.stringify(r));
    });
    assert.deepEqual(pageProblems(s.page), []);
  } finally {
    await s.close();
  }
});
