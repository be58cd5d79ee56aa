// The model page's views at GPT-2-small scale, in headless Chromium: a generated GPT-2-shaped
// checkpoint of 12 layers x 12 heads (tiny width, n_positions 1024, GPT-2's real vocab.json +
// merges.txt) served by a local "Hub", and a ~1000-token prompt. The head view is virtualised:
// it shows the first rows' labels, a mouse-wheel scroll brings the labels of the new rows, the
// canvas is inked where a visible query's strongest link ends (the strongest key computed by
// qkv in Node from the same files), a pinned query's off-screen keys are named at the edge, and
// the label nodes stay a few hundred. The model view's thumbnails are max-pooled (128 px) and
// the neuron view lists a bounded number of bars. Times are written to
// build/artifacts/demo/views-long.json, never asserted.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, openPage, watchMainThread } from './harness.js';
import { LONG_PROMPT as PROMPT, startDemoHub } from './hub-server.js';

const ART = join(ROOT, 'build/artifacts/demo');
const DIR = join(ROOT, 'build/test-hub/gpt2-12x12');
let demo, hub, browser, stop;

/** The reference: qkv in Node on the same files: the prompt's ids, token texts and layer 0's attention [H][L][L]. */
async function reference() {
  const { loadModel } = await import(pathToFileURL(join(ROOT, 'dist/index.js')).href);
  const model = await loadModel(DIR);
  const ids = model.tokenizer.encode(PROMPT).slice(-1024);
  const out = await model.forward(ids, { outputAttentions: true, logits: 'last' });
  const t = out.attentions[0];
  const L = ids.length, H = t.shape[t.shape.length - 3];
  const data = t.data; // [1, H, L, L]
  const attn = Array.from({ length: H }, (_h, h) => Array.from({ length: L }, (_i, i) => data.subarray((h * L + i) * L, (h * L + i + 1) * L).slice()));
  const texts = ids.map((id) => model.tokenizer.decode([id]));
  out.logits.dispose?.(); out.attentions.forEach((a) => a.dispose?.()); model.dispose?.();
  return { ids, texts, attn, H, L };
}

/** What the page prints for a token (web/demo/src/ui.ts showToken, then cut to 12 characters). */
const label = (t) => { const s = t.replace(/ /g, '␣').replace(/\n/g, '↵'); return s.length > 12 ? s.slice(0, 11) + '…' : s; };

/**
 * The head view's links of query i (the page's rule: weight >= 0.01, the 8 strongest per head
 * past 128 tokens). Counts compare within min = 0.01 +- 1e-4: the page's wasm variant may round
 * a weight at the threshold otherwise than Node's.
 */
const linkCount = (ref, i, n) => n >= linksOf(ref, i, 0.0101).length && n <= linksOf(ref, i, 0.0099).length;
/** Query i's links, strongest first: weight >= min, the 8 strongest per head. */
function linksOf(ref, i, min = 0.01) {
  const out = [];
  for (let h = 0; h < ref.H; h++) {
    const row = [];
    for (let j = 0; j <= i; j++) if (ref.attn[h][i][j] >= min) row.push({ h, j, w: ref.attn[h][i][j] });
    out.push(...row.sort((a, b) => b.w - a.w).slice(0, 8));
  }
  return out.sort((a, b) => b.w - a.w);
}

/** The head view's geometry and the labels it has (index -> text). */
const headState = (page) => page.evaluate(() => {
  const svg = document.querySelector('#headview svg');
  const g = Object.fromEntries(['xl', 'xr', 'top', 'row-h', 'dpr', 'y0', 'first', 'last', 'tokens', 'visible-lines'].map((a) => [a, Number(svg.getAttribute(`data-${a}`))]));
  const box = document.querySelector('#headview .headview-scroll');
  const labels = [...svg.querySelectorAll('.tokens-q > g')].map((e) => [Number(e.dataset.index), e.querySelector('text').textContent]);
  const tabStops = [...svg.querySelectorAll('.tokens-q > g[tabindex="0"]')].map((e) => Number(e.dataset.index));
  return { ...g, tabStops, viewH: box.clientHeight, scrollTop: box.scrollTop, labels, nodes: svg.querySelectorAll('.tokens-q > g, .tokens-k > g').length, offscreen: [...svg.querySelectorAll('.offscreen-keys')].map((t) => t.textContent) };
});

