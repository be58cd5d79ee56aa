// The direct logit attribution panel, read as a person reads it (tiny-kjv-induction):
// - the ranked list's printed parts and values against qkv's logitAttribution run here in Node on
//   the same model, prompt, position and tokens (the token A default: the argmax of forward's
//   logits there), "the other N parts" against the sum of the rest, the printed sum of all parts
//   against the printed logit (the same digits) and the Node total; the heads grid's printed
//   values against the heads' parts;
// - "A rather than B" at a chosen position, both typed; B = A said in the panel;
// - a click on a head's cell shows that head in the explorer's model view;
// - the URL: attr, attrA, attrB written; a fresh page on that URL prints the same list;
// - at 390 px nothing of the panel is wider than the page.
// Run is clicked right after typing (the panel reads the prompt as typed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import * as qkv from 'qkv';
import { ROOT, hash, launch, openPage, shownNumber } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

const DESKTOP = { width: 1280, height: 1000 };
const PROMPT = 'And the LORD spake unto Moses, saying, Speak unto the children of Israel, and say unto them, Speak unto the children of';
const MODEL = 'tiny-kjv-induction';

let server, url, browser, model, ids;
before(async () => {
  ({ server, url } = await serveDemo({ port: 0 }));
  browser = await launch();
  model = await qkv.loadModel(join(ROOT, 'web/models', MODEL));
  ids = model.tokenizer.encode(PROMPT);
});
after(async () => { await browser?.close(); server?.close(); model?.dispose(); });


async function open(h, viewport = DESKTOP, b = browser) {
  const page = await openPage(b, url + 'index.html' + h, { viewport });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await page.waitForFunction(() => Number(document.body.dataset.tokens) > 0, null, { timeout: 30_000 });
  return page;
}
const done = (page) => page.waitForSelector('#attribution-panel[data-state=done]', { timeout: 30_000 });

/** The list as printed: each listed part (its library name, first word of the label) and value, the rest, the sum and the logit. */
async function printed(page) {
  const rows = await page.$$eval('#attr-list tr', (trs) => trs.map((tr) => ({ cls: tr.className, part: tr.dataset.part ?? null, cells: [...tr.children].map((c) => c.textContent) })));
  const pick = (cls) => rows.find((r) => r.cls === cls);
  return {
    parts: rows.filter((r) => r.cls === 'attr-part').map((r) => ({ name: r.cells[1].split(' ')[0], label: r.cells[1], part: r.part, value: r.cells[2] })),
    rest: pick('attr-rest')?.cells, sum: pick('attr-sum').cells, total: pick('attr-total').cells,
  };
}

/** Asserts the printed list against logitAttribution in Node. */
function assertList(p, r, label) {
  const ranked = [...r.parts].sort((a, b) => Math.abs(b.value) - Math.abs(a.value));
  const digits = p.sum[2].split('.')[1].length;
  const tol = 0.5 * 10 ** -digits + 1e-4; // the printed digits, and float32 differences between wasm builds
  assert.equal(p.parts.length, Math.min(10, r.parts.length), `${label}: 10 parts listed`);
  const byName = new Map(r.parts.map((x) => [x.name, x.value]));
  p.parts.forEach((x, i) => {
    assert.equal(x.name, x.part, `${label}: the label starts with the library's name`);
    assert.ok(byName.has(x.name), `${label}: ${x.name} is a part`);
    assert.ok(Math.abs(shownNumber(x.value) - byName.get(x.name)) <= tol, `${label}: ${x.name} ${x.value} vs ${byName.get(x.name)}`);
    // ranked by |value| (a swap only between parts equal to within the tolerance)
    assert.ok(Math.abs(Math.abs(byName.get(x.name)) - Math.abs(ranked[i].value)) <= 2e-4, `${label}: rank ${i + 1} is ${x.name}, Node's ${ranked[i].name}`);
  });
  const listed = new Set(p.parts.map((x) => x.name));
  const rest = r.parts.filter((x) => !listed.has(x.name));
  assert.equal(p.rest[1], `the other ${rest.length} parts`);
  assert.ok(Math.abs(shownNumber(p.rest[2]) - rest.reduce((s, x) => s + x.value, 0)) <= tol, `${label}: the rest ${p.rest[2]}`);
  assert.equal(p.sum[1], `sum of all ${r.parts.length} parts`);
  // the printed sum equals the printed logit to the last digit, and both are Node's total
  assert.equal(p.sum[2], p.total[2], `${label}: sum ${p.sum[2]} = logit ${p.total[2]}`);
  assert.ok(digits >= 3);
  assert.ok(Math.abs(shownNumber(p.total[2]) - r.total) <= tol, `${label}: logit ${p.total[2]} vs Node ${r.total}`);
}

