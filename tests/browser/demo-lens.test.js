// The logit lens panel, read as a person reads it:
// - on the model page (tiny-kjv-induction), the grid's cells (the top token, its probability,
//   the target's probability and rank) against qkv's logitLens run here in Node on the same
//   model and prompt, with the model's own prediction at each position as the target (the argmax
//   of forward's logits), then with a word typed as the target (its first token); the details
//   line of a hovered and of a focused cell (top 5, KL) against the same lens;
// - the URL: lens=1, lensTarget and lensPos written, and a fresh page opened on that URL shows
//   the same cells and the same focused cell;
// - keyboard: arrow keys move the focused cell and its details; Cancel clicked in the same task
//   as Run stops the run and says so;
// - at 390 px a 64-token prompt's grid scrolls inside its box (the page does not);
// - the encoders page's lens over the MLM head against logitLens(encoder) in Node, its [MASK]
//   column marked, and lens=1 in its URL.
// Run is clicked right after typing (the lens reads the text as typed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import * as qkv from 'qkv';
import { ROOT, hash, launch, openPage } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

const DESKTOP = { width: 1280, height: 1000 };
const PROMPT = 'And the LORD spake unto Moses, saying, Speak unto the children of Israel, and say unto them, Speak unto the children of';
const MODEL = 'tiny-kjv-induction';
const SENTENCE = 'In the beginning God created the [MASK] and the earth.';

let server, url, browser, model, bert;
before(async () => {
  ({ server, url } = await serveDemo({ port: 0 }));
  browser = await launch();
  model = await qkv.loadModel(join(ROOT, 'web/models', MODEL));
  bert = await qkv.loadModel(join(ROOT, 'web/models/tiny-bert-kjv'));
});
after(async () => { await browser?.close(); server?.close(); model?.dispose(); bert?.dispose(); });

const show = (t) => t.replace(/ /g, '␣').replace(/\n/g, '↵').replace(/\t/g, '⇥');

/** argmax of each position's logits (the first of equal values) */
function argmaxRows(data, T, V) {
  return Array.from({ length: T }, (_t, t) => {
    let best = 0;
    for (let v = 1; v < V; v++) if (data[t * V + v] > data[t * V + best]) best = v;
    return best;
  });
}

/** The lens the page should print: target = the given id, or the model's own prediction per position. */
async function nodeLens(m, ids, target) {
  if (target === undefined) {
    const out = m instanceof qkv.EncoderModel ? await m.forward(ids) : await m.forward(ids, { logits: 'all' });
    target = argmaxRows(out.logits.data, ids.length, out.logits.shape[2]);
  }
  return { lens: await qkv.logitLens(m, ids, { topK: 5, target }), target };
}

/** Opens the model page on a prompt and waits for its analysis. */
async function open(h, viewport = DESKTOP, b = browser) {
  const page = await openPage(b, url + 'index.html' + h, { viewport });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await page.waitForFunction(() => Number(document.body.dataset.tokens) > 0, null, { timeout: 30_000 });
  return page;
}

const done = (page, panel = '#lens-panel') => page.waitForSelector(`${panel}[data-state=done]`, { timeout: 30_000 });

/** The printed cell (layer, position): its top token, probability, and target probability and rank. */
const cellText = (page, l, t) => page.$eval(`#lens-grid td[data-layer="${l}"][data-pos="${t}"]`, (td) => ({
  tok: td.querySelector('.lens-tok').textContent, p: td.querySelector('.lens-p').textContent, t: td.querySelector('.lens-t')?.textContent ?? null,
}));

/** Asserts the printed cell is the Node lens's: the same top token, the probability rounded to the printed digits. */
function assertCell(printed, cell, where) {
  assert.equal(printed.tok, show(cell.top[0].token), `${where}: top token`);
  assert.ok(Math.abs(Number(printed.p) - cell.top[0].p) <= 0.005 + 1e-4, `${where}: p ${printed.p} vs ${cell.top[0].p}`);
  const m = /^([\d.]+) · #(\d+)$/.exec(printed.t);
  assert.ok(m, `${where}: target text "${printed.t}"`);
  assert.ok(Math.abs(Number(m[1]) - cell.targetP) <= 0.005 + 1e-4, `${where}: target p ${m[1]} vs ${cell.targetP}`);
  assert.equal(Number(m[2]), cell.targetRank + 1, `${where}: target rank`);
}

