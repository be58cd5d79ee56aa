// The model page tests what a map suggests, read as a person reads it:
// - test a head: clicks in the model view remove heads, a click on a cell of the enlarged map
//   blocks it; the before/after top-5 probabilities, KL and the prompt's loss as printed are
//   checked against qkv's own forward (headMask, knockout) run here in Node on the same model;
// - find heads: the scatter point of a known head sits where its probe score and ablation effect
//   (qkv's headProbes, run here) put it, read off the axes' tick labels on the screen; the chips
//   carry the probe labels and the warning box names the head farthest from the diagonal;
// - raw / rollout / flow: the enlarged map's cells against attentionRolloutSync / attentionFlowSync;
// - the view in the URL: a reload, and the link opened in a fresh browser context, show the same
//   view (tab, layer, head, removed heads, the same printed result); a Hub model (the local
//   stand-in Hub) is probed by Find heads and comes back on a reload;
// - the Encoders page's rollout toggle.
// Clicks come at user speed and faster (two heads clicked in one task; typing then Run at once).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import * as qkv from 'qkv';
import { ROOT, hash, launch, openPage } from './harness.js';
import { assertMatches } from './test-head-asserts.js';
import { assertMapModes } from './map-mode-asserts.js';
import { serveDemo } from '../../tools/serve-demo.mjs';
import { serveFolderAsHub, writeGpt2Checkpoint } from './hub-server.js';

const DESKTOP = { width: 1280, height: 1000 };
const PROMPT = 'In the beginning God created the heaven and the earth. And the earth was';
const MODEL = join(ROOT, 'web/models/tiny-kjv-bpe');

let server, url, browser, model, ids;
before(async () => {
  ({ server, url } = await serveDemo({ port: 0 }));
  browser = await launch();
  model = await qkv.loadModel(MODEL);
  ids = model.tokenizer.encode(PROMPT);
});
after(async () => { await browser?.close(); server?.close(); model?.dispose(); });

const shownTokens = (page, n) => page.waitForFunction((k) => document.body.dataset.tokens === String(k), n, { timeout: 30_000 });
async function open(h, b = browser, tokens = ids.length) {
  const page = await openPage(b, url + 'index.html' + h, { viewport: DESKTOP });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await shownTokens(page, tokens);
  return page;
}

/** softmax of the last position's logits [1, L, V], float64 */
function lastProbs(logits) {
  const [, L, V] = logits.shape, x = logits.data, o = (L - 1) * V;
  let m = -Infinity;
  for (let v = 0; v < V; v++) m = Math.max(m, x[o + v]);
  const p = new Float64Array(V);
  let s = 0;
  for (let v = 0; v < V; v++) s += (p[v] = Math.exp(x[o + v] - m));
  return p.map((q) => q / s);
}
const top5 = (p) => [...p.keys()].sort((a, b) => p[b] - p[a]).slice(0, 5);
const show = (t) => t.replace(/ /g, '␣').replace(/\n/g, '↵');

/** What the API says the test prints: top-5 before and after, KL, the loss before and after. */
async function expected(options) {
  const b = await model.forward(ids, { logits: 'all' }), a = await model.forward(ids, { logits: 'all', ...options });
  const pb = lastProbs(b.logits), pa = lastProbs(a.logits);
  let kl = 0;
  for (let v = 0; v < pb.length; v++) if (pb[v] > 0) kl += pb[v] * Math.log(pb[v] / pa[v]);
  const row = (p, k) => [show(model.tokenizer.decode([k])), p[k]];
  return {
    before: top5(pb).map((k) => row(pb, k)), after: top5(pa).map((k) => row(pa, k)), kl,
    lossBefore: qkv.nextTokenLoss(b.logits, ids), lossAfter: qkv.nextTokenLoss(a.logits, ids),
  };
}

