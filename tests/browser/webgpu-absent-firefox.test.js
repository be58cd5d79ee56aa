// WebGPU missing as a real browser misses it: Firefox ESR on Linux has no navigator.gpu, so
// backend 'auto' must run on wasm (even with the threshold at 0, where it would pick WebGPU if it
// could) and give wasm's exact result, and backend 'webgpu' must reject with the clear Error.
// (webgpu-fallback.test.js checks the same in Chromium by deleting navigator.gpu.)
// Runs in the browser browsers.js drives; stage 65 sets QKV_BROWSER=firefox.
import test from 'node:test';
import assert from 'node:assert/strict';
import { serve } from './harness.js';
import { BROWSER, launchBrowser } from './browsers.js';

const HELPERS = '/tests/browser/webgpu/page-helpers.js';

test(`${BROWSER}: no navigator.gpu: 'auto' runs on wasm, 'webgpu' is a clear Error`, async (t) => {
  if (BROWSER === 'chromium') { t.skip('Chromium here has WebGPU (SwiftShader): webgpu-fallback.test.js covers it'); return; }
  const server = await serve({ isolated: true });
  const browser = await launchBrowser(BROWSER);
  try {
    const page = await browser.open(`${server.url}/tests/browser/pages/webgpu.html`);
    assert.equal(await page.evaluate(() => 'gpu' in navigator), false, `${browser.version} now has navigator.gpu: this test checks a browser without it; point it at one`);
    const r = await page.evaluate(async (HELPERS) => {
      const h = await import(HELPERS);
      const c = h.sizedCase(3, { B: 1, H: 2, Hkv: 2, Lq: 40, Lk: 40, D: 16, Dv: 16, causal: true, returnWeights: true });
      const out = { available: await h.gpu.webgpuAvailable(), reason: await h.gpu.webgpuUnavailableReason() };
      h.setThreshold(0);  // 'auto' would pick WebGPU for anything if it were there
      h.allowSoftware(true);
      const a = await h.run(c, 'auto');
      out.autoBackend = h.lastBackend();
      const w = await h.run(c, 'wasm');
      out.autoDiff = h.diff(a, w);
      out.rowSum = Array.from(a.weights.data.subarray(0, 40)).reduce((s, x) => s + x, 0);
      try { await h.run(c, 'webgpu'); out.webgpu = 'resolved'; } catch (e) { out.webgpu = `${e.name}: ${e.message}`; }
      return out;
    }, HELPERS);
    t.diagnostic(JSON.stringify(r));
    assert.equal(r.available, false);
    assert.match(r.reason, /navigator\.gpu is absent/);
    assert.equal(r.autoBackend, 'wasm');
    assert.deepEqual(r.autoDiff, { out: 0, w: 0 });
    assert.ok(Math.abs(r.rowSum - 1) < 1e-5, `first weight row sums to ${r.rowSum}`);
    assert.match(r.webgpu, /^(Error|WebGPUUnavailableError): /);
    assert.match(r.webgpu, /scaledDotProductAttention: options\.backend 'webgpu': WebGPU is not available/);
    assert.match(r.webgpu, /navigator\.gpu is absent/);
    assert.deepEqual(page.problems, []);
    await page.close();
  } finally {
    await browser.close();
    await server.close();
  }
});
