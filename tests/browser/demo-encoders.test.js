// The Encoders page in headless Chromium: the tiny BERT's fill-mask predictions (top one as
// the model in Python says, tests/data/encoder/encoder.json), updated as a user types; its
// bidirectional head view (weight above the diagonal); the sentence-pair mode; the tiny BART
// spelling 1907 with the three attention panels, the cross panel's row for "nine" peaking on
// the digit 9; no console message.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, launch, openPage } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

let demo, browser;
before(async () => {
  assert.ok(existsSync(join(ROOT, 'build/demo/encoders.html')), 'build/demo/ is missing: run the Vite build first (tools/stages/60-demo.sh)');
  demo = await serveDemo({ port: 0 });
  browser = await launch();
});
after(async () => { await browser?.close(); demo?.server.close(); });

test('Encoders page: fill-mask as Python ranks it, bidirectional weights, sentence pairs, cross-attention aligned', async () => {
  const ref = JSON.parse(await readFile(join(ROOT, 'tests/data/encoder/encoder.json'), 'utf8')).fill_mask.cases;
  const page = await openPage(browser, `${demo.url}encoders.html`, { viewport: { width: 1280, height: 800 } });
  await page.waitForSelector('body[data-ready=true]', { timeout: 90_000 });
  const top = async () => page.$$eval('#mask-out li', (els) => els.map((e) => ({ token: e.dataset.token, score: Number(e.dataset.score), text: e.textContent })));

  // the default sentence is the reference's first case
  await page.waitForFunction(() => document.querySelectorAll('#mask-out li').length === 5);
  let preds = await top();
  assert.equal(preds[0].token, ref[0].top[0].token);
  assert.ok(Math.abs(preds[0].score - ref[0].top[0].score) < 1e-4, `score ${preds[0].score} vs Python ${ref[0].top[0].score}`);
  assert.match(preds[0].text, /^\S+ {2}\d+\.\d %/);

  // a user types another case: the list follows
  await page.fill('#mask-text', '');
  await page.type('#mask-text', ref[1].text, { delay: 20 });
  await page.waitForFunction((t) => document.querySelector('#mask-out').dataset.text === t, ref[1].text, { timeout: 30_000 });
  assert.equal((await top())[0].token, ref[1].top[0].token);
  preds = await top();
  assert.ok(Math.abs(preds[0].score - ref[1].top[0].score) < 1e-4);

  // bidirectional: the head view draws lines, and queries put weight on keys after them
  assert.ok(Number(await page.getAttribute('#enc-headview svg', 'data-visible-lines')) > 0);
  assert.ok(Number(await page.getAttribute('#enc-check', 'data-above')) > 0.5, await page.textContent('#enc-check'));
  assert.match(await page.textContent('#enc-check'), /goes to keys after it \(a GPT's would be 0 %\)/);

  // sentence pairs: segment B is marked in the labels
  await page.check('#pair');
  await page.waitForFunction(() => [...document.querySelectorAll('#enc-headview .tokens-q text')].some((t) => t.textContent.endsWith('·B')));
  const labels = await page.$$eval('#enc-headview .tokens-q text', (els) => els.map((e) => e.textContent));
  assert.match(labels[0], /^␣?\[CLS\]$/);
  assert.ok(labels.filter((l) => l.endsWith('·B')).length >= 3, labels.join(' '));

  // the encoder-decoder: 1907 spelled, three panels, the cross row of "nine" on the digit 9
  await page.waitForSelector('body[data-spelling=false][data-spelled]', { timeout: 60_000 });
  assert.equal(await page.getAttribute('body', 'data-spelled'), 'one thousand nine hundred seven');
  for (const id of ['#s2s-enc', '#s2s-dec', '#s2s-cross']) assert.ok(await page.locator(`${id} svg`).count() === 1, `${id} drawn`);
  const cross = await page.$eval('#s2s-cross svg', (svg) => {
    const rows = [...svg.querySelectorAll('g.cell')].map((g) => ({ t: g.querySelector('title').textContent }));
    return rows.map((r) => r.t);
  });
  const nine = cross.filter((t) => /^\W*nine →/.test(t)).map((t) => ({ key: t.split(' → ')[1].split(':')[0], w: Number(t.split(': ')[1]) }));
  assert.ok(nine.length > 0, 'a cross-attention row for "nine"');
  const best = nine.reduce((a, b) => (b.w > a.w ? b : a));
  assert.equal(best.key.replace(/^##/, ''), '9', `"nine" attends most to ${best.key}`);
  assert.deepEqual(page.problems, []);
  await page.close();
});

test('the model page offers the tiny GPT with an induction head, the encoder and the encoder-decoder: choosing an encoder opens the Encoders page', async () => {
  const page = await openPage(browser, `${demo.url}index.html`, { viewport: { width: 1280, height: 800 } });
  await page.waitForSelector('body[data-ready=true]', { timeout: 90_000 });
  const labels = await page.$$eval('#model option', (os) => os.map((o) => o.textContent));
  assert.ok(labels.some((l) => /encoder, fill-mask/.test(l)) && labels.some((l) => /encoder-decoder, cross-attention/.test(l)), labels.join(' | '));
  // the tiny GPT with an induction head (tools/model/README.md) loads from the same menu
  await page.selectOption('#model', './models/tiny-kjv-induction/');
  await page.waitForFunction(() => /^tiny-kjv-induction: 4 layers × 4 heads/.test(document.querySelector('#model-info').textContent), null, { timeout: 60_000 });
  await Promise.all([page.waitForURL(/encoders\.html#s2s-h$/), page.selectOption('#model', './encoders.html#s2s-h')]);
  await page.waitForSelector('body[data-ready=true]', { timeout: 90_000 });
  assert.deepEqual(page.problems, []);
  await page.close();
});
