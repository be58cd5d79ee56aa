// The model page reads by words: the default BPE model's head view shows word tokens
// and fits a 1280x800 screen; on the byte-level model the 'words' toggle merges the bytes into
// words in the head, model and neuron views, and the merged rows still sum to 1.
// Run after the Vite build (tools/stages/60-demo.sh). Screenshots: build/artifacts/demo/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT, launch, openPage } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

const ART = join(ROOT, 'build/artifacts/demo');
const DESKTOP = { width: 1280, height: 800 };
const PROMPT = 'In the beginning God created'; // index.html's default prompt

let server, url, browser;
before(async () => {
  await mkdir(ART, { recursive: true });
  ({ server, url } = await serveDemo({ port: 0 }));
  browser = await launch();
});
after(async () => { await browser?.close(); server?.close(); });

/** The head view's query labels as drawn (showToken: a space is ␣). */
const rowLabels = (page) => page.$$eval('#headview .tokens-q text', (els) => els.map((e) => e.textContent));
const maxRowError = async (page) => Number(await page.getAttribute('#rowcheck', 'data-max-row-error'));

test('default model: BPE word tokens in a head view that fits 1280x800; the byte model reads by words with the toggle', async () => {
  const page = await openPage(browser, url + 'index.html', { viewport: DESKTOP });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  assert.equal(await page.locator('#gen-msg[data-tone=error]').count(), 0, `load failed: ${await page.textContent('#gen-msg')}`);
  assert.match(await page.textContent('#model-info'), /^tiny-kjv-bpe: 4 layers × 4 heads/);
  assert.equal(await page.inputValue('#model'), './models/tiny-kjv-bpe/');
  assert.equal(await page.inputValue('#prompt'), PROMPT);
  await page.waitForSelector('#headview svg');

  // the rows are (mostly) whole words: far fewer than the prompt's 28 bytes. The first word too:
  // the model's tokenizer_config.json sets add_prefix_space, so the prompt reads as ' In the
  // beginning …' (as mid-line), not 'I' 'n'
  const bpe = await rowLabels(page);
  assert.deepEqual(bpe, ['␣In', '␣the', '␣beginning', '␣God', '␣creat', 'ed'], `BPE rows: ${JSON.stringify(bpe)}`);
  assert.equal(bpe.join('').replace(/␣/g, ' '), ' ' + PROMPT);
  assert.equal(await page.$eval('#query', (s) => s.options[0].textContent), '0: ␣In');
  assert.equal(await page.textContent('#output .prompt'), ' ' + PROMPT, 'the prompt as the tokenizer decodes it');
  assert.ok(await maxRowError(page) < 1e-3);

  // the head view fits the screen: no page scroll needed to see all of it, no sideways scroll
  const box = await page.$eval('#headview svg', (s) => { const r = s.getBoundingClientRect(); return { bottom: r.bottom, right: r.right }; });
  assert.ok(box.bottom <= DESKTOP.height && box.right <= DESKTOP.width, `head view ends at ${JSON.stringify(box)}`);
  assert.ok(await page.$eval('#headview', (e) => e.scrollWidth <= e.clientWidth), 'head view scrolls sideways');
  await page.screenshot({ path: join(ART, 'words-bpe-1280x800.png') });

  // the byte-level model: one row per byte, and with the toggle one per word
  await page.selectOption('#model', './models/tiny-kjv/');
  await page.waitForFunction(() => /^tiny-kjv: /.test(document.querySelector('#model-info').textContent), null, { timeout: 60_000 });
  await page.waitForFunction((n) => document.querySelectorAll('#headview .tokens-q text').length === n, PROMPT.length, { timeout: 30_000 });
  assert.equal((await rowLabels(page)).join('').replace(/␣/g, ' '), PROMPT);
  assert.equal(await page.isHidden('#word-rule'), true);
  await page.check('#words');
  assert.deepEqual(await rowLabels(page), ['In', '␣the', '␣beginning', '␣God', '␣created']);
  assert.match(await page.textContent('#word-rule'), /sum over B's tokens of the mean over A's tokens/);
  assert.equal(await page.isVisible('#word-rule'), true);
  assert.match(await page.textContent('#rowcheck'), /× 5 words; every row sums to 1/);
  assert.ok(await maxRowError(page) < 1e-3, `word rows deviate by ${await maxRowError(page)}`);
  await page.screenshot({ path: join(ART, 'words-bytes-1280x800.png') });

  // model view: the heat map of a head has 5 word rows, each summing to 1
  await page.click('#tab-model');
  await page.click('#thumbs .thumb[data-layer="1"][data-head="2"]');
  const sums = await page.$$eval('#heatmap .rowsum', (els) => els.map((e) => Number(e.getAttribute('data-sum'))));
  assert.equal(sums.length, 5);
  for (const s of sums) assert.ok(Math.abs(s - 1) < 1e-3, `word heat map row sum ${s}`);

  // neuron view: the query word's merged row, then the per-token arithmetic
  await page.click('#tab-neuron');
  await page.waitForSelector('#neuron .word-row svg');
  assert.match(await page.textContent('#neuron'), /Word 4: ␣created/);
  await page.waitForSelector('#neuron .ncols svg');

  // generating with the toggle on: still words, still rows that sum to 1
  await page.click('#tab-head');
  await page.fill('#max-new', '12');
  await page.click('#generate');
  await page.waitForSelector('body[data-generating=false][data-generated="12"]', { timeout: 120_000 });
  const words = await rowLabels(page);
  assert.ok(words.length > 5 && words.length < PROMPT.length + 12, `after generating: ${JSON.stringify(words)}`);
  assert.ok(await maxRowError(page) < 1e-3);

  // and off again: one row per byte
  await page.uncheck('#words');
  // (the head view is virtualised: 40 rows outgrow its 600 px box, so it has the rows on screen)
  assert.equal(Number(await page.getAttribute('#headview svg', 'data-tokens')), PROMPT.length + 12);
  const bytes = await rowLabels(page);
  assert.equal(bytes.slice(0, PROMPT.length).join('').replace(/␣/g, ' '), PROMPT, 'the top rows: one byte each');
  assert.deepEqual(page.problems, [], 'console errors/warnings');
  await page.close();
});
