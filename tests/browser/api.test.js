// The shared cases, the invalid-call table and a randomized run in a headless browser (Chromium;
// QKV_BROWSER=firefox for Firefox ESR, browsers.js), with cross-origin isolation (SIMD + threads)
// and without (the single-thread fallback), and forced variants. Needs dist/ (tools/build.sh).
import assert from 'node:assert/strict';
import { test, before, after } from 'node:test';
import { serve } from './harness.js';
import { BROWSER, launchBrowser } from './browsers.js';

let browser;
before(async () => { browser = await launchBrowser(BROWSER); });
after(async () => { await browser?.close(); });

async function run({ isolated, variant = '', fuzz = 0 }) {
  const server = await serve({ isolated });
  try {
    const page = await browser.open(`${server.url}/tests/browser/api/index.html?variant=${variant}&fuzz=${fuzz}`);
    await page.waitFor(() => window.__qkvResult !== undefined, null, { timeout: 240_000 });
    const result = await page.evaluate(() => window.__qkvResult);
    const problems = page.problems;
    await page.close();
    return { result, problems };
  } finally {
    await server.close();
  }
}

function assertAllPass({ result, problems }) {
  assert.equal(result.error, undefined, result.error);
  assert.ok(result.cases >= 36 && result.syncCases >= 20, `ran ${result.cases} + ${result.syncCases} cases`);
  assert.deepEqual(result.failures, []);
  assert.ok(result.invalid.count >= 40);
  assert.deepEqual(result.invalid.problems, []);
  assert.deepEqual(problems, []);
}

// auto loads the relaxed-SIMD twin of the SIMD build where the engine has relaxed SIMD
// (Chromium 114+: checked below, so a probe that stopped working cannot pass unnoticed).
const simdName = (relaxed) => (relaxed ? 'simd-relaxed' : 'simd');

test(`${BROWSER}: crossOriginIsolated page: SIMD + threads, all cases, invalid table, 3000 random calls without heap growth`, async () => {
  const r = await run({ isolated: true, fuzz: 3000 });
  assertAllPass(r);
  assert.equal(r.result.crossOriginIsolated, true);
  if (BROWSER === 'chromium') assert.equal(r.result.relaxedSimd, true, 'Chromium has relaxed SIMD: the probe must say so');
  assert.equal(r.result.loaded.variant, `${simdName(r.result.relaxedSimd)}-threads`);
  assert.ok(r.result.loaded.threads >= 2, `threads ${r.result.loaded.threads}`);
  assert.deepEqual(r.result.fuzz.problems, []);
  assert.equal(r.result.fuzz.after.inUseBytes, r.result.fuzz.before.inUseBytes);
  assert.equal(r.result.fuzz.after.heapBytes, r.result.fuzz.before.heapBytes);
});

test(`${BROWSER}: page without isolation: falls back to single-thread SIMD, all cases pass`, async () => {
  const r = await run({ isolated: false });
  assertAllPass(r);
  assert.equal(r.result.crossOriginIsolated, false);
  assert.deepEqual(r.result.loaded, { variant: simdName(r.result.relaxedSimd), threads: 1 });
});

test(`${BROWSER}: forced plain SIMD + threads (the build auto passes over where relaxed SIMD runs)`, async () => {
  const r = await run({ isolated: true, variant: 'simd-threads' });
  assertAllPass(r);
  assert.equal(r.result.loaded.variant, 'simd-threads');
});

test(`${BROWSER}: forced scalar variant in the browser`, async () => {
  const r = await run({ isolated: true, variant: 'scalar' });
  assertAllPass(r);
  assert.deepEqual(r.result.loaded, { variant: 'scalar', threads: 1 });
});

test(`${BROWSER}: forcing 'simd-threads' without isolation is a clear error`, async () => {
  const r = await run({ isolated: false, variant: 'simd-threads' });
  assert.match(r.result.error, /env.variant 'simd-threads' needs SharedArrayBuffer/);
});
