// The model page's Patching panel, read as a person reads it, against qkv's activationPatching
// run here in Node on the same model, prompts and answer (tiny-kjv-induction: a repeated
// sequence of random word tokens as the clean prompt, the same with the first copy's words
// changed as the corrupted one):
// - the hottest cell's printed name and value = the argmax of the sweep (heads, heads x positions),
//   the printed m(clean) / m(corrupted), the default answers (each prompt's top prediction);
// - a click on a head's cell shows that head in the model view;
// - the token-count message when the prompts differ in length, Run disabled;
// - Cancel stops a long sweep (the bar goes, the panel says cancelled) and a new Run works;
// - the URL round trip (a reload runs the sweep shown again, the answer typed comes back);
// - 390 px wide: nothing of the panel overflows the page (the map scrolls in its own box).
// Run is clicked right after typing (before any debounce).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import * as qkv from 'qkv';
import { ROOT, cancelWhenMoving, hash, launch, openPage, shownNumber } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

const MODEL = 'tiny-kjv-induction';
const DESKTOP = { width: 1280, height: 1000 };

let server, url, browser, model, clean, corrupt, cleanIds, corruptIds;

/** Word tokens (' word') that encode back to themselves, picked by a seeded generator. */
function randomWords(n, seed, avoid = new Set()) {
  const tok = model.tokenizer, words = [];
  for (let id = 0; id < model.dims.vocab; id++) {
    const t = tok.decode([id]);
    if (/^ [a-z]{3,}$/.test(t) && tok.encode(t).length === 1 && !avoid.has(id)) words.push(id);
  }
  let s = seed;
  const next = () => { s = (s * 1103515245 + 12345) % 2147483648; return s; };
  const out = [];
  while (out.length < n) { const id = words[next() % words.length]; if (!out.includes(id)) out.push(id); }
  return out;
}

before(async () => {
  ({ server, url } = await serveDemo({ port: 0 }));
  browser = await launch();
  model = await qkv.loadModel(join(ROOT, 'web/models', MODEL));
  const seq = randomWords(10, 7), other = randomWords(10, 99, new Set(seq));
  clean = model.tokenizer.decode([...seq, ...seq]);
  corrupt = model.tokenizer.decode([...other, ...seq]);
  cleanIds = model.tokenizer.encode(clean);
  corruptIds = model.tokenizer.encode(corrupt);
  assert.equal(cleanIds.length, corruptIds.length, 'the test\'s prompts have the same token count');
});
after(async () => { await browser?.close(); server?.close(); model?.dispose(); });

async function open(h, viewport = DESKTOP, tokens = cleanIds.length) {
  const page = await openPage(browser, url + 'index.html' + h, { viewport });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await page.waitForFunction((k) => document.body.dataset.tokens === String(k), tokens, { timeout: 30_000 });
  return page;
}
const show = (t) => t.replace(/ /g, '␣').replace(/\n/g, '↵');
const argmax = (x) => x.reduce((b, v, i) => (v > x[b] ? i : b), 0);
async function top(ids) {
  const out = await model.forward(ids, { logits: 'last' });
  return argmax(Array.from(out.logits.data));
}

/** What the panel prints after a sweep: the hottest cell's name and value, m(clean), m(corrupted). */
async function printed(page) {
  await page.waitForSelector('#patching-panel[data-state=done] #patch-result:not([hidden])', { timeout: 30_000 });
  const hot = /^hottest: (.+), (−?[\d.]+) of the clean metric$/.exec(await page.textContent('#patch-hottest'));
  assert.ok(hot, `hottest line: ${await page.textContent('#patch-hottest')}`);
  const metrics = await page.textContent('#patch-metrics');
  const m = /m\(clean\) = (−?[\d.]+), m\(corrupted\) = (−?[\d.]+)/.exec(metrics);
  assert.ok(m, `metrics line: ${metrics}`);
    return { name: hot[1], value: shownNumber(hot[2]), mClean: shownNumber(m[1]), mCorr: shownNumber(m[2]), metrics };
}

