// The demo smoke test in any browser browsers.js drives (QKV_BROWSER=firefox in stage 65; the
// full Chromium test is demo.test.js): the built site (build/demo/) served as `npm start` serves
// it, every page loads with no console message, generating on the model page shows new text in
// #output (its visible text, as a reader sees it) and draws the head view, the explorer's tests
// (a removed head's before/after, Find heads' scatter, rollout, the view restored from the URL)
// work, the Encoders page's tests (a link's removed head at the [MASK], Find heads) work, a link's
// logit lens and attribution draw, and the benchmark page finishes a small run. Screenshots: build/artifacts/demo-<browser>/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT } from './harness.js';
import { BROWSER, launchBrowser } from './browsers.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

const ART = join(ROOT, `build/artifacts/demo-${BROWSER}`);
const DESKTOP = { width: 1280, height: 800 };

let server, url, browser;

before(async () => {
  assert.ok(existsSync(join(ROOT, 'build/demo/index.html')), 'build/demo/ is missing: run the Vite build first (tools/stages/60-demo.sh)');
  await mkdir(ART, { recursive: true });
  ({ server, url } = await serveDemo({ port: 0 }));
  browser = await launchBrowser(BROWSER);
});
after(async () => { await browser?.close(); server?.close(); });

async function open(path) {
  const page = await browser.open(url + path, { viewport: DESKTOP });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  return page;
}

test(`${BROWSER}: every demo page loads with no console message`, async () => {
  for (const [name, path] of [['model', 'index.html'], ['encoders', 'encoders.html'], ['playground', 'playground.html'], ['bench', 'bench.html']]) {
    const page = await open(path);
    assert.equal(await page.evaluate(() => self.crossOriginIsolated), true, `${name}: not crossOriginIsolated`);
    await page.screenshot(join(ART, `${name}-1280x800.png`));
    assert.deepEqual(page.problems, [], `${name}: console errors/warnings`);
    await page.close();
  }
});

test(`${BROWSER}: model page: Generate adds new text after the prompt and draws the head view`, async () => {
  const page = await open('index.html');
  await page.waitForSelector('#generate:not([disabled])', { timeout: 60_000 });
  const prompt = await page.evaluate(() => document.querySelector('#prompt').value);
  // the page runs the prompt alone first, so #output shows it before anything is generated
  await page.waitFor((p) => document.querySelector('#output').innerText.trim() === p.trim(), prompt, { timeout: 60_000 });
  await page.fill('#max-new', '20');
  await page.click('#generate');
  await page.waitForSelector('body[data-generating=false][data-generated]', { timeout: 180_000 });
  // (the default model's add_prefix_space decodes the prompt with a space before it)
  const output = (await page.text('#output')).trimStart();
  assert.ok(output.startsWith(prompt.trim()), `#output should start with the prompt: "${output}"`);
  const added = output.slice(prompt.trim().length);
  assert.ok(added.trim().length >= 3, `generating added only "${added}" after the prompt`);
  assert.equal(await page.text('#count'), '20');
  assert.match(await page.text('#speed'), /tokens\/s/);
  const backend = await page.text('#backend');
  assert.match(backend, /wasm/i, `backend shown: "${backend}"`);
  const lines = Number(await page.evaluate(() => document.querySelector('#headview svg')?.getAttribute('data-visible-lines')));
  assert.ok(lines > 0, `head view draws ${lines} lines`);
  await page.screenshot(join(ART, 'model-generated-1280x800.png'));
  assert.deepEqual(page.problems, [], 'model page: console errors/warnings');
  await page.close();
});

