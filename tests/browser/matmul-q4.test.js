// The 4-bit matmul kernels in a browser (matmul-q4/page.js): in Chromium the relaxed-SIMD build
// takes the relaxed int8 dot (its probe must say the engine computes it right) and the plain SIMD
// build does not; both within x's rounding of the float64 product, and the matrix-vector
// kernel's rows the matrix product's bits (a decoded token gets a prefill's). QKV_BROWSER=firefox
// runs it in Firefox ESR, which has relaxed SIMD too.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { serve } from './harness.js';
import { BROWSER, launchBrowser } from './browsers.js';

let browser, server;
before(async () => { browser = await launchBrowser(BROWSER); server = await serve({ isolated: false }); });
after(async () => { await browser?.close(); await server?.close(); });

async function run(variant) {
  const page = await browser.open(`${server.url}/tests/browser/matmul-q4/index.html?variant=${variant}`);
  await page.waitFor(() => window.__qkvResult !== undefined, null, { timeout: 120_000 });
  const result = await page.evaluate(() => window.__qkvResult);
  assert.deepEqual(page.problems, []);
  await page.close();
  assert.equal(result.error, undefined, result.error);
  return result;
}

for (const variant of ['simd-relaxed', 'simd']) {
  test(`${BROWSER}: 4-bit matmul, ${variant}: within x's rounding, gemv rows = gemm bits`, async () => {
    const r = await run(variant);
    assert.equal(r.loaded.variant, variant);
    if (BROWSER === 'chromium') assert.equal(r.relaxedDotComputes, true, "Chromium computes the relaxed int8 dot right: the loader's probe must say so");
    assert.equal(r.int8x, variant === 'simd-relaxed' && r.relaxedDotComputes, 'the int8 dot runs exactly where the probe found it right');
    assert.deepEqual(r.failures, []);
    console.log(`# ${variant}: x as ${r.int8x ? 'int8' : 'int16'}, worst error ${r.worst.toFixed(3)} of the tolerance`);
  });
}
