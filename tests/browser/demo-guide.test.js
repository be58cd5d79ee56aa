// The model page's guided example, read as a person reads it: on a fresh page load one click
// ("Show me an induction head", no typing) loads tiny-kjv-induction, types a repeated random
// sequence of words and prints four steps' figures. Each printed figure is recomputed here in
// Node with qkv (dist/) on the same model and the same ids (read from the panel and from the
// printed prompt, which must encode to them): the lens's per-layer mean probability and top-1
// count of the correct word on the second copy (logitLens), the attribution's top head and its
// value (logitAttribution), the patching sweep's hottest cell and every cell (activationPatching),
// the second copy's loss and the last word's probability with and without the head (forward with
// headMask). A step's button shows its view (the URL's guide and remove fields, Test a head's
// panel); a reload restores the guide at that step, also from a link that names only the step;
// keyboard; Cancel; 390 px.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import * as qkv from 'qkv';
import { ROOT, launch, openPage, shownNumber } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

const DESKTOP = { width: 1280, height: 1000 };
const PHONE = { width: 390, height: 844 };
const MODEL = join(ROOT, 'web/models/tiny-kjv-induction');

let server, url, browser, model;
before(async () => {
  ({ server, url } = await serveDemo({ port: 0 }));
  browser = await launch();
  model = await qkv.loadModel(MODEL);
});
after(async () => { await browser?.close(); server?.close(); model?.dispose(); });

const show = (t) => `"${t.replace(/ /g, '␣').replace(/\n/g, '↵')}"`;
const tok = (id) => show(model.tokenizer.decode([id]));
const name = (l, h) => `L${l}H${h}`;
/** |printed - exact| within the printed rounding (and float32 slack between the page's wasm and Node's). */
function near(printed, exact, digits, what) {
  assert.ok(Math.abs(shownNumber(printed) - exact) <= 0.5 * 10 ** -digits + 2e-4, `${what}: printed ${printed}, qkv in Node ${exact}`);
}
const argmax = (xs) => xs.reduce((k, x, i) => (x > xs[k] ? i : k), 0);

function logSoftmaxAt(x, o, V, v) {
  let m = -Infinity;
  for (let i = 0; i < V; i++) m = Math.max(m, x[o + i]);
  let z = 0;
  for (let i = 0; i < V; i++) z += Math.exp(x[o + i] - m);
  return x[o + v] - m - Math.log(z);
}

/** The figures the guide must print, computed here with qkv on `ids` (A + A without its last word) and `corrupted`. */
async function expected(ids, corrupted) {
  const T = (ids.length + 1) / 2, last = ids.length - 1, { layers: L, heads: H } = model.dims;
  const A = ids.slice(0, T);
  const positions = Array.from({ length: T - 1 }, (_v, k) => T + k);
  const target = ids.slice(1).concat(A[T - 1]);
  const lens = await qkv.logitLens(model, ids, { topK: 1, target });
  const rows = lens.layers.map((row) => ({
    meanP: positions.reduce((s, t) => s + row[t].targetP, 0) / positions.length,
    top1: positions.filter((t) => row[t].targetRank === 0).length,
  }));
  const attr = await qkv.logitAttribution(model, ids, { position: last, tokens: [A[T - 1]] });
  const heads = attr.parts.filter((p) => /^L\d+H\d+$/.test(p.name)).sort((a, b) => b.value - a.value);
  const cl = (await model.forward(corrupted)).logits.data, V = cl.length / corrupted.length, o = last * V;
  const order = [...Array(V).keys()].sort((a, b) => cl[o + b] - cl[o + a]);
  const answer = [A[T - 1], order[0] === A[T - 1] ? order[1] : order[0]];
  const sweep = await qkv.activationPatching(model, { clean: ids, corrupted, answer, over: 'heads' });
  const hot = argmax([...sweep.values]);
  const loss = async (headMask) => {
    const x = (await model.forward(ids, { logits: 'all', ...(headMask ? { headMask } : {}) })).logits.data;
    return { loss: -positions.reduce((s, t) => s + logSoftmaxAt(x, t * V, V, target[t]), 0) / positions.length, p: Math.exp(logSoftmaxAt(x, last * V, V, target[last])) };
  };
  const base = await loss();
  const removed = [];
  for (let l = 0; l < L; l++) for (let h = 0; h < H; h++) removed.push(await loss(Array.from({ length: L }, (_v, i) => Array.from({ length: H }, (_w, j) => (i === l && j === h ? 0 : 1)))));
  return { rows, heads, total: attr.total, answer, sweep, hot: [Math.floor(hot / H), hot % H], base, removed, last, A };
}