/** The result as printed: the table's rows and the summary line's numbers. */
async function printed(page) {
  await page.waitForSelector('body[data-test=done] #test-result:not([hidden]) table', { timeout: 30_000 });
  const rows = await page.$$eval('#test-result tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  const line = await page.textContent('#test-result .test-summary');
  const m = /^KL\(before ‖ after\) = ([\d.]+) nats · the prompt's loss ([\d.]+) → ([\d.]+) nats per token/.exec(line);
  assert.ok(m, `summary line: "${line}"`);
  return { rows, kl: Number(m[1]), lossBefore: Number(m[2]), lossAfter: Number(m[3]), line };
}

test('test a head: removed heads and a blocked cell, before and after as printed = qkv forward with headMask / knockout; the URL restores it', async () => {
  const page = await open(hash({ prompt: 'In the beginning' }), browser, model.tokenizer.encode('In the beginning').length);
  await page.click('#tab-model');
  await page.check('#remove-mode');
  // the prompt typed, then at once (before its 300 ms debounce) two heads clicked in one task:
  // the test runs on the old text, is replaced by the new prompt's pass, and runs on the new one
  await page.fill('#prompt', PROMPT);
  await page.$$eval('#thumbs button.thumb', (bs) => bs.filter((b) => b.dataset.layer === '1' && ['2', '3'].includes(b.dataset.head)).forEach((b) => b.click()));
  assert.equal(await page.textContent('#test-what'), 'Removed: layer 1 head 2, layer 1 head 3.');
  await shownTokens(page, ids.length);
  const mask = [[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]];
  const heads = await printed(page);
  assertMatches(heads, await expected({ headMask: mask }), 'heads 1.2, 1.3 removed');
  assert.ok(heads.kl > 0, 'removing two heads changes the distribution');
  assert.equal(await page.locator('#thumbs button.thumb.removed').count(), 2);
  assert.match(await page.getAttribute('#thumbs button.thumb[data-layer="1"][data-head="3"]', 'aria-label'), /^layer 1 head 3: .*; removed by the test$/);

  // a cell of the enlarged map of layer 2 head 0 (chosen with "clicks remove" off, at user speed)
  await page.uncheck('#remove-mode');
  await page.click('#thumbs button.thumb[data-layer="2"][data-head="0"]');
  await page.check('#remove-mode');
  const q = ids.length - 1;
  const cell = page.locator('#heatmap g.cell').nth(q * ids.length + 0);
  await page.evaluate(() => { delete document.body.dataset.test; });
  await cell.click();
  await page.waitForSelector('#heatmap g.cell[data-marked=true]');
  assert.match(await page.textContent('#test-what'), new RegExp(`Blocked: layer 2 head 0: query ${q} → key 0\\.$`));
  const both = await printed(page);
  assertMatches(both, await expected({ headMask: mask, knockout: [{ layer: 2, heads: [0], block: [[q, 0]] }] }), 'and cell 2.0 q→0 blocked');

  // the maps after: the removed heads' maps are 0 (their thumbnails' cells read 0 in the detail)
  await page.check('#maps-after');
  await page.uncheck('#remove-mode');
  await page.click('#thumbs button.thumb[data-layer="1"][data-head="2"]');
  const sums = await page.$$eval('#heatmap .rowsum', (ts) => ts.map((t) => t.textContent));
  assert.ok(sums.every((s) => s === '0.000'), `a removed head's rows after: ${sums}`);
  await page.uncheck('#maps-after');

  // reload: the same view (model tab, layer 1, head 2, the removed heads and blocked cell, the same result)
  const link = page.url();
  assert.match(link, /#model=tiny-kjv-bpe&prompt=.*&view=model&layer=1&head=2&map=raw&remove=1\.2%2C1\.3&block=2\.0%3A\d+-0$/);
  await page.reload();
  await page.waitForSelector('body[data-ready=true]');
  const again = await printed(page);
  assert.deepEqual(again.rows, both.rows);
  assert.equal(again.line, both.line);
  assert.equal(await page.getAttribute('#tab-model', 'aria-selected'), 'true');
  assert.match(await page.textContent('#heatmap svg text'), /^layer 1 · head 2 · /);
  assert.equal(await page.locator('#thumbs button.thumb.removed').count(), 2);
  // the link opened elsewhere (a fresh context: nothing shared with this page)
  const other = await browser.newContext();
  const shared = await open(link.slice(link.indexOf('#')), other);
  assert.deepEqual((await printed(shared)).rows, both.rows);
  assert.equal(await shared.inputValue('#prompt'), PROMPT);
  assert.deepEqual([...page.problems, ...shared.problems], []);
  await other.close();
  await page.close();
});

test('find heads: probe labels, the scatter point of a known head where headProbes puts it, the warning names the farthest head', async () => {
  const page = await open(hash({ prompt: PROMPT, view: 'model' }));
  await page.evaluate(() => {
    window.captions = [];
    new MutationObserver(() => window.captions.push(document.querySelector('#fwd-text').textContent))
      .observe(document.querySelector('#fwd-text'), { childList: true, characterData: true, subtree: true });
  });
  // Find heads, then Cancel at once (both in one task: faster than a user)
  await page.evaluate(() => { document.querySelector('#find-heads').click(); document.querySelector('#fwd-cancel').click(); });
  await page.waitForSelector('body[data-probes=cancelled]');
  assert.equal(await page.textContent('#probe-msg'), 'Cancelled: the heads were not probed. Find heads starts again.');
  assert.equal(await page.locator('#scatter svg').count(), 0);
  // type a longer prompt and click Find heads at once: the probes run on what was typed
  const typed = PROMPT + ' without form';
  const ids2 = model.tokenizer.encode(typed);
  await page.fill('#prompt', typed);
  await page.click('#find-heads');
  await page.waitForSelector('body[data-probes=done] #scatter svg', { timeout: 60_000 });
  const total = 1 + 2 + 1 + 16;
  assert.match(await page.textContent('#probe-msg'), new RegExp(`^Probed on the prompt \\(${ids2.length} tokens\\)`));
  const captions = await page.evaluate(() => window.captions);
  assert.ok(captions.some((c) => new RegExp(`^Probes: \\d+ % \\(\\d+ of ${total} forward passes\\)$`).test(c)), `captions: ${captions}`);
  const r = await qkv.headProbes(model, { ids: ids2, inductionSequences: 2 });
  // a GPT is causal: no next-token score, and the message says why (not a measured 0)
  assert.equal(r.nextToken, null);
  assert.match(await page.textContent('#probe-msg'), / No next-token score: the maps are causal, so every head's is 0 by construction\.$/);
  const biggest = Math.max(...r.scores.map((s) => Math.abs(s.ablation)));
  const best = (s) => [['induction', s.induction], ['previous token', s.previousToken], ['sink', s.sink]].reduce((a, b) => (b[1] > a[1] ? b : a));
  // the known head: the one whose removal costs most
  const known = r.scores.reduce((a, b) => (b.ablation > a.ablation ? b : a));
  const [name, score] = best(known);
  // its point on the screen, read against the axes' tick labels: the ticks and the point in one
  // read (one layout: the page can still be laying out the model view, which moves and scales
  // the scatter), once the page's forward passes are over and the ticks are laid out
  await page.waitForFunction(() => {
    const xs = [...document.querySelectorAll('#scatter .x-axis .tick text')].map((t) => t.getBoundingClientRect().x);
    return document.body.dataset.forward !== 'running' && xs.length >= 2 && xs[0] !== xs.at(-1);
  }, null, { timeout: 10_000 });
  const point = page.locator(`#scatter .point[data-layer="${known.layer}"][data-head="${known.head}"]`);
  assert.equal(await point.locator('text').textContent(), `${known.layer}.${known.head}`);
  const { x, y } = await page.evaluate(({ layer, head }) => {
    const ticks = (axis) => [...document.querySelectorAll(`#scatter .${axis} .tick`)].map((t) => {
      const r = t.querySelector('text').getBoundingClientRect();
      return { v: Number(t.textContent.replace('−', '-')), at: axis === 'x-axis' ? r.x + r.width / 2 : r.y + r.height / 2 };
    });
    const read = (ts, at) => { const [a, b] = [ts[0], ts.at(-1)]; return a.v + ((at - a.at) * (b.v - a.v)) / (b.at - a.at); };
    const c = document.querySelector(`#scatter .point[data-layer="${layer}"][data-head="${head}"] circle`).getBoundingClientRect();
    return { x: read(ticks('x-axis'), c.x + c.width / 2), y: read(ticks('y-axis'), c.y + c.height / 2) };
  }, { layer: known.layer, head: known.head });
  assert.ok(Math.abs(x - score) < 0.02, `x of ${known.layer}.${known.head}: ${x} vs ${name} ${score}`);
  assert.ok(Math.abs(y - known.ablation / biggest) < 0.02, `y: ${y} vs ${known.ablation / biggest}`);
  const title = await point.locator('title').textContent();
  const t = new RegExp(`^layer ${known.layer} head ${known.head}: ${name} ([\\d.]+); removing it: \\+([\\d.]+) nats per token`).exec(title);
  assert.ok(t && Math.abs(t[1] - score) <= 0.006 && Math.abs(t[2] - known.ablation) <= 2e-4, `tooltip "${title}" vs ${name} ${score}, +${known.ablation}`);
  // the chips (head view) carry each head's probe label
  await page.click('#tab-head');
  await page.selectOption('#layer', String(known.layer));
  assert.equal(await page.textContent(`#chips .chip[data-head="${known.head}"] .probe`), `${name} ${score.toFixed(2)}`);
  // the warning box names the head farthest from the diagonal
  // (any head within 1e-3 of the largest distance: the page's wasm variant may round differently)
  const off = (s) => Math.abs(best(s)[1] - s.ablation / biggest);
  const farthest = Math.max(...r.scores.map(off));
  const warning = await page.textContent('#caveat-head');
  const w = /^The probes' warning: layer (\d+) head (\d+) \((induction|previous token|sink) ([\d.]+)\)/.exec(warning);
  const far = w && r.scores.find((s) => s.layer === Number(w[1]) && s.head === Number(w[2]));
  assert.ok(far && off(far) >= farthest - 1e-3 && best(far)[0] === w[3], `warning "${warning}": farthest is ${farthest}`);
  await page.click('#caveat-head button');
  assert.match(await page.textContent('#heatmap svg text'), new RegExp(`^layer ${far.layer} · head ${far.head} · `));
  assert.deepEqual(page.problems, []);
  await page.close();
});

test('raw / rollout / flow: the enlarged map is qkv\'s rollout and flow of the page\'s maps; Cancel goes back to raw', async () => {
  const page = await open(hash({ prompt: PROMPT, view: 'model', layer: '3' }));
  const { attentions } = await model.forward(ids, { outputAttentions: true });
  await assertMapModes(page, {
    attentions, shape: { layers: model.dims.layers, heads: model.dims.heads }, causal: true,
    ids: { select: '#map', note: '#map-note', msg: '#gen-msg' },
  });
  assert.deepEqual(page.problems, []);
  await page.close();
});

test('Encoders page: the BERT head view\'s rollout toggle shows qkv\'s rollout of the encoder\'s maps (a pinned query\'s weight boxes)', async () => {
  const bert = await qkv.loadModel(join(ROOT, 'web/models/tiny-bert-kjv'));
  const page = await openPage(browser, url + 'encoders.html', { viewport: DESKTOP });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await page.waitForSelector('#enc-headview svg');
  const text = await page.inputValue('#mask-text');
  const bids = bert.tokenizer.encode(text);
  const { attentions } = await bert.forward(bids, { outputAttentions: true });
  const layer = bert.layers - 1, q = 2;
  const want = qkv.attentionRolloutSync(attentions).data.slice(q * bids.length, (q + 1) * bids.length);
  await page.selectOption('#enc-layer', String(layer));
  await page.selectOption('#enc-map', 'rollout');
  await page.waitForFunction(() => document.querySelector('#enc-map-note').textContent.startsWith('Rollout ('));
  await page.click(`#enc-headview .tokens-q g[data-index="${q}"]`);
  const boxes = await page.$$eval('#enc-headview g.boxes rect title', (ts) => ts.map((t) => t.textContent));
  assert.equal(boxes.length, bids.length, `one box per key, one fused map: ${boxes}`);
  boxes.forEach((b, j) => {
    const m = /^head 0: ([\d.]+)$/.exec(b);
    assert.ok(m && Math.abs(Number(m[1]) - want[j]) <= 6e-4, `key ${j}: "${b}" vs rollout ${want[j]}`);
  });
  // raw again: one box per head per key
  await page.selectOption('#enc-map', 'raw');
  await page.waitForFunction(() => document.querySelector('#enc-map-note').hidden);
  await page.click(`#enc-headview .tokens-q g[data-index="${q}"]`);
  assert.equal(await page.locator('#enc-headview g.boxes rect').count(), bids.length * bert.heads);
  assert.deepEqual(page.problems, []);
  bert.dispose();
  await page.close();
});

test('a Hub model: Find heads probes it, and a reload loads it again with the same view and test', async () => {
  const dir = join(ROOT, 'build/test-hub/gpt2-2x3-explorer');
  await writeGpt2Checkpoint(dir, { n_layer: 2, n_head: 3, n_embd: 24, n_positions: 64 }, 7);
  const hub = await serveFolderAsHub(dir, 'test-org/explorer');
  try {
    const page = await openPage(browser, `${url}index.html?${hub.query}`, { viewport: DESKTOP });
    await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
    await page.click('#hub-load');
    await page.waitForFunction(() => /^test-org\/explorer \(Hub\): 2 layers × 3 heads/.test(document.querySelector('#model-info').textContent), null, { timeout: 60_000 });
    await page.waitForSelector('#headview svg');
    await page.click('#find-heads');
    await page.waitForSelector('body[data-probes=done] #scatter svg', { timeout: 60_000 });
    assert.equal(await page.locator('#scatter .point').count(), 6);
    assert.match(await page.textContent('#chips .chip[data-head="2"] .probe'), /^(induction|previous token|sink) \d\.\d\d$/);
    await page.click('#tab-model');
    await page.check('#remove-mode');
    await page.click('#thumbs button.thumb[data-layer="0"][data-head="1"]');
    const before = await printed(page);
    await page.uncheck('#remove-mode');
    await page.click('#thumbs button.thumb[data-layer="1"][data-head="2"]');
    assert.match(page.url(), /#model=hub%3Atest-org%2Fexplorer&.*&view=model&layer=1&head=2&map=raw&remove=0\.1$/);
    await page.reload();
    await page.waitForFunction(() => /^test-org\/explorer \(Hub\): /.test(document.querySelector('#model-info').textContent), null, { timeout: 60_000 });
    const after = await printed(page);
    assert.deepEqual(after.rows, before.rows);
    assert.match(await page.textContent('#heatmap svg text'), /^layer 1 · head 2 · /);
    assert.deepEqual(page.problems, []);
    await page.close();
  } finally {
    await hub.close();
  }
});