test(`${BROWSER}: model page: removing a head prints before and after, Find heads draws the scatter, rollout fuses the heads, a reload restores the view`, async () => {
  const page = await open('index.html#prompt=In+the+beginning+God+created+the+heaven&view=model&layer=1&remove=1.0');
  // the URL's removed head: the test runs by itself once the prompt has run
  await page.waitForSelector('body[data-test=done] #test-result:not([hidden]) tbody tr', { timeout: 60_000 });
  assert.equal(await page.text('#test-what'), 'Removed: layer 1 head 0.');
  assert.match(await page.text('#test-result .test-summary'), /^KL\(before ‖ after\) = \d+\.\d{4} nats · the prompt's loss \d+\.\d{3} → \d+\.\d{3} nats per token/);
  assert.equal(await page.evaluate(() => document.querySelectorAll('#test-result tbody tr').length), 5);
  await page.click('#find-heads');
  await page.waitForSelector('body[data-probes=done] #scatter svg', { timeout: 60_000 });
  assert.equal(await page.evaluate(() => document.querySelectorAll('#scatter .point').length), 16);
  assert.match(await page.text('#caveat-head'), /^The probes' warning: layer \d head \d \((induction|previous token|sink) \d\.\d\d\)/);
  await page.evaluate(() => { const s = document.querySelector('#map'); s.value = 'rollout'; s.dispatchEvent(new Event('change')); });
  await page.waitFor(() => document.querySelectorAll('#thumbs button.thumb').length === 4);
  await page.screenshot(join(ART, 'model-explorer-tests-1280x800.png'));
  // reload: the rollout view of layer 1, the removed head's test again
  await page.raw.reload(); // Playwright's and Puppeteer's page alike
  await page.waitForSelector('body[data-ready=true][data-test=done] #test-result:not([hidden]) tbody tr', { timeout: 60_000 });
  assert.equal(await page.evaluate(() => document.querySelector('#map').value), 'rollout');
  assert.equal(await page.evaluate(() => document.querySelectorAll('#thumbs button.thumb').length), 4);
  assert.match(await page.evaluate(() => document.querySelector('#heatmap svg text').textContent), /^layer 1 · head 0 · /);
  assert.deepEqual(page.problems, [], 'model page: console errors/warnings');
  await page.close();
});

test(`${BROWSER}: Encoders page: a link's removed head prints the [MASK]'s before and after, Find heads draws the scatter, the model view marks the head`, async () => {
  const page = await open('encoders.html#view=model&layer=1&head=2&remove=1.2&target=heaven');
  await page.waitForSelector('body[data-test=done] #test-result:not([hidden]) tbody tr', { timeout: 60_000 });
  assert.equal(await page.text('#test-what'), 'Removed: layer 1 head 2.');
  assert.equal(await page.text('#test-result caption'), 'At the [MASK], top 5');
  assert.match(await page.text('#test-result .test-summary'), /^KL\(before ‖ after\) = \d+\.\d{4} nats · the masked-token loss of “heaven” \d+\.\d{3} → \d+\.\d{3} nats/);
  assert.equal(await page.evaluate(() => document.querySelectorAll('#test-result tbody tr').length), 5);
  assert.equal(await page.evaluate(() => document.querySelector('#thumbs button.thumb[data-layer="1"][data-head="2"]').dataset.removed), 'true');
  assert.match(await page.evaluate(() => document.querySelector('#heatmap svg text').textContent), /^layer 1 · head 2 · /);
  await page.click('#find-heads');
  await page.waitForSelector('body[data-probes=done] #scatter svg', { timeout: 60_000 });
  assert.equal(await page.evaluate(() => document.querySelectorAll('#scatter .point').length), 16);
  assert.match(await page.text('#caveat-head'), /^The probes' warning: layer \d head \d \((induction|previous token|next token|sink) \d\.\d\d\) changes the loss by [+−]\d\.\d{4} nats per masked token/);
  await page.screenshot(join(ART, 'encoders-explorer-tests-1280x800.png'));
  assert.deepEqual(page.problems, [], 'encoders page: console errors/warnings');
  await page.close();
});

test(`${BROWSER}: model page: a link's logit lens and attribution draw their grids, the printed sum of the parts equals the printed logit`, async () => {
  const page = await open('index.html#model=tiny-kjv-induction&prompt=And+the+LORD+spake+unto+Moses%2C+saying&lens=1&lensPos=3&attr=7');
  await page.waitForSelector('#lens-panel[data-state=done] #lens-grid td', { timeout: 60_000 });
  await page.waitForSelector('#attribution-panel[data-state=done] #attr-list', { timeout: 60_000 });
  const tokens = Number(await page.evaluate(() => document.body.dataset.tokens));
  assert.equal(await page.evaluate(() => document.querySelectorAll('#lens-grid td.lens-cell').length), 5 * tokens);
  assert.match(await page.text('#lens-detail'), /^output, position 3 \(after .*\): top 5 .*; KL to the output 0\.000 nats$/);
  assert.equal(await page.evaluate(() => document.querySelectorAll('#attr-grid button.attr-head').length), 16);
  const [sum, logit] = await page.evaluate(() => ['.attr-sum', '.attr-total'].map((c) => document.querySelector(`#attr-list ${c} td:last-child`).textContent));
  assert.match(sum, /^[+−]?\d+\.\d{3,}$/);
  assert.equal(sum, logit);
  await page.screenshot(join(ART, 'model-lens-attribution-1280x800.png'));
  assert.deepEqual(page.problems, [], 'model page: console errors/warnings');
  await page.close();
});

test(`${BROWSER}: benchmark page: a small run finishes with a results table and a plot`, async () => {
  const page = await open('bench.html?run=256');
  await page.waitForSelector('body[data-bench-done=true]', { timeout: 240_000 });
  const rows = await page.evaluate(() => document.querySelectorAll('#results tbody tr').length);
  assert.ok(rows >= 2, `results table has ${rows} rows`);
  assert.ok(await page.evaluate(() => document.querySelectorAll('#plot-time svg').length) >= 1, 'time plot drawn');
  assert.equal(await page.evaluate(() => document.querySelector('#bar').value), 1);
  await page.screenshot(join(ART, 'bench-run-1280x800.png'));
  assert.deepEqual(page.problems, [], 'benchmark page: console errors/warnings');
  await page.close();
});
