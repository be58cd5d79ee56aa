// The model page's forward pass shows progress and can be cancelled, in headless Chromium: a
// generated GPT-2-shaped checkpoint of 24 layers x 12 heads (n_positions 1024) from the local
// "Hub", a ~1000-token prompt (seconds of forward with attentions, run by qkv a chunk of 64
// tokens at a time; 24 layers so that Playwright's click, which waits for several frames and
// so for several chunks, lands before the end). A user types the prompt and cancels as the bar
// moves; Run then Cancel at once (a user's two clicks, and faster: both in one task); Generate
// then Cancel during the prompt's pass; the neuron view's queries-and-keys pass, cancelled, then
// computed on request. Each time the page says it was cancelled and stays usable: a second Run
// draws the head view of every token, Generate generates. The texts read are the ones a user
// sees (the bar's caption, the message). Times are written to build/artifacts/demo/forward-cancel.json.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT, openPage } from './harness.js';
import { LONG_PROMPT as PROMPT, startDemoHub } from './hub-server.js';

const ART = join(ROOT, 'build/artifacts/demo');
const DIR = join(ROOT, 'build/test-hub/gpt2-12x12-cancel');
const CANCELLED = /^Cancelled: the attention of (\d+) tokens was not computed\. Run \(or Generate\) computes it again\.$/;
const CAPTION = /^(Attention|Prompt|Every row|Queries and keys): (\d+) % \((\d+) of (\d+) tokens\)$/;
let demo, hub, browser, stop;

before(async () => {
  ({ demo, hub, browser, close: stop } = await startDemoHub(DIR, { n_layer: 24, n_head: 12, n_embd: 48, n_positions: 1024 }, 13));
});
after(() => stop?.());

/**
 * Records every caption of the progress bar and every message as they change, and (page time)
 * when each caption came, when Cancel was clicked and when the pass said 'cancelled'.
 */
const watchTexts = (page) => page.evaluate(() => {
  window.captions = [];
  window.messages = [];
  window.at = { captions: [], click: 0, cancelled: 0, clickState: '' };
  const watch = (sel, into, times) => new MutationObserver(() => {
    const t = document.querySelector(sel).textContent;
    if (t && into.at(-1) !== t) { into.push(t); times?.push(performance.now()); }
  }).observe(document.querySelector(sel), { childList: true, characterData: true, subtree: true });
  watch('#fwd-text', window.captions, window.at.captions);
  watch('#gen-msg', window.messages);
  // after the page's own handler (registered first): the pass's state when Cancel was clicked
  document.querySelector('#fwd-cancel').addEventListener('click', () => { window.at.click = performance.now(); window.at.clickState = document.body.dataset.forward; });
  new MutationObserver(() => { if (document.body.dataset.forward === 'cancelled') window.at.cancelled ||= performance.now(); })
    .observe(document.body, { attributes: true, attributeFilter: ['data-forward'] });
});
/** In page time: Cancel's click to 'cancelled', and the longest gap between two captions (one chunk). */
const cancelLatency = (page) => page.evaluate(() => {
  const { captions: c, click, cancelled } = window.at;
  const chunk = Math.max(0, ...c.slice(1).map((t, i) => t - c[i]));
  window.at.captions.length = 0;
  Object.assign(window.at, { click: 0, cancelled: 0, clickState: '' });
  return { clickToCancelledMs: click && cancelled ? Math.round(cancelled - click) : null, longestChunkMs: Math.round(chunk) };
});
const seen = (page) => page.evaluate(() => ({ captions: window.captions.splice(0), messages: window.messages.splice(0) }));

/**
 * Clicks Cancel as a user does: the mouse on the button, whose place is read once (it never
 * moves). A mouse click is input, which the page takes at the next task boundary, i.e. after
 * the running chunk; Playwright's locator.click and evaluate calls wait longer while the pass
 * runs (their work queues behind the chunks: measured 1-2.5 s, several chunks).
 * Returns false when the bar was already gone (the pass ended before the click).
 */
let cancelAt = null;
async function clickCancel(page) {
  if (!cancelAt) {
    const b = await page.locator('#fwd-cancel').boundingBox();
    if (!b) return false;
    assert.ok(b.y + b.height < 900, `Cancel on screen: ${JSON.stringify(b)}`);
    cancelAt = { x: b.x + b.width / 2, y: b.y + b.height / 2 };
  }
  await page.mouse.click(cancelAt.x, cancelAt.y);
  return true;
}

/**
 * start() begins a pass; once `caption` (if given) matches the bar's text, Cancel is clicked as
 * a user does. On a loaded machine the click (or the caption) may arrive after the pass has
 * ended: then (the page saw no click during a pass) it starts again, at most 3 times. A click
 * during the pass that did not cancel it fails. Returns the attempts.
 */
