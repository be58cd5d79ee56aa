// The benchmark page's decode row: "Measure decode" loads the bundled tiny model at
// each weight type and fills a table a person reads: one row per weight type with the type it
// is held as, tokens/s per thread count (1 and 2: the served demo is crossOriginIsolated), with
// a progress bar and status line; Cancel stops a run and says so. Speed itself is not asserted.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, launch } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

let demo, browser;
before(async () => {
  assert.ok(existsSync(join(ROOT, 'build/demo/bench.html')), 'build/demo/ is missing: run the Vite build first (tools/stages/60-demo.sh)');
  demo = await serveDemo({ port: 0 });
  browser = await launch();
});
after(async () => { await browser?.close(); demo?.server.close(); });

test('benchmark page: decode tokens/s for every weight type on 1 and 2 threads, with progress; Cancel stops', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  await page.goto(`${demo.url}bench.html`);
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  assert.match(await page.textContent('#decode-note'), /^tiny-kjv-bpe, greedy, 32 tokens after 4 warm-up ones; 1 and 2 threads\.$/);
  const seen = new Set();
  const watch = setInterval(() => page.textContent('#decode-status').then((t) => t && seen.add(t), () => {}), 50);
  await page.click('#decode-run');
  await page.waitForSelector('body[data-decode-done=true]', { timeout: 120_000 });
  clearInterval(watch);
  assert.ok([...seen].some((t) => /^int4, 2 threads: /.test(t)), `progress seen: ${[...seen].slice(0, 6)}`);
  assert.equal(await page.textContent('#decode-status'), 'Done: 8 settings.');
  const table = await page.$$eval('#decode-table tr', (trs) => trs.map((tr) => [...tr.children].map((c) => c.textContent)));
  assert.deepEqual(table[0], ['weights', 'held as', '1 thread, tok/s', '2 threads, tok/s']);
  assert.deepEqual(table.slice(1).map((r) => r.slice(0, 2)), [['auto', 'F32'], ['f16', 'F16'], ['int8', 'Q8'], ['int4', 'Q4']]);
  for (const r of table.slice(1)) for (const c of r.slice(2)) assert.ok(Number(c) > 0, `tok/s cell "${c}" in ${r}`);
  // Cancel: a second run stops between tokens and says so
  await page.click('#decode-run');
  await page.waitForFunction(() => /loading|token/.test(document.querySelector('#decode-status').textContent));
  await page.click('#decode-stop');
  await page.waitForSelector('body[data-decode-done=true]', { timeout: 60_000 });
  assert.equal(await page.textContent('#decode-status'), 'Cancelled.');
  assert.equal(await page.isDisabled('#decode-run'), false);
  assert.deepEqual(problems, []);
  await page.close();
});