/** Canvas ink (max alpha in a 4x4 px box) where the line i -> j passes 10 px before the key column. */
const inkAt = (page, i, j) => page.evaluate(([i, j]) => {
  const svg = document.querySelector('#headview svg');
  const canvas = document.querySelector('#headview canvas');
  const [xL, xR, top, rowH, dpr, y0] = ['data-xl', 'data-xr', 'data-top', 'data-row-h', 'data-dpr', 'data-y0'].map((a) => Number(svg.getAttribute(a)));
  const copy = document.createElement('canvas');
  copy.width = canvas.width; copy.height = canvas.height;
  const ctx = copy.getContext('2d', { willReadFrequently: true });
  ctx.drawImage(canvas, 0, 0);
  const y = (k) => top + k * rowH + rowH / 2 - y0; // viewport px
  const x0 = xL + 4, x1 = xR - 4, x = x1 - 10;
  const yj = y(i) + ((x - x0) / (x1 - x0)) * (y(j) - y(i));
  const px = ctx.getImageData(Math.round((x - 2) * dpr), Math.round((yj - 2) * dpr), Math.round(4 * dpr), Math.round(4 * dpr)).data;
  let ink = 0;
  for (let a = 3; a < px.length; a += 4) ink = Math.max(ink, px[a]);
  return ink;
}, [i, j]);

before(async () => {
  ({ demo, hub, browser, close: stop } = await startDemoHub(DIR, { n_layer: 12, n_head: 12, n_embd: 48, n_positions: 1024 }, 11));
});
after(() => stop?.());