/** The expected hottest cell of a sweep in Node: its name as the panel prints it, and its value. */
function expectedHottest(r) {
  const i = argmax(Array.from(r.values));
  const tokens = cleanIds.map((id) => model.tokenizer.decode([id]));
  if (r.over === 'heads') return { name: `L${Math.floor(i / r.shape[1])}H${i % r.shape[1]}`, value: r.values[i] };
  const [, H, T] = r.shape;
  const l = Math.floor(i / (H * T)), h = Math.floor(i / T) % H, t = i % T;
  return { name: `L${l}H${h} at ${t} ${show(tokens[t])}`, value: r.values[i] };
}

test('patching: the hottest cell as printed = argmax of activationPatching in Node; a click opens its head; the URL brings the sweep back', async () => {
  const answer = [await top(cleanIds), await top(corruptIds)];
  assert.notEqual(answer[0], answer[1], 'the two prompts predict different tokens');
  const page = await open(hash({ model: MODEL, prompt: clean }));
  assert.equal(await page.inputValue('#patch-clean'), clean, 'the clean prompt is the page\'s');
  // typed, then Run at once
  await page.fill('#patch-corrupt', corrupt);
  await page.click('#patch-run');
  const heads = await printed(page);
  const r = await qkv.activationPatching(model, { clean: cleanIds, corrupted: corruptIds, answer, over: 'heads' });
  const want = expectedHottest(r);
  assert.equal(heads.name, want.name);
  assert.ok(Math.abs(heads.value - want.value) <= 0.0051, `hottest ${heads.value} vs ${want.value}`);
  assert.ok(Math.abs(heads.mClean - r.cleanMetric) <= 0.0006 && Math.abs(heads.mCorr - r.corruptedMetric) <= 0.0006, heads.metrics);
  assert.match(await page.textContent('#patch-answer'), new RegExp(`correct '.*' \\(id ${answer[0]}\\), wrong '.*' \\(id ${answer[1]}\\): each prompt's top prediction`));
  assert.equal(await page.locator('#patch-map td').count(), 16);
  // a cell's value on focus; a click on the hottest head's cell shows it in the model view
  const [l, h] = /^L(\d+)H(\d+)$/.exec(want.name).slice(1).map(Number);
  const cell = page.locator(`#patch-map td[data-index="${l * r.shape[1] + h}"]`);
  await cell.focus();
  assert.match(await page.textContent('#patch-cell'), new RegExp(`^${want.name}: ${want.value.toFixed(3).replace('-', '−')} of the clean metric`));
  await cell.click();
  await page.waitForSelector('#tab-model[aria-selected=true]');
  assert.equal(await page.inputValue('#layer'), String(l));
  assert.equal(await page.inputValue('#head'), String(h));

  // heads x positions
  await page.selectOption('#patch-sweep', 'headPositions');
  await page.click('#patch-run');
  const hp = await printed(page);
  const rp = await qkv.activationPatching(model, { clean: cleanIds, corrupted: corruptIds, answer, over: 'headPositions' });
  const wantP = expectedHottest(rp);
  assert.equal(hp.name, wantP.name);
  assert.ok(Math.abs(hp.value - wantP.value) <= 0.0051, `hottest ${hp.value} vs ${wantP.value}`);

  // the URL: corrupt and sweep written (the clean prompt is the page's: not written); a reload runs it again
  const h1 = new URLSearchParams((await page.evaluate(() => location.hash)).slice(1));
  assert.equal(h1.get('corrupt'), corrupt);
  assert.equal(h1.get('sweep'), 'headPositions');
  assert.equal(h1.has('clean'), false);
  const again = await open('#' + h1.toString());
  assert.deepEqual(await printed(again), hp);
  // an answer typed (by id) goes into the URL and comes back
  await again.fill('#patch-wrong', `#${answer[0] === 1 ? 2 : 1}`);
  await again.press('#patch-wrong', 'Tab');
  await again.waitForFunction(() => /answer=/.test(location.hash));
  const h2 = new URLSearchParams((await again.evaluate(() => location.hash)).slice(1));
  assert.equal(h2.get('answer'), `${answer[0]},${answer[0] === 1 ? 2 : 1}`);
  const third = await open('#' + h2.toString());
  await printed(third);
  assert.match(await third.textContent('#patch-answer'), new RegExp(`\\(id ${answer[0] === 1 ? 2 : 1}\\), as you set them`));
  assert.deepEqual([page.problems, again.problems, third.problems].flat(), []);
  await Promise.all([page.close(), again.close(), third.close()]);
});

