// The head view from the keyboard, in headless Chromium: the view is virtualised (only the rows
// near the viewport have label nodes), yet a keyboard user reaches every token. The query column
// is one tab stop; End, Home, Page Down and the arrows move the focus through all the tokens,
// scrolling the view; the focused token's label is on screen, highlighted (read from the
// screenshot's pixels), and Tab away and back returns to it. Keys are pressed without pauses
// (faster than a person) and each check waits only for what a user would see.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, launch, openPage } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

// Genesis 1:1-5, ~110 tokens of the bundled tiny GPT's BPE (context 128): ~5 screens of rows
const PROMPT = 'In the beginning God created the heaven and the earth. And the earth was without form, and void; '
  + 'and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. '
  + 'And God said, Let there be light: and there was light. And God saw the light, that it was good: '
  + 'and God divided the light from the darkness. And God called the light Day, and the darkness he called Night. '
  + 'And the evening and the morning were the first day.';
let server, browser;

before(async () => {
  assert.ok(existsSync(join(ROOT, 'build/demo/index.html')), 'build/demo/ is missing: run the Vite build first (tools/stages/60-demo.sh)');
  server = await serveDemo({ port: 0 });
  browser = await launch();
});
after(async () => { await browser?.close(); server?.server.close(); });

/** The focused element as a user perceives it: its accessible name, its label text, and whether it sits inside the scroll box. */
const focused = (page) => page.evaluate(() => {
  const e = document.activeElement;
  const box = document.querySelector('#headview .headview-scroll').getBoundingClientRect();
  const r = e.getBoundingClientRect();
  return {
    name: e.getAttribute('aria-label'), text: e.querySelector('text')?.textContent ?? null,
    onScreen: r.top >= box.top - 1 && r.bottom <= box.bottom + 1 && r.height > 0,
    centre: { x: r.left + r.width / 2, y: r.top + r.height / 2 }, rect: { x: r.left, y: r.top, w: r.width, h: r.height },
    tabStops: document.querySelectorAll('#headview .tokens-q > g[tabindex="0"]').length,
    scrollTop: document.querySelector('#headview .headview-scroll').scrollTop,
  };
});

/** The colour of the screenshot's pixels over the focused label's left half (its background: the focus highlight). */
async function highlightColour(page, rect) {
  const png = await page.screenshot({ clip: { x: rect.x + 2, y: rect.y + 3, width: 6, height: Math.max(2, rect.h - 6) } });
  return page.evaluate(async (b64) => {
    const img = new Image();
    img.src = `data:image/png;base64,${b64}`;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.width; c.height = img.height;
    const ctx = c.getContext('2d');
    ctx.drawImage(img, 0, 0);
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    const counts = new Map();
    for (let i = 0; i < d.length; i += 4) { const k = `${d[i]},${d[i + 1]},${d[i + 2]}`; counts.set(k, (counts.get(k) ?? 0) + 1); }
    return [...counts].sort((a, b) => b[1] - a[1])[0][0]; // the commonest colour: the background, not the glyphs
  }, png.toString('base64'));
}

test('head view: a keyboard user reaches every token of a long prompt (one tab stop, End/Home/Page/arrows scroll to it)', async () => {
  const page = await openPage(browser, `${server.url}index.html`, { viewport: { width: 1280, height: 900 } });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await page.fill('#prompt', PROMPT);
  await page.waitForFunction(() => Number(document.querySelector('#headview svg')?.getAttribute('data-tokens')) > 90, null, { timeout: 120_000 });
  const L = Number(await page.getAttribute('#headview svg', 'data-tokens'));
  const labelled = await page.$$eval('#headview .tokens-q > g', (g) => g.length);
  assert.ok(labelled < L, `virtualised: ${labelled} query labels for ${L} tokens`);

  // Tab from the prompt box until the head view's query column has the focus (as a keyboard user)
  await page.focus('#prompt');
  let f;
  for (let n = 0; n < 60; n++) {
    await page.keyboard.press('Tab');
    f = await focused(page);
    if (f.name?.startsWith('query ')) break;
  }
  assert.match(f.name ?? '', /^query 0: /, 'Tab reaches the first query token');
  assert.equal(f.tabStops, 1, 'the query column is one tab stop');

  // End, at once: the last token is focused, scrolled into view, highlighted
  await page.keyboard.press('End');
  f = await focused(page);
  assert.match(f.name, new RegExp(`^query ${L - 1}: `), `End focuses the last token (got ${f.name})`);
  assert.ok(f.onScreen && f.scrollTop > 0, `the last token's label is on screen (scrollTop ${f.scrollTop})`);
  assert.equal(await highlightColour(page, f.rect), '255,233,184', 'the focused token is highlighted');
  assert.equal(f.tabStops, 1);

  // Tab away and Shift+Tab back: the focus returns to the same token (the tab stop moved with it)
  await page.keyboard.press('Tab');
  assert.doesNotMatch((await focused(page)).name ?? '', new RegExp(`^query ${L - 1}: `));
  assert.equal(await highlightColour(page, f.rect), '255,255,255', 'unfocused and not pinned: no highlight');
  await page.keyboard.press('Shift+Tab');
  assert.match((await focused(page)).name, new RegExp(`^query ${L - 1}: `), 'Shift+Tab comes back to the last token');

  // Home, Page Down twice, Arrow Up, typed without pauses: each lands where it should, on screen
  await page.keyboard.press('Home');
  f = await focused(page);
  assert.match(f.name, /^query 0: /);
  assert.equal(f.scrollTop, 0, 'Home scrolls back to the top');
  await page.keyboard.press('PageDown');
  await page.keyboard.press('PageDown');
  await page.keyboard.press('ArrowUp');
  f = await focused(page);
  const at = Number(f.name.match(/^query (\d+):/)[1]);
  const rowH = Number(await page.getAttribute('#headview svg', 'data-row-h'));
  const viewH = await page.$eval('#headview .headview-scroll', (e) => e.clientHeight);
  const pageRows = Math.floor((viewH - Number(await page.getAttribute('#headview svg', 'data-top'))) / rowH) - 1;
  assert.equal(at, 2 * pageRows - 1, `two pages down and one up: token ${2 * pageRows - 1} (got ${at})`);
  assert.ok(f.onScreen, 'and its label is on screen');

  // Enter pins the focused token: once the focus has left the view, its highlight stays
  await page.keyboard.press('Enter');
  await page.keyboard.press('Tab');
  assert.doesNotMatch((await focused(page)).name ?? '', /^query /);
  const pinned = await page.$eval(`#headview .tokens-q > g[data-index="${at}"]`, (e) => { const r = e.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; });
  assert.equal(await highlightColour(page, pinned), '255,233,184', `token ${at} is shown pinned`);
  assert.deepEqual(page.problems, []);
  await page.close();
});