/** What the panel prints, parsed. */
async function printed(page) {
  const step = (n) => `#guide-steps > li[data-step="${n}"]`;
  const lensRows = await page.$$eval(`${step(1)} tbody tr`, (trs) => trs.map((tr) => [...tr.children].map((c) => c.textContent)));
  const attrLine = await page.textContent(`${step(2)} .guide-fig`);
  const a = /^At position (\d+) \((".*"), next (".*")\), L(\d+)H(\d+) adds ([+−][\d.]+) to the logit of (".*") \(the logit: (−?-?[\d.]+)\)\./.exec(attrLine);
  assert.ok(a, `attribution line: ${attrLine}`);
  const patchLine = await page.textContent(`${step(3)} .guide-fig`);
  const p = /^Hottest cell: L(\d+)H(\d+) = (-?[\d.]+)\. The metric, logit (".*") − logit (".*"): clean (-?[\d.]+), corrupted (-?[\d.]+)\./.exec(patchLine);
  assert.ok(p, `patching line: ${patchLine}`);
  const cells = await page.$$eval(`${step(3)} tbody tr`, (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((c) => c.textContent)));
  const removeLine = await page.textContent(`${step(4)} .guide-fig`);
  const r = /^Without L(\d+)H(\d+) the second copy's loss goes from ([\d.]+) to ([\d.]+) nats\/token \(([+−][\d.]+)\) and p\((".*")\) at the last position from ([\d.]+) to ([\d.]+)\. Removing any other single head: at most ([+−][\d.]+) \(L(\d+)H(\d+)\)\.$/.exec(removeLine);
  assert.ok(r, `removal line: ${removeLine}`);
  return { lensRows, a, p, cells, r, verdict: await page.textContent('#guide-verdict') };
}

/** Checks every printed figure against `want`. */
function assertFigures(got, want, T) {
  const { lensRows, a, p, cells, r } = got;
  assert.equal(lensRows.length, want.rows.length);
  want.rows.forEach((w, k) => {
    near(lensRows[k][1], w.meanP, 3, `lens row ${k} (${lensRows[k][0]}) mean p`);
    assert.equal(lensRows[k][2], `${w.top1} of ${T - 1}`, `lens row ${k} top-1`);
  });
  assert.equal(Number(a[1]), want.last);
  assert.equal(a[3], tok(want.A[T - 1]));
  assert.equal(a[7], tok(want.A[T - 1]));
  assert.equal(name(a[4], a[5]), want.heads[0].name, 'the attribution names its top head');
  near(a[6], want.heads[0].value, 2, 'its part');
  near(a[8], want.total, 2, 'the logit');
  assert.deepEqual([p[1], p[2]].map(Number), want.hot, 'the hottest cell');
  near(p[3], want.sweep.values[want.hot[0] * model.dims.heads + want.hot[1]], 2, 'its value');
  assert.deepEqual([p[4], p[5]], want.answer.map(tok), 'the answer tokens');
  near(p[6], want.sweep.cleanMetric, 2, 'm(clean)');
  near(p[7], want.sweep.corruptedMetric, 2, 'm(corrupted)');
  cells.forEach((row, l) => row.forEach((c, h) => near(c, want.sweep.values[l * model.dims.heads + h], 2, `cell L${l}H${h}`)));
  // step 4 removes the patching's head
  assert.deepEqual([r[1], r[2]].map(Number), want.hot);
  const gone = want.removed[want.hot[0] * model.dims.heads + want.hot[1]];
  near(r[3], want.base.loss, 3, 'loss with every head');
  near(r[4], gone.loss, 3, 'loss without the head');
  near(r[7], want.base.p, 3, 'p with every head');
  near(r[8], gone.p, 3, 'p without the head');
  const others = want.removed.map((x, k) => ({ k, delta: x.loss - want.base.loss })).filter((x) => x.k !== want.hot[0] * model.dims.heads + want.hot[1]);
  const most = others.reduce((m, x) => (x.delta > m.delta ? x : m));
  near(r[9], most.delta, 3, 'the largest rise of any other head');
  assert.equal(name(r[10], r[11]), name(Math.floor(most.k / model.dims.heads), most.k % model.dims.heads));
}