/** Several cells: every position of the output row, a middle row and the embeddings' row at a few positions. */
async function assertGrid(page, lens, label) {
  const NL = lens.numLayers, T = lens.positions, mid = Math.floor(NL / 2);
  const cells = [...Array.from({ length: T }, (_v, t) => [NL, t]), [mid, 0], [mid, Math.floor(T / 2)], [mid, T - 1], [0, 3], [1, T - 2]];
  for (const [l, t] of cells) assertCell(await cellText(page, l, t), lens.layers[l][t], `${label} (${l}, ${t})`);
  assert.equal(await page.locator('#lens-grid tbody tr').count(), NL + 1);
  assert.equal(await page.locator('#lens-grid thead th.lens-col').count(), T);
}

/** The details line of cell (l, t) as the Node lens gives it: top 5 with probabilities, KL. */
function assertDetail(text, cell, l, t) {
  assert.match(text, new RegExp(`position ${t} `), `detail names position ${t}: ${text}`);
  const top = /: top \d+ (.*?); (?:target|KL)/.exec(text)[1].split(' · ').map((s) => [s.slice(0, s.lastIndexOf(' ')), Number(s.slice(s.lastIndexOf(' ') + 1))]);
  assert.deepEqual(top.map(([tok]) => tok), cell.top.map((x) => show(x.token)), `detail (${l}, ${t}): top 5`);
  top.forEach(([tok, p], i) => assert.ok(Math.abs(p - cell.top[i].p) <= 5e-4 + 1e-4, `detail (${l}, ${t}): ${tok} ${p} vs ${cell.top[i].p}`));
  const kl = /KL to the output ([\d.]+) nats/.exec(text);
  assert.ok(kl && Math.abs(Number(kl[1]) - cell.kl) <= 5e-4 + 1e-4, `detail (${l}, ${t}) KL ${kl?.[1]} vs ${cell.kl}`);
}