test('the list and the grid = logitAttribution in Node (the top prediction at the last position, then A rather than B at position 9); a head click; the URL', async () => {
  const page = await open(hash({ model: MODEL, prompt: 'In the beginning' }));
  await page.fill('#prompt', PROMPT);
  await page.click('#attr-run');
  await done(page);
  const T = ids.length, V = model.dims.vocab;
  const out = await model.forward(ids, { logits: 'all' });
  const last = out.logits.data.subarray((T - 1) * V, T * V);
  const top = last.indexOf(Math.max(...last));
  const r = await qkv.logitAttribution(model, ids, { tokens: [top] });
  assertList(await printed(page), r, 'top prediction');
  assert.match(await page.textContent('#attr-what'), new RegExp(`^After position ${T - 1} .*: logit\\(${model.tokenizer.decode([top]).replace(/ /g, '␣')}\\) = .*the model's top prediction there\\.$`));
  // the grid: every head's printed value (2 decimals) and its data value
  const { layers: L, heads: H } = model.dims;
  const cells = await page.$$eval('#attr-grid button.attr-head', (bs) => bs.map((b) => ({ l: b.dataset.layer, h: b.dataset.head, text: b.textContent, v: Number(b.dataset.value) })));
  assert.equal(cells.length, L * H);
  const part = new Map(r.parts.map((x) => [x.name, x.value]));
  for (const c of cells) {
    const v = part.get(`L${c.l}H${c.h}`);
    assert.ok(Math.abs(c.v - v) <= 1e-4, `L${c.l}H${c.h}: ${c.v} vs ${v}`);
    assert.ok(Math.abs(shownNumber(c.text) - v) <= 0.005 + 1e-4, `L${c.l}H${c.h} printed ${c.text} vs ${v}`);
  }
  // hover shows the value; a click shows the head in the model view
  await page.hover('#attr-grid button.attr-head[data-layer="2"][data-head="0"]');
  assert.match(await page.textContent('#attr-detail'), /^L2H0 \(layer 2, head 0\): [+−]?\d+\.\d{3} of /);
  await page.click('#attr-grid button.attr-head[data-layer="2"][data-head="0"]');
  await page.waitForSelector('#tab-model[aria-selected=true]');
  assert.equal(await page.inputValue('#layer'), '2');
  assert.equal(await page.inputValue('#head'), '0');
  assert.ok(await page.isVisible('#view-model'));

  // A rather than B after position 9 (" Speak"), typed, then Run at once
  const a = model.tokenizer.encode('unto', { addSpecialTokens: false })[0], b = model.tokenizer.encode('the', { addSpecialTokens: false })[0];
  await page.selectOption('#attr-pos', '9');
  await page.fill('#attr-a', 'unto');
  await page.fill('#attr-b', 'the');
  await page.click('#attr-run');
  await page.waitForFunction(() => location.hash.includes('attr=9'));
  await done(page);
  const pair = await qkv.logitAttribution(model, ids, { position: 9, tokens: [a, b] });
  const shown = await printed(page);
  assertList(shown, pair, 'unto rather than the');
  assert.match(shown.total[1], /^logit\(␣unto\) − logit\(␣the\) \(the forward's\)$/);
  const link = page.url();
  assert.match(link, new RegExp(`attr=9&attrA=${a}&attrB=${b}`));
  // B the same token as A: the panel says why, nothing is drawn over the last result
  await page.fill('#attr-b', 'unto');
  await page.click('#attr-run');
  await page.waitForSelector('#attribution-panel[data-state=error]');
  assert.match(await page.textContent('#attr-msg'), /^The attribution failed: token B is token A \(␣unto\): a logit difference needs two tokens$/);
  assert.deepEqual(await printed(page), shown);
  assert.deepEqual(page.problems, []);
  await page.close();

  // the link in a fresh context: the same list, the tokens in their fields
  const ctx = await browser.newContext({ viewport: DESKTOP });
  const again = await ctx.newPage();
  await again.goto(link);
  await done(again);
  assert.deepEqual(await printed(again), shown);
  assert.equal(await again.inputValue('#attr-a'), model.tokenizer.decode([a]));
  assert.equal(await again.inputValue('#attr-pos'), '9');
  await ctx.close();
});

test('390 px: the attribution panel fits the page (its grid scrolls in its box)', async () => {
  const page = await open(hash({ model: MODEL, prompt: PROMPT, attr: String(ids.length - 1) }), { width: 390, height: 844 });
  await done(page);
  const wide = await page.evaluate(() => [...document.querySelectorAll('#attribution-panel *')].filter((e) => {
    const box = e.closest('.scroll-x');
    return e.getBoundingClientRect().right > innerWidth + 1 && !(box && box !== e && box.getBoundingClientRect().right <= innerWidth + 1);
  }).map((e) => e.id || e.className || e.tagName));
  assert.deepEqual(wide, [], 'nothing of the panel outside a scrolling box is wider than the page');
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= innerWidth), 'the page does not scroll sideways');
  // keyboard: Tab from Run reaches the grid's buttons (they are buttons), Enter on one selects the head
  await page.focus('#attr-grid button.attr-head[data-layer="1"][data-head="3"]');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#tab-model[aria-selected=true]');
  assert.equal(await page.inputValue('#head'), '3');
  await page.close();
});
