// The Encoders page's fill-mask panel has the model page's tools, read
// as a person reads them:
// - test a head: a click on a head in the model view removes it, a click on a cell of its
//   enlarged map blocks that edge; the top-5 at the [MASK] before and after, the KL and the
//   masked-token loss of the target word as printed are checked against qkv's own fillMask /
//   forward with headMask / knockout, run here in Node on web/models/tiny-bert-kjv;
// - find heads: the scatter point of the head whose removal costs most sits where qkv's
//   headProbes (ablation: true, the masked-LM effect) puts it, read against the axes' ticks;
// - raw / rollout / flow: the enlarged map's cells against attentionRolloutSync / attentionFlowSync;
// - the view in the URL: a reload and the link opened in a fresh context show the same view
//   (model view, layer, head, removed heads, blocked cell, target word, the same printed result).
// Clicks at user speed and faster (the target typed and a head clicked at once).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import * as qkv from 'qkv';
import { ROOT, hash, launch, openPage } from './harness.js';
import { assertMatches } from './test-head-asserts.js';
import { assertMapModes } from './map-mode-asserts.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

const DESKTOP = { width: 1280, height: 1000 };
const TEXT = 'In the beginning God created the [MASK] and the earth.';

let server, url, browser, bert, ids, at;
before(async () => {
  ({ server, url } = await serveDemo({ port: 0 }));
  browser = await launch();
  bert = await qkv.loadModel(join(ROOT, 'web/models/tiny-bert-kjv'));
  ids = bert.tokenizer.encode(TEXT);
  at = ids.indexOf(bert.tokenizer.specialTokens.mask);
});
after(async () => { await browser?.close(); server?.close(); bert?.dispose(); });

async function open(h = '', b = browser) {
  const page = await openPage(b, url + 'encoders.html' + h, { viewport: DESKTOP });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await page.waitForSelector('#mask-out li');
  return page;
}
const show = (t) => t.replace(/ /g, '␣').replace(/\n/g, '↵');

/** softmax of position `at`'s logits [1, L, V], float64 */
function probsAt(logits) {
  const V = logits.shape[2], x = logits.data, o = at * V;
  let m = -Infinity;
  for (let v = 0; v < V; v++) m = Math.max(m, x[o + v]);
  const p = new Float64Array(V);
  let s = 0;
  for (let v = 0; v < V; v++) s += (p[v] = Math.exp(x[o + v] - m));
  return p.map((q) => q / s);
}

/** What the API says the test prints: fillMask's top-5 before and after, KL at the [MASK], -log p(target). */
async function expected(options, target) {
  const fb = await bert.fillMask(TEXT, { topK: 5 }), fa = await bert.fillMask(TEXT, { topK: 5, ...options });
  const pb = probsAt((await bert.forward(ids)).logits), pa = probsAt((await bert.forward(ids, options)).logits);
  let kl = 0;
  for (let v = 0; v < pb.length; v++) if (pb[v] > 0) kl += pb[v] * Math.log(pb[v] / pa[v]);
  const [tid] = bert.tokenizer.encode(target, { addSpecialTokens: false });
  const row = (f) => [show(bert.tokenizer.tokenText(f.tokenId)), f.score];
  return { before: fb.map(row), after: fa.map(row), kl, lossBefore: -Math.log(pb[tid]), lossAfter: -Math.log(pa[tid]) };
}