test('model page: the lens grid = logitLens in Node (own predictions, then a typed target); details on hover and focus; the URL restores it', async () => {
  const page = await open(hash({ model: MODEL, prompt: ' In the beginning' }));
  // typed, then Run at once (before the page's own 300 ms analysis of the new text)
  await page.fill('#prompt', PROMPT);
  await page.click('#lens-run');
  await done(page);
  const ids = model.tokenizer.encode(PROMPT);
  const own = await nodeLens(model, ids);
  await assertGrid(page, own.lens, 'own prediction');
  const NL = own.lens.numLayers, T = ids.length;
  // the output row's top token is the target (the model's own prediction): rank #1 there
  for (let t = 0; t < T; t++) assert.match((await cellText(page, NL, t)).t, / · #1$/);

  // hover a middle cell: its top 5 and KL
  await page.hover(`#lens-grid td[data-layer="2"][data-pos="9"]`);
  assertDetail(await page.textContent('#lens-detail'), own.lens.layers[2][9], 2, 9);

  // a typed target word of two tokens: its first token is followed, and the page says so
  const word = 'Israelites';
  const wordIds = model.tokenizer.encode(word, { addSpecialTokens: false });
  await page.fill('#lens-target', word);
  await page.press('#lens-target', 'Enter');
  await page.waitForFunction((id) => location.hash.includes(`lensTarget=${id}`), wordIds[0], { timeout: 30_000 });
  await done(page);
  if (wordIds.length > 1) assert.match(await page.textContent('#lens-note'), new RegExp(`is ${wordIds.length} tokens.*\\(id ${wordIds[0]}\\), is used`));
  const typed = await nodeLens(model, ids, wordIds[0]);
  await assertGrid(page, typed.lens, `target ${word}`);

  // click a cell, then arrow keys: the focused cell's details, and lensPos in the URL
  await page.click(`#lens-grid td[data-layer="${NL}"][data-pos="6"]`);
  await page.keyboard.press('ArrowUp');
  await page.keyboard.press('ArrowRight');
  assert.equal(await page.evaluate(() => `${document.activeElement.dataset.layer},${document.activeElement.dataset.pos}`), `${NL - 1},7`);
  assertDetail(await page.textContent('#lens-detail'), typed.lens.layers[NL - 1][7], NL - 1, 7);
  await page.waitForFunction(() => location.hash.includes('lensPos=7'));
  const link = page.url();
  assert.match(link, /lens=1/);
  const before = await page.$$eval('#lens-grid td.lens-cell', (tds) => tds.map((td) => td.textContent));
  // Run and Cancel in one task: the run stops, the panel says so, the grid drawn before stays
  await page.evaluate(() => { document.querySelector('#lens-run').click(); document.querySelector('#lens-panel .fwd button').click(); });
  await page.waitForSelector('#lens-panel[data-state=cancelled]');
  assert.match(await page.textContent('#lens-msg'), /^Cancelled: the lens was not computed\./);
  assert.deepEqual(await page.$$eval('#lens-grid td.lens-cell', (tds) => tds.map((td) => td.textContent)), before);
  assert.deepEqual(page.problems, []);
  await page.close();

  // the link in a fresh context: the same cells, the target in its field, position 7 described
  const ctx = await browser.newContext({ viewport: DESKTOP });
  const again = await ctx.newPage();
  await again.goto(link);
  await done(again);
  assert.deepEqual(await again.$$eval('#lens-grid td.lens-cell', (tds) => tds.map((td) => td.textContent)), before);
  assert.equal(await again.inputValue('#lens-target'), model.tokenizer.decode([wordIds[0]]));
  assert.match(await again.textContent('#lens-detail'), /^output, position 7 /);
  assert.equal(await again.getAttribute(`#lens-grid td[data-layer="${NL}"][data-pos="7"]`, 'tabindex'), '0');
  await ctx.close();
});

test('390 px: a 64-token prompt\'s lens grid scrolls inside its box, the page does not', async () => {
  const long = model.tokenizer.decode(Array.from({ length: 64 }, (_v, i) => model.tokenizer.encode(PROMPT)[i % 20]));
  const page = await open(hash({ model: MODEL, prompt: long, lens: '1' }), { width: 390, height: 844 });
  await done(page);
  assert.equal(await page.locator('#lens-grid thead th.lens-col').count(), model.tokenizer.encode(long).length);
  const box = await page.$eval('#lens-grid', (b) => ({ scroll: b.scrollWidth, client: b.clientWidth }));
  assert.ok(box.scroll > box.client, `the grid scrolls in its box (${box.scroll} > ${box.client})`);
  const wide = await page.evaluate(() => [...document.querySelectorAll('#lens-panel *')].filter((e) => e.getBoundingClientRect().right > innerWidth + 1 && !e.closest('#lens-grid')).map((e) => e.id || e.className || e.tagName));
  assert.deepEqual(wide, [], 'nothing of the panel outside the grid\'s box is wider than the page');
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= innerWidth), 'the page does not scroll sideways');
  await page.close();
});

test('encoders page: the lens over the MLM head = logitLens(encoder) in Node, the [MASK] column marked, lens=1 in the URL', async () => {
  const page = await openPage(browser, url + 'encoders.html' + hash({ model: 'tiny-bert-kjv', prompt: SENTENCE, lens: '1' }), { viewport: DESKTOP });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await done(page, '#enc-lens-panel');
  const ids = bert.tokenizer.encode(SENTENCE);
  const { lens } = await nodeLens(bert, ids);
  await assertGrid(page, lens, 'encoder');
  const maskAt = ids.indexOf(bert.tokenizer.specialTokens.mask);
  assert.deepEqual(await page.$$eval('#lens-grid thead th.lens-col.marked', (ths) => ths.map((th) => th.querySelector('.lens-pos').textContent)), [String(maskAt)]);
  // the [MASK]'s output cell: the fill-mask panel's first prediction
  assert.equal((await cellText(page, lens.numLayers, maskAt)).tok, show(lens.layers[lens.numLayers][maskAt].top[0].token));
  await page.focus(`#lens-grid td[data-layer="${lens.numLayers}"][data-pos="${ids.length - 1}"]`);
  await page.click(`#lens-grid td[data-layer="1"][data-pos="${maskAt}"]`);
  assertDetail(await page.textContent('#lens-detail'), lens.layers[1][maskAt], 1, maskAt);
  await page.waitForFunction((t) => location.hash.includes('lens=1') && location.hash.includes(`lensPos=${t}`), maskAt);
  assert.deepEqual(page.problems, []);
  await page.close();
});
