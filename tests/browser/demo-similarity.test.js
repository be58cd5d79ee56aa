// The Encoders page's similarity panel in headless Chromium: the printed cosine matrix of the
// default sentences and of sentences a user types equals what model.embed gives in Node on the
// same model (3 decimals); clicking a cell shows that pair's tokens, shaded by their share of the
// pooled vector (shares summing to 1 per sentence); no console message.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, launch, openPage } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

let demo, browser, model;
before(async () => {
  assert.ok(existsSync(join(ROOT, 'build/demo/encoders.html')), 'build/demo/ is missing: run the Vite build first (tools/stages/60-demo.sh)');
  demo = await serveDemo({ port: 0 });
  browser = await launch();
  const qkv = await import(pathToFileURL(join(ROOT, 'dist', 'index.js')).href);
  qkv.env.variant = 'simd';
  model = await qkv.loadModel(join(ROOT, 'web', 'models', 'tiny-bert-kjv'));
});
after(async () => { await browser?.close(); demo?.server.close(); model?.dispose(); });

/** The cosine matrix of `lines` in Node, as the page prints it. */
async function expected(lines) {
  const e = await model.embed(lines, { pooling: 'mean', normalize: true });
  const E = e.shape[1];
  return lines.map((_a, i) => lines.map((_b, j) => {
    let s = 0;
    for (let k = 0; k < E; k++) s += e.data[i * E + k] * e.data[j * E + k];
    return s.toFixed(3);
  }));
}

const printed = (page) => page.$$eval('#sim-table tr', (trs) => trs.slice(1).map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));

test('Encoders page: the similarity matrix a user sees is model.embed\'s, and the chosen pair\'s tokens', async () => {
  const page = await openPage(browser, `${demo.url}encoders.html`, { viewport: { width: 1280, height: 900 } });
  await page.waitForSelector('body[data-ready=true]', { timeout: 90_000 });
  const lines0 = (await page.inputValue('#sim-text')).split('\n');
  assert.deepEqual(await printed(page), await expected(lines0));

  // a user types three sentences
  const typed = ['Jesus wept.', 'And Jesus wept with them.', 'The sea and the dry land.'];
  await page.fill('#sim-text', '');
  await page.type('#sim-text', typed.join('\n'), { delay: 5 });
  await page.waitForFunction((l) => document.querySelector('#sim-table').dataset.lines === l, JSON.stringify(typed), { timeout: 30_000 });
  const m = await printed(page);
  assert.deepEqual(m, await expected(typed));
  for (let i = 0; i < 3; i++) assert.equal(m[i][i], '1.000');

  // the chosen pair: a click on row 3, column 1
  await page.click('#sim-table tr:nth-child(4) td:nth-of-type(1)');
  await page.waitForFunction(() => document.querySelector('#sim-pair').textContent.startsWith('pair 3 – 1'));
  const lines = await page.$$eval('#sim-tokens p', (ps) => ps.map((p) => [...p.querySelectorAll('span')].map((s) => ({ t: s.textContent, w: Number(s.dataset.weight) }))));
  assert.equal(lines.length, 2);
  const ids = model.tokenizer.encode(typed[2]);
  assert.deepEqual(lines[0].map((x) => x.t.replace(/^␣/, '')), ids.map((id) => model.tokenizer.tokenText(id).trim()));  // ␣ marks a token that starts a word
  for (const l of lines) assert.ok(Math.abs(l.reduce((s, x) => s + x.w, 0) - 1) < 0.01, JSON.stringify(l));
  assert.ok(await page.locator('#sim-table td.chosen').count() === 2);
  assert.deepEqual(page.problems, []);
  await page.close();
});