test('12 layers x 12 heads x ~1000 tokens: head view virtualised and scrolled with the wheel, model and neuron views bounded', async () => {
  const ref = await reference();
  assert.ok(ref.L >= 900 && ref.L <= 1024, `prompt tokens: ${ref.L}`);
  assert.equal(ref.H, 12);
  const times = { tokens: ref.L };

  const page = await openPage(browser, `${demo.url}index.html?${hub.query}`, { viewport: { width: 1280, height: 900 } });
  const problems = page.problems;
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await page.selectOption('#hub-weights', 'auto'); // F32, as the Node reference
  const watch = await watchMainThread(page); // for the message below: where the page is if the load never ends
  await page.click('#hub-load');
  await page.waitForSelector('body[data-hub]', { timeout: 180_000 }).catch(async (e) => {
    // (Chromium's BYOB reads of the cached Blob hung here now and then: web/lib/model/files.ts)
    // say where the main thread is, then what the page shows (bounded: a main thread that never
    // returns to its event loop answers no evaluate)
    const stack = await watch.stack();
    const shown = await Promise.race([
      page.evaluate(() => [...document.querySelectorAll('[id^=hub], #model-info, #gen-msg')].map((el) => `${el.id}: ${el.textContent.trim().slice(0, 200)}`).join(' | ')),
      new Promise((ok) => setTimeout(ok, 15_000, 'no answer in 15 s')),
    ]);
    throw new Error(`${e.message}\nmain thread: ${stack}\npage: ${shown}\nconsole: ${JSON.stringify(page.problems)}\nHub requests: ${JSON.stringify(hub.requests)}`);
  });
  await watch.stop();
  assert.match(await page.textContent('#model-info'), /12 layers × 12 heads, d_model 48, context 1024/);

  // the prompt: analysed (the forward with attentions) and drawn in the head view
  let t0 = Date.now();
  await page.evaluate(() => { // what #gen-msg says while the forward runs
    window.seenMessages = [];
    new MutationObserver(() => window.seenMessages.push(document.querySelector('#gen-msg').textContent)).observe(document.querySelector('#gen-msg'), { childList: true, characterData: true, subtree: true });
  });
  await page.fill('#prompt', PROMPT);
  await page.waitForSelector(`#headview svg[data-tokens="${ref.L}"]`, { timeout: 300_000 });
  times.promptToHeadViewMs = Date.now() - t0; // debounce 300 ms + forward with attentions + statistics + head view
  times.headViewRenderMs = Number(await page.getAttribute('#headview svg', 'data-render-ms'));
  assert.equal(await page.getAttribute('body', 'data-tokens'), String(ref.L));
  const seen = await page.evaluate(() => window.seenMessages);
  assert.ok(seen.includes(`Computing the attention of ${ref.L} tokens (12 layers × 12 heads)…`), `messages while analysing: ${JSON.stringify(seen)}`);
  assert.equal(await page.isHidden('#gen-msg'), true, 'the message is gone once the views are drawn');

  // the top of the view: the first rows' labels are the prompt's first tokens, every row labelled
  let s = await headState(page);
  assert.equal(s.scrollTop, 0);
  const visibleRows = Math.floor((s.viewH - s.top) / s['row-h']);
  assert.ok(visibleRows >= 20, `rows on screen: ${visibleRows}`);
  for (let i = 0; i < visibleRows; i++) assert.deepEqual(s.labels.find(([k]) => k === i), [i, label(ref.texts[i])], `label of row ${i}`);
  assert.ok(s.nodes <= 300, `label nodes: ${s.nodes} (bounded, not one per token)`);
  assert.ok(s['visible-lines'] > 0, 'lines drawn');
  const spacer = await page.$eval('#headview .headview-scroll', (e) => e.scrollHeight);
  assert.ok(spacer >= ref.L * s['row-h'], `the scroll height (${spacer} px) covers all ${ref.L} rows`);

  // scroll with the mouse wheel, as a user: the labels of the new rows appear
  const box = await page.$eval('#headview .headview-scroll', (e) => { const r = e.getBoundingClientRect(); return { x: r.left + r.width / 2, y: r.top + r.height / 2 }; });
  await page.mouse.move(box.x, box.y);
  t0 = Date.now();
  await page.mouse.wheel(0, 9000);
  await page.waitForFunction(() => Number(document.querySelector('#headview svg').getAttribute('data-y0')) > 5000, null, { timeout: 60_000 });
  await page.evaluate(() => new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok))));
  times.wheelScrollToRedrawMs = Date.now() - t0; // as the test sees it (wheel, polling, two frames)
  times.headViewPaintMs = Number(await page.getAttribute('#headview svg', 'data-paint-ms')); // the page's own redraw
  s = await headState(page);
  assert.equal(s.y0, s.scrollTop, 'canvas and labels follow the scroll');
  const firstSeen = Math.ceil((s.scrollTop + 2 * s['row-h']) / s['row-h']), lastSeen = Math.floor((s.scrollTop + s.viewH - s.top) / s['row-h']) - 1;
  assert.ok(firstSeen > 200 && lastSeen < ref.L, `rows in view after the scroll: ${firstSeen}..${lastSeen}`);
  for (let i = firstSeen; i <= lastSeen; i++) assert.deepEqual(s.labels.find(([k]) => k === i), [i, label(ref.texts[i])], `label of row ${i} after the scroll`);
  // one label stays above the viewport: the keyboard's tab stop (row 0 until a key moves it)
  assert.deepEqual(s.tabStops, [0], 'one tab stop, kept while scrolled away');
  assert.ok(!s.labels.some(([k]) => k < 100 && k !== 0), 'the labels of the other top rows are gone');
  assert.ok(s.nodes <= 300, `label nodes after the scroll: ${s.nodes}`);

  // pin a query whose strongest link (over the heads) ends a few rows above it, scrolled into
  // view with the wheel: the canvas is inked where that link ends
  const candidates = Array.from({ length: ref.L - 400 }, (_v, n) => 350 + n)
    .filter((i) => { const l = linksOf(ref, i)[0]; return l && l.j < i && l.j >= i - 16; });
  assert.ok(candidates.length > 0, 'a query whose strongest key is at most 16 rows before it');
  const q = candidates.reduce((a, b) => (linksOf(ref, b)[0].w > linksOf(ref, a)[0].w ? b : a));
  const strongest = linksOf(ref, q)[0];
  const rowY = (i) => s.top + i * s['row-h'];
  for (let n = 0; n < 4; n++) {
    const want = rowY(strongest.j) - s.top - 3 * s['row-h']; // the key 3 rows below the header
    if (Math.abs(want - s.scrollTop) < s['row-h']) break;
    await page.mouse.move(box.x, box.y);
    await page.mouse.wheel(0, want - s.scrollTop);
    await page.waitForFunction((y) => Math.abs(Number(document.querySelector('#headview svg').getAttribute('data-y0')) - y) < 40, want, { timeout: 30_000 }).catch(() => {});
    await page.evaluate(() => new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok))));
    s = await headState(page);
  }
  assert.ok(rowY(strongest.j) > s.scrollTop + s.top && rowY(q) + s['row-h'] < s.scrollTop + s.viewH, `query ${q} and key ${strongest.j} in view (scrollTop ${s.scrollTop})`);
  await page.click(`#headview .tokens-q > g[data-index="${q}"]`);
  await page.mouse.move(1, 1); // the pinned query stays the focus
  const nLinks = linksOf(ref, q).length;
  await page.waitForFunction((n) => Number(document.querySelector('#headview svg').getAttribute('data-visible-lines')) === n, nLinks, { timeout: 10_000 })
    .catch(() => {});
  s = await headState(page);
  assert.ok(linkCount(ref, q, s['visible-lines']), `the pinned query draws all its links (those off-screen run to the edge): ${s['visible-lines']} of ${nLinks}`);
  const ink = await inkAt(page, q, strongest.j);
  assert.ok(ink >= Math.floor(strongest.w * 255 * 0.7), `ink ${ink} where query ${q}'s strongest link (head ${strongest.h}, key ${strongest.j}, weight ${strongest.w.toFixed(3)}) ends`);
  // its keys above the viewport are named at the top edge, the strongest first
  const above = linksOf(ref, q).filter((l) => s.top + l.j * s['row-h'] + s['row-h'] / 2 < s.y0 + s.top);
  if (above.length) assert.ok(s.offscreen.some((t) => t.startsWith(`↑ ${above[0].j}:`)), `off-screen keys: ${JSON.stringify(s.offscreen)}, strongest above: ${above[0].j}`);
  else assert.ok(!s.offscreen.some((t) => t.startsWith('↑')), `no key above, yet: ${JSON.stringify(s.offscreen)}`);
  await page.screenshot({ path: join(ART, 'views-long-head.png') });

  // model view: 144 thumbnails, max-pooled to 128 x 128
  t0 = Date.now();
  await page.click('#tab-model');
  await page.waitForFunction(() => document.querySelectorAll('#thumbs .thumb canvas').length === 144 && document.querySelector('#heatmap svg'), null, { timeout: 120_000 });
  times.modelViewMs = Date.now() - t0;
  times.thumbnailsMs = Number(await page.getAttribute('#thumbs', 'data-thumbs-ms'));
  times.enlargedHeadMs = Number(await page.getAttribute('#thumbs', 'data-detail-ms'));
  // choosing another head repaints no thumbnail
  await page.click('#thumbs .thumb[data-layer="5"][data-head="7"]');
  await page.waitForFunction(() => /layer 5 · head 7/.test(document.querySelector('#heatmap svg')?.textContent ?? ''), null, { timeout: 60_000 });
  times.chooseHeadThumbnailsMs = Number(await page.getAttribute('#thumbs', 'data-thumbs-ms'));
  times.chooseHeadDetailMs = Number(await page.getAttribute('#thumbs', 'data-detail-ms'));
  const sizes = await page.$$eval('#thumbs .thumb canvas', (cs) => [...new Set(cs.map((c) => `${c.width}x${c.height}`))]);
  assert.deepEqual(sizes, ['128x128']);
  // layer 0 head 0's bottom pixel row: each pixel is the max over its block of queries x keys,
  // so the block holding the strongest weight is the darkest (red channel lowest: darker blue)
  const pooled = await page.evaluate(() => {
    const c = document.querySelector('#thumbs .thumb[data-layer="0"][data-head="0"] canvas');
    const row = c.getContext('2d').getImageData(0, 127, 128, 1).data;
    return Array.from({ length: 128 }, (_v, x) => row[4 * x]);
  });
  const blockMax = new Float32Array(128);
  for (let i = 0; i < ref.L; i++) if (Math.floor((i * 128) / ref.L) === 127) {
    for (let j = 0; j <= i; j++) { const x = Math.floor((j * 128) / ref.L); blockMax[x] = Math.max(blockMax[x], ref.attn[0][i][j]); }
  }
  const xMax = blockMax.indexOf(Math.max(...blockMax));
  assert.ok(pooled[xMax] <= Math.min(...pooled) + 1, `layer 0 head 0, bottom row: block ${xMax} (max weight ${blockMax[xMax].toFixed(3)}) is the darkest pixel (${pooled[xMax]} vs min ${Math.min(...pooled)})`);
  const xMin = blockMax.indexOf(Math.min(...blockMax));
  assert.ok(pooled[xMin] > pooled[xMax], 'a weak block is lighter than the strongest');
  await page.screenshot({ path: join(ART, 'views-long-model.png') });

  // neuron view: bounded bars for the pinned query
  t0 = Date.now();
  await page.click('#tab-neuron');
  await page.waitForSelector('#neuron .bars-note', { timeout: 120_000 });
  times.neuronViewMs = Date.now() - t0;
  assert.match(await page.textContent('#neuron .bars-note'), new RegExp(`of the ${q + 1} this query sees`));
  const bars = await page.$$eval('#neuron .ncols:last-of-type svg', (ss) => ss.map((sv) => sv.querySelectorAll('rect').length));
  assert.ok(bars.every((n) => n <= 60), `bars per chart: ${bars}`);
  await page.screenshot({ path: join(ART, 'views-long-neuron.png') });

  // a query chosen in the neuron view's menu, far above the head view's rows on screen: the head view scrolls to it
  await page.selectOption('#query', '30');
  await page.waitForFunction(() => /query 30:/.test(document.querySelector('#neuron').textContent), null, { timeout: 60_000 });
  await page.click('#tab-head');
  await page.selectOption('#layer', '0'); // choosing layer 5's thumbnail moved the views to layer 5; the reference is layer 0
  await page.waitForSelector('#headview .tokens-q > g[data-index="30"]', { timeout: 30_000 });
  s = await headState(page);
  assert.ok(s.scrollTop <= s.top + 30 * s['row-h'] && s.scrollTop + s.viewH >= s.top + 31 * s['row-h'], `row 30 in view (scrollTop ${s.scrollTop})`);
  assert.ok(linkCount(ref, 30, s['visible-lines']), `query 30 draws its links: ${s['visible-lines']} of ${linksOf(ref, 30).length}`);
  await page.mouse.move(1, 1); // off any row: query 30 is the focus as the pinned query
  assert.equal(await page.getAttribute('#headview .tokens-q > g[data-index="30"] rect.bg', 'fill'), '#ffe9b8');

  assert.deepEqual(problems, []);
  await writeFile(join(ART, 'views-long.json'), JSON.stringify(times, null, 1));
  console.log(`12 layers x 12 heads x ${ref.L} tokens: ${JSON.stringify(times)}`);
  await page.close();
});