async function untilCancelled(page, start, caption) {
  for (let attempt = 1; ; attempt++) {
    await page.evaluate(() => { delete document.body.dataset.forward; window.at.clickState = ''; });
    await start(attempt);
    // the caption, or the pass's end: on a loaded machine a pass can end between two polls,
    // before its bar showed a matching caption; that counts as a click after the pass
    const ended = caption && (await page.waitForFunction(
      (re) => (new RegExp(re).test(document.querySelector('#fwd-text').textContent) ? 'caption' : ['done', 'cancelled'].includes(document.body.dataset.forward) && 'ended'),
      caption.source, { timeout: 300_000 }).then((h) => h.jsonValue())) === 'ended';
    const clicked = !ended && (await clickCancel(page));
    await page.waitForFunction((c) => (!c || window.at.clickState) && ['done', 'cancelled'].includes(document.body.dataset.forward), clicked, { timeout: 300_000 });
    const [state, when] = await page.evaluate(() => [document.body.dataset.forward, window.at.clickState]);
    if (state === 'cancelled') return attempt;
    assert.notEqual(when, 'running', 'Cancel clicked during the pass must cancel it');
    assert.ok(attempt < 3, 'the click came after the pass, three times');
    await page.waitForFunction(() => document.body.dataset.generating !== 'true', null, { timeout: 300_000 });
    await seen(page);
  }
}

/** The captions' percentages rise and agree with their token counts. */
function checkCaptions(captions, L) {
  let last = -1;
  for (const c of captions) {
    const m = CAPTION.exec(c);
    assert.ok(m, `caption: ${c}`);
    const [pct, done, total] = [Number(m[2]), Number(m[3]), Number(m[4])];
    assert.equal(total, L);
    assert.equal(pct, Math.floor((100 * done) / total), c);
    assert.ok(done >= last, `captions rise: ${JSON.stringify(captions)}`);
    last = done;
  }
}