/** The result as printed: the table's rows and the summary line's numbers. */
async function printed(page, target) {
  await page.waitForSelector('body[data-test=done] #test-result:not([hidden]) table', { timeout: 30_000 });
  const rows = await page.$$eval('#test-result tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  const line = await page.textContent('#test-result .test-summary');
  const m = new RegExp(`^KL\\(before ‖ after\\) = ([\\d.]+) nats · the masked-token loss of “${target}” ([\\d.]+) → ([\\d.]+) nats`).exec(line);
  assert.ok(m, `summary line: "${line}"`);
  assert.equal(await page.textContent('#test-result caption'), 'At the [MASK], top 5');
  return { rows, kl: Number(m[1]), lossBefore: Number(m[2]), lossAfter: Number(m[3]), line };
}

test('Encoders page, test a head: a removed head and a blocked cell, the [MASK]\'s top-5, KL and loss as printed = qkv fillMask / forward with headMask / knockout', async () => {
  const page = await open();
  // the page's own predictions are fillMask's (the list above the views)
  const listed = await page.$$eval('#mask-out li', (lis) => lis.map((li) => li.dataset.token));
  assert.deepEqual(listed, (await bert.fillMask(TEXT, { topK: 5 })).map((p) => p.token));
  await page.selectOption('#enc-view', 'model');
  await page.check('#remove-mode');
  // the target typed and a head clicked at once (one task): the test runs with the new target
  await page.evaluate(() => {
    const t = document.querySelector('#mask-target');
    t.value = 'earth'; t.dispatchEvent(new Event('input'));
    document.querySelector('#thumbs button.thumb[data-layer="1"][data-head="2"]').click();
  });
  assert.equal(await page.textContent('#test-what'), 'Removed: layer 1 head 2.');
  const mask = [[1, 1, 1, 1], [1, 1, 0, 1], [1, 1, 1, 1], [1, 1, 1, 1]];
  const one = await printed(page, 'earth');
  assertMatches(one, await expected({ headMask: mask }, 'earth'), 'head 1.2 removed');
  assert.ok(one.kl > 0, 'removing a head changes the distribution at the [MASK]');
  assert.equal(await page.locator('#thumbs button.thumb.removed').count(), 1);

  // a cell of layer 3 head 0's enlarged map: the [MASK] query -> key 1 (chosen with clicks remove off)
  await page.uncheck('#remove-mode');
  await page.click('#thumbs button.thumb[data-layer="3"][data-head="0"]');
  await page.check('#remove-mode');
  await page.evaluate(() => { delete document.body.dataset.test; });
  await page.locator('#heatmap g.cell').nth(at * ids.length + 1).click();
  await page.waitForSelector('#heatmap g.cell[data-marked=true]');
  assert.match(await page.textContent('#test-what'), new RegExp(`Blocked: layer 3 head 0: query ${at} → key 1\\.$`));
  const both = await printed(page, 'earth');
  assertMatches(both, await expected({ headMask: mask, knockout: [{ layer: 3, heads: [0], block: [[at, 1]] }] }, 'earth'), 'and cell 3.0 [MASK]→1 blocked');

  // the maps after: the removed head's rows are 0
  await page.check('#maps-after');
  await page.uncheck('#remove-mode');
  await page.click('#thumbs button.thumb[data-layer="1"][data-head="2"]');
  const sums = await page.$$eval('#heatmap .rowsum', (ts) => ts.map((t) => t.textContent));
  assert.ok(sums.length === ids.length && sums.every((s) => s === '0.000'), `the removed head's rows after: ${sums}`);
  // the sentence pair on: the panel says the test needs the fill-mask sentence
  await page.check('#pair');
  await page.waitForFunction(() => /turn the sentence pair off/.test(document.querySelector('#test-msg').textContent));
  await page.uncheck('#pair');
  await page.waitForFunction(() => document.querySelector('#test-msg').hidden);
  assert.deepEqual((await printed(page, 'earth')).rows, both.rows, 'the same result again');
  assert.deepEqual(page.problems, []);
  await page.close();
});

test('Encoders page, find heads: the scatter point of the head whose removal costs most is where headProbes (masked-LM ablation) puts it', async () => {
  const page = await open();
  await page.click('#find-heads');
  await page.waitForSelector('body[data-probes=done] #scatter svg', { timeout: 60_000 });
  const r = await qkv.headProbes(bert, { ids, inductionSequences: 2, ablation: true });
  const masked = r.ablationTargets[0].map(([, id]) => `“${bert.tokenizer.token(id)}”`).join(', ');
  assert.match(await page.textContent('#probe-msg'), new RegExp(`^Probed on the sentence \\(${ids.length} tokens\\).*masked-token loss of ${masked} \\(masked BERT-style from seed 0\\)`));
  // bidirectional maps: the next-token probe is measured, and the message does not call it causal
  assert.ok(r.nextToken !== null && r.scores.every((s) => typeof s.nextToken === 'number'));
  assert.doesNotMatch(await page.textContent('#probe-msg'), /next-token/);
  assert.equal(await page.locator('#scatter .point').count(), bert.layers * bert.heads);
  const biggest = Math.max(...r.scores.map((s) => Math.abs(s.ablation)));
  const best = (s) => [['induction', s.induction], ['previous token', s.previousToken], ['next token', s.nextToken], ['sink', s.sink]].reduce((a, b) => (b[1] > a[1] ? b : a));
  const known = r.scores.reduce((a, b) => (b.ablation > a.ablation ? b : a));
  const [name, score] = best(known);
  const ticks = async (axis) => page.$$eval(`#scatter .${axis} .tick`, (ts, ax) => ts.map((t) => {
    const b = t.querySelector('text').getBoundingClientRect();
    return { v: Number(t.textContent.replace('−', '-')), at: ax === 'x-axis' ? b.x + b.width / 2 : b.y + b.height / 2 };
  }), axis);
  const read = (ts, px) => { const [a, b] = [ts[0], ts.at(-1)]; return a.v + ((px - a.at) * (b.v - a.v)) / (b.at - a.at); };
  const point = page.locator(`#scatter .point[data-layer="${known.layer}"][data-head="${known.head}"]`);
  const c = await point.locator('circle').boundingBox();
  const x = read(await ticks('x-axis'), c.x + c.width / 2), y = read(await ticks('y-axis'), c.y + c.height / 2);
  assert.ok(Math.abs(x - score) < 0.02, `x of ${known.layer}.${known.head}: ${x} vs ${name} ${score}`);
  assert.ok(Math.abs(y - known.ablation / biggest) < 0.02, `y: ${y} vs ${known.ablation / biggest}`);
  const title = await point.locator('title').textContent();
  const t = new RegExp(`^layer ${known.layer} head ${known.head}: ${name} ([\\d.]+); removing it: \\+([\\d.]+) nats per masked token`).exec(title);
  assert.ok(t && Math.abs(t[1] - score) <= 0.006 && Math.abs(t[2] - known.ablation) <= 2e-4, `tooltip "${title}" vs ${name} ${score}, +${known.ablation}`);
  // the thumbnails carry the probe labels
  await page.selectOption('#enc-view', 'model');
  assert.equal(await page.textContent(`#thumbs button.thumb[data-layer="${known.layer}"][data-head="${known.head}"] .probe`), `${name} ${score.toFixed(2)}`);
  // layer 0 head 1 gives each token's weight to the token after it: its label is its next-token score
  const next = r.scores.find((s) => s.layer === 0 && s.head === 1);
  assert.equal(best(next)[0], 'next token', `layer 0 head 1's strongest probe in Node: ${best(next)}`);
  assert.equal(await page.textContent('#thumbs button.thumb[data-layer="0"][data-head="1"] .probe'), `next token ${next.nextToken.toFixed(2)}`);
  // ... and the pattern badge read off its map says so too (it read "mixed" when the badges looked
  // only at keys up to the query, as if every model were causal); layer 0 head 0 looks back
  assert.equal(await page.textContent('#thumbs button.thumb[data-layer="0"][data-head="1"] .tag'), 'next token');
  assert.match(await page.getAttribute('#thumbs button.thumb[data-layer="0"][data-head="1"]', 'title'), /\(most weight on the token just after\); previous 0\.0\d, next 0\.9\d,/);
  assert.equal(await page.textContent('#thumbs button.thumb[data-layer="0"][data-head="0"] .tag'), 'previous token');
  // the warning box names the head farthest from the diagonal, with its strongest probe, and shows it on a click
  // (any head within 1e-3 of the largest distance: the page's wasm variant may round differently)
  const off = (s) => Math.abs(best(s)[1] - s.ablation / biggest);
  const farthest = Math.max(...r.scores.map(off));
  const warn = await page.textContent('#caveat-head');
  const w = /^The probes' warning: layer (\d+) head (\d+) \((induction|previous token|next token|sink) ([\d.]+)\)/.exec(warn);
  const far = w && r.scores.find((s) => s.layer === Number(w[1]) && s.head === Number(w[2]));
  assert.ok(far && off(far) >= farthest - 1e-3 && best(far)[0] === w[3] && Math.abs(best(far)[1] - Number(w[4])) <= 0.006, `warning "${warn}": farthest is ${farthest}`);
  await page.click('#caveat-head button');
  assert.match(await page.textContent('#heatmap svg text'), new RegExp(`^layer ${w[1]} · head ${w[2]} · `));
  assert.deepEqual(page.problems, []);
  await page.close();
});

test('Encoders page, the view in the URL: a reload and a shared link restore the model view, layer, head, removed head, blocked cell and target', async () => {
  const page = await open();
  await page.selectOption('#enc-view', 'model');
  await page.click('#thumbs button.thumb[data-layer="2"][data-head="1"]');
  await page.check('#remove-mode');
  await page.fill('#mask-target', 'heaven');
  await page.click('#thumbs button.thumb[data-layer="0"][data-head="3"]');
  await page.locator('#heatmap g.cell').nth(at * ids.length + 2).click();
  await page.waitForSelector('#heatmap g.cell[data-marked=true]');
  await page.waitForFunction(() => /block=/.test(location.hash));
  const shown = await printed(page, 'heaven');
  const link = page.url();
  assert.match(link, new RegExp(`#model=tiny-bert-kjv&prompt=.*&view=model&layer=2&head=1&map=raw&remove=0\\.3&block=2\\.1%3A${at}-2&target=heaven$`));
  await page.reload();
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  const again = await printed(page, 'heaven');
  assert.deepEqual(again.rows, shown.rows);
  assert.equal(again.line, shown.line);
  assert.equal(await page.inputValue('#enc-view'), 'model');
  assert.equal(await page.inputValue('#enc-layer'), '2');
  assert.match(await page.textContent('#heatmap svg text'), /^layer 2 · head 1 · /);
  assert.equal(await page.locator('#thumbs button.thumb.removed').count(), 1);
  assert.equal(await page.getAttribute('#thumbs button.thumb[data-layer="0"][data-head="3"]', 'data-removed'), 'true');
  assert.equal(await page.locator('#heatmap g.cell[data-marked=true]').count(), 1);
  assert.equal(await page.inputValue('#mask-target'), 'heaven');
  // the link opened in a fresh context (nothing shared with this page)
  const other = await browser.newContext();
  const shared = await open(link.slice(link.indexOf('#')), other);
  assert.deepEqual((await printed(shared, 'heaven')).rows, shown.rows);
  assert.equal(await shared.inputValue('#mask-text'), TEXT);
  assert.equal(await shared.textContent('#test-what'), await page.textContent('#test-what'));
  assert.deepEqual([...page.problems, ...shared.problems], []);
  await other.close();
  await page.close();
});

test('Encoders page, raw / rollout / flow: the enlarged map (last layer) is qkv\'s rollout and flow of the encoder\'s maps; Cancel goes back to raw', async () => {
  const page = await open(hash({ view: 'model', layer: '3' }));
  const { attentions } = await bert.forward(ids, { outputAttentions: true });
  await assertMapModes(page, {
    attentions, shape: { layers: bert.layers, heads: bert.heads }, causal: false,
    ids: { select: '#enc-map', note: '#enc-map-note', msg: '#mask-msg' },
  });
  assert.deepEqual(page.problems, []);
  await page.close();
});

test('Encoders page at 390 px: the test\'s table, the scatter and the model view fit the phone (no page overflow)', async () => {
  const page = await openPage(browser, url + 'encoders.html' + hash({ view: 'model', remove: '1.2' }), { viewport: { width: 390, height: 844 } });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await printed(page, 'heaven');
  await page.click('#find-heads');
  await page.waitForSelector('body[data-probes=done] #scatter svg', { timeout: 60_000 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `the page is ${overflow}px wider than the 390 px viewport`);
  assert.deepEqual(page.problems, []);
  await page.close();
});