test('patching: different token counts are said (where they part) and Run is disabled; Cancel stops a long sweep and Run works again', async () => {
  const page = await open(hash({ model: MODEL, prompt: clean }));
  // a corrupted prompt with one token more at position 3
  const longer = [...corruptIds.slice(0, 3), ...randomWords(1, 5, new Set(corruptIds)), ...corruptIds.slice(3)];
  await page.fill('#patch-corrupt', model.tokenizer.decode(longer));
  const q = (ids) => ids.map((id) => `'${model.tokenizer.decode([id])}'`).join(' ');
  const note = await page.textContent('#patch-tokens');
  assert.ok(note.startsWith(`clean has ${cleanIds.length} tokens, corrupted ${longer.length}: they part at token 0 (`), note);
  // the corrupted span ends where the common end (the second copy) starts: 11 tokens, the first 6 shown
  const span = longer.slice(0, longer.length - 10);
  assert.ok(note.includes(` vs ${q(span.slice(0, 6))} … and ${span.length - 6} more)`), note);
  assert.equal(await page.isDisabled('#patch-run'), true);

  // a long sweep: heads x positions over the model's whole context
  const T = model.dims.positions / 2;
  const long = (ids) => model.tokenizer.decode(Array.from({ length: T }, (_v, i) => ids[i % ids.length]));
  await page.fill('#prompt', long(cleanIds));
  await page.fill('#patch-corrupt', long(corruptIds));
  await page.selectOption('#patch-sweep', 'headPositions');
  await page.click('#patch-run');
  await cancelWhenMoving(page, '#patching-panel', '#patch-bar', '#patch-cancel');
  await page.waitForSelector('#patching-panel[data-state=cancelled]', { timeout: 30_000 });
  assert.match(await page.textContent('#patch-msg'), /^Cancelled after \d+ of \d+ cells/);
  assert.equal(await page.isVisible('#patch-progress'), false);
  assert.equal(await page.isVisible('#patch-result'), false);
  assert.equal(new URLSearchParams((await page.evaluate(() => location.hash)).slice(1)).has('sweep'), false);
  // Run again: a short sweep finishes
  await page.selectOption('#patch-sweep', 'residPre');
  await page.click('#patch-run');
  await page.waitForSelector('#patching-panel[data-state=done]', { timeout: 60_000 });
  assert.equal(await page.locator('#patch-map td').count(), model.dims.layers * model.tokenizer.encode(long(cleanIds)).length);
  assert.deepEqual(page.problems, []);
  await page.close();
});

test('patching at 390 px: the panel fits the page width (the map scrolls in its own box) and is keyboard reachable', async () => {
  const page = await open(hash({ model: MODEL, prompt: clean, corrupt, sweep: 'headPositions' }), { width: 390, height: 844 });
  await printed(page);
  const box = await page.evaluate(() => {
    const p = document.querySelector('#patching-panel').getBoundingClientRect();
    const map = document.querySelector('#patch-map');
    return { page: document.documentElement.scrollWidth, right: p.right, mapScrolls: map.scrollWidth > map.clientWidth };
  });
  assert.ok(box.page <= 390 && box.right <= 390, `the page is ${box.page} px wide, the panel ends at ${box.right}`);
  assert.equal(box.mapScrolls, true, 'the heads x positions map scrolls inside its box');
  // Tab from the sweep select reaches Run, then the cells
  await page.focus('#patch-sweep');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'patch-run');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.dataset.index), '0', 'the map is the next tab stop');
  assert.match(await page.textContent('#patch-cell'), /^L0H0 at 0 /);
  // the arrow keys move between the cells: right to position 1, down to head 1
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowDown');
  assert.match(await page.textContent('#patch-cell'), /^L0H1 at 1 /);
  // Enter opens that head in the model view
  await page.keyboard.press('Enter');
  await page.waitForSelector('#tab-model[aria-selected=true]');
  assert.equal(await page.inputValue('#head'), '1');
  assert.deepEqual(page.problems, []);
  await page.close();
});