test('a long forward: progress bar with a percentage, Cancel (typed prompt, Run, Generate, the neuron view queries and keys), the page stays usable', async () => {
  const times = {};
  const page = await openPage(browser, `${demo.url}index.html?${hub.query}`, { viewport: { width: 1280, height: 900 } });
  const problems = page.problems;
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await page.selectOption('#hub-weights', 'auto');
  await page.click('#hub-load');
  await page.waitForSelector('body[data-hub=done]', { state: 'attached', timeout: 300_000 });
  assert.match(await page.textContent('#model-info'), /24 layers × 12 heads, d_model 48, context 1024/);
  await page.waitForSelector('body[data-forward=done]', { state: 'attached', timeout: 120_000 }); // the default prompt's pass
  const shortL = Number(await page.getAttribute('body', 'data-tokens'));
  await watchTexts(page);

  // 1. type the long prompt: its pass starts (after the page's 300 ms pause); cancel once the
  //    bar has moved past its first chunk, as a user watching it would
  let t0 = Date.now();
  times.attempts = {};
  times.attempts.typed = await untilCancelled(page, (n) => (n === 1 ? page.fill('#prompt', PROMPT) : page.click('#run')), /^Attention: [1-9]\d? % /);
  times.typedToCancelledMs = Date.now() - t0; // as the test sees it (the 300 ms pause and its polling included)
  times.typed = await cancelLatency(page); // in the page: the click's handler to 'cancelled', vs a chunk
  const msg1 = await page.textContent('#gen-msg');
  const L = Number(CANCELLED.exec(msg1)?.[1]);
  assert.ok(L >= 900 && L <= 1024, `the page says it was cancelled: ${msg1}`);
  assert.equal(await page.isHidden('#fwd'), true, 'the bar is gone');
  assert.equal(await page.getAttribute('body', 'data-tokens'), String(shortL), 'the views keep the last full result');
  let s = await seen(page);
  checkCaptions(s.captions, L);
  const pcts = s.captions.map((c) => Number(CAPTION.exec(c)[2]));
  assert.ok(pcts[0] === 0 && pcts.some((p) => p > 0) && pcts.every((p) => p < 100), `stopped part-way: ${pcts}`);
  assert.ok(s.messages.includes(`Computing the attention of ${L} tokens (24 layers × 12 heads)…`), JSON.stringify(s.messages));

  // 2. Run, then Cancel at once: two clicks at a user's speed, then both in one task (faster than a frame)
  for (const how of ['user', 'same task']) {
    t0 = Date.now();
    if (how === 'user') {
      times.attempts.runCancel = await untilCancelled(page, () => page.click('#run'));
    } else {
      await page.evaluate(() => { delete document.body.dataset.forward; document.querySelector('#run').click(); document.querySelector('#fwd-cancel').click(); });
      await page.waitForSelector('body[data-forward=cancelled]', { state: 'attached', timeout: 60_000 });
    }
    times[`runCancel ${how}Ms`] = Date.now() - t0;
    await cancelLatency(page);
    assert.match(await page.textContent('#gen-msg'), CANCELLED, how);
    assert.equal(await page.isHidden('#fwd'), true);
    assert.equal(await page.getAttribute('body', 'data-tokens'), String(shortL));
    s = await seen(page);
    checkCaptions(s.captions, L);
  }

  // 3. Run again: the bar rises to 100 % and the head view shows every token
  t0 = Date.now();
  await page.click('#run');
  await page.waitForSelector(`#headview svg[data-tokens="${L}"]`, { timeout: 300_000 });
  times.runToHeadViewMs = Date.now() - t0;
  assert.equal(await page.getAttribute('body', 'data-forward'), 'done');
  assert.equal(await page.getAttribute('body', 'data-tokens'), String(L));
  s = await seen(page);
  checkCaptions(s.captions, L);
  times.run = await cancelLatency(page); // longestChunkMs: the most a Cancel click waits
  assert.equal(s.captions.at(-1), `Attention: 100 % (${L} of ${L} tokens)`);
  assert.ok(s.captions.length >= 5, `the bar moved chunk by chunk: ${JSON.stringify(s.captions)}`);
  assert.equal(await page.isHidden('#fwd'), true);
  assert.match(await page.textContent('#rowcheck'), new RegExp(`24 layers × 12 heads × ${L} tokens; every row sums to 1`));

  // 4. Generate, Cancel during the prompt's pass: nothing generated, the page says so; Generate again works
  await page.fill('#max-new', '2');
  times.attempts.generate = await untilCancelled(page, () => page.click('#generate'), /^Prompt: /);
  await page.waitForSelector('body[data-generating=false]', { state: 'attached', timeout: 60_000 });
  assert.equal(await page.textContent('#gen-msg'), 'Cancelled: nothing was generated. Generate (or Run) starts again.');
  assert.equal(await page.getAttribute('body', 'data-generated'), '0');
  assert.equal(await page.isEnabled('#generate'), true);
  assert.equal(await page.isEnabled('#run'), true);
  t0 = Date.now();
  await page.click('#generate');
  await page.waitForFunction(() => document.body.dataset.generating === 'false' && document.body.dataset.generated === '2', null, { timeout: 300_000 });
  times.generateTwoTokensMs = Date.now() - t0; // two full passes (prompt, every row) and two steps
  assert.equal(await page.textContent('#gen-msg'), 'Generated 2 tokens.');
  assert.equal(await page.getAttribute('body', 'data-tokens'), String(L + 2));

  // 5. the neuron view's queries and keys (a pass of their own over every token): the same bar,
  //    captioned 'Queries and keys', and Cancel; the view says so and keeps its button to compute
  //    them, which draws the view (the last query's bars). If the pass ends before the click, Run
  //    makes a new text whose queries and keys the open neuron view asks for again.
  times.attempts.neuron = await untilCancelled(page, (n) => page.click(n === 1 ? '#tab-neuron' : '#run'), /^Queries and keys: [1-9]\d? % /);
  const note = /^Cancelled: the queries and keys of (\d+) tokens were not computed\. Compute them$/.exec(await page.textContent('#neuron'));
  assert.ok(note && Number(note[1]) >= L, `the neuron view says it was cancelled: ${await page.textContent('#neuron')}`);
  assert.equal(await page.isHidden('#fwd'), true, 'the bar is gone');
  s = await seen(page);
  const qkCaptions = s.captions.filter((c) => c.startsWith('Queries and keys'));
  checkCaptions(qkCaptions, Number(note[1]));
  assert.ok(qkCaptions.length >= 2 && qkCaptions.every((c) => !c.includes('100 %')), `stopped part-way: ${JSON.stringify(qkCaptions)}`);
  await page.click('#neuron button:text-is("Compute them")');
  await page.waitForSelector('#neuron .bars-note', { timeout: 300_000 });
  assert.match(await page.textContent('#neuron .bars-note'), new RegExp(`of the ${note[1]} this query sees`));
  s = await seen(page);
  assert.equal(s.captions.at(-1), `Queries and keys: 100 % (${note[1]} of ${note[1]} tokens)`);

  assert.deepEqual(problems, []);
  await page.screenshot({ path: join(ART, 'forward-cancel.png') });
  await writeFile(join(ART, 'forward-cancel.json'), JSON.stringify({ tokens: L, ...times }, null, 2));
  await page.close();
});