test('one click on a fresh page: the guide\'s printed heads and figures = qkv in Node on the same sequence; a step shows its view; its link (a reload) restores it at 390 px', async () => {
  const page = await openPage(browser, url + 'index.html', { viewport: DESKTOP });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  assert.equal(await page.inputValue('#model'), './models/tiny-kjv-bpe/', 'a fresh load has the default model');
  await page.click('#guide-run');
  await page.waitForSelector('#guide-panel[data-guide=done][data-step="1"]', { timeout: 60_000 });
  assert.equal(await page.inputValue('#model'), './models/tiny-kjv-induction/');

  // the sequence: the panel's ids, the printed prompt encodes to them, the prompt box holds it
  const ids = (await page.getAttribute('#guide-panel', 'data-ids')).split(',').map(Number);
  const corrupted = (await page.getAttribute('#guide-panel', 'data-corrupted')).split(',').map(Number);
  const text = await page.textContent('#guide-prompt');
  assert.deepEqual(model.tokenizer.encode(text), ids, 'the printed prompt is the sequence');
  assert.equal(await page.inputValue('#prompt'), text);
  assert.deepEqual(model.tokenizer.encode(await page.textContent('#guide-steps .guide-corrupt')), corrupted);
  const T = (ids.length + 1) / 2;
  assert.ok(T >= 12 && T <= 16 && Number.isInteger(T));
  assert.deepEqual(ids.slice(T), ids.slice(0, T - 1), 'the second copy repeats the first');
  assert.equal(new Set(ids.slice(0, T)).size, T, 'distinct words');
  assert.deepEqual(corrupted.slice(T), ids.slice(T), 'the corrupted prompt keeps the second copy');
  assert.ok(corrupted.slice(0, T).every((x) => !ids.includes(x)), 'and replaces the first');
  assert.equal(await page.getAttribute('body', 'data-tokens'), String(ids.length), 'the explorer shows the prompt');

  const want = await expected(ids, corrupted);
  const got = await printed(page);
  assertFigures(got, want, T);
  // the verdict says whether the measures agree on the head
  const agree = want.heads[0].name === name(...want.hot);
  assert.match(got.verdict, agree ? new RegExp(`pick the same head: ${name(...want.hot)}\\.`)
    : new RegExp(`The patching picks ${name(...want.hot)}; the attribution ranks ${want.heads[0].name} first`));
  assert.match(page.url(), /[#&]guide=1(&|$)/);
  assert.match(page.url(), /[#&]model=tiny-kjv-induction(&|$)/);

  // step 4 from the keyboard: Test a head removes the named head and prints the prompt's run without it
  await page.focus('#guide-steps > li[data-step="4"] button');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#guide-panel[data-step="4"] #guide-steps > li[data-step="4"].current');
  assert.equal(await page.textContent('#test-what'), `Removed: layer ${want.hot[0]} head ${want.hot[1]}.`);
  await page.waitForSelector('body[data-test=done] #test-result:not([hidden]) table', { timeout: 30_000 });
  const link = page.url();
  assert.match(link, new RegExp(`[#&]remove=${want.hot[0]}\\.${want.hot[1]}(&|$)`));
  assert.match(link, /[#&]guide=4(&|$)/);

  // the link at 390 px in a fresh context: the guide runs again and shows step 4 with the same figures
  const other = await browser.newContext({ viewport: PHONE });
  const phone = await other.newPage();
  phone.problems = [];
  phone.on('pageerror', (e) => phone.problems.push(e.message));
  await phone.goto(link);
  await phone.waitForSelector('#guide-panel[data-guide=done][data-step="4"]', { timeout: 60_000 });
  assert.equal(await phone.getAttribute('#guide-panel', 'data-ids'), ids.join(','));
  assertFigures(await printed(phone), want, T);
  assert.equal(await phone.getAttribute('#guide-steps > li[data-step="4"]', 'aria-current'), 'step');
  await phone.waitForSelector('body[data-test=done] #test-result:not([hidden]) table', { timeout: 30_000 });
  const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `the page is ${overflow}px wider than the 390 px viewport`);
  const right = await phone.$eval('#guide-panel', (e) => e.getBoundingClientRect().right);
  assert.ok(right <= 391, `the guide's right edge ${right}`);
  assert.deepEqual([...page.problems, ...phone.problems], []);
  await other.close();
  await page.close();
});

test('Cancel stops the walk (clicked in the same task as the button); the button runs it again', async () => {
  const page = await openPage(browser, url + 'index.html', { viewport: DESKTOP });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await page.evaluate(() => { document.querySelector('#guide-run').click(); document.querySelector('#guide-cancel').click(); });
  await page.waitForSelector('#guide-panel[data-guide=cancelled]', { timeout: 60_000 });
  assert.match(await page.textContent('#guide-msg'), /^Cancelled/);
  assert.equal(await page.isHidden('#guide-body'), true, 'no figures drawn');
  assert.doesNotMatch(page.url(), /guide=/);
  await page.click('#guide-run');
  await page.waitForSelector('#guide-panel[data-guide=done]', { timeout: 60_000 });
  assert.equal(await page.isHidden('#guide-msg'), true);
  assert.deepEqual(page.problems, []);
  await page.close();
});

test('a link with only #guide=2 loads the guide\'s model, types its prompt and shows step 2', async () => {
  const page = await openPage(browser, url + 'index.html#guide=2', { viewport: DESKTOP });
  await page.waitForSelector('#guide-panel[data-guide=done][data-step="2"]', { timeout: 60_000 });
  assert.equal(await page.inputValue('#model'), './models/tiny-kjv-induction/');
  assert.equal(await page.inputValue('#prompt'), await page.textContent('#guide-prompt'));
  assert.equal(await page.getAttribute('#guide-steps > li[data-step="2"]', 'aria-current'), 'step');
  // the explorer shows the head the attribution names
  const [, l, h] = /, L(\d+)H(\d+) adds /.exec(await page.textContent('#guide-steps > li[data-step="2"] .guide-fig'));
  await page.waitForFunction(([a, b]) => /[#&]guide=2(&|$)/.test(location.hash) && new RegExp(`[#&]layer=${a}&head=${b}(&|$)`).test(location.hash), [l, h]);
  assert.equal(await page.getAttribute('#tab-model', 'aria-selected'), 'true');
  assert.deepEqual(page.problems, []);
  await page.close();
});
