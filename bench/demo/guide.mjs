// The model page's guided example, timed in headless Chromium on the built demo (build/demo/):
// from a click on "Show me an induction head" to its four steps printed, on a fresh page (the
// click loads tiny-kjv-induction first) and again with that model loaded (the prompt's run, the
// lens, the attribution, the heads sweep and 1 + layers x heads forwards with a head removed);
// then from a step's button to that step shown (step 4: Test a head's result printed).
// Prints a table; writes bench/results/demo-guide-chromium.json with the machine beside it.
//   npx --no-install vite build --config web/demo/vite.config.ts && node bench/demo/guide.mjs [--runs 3]
import os from 'node:os';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, launch, openPage } from '../../tests/browser/harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

const args = process.argv.slice(2);
const RUNS = Number(args.includes('--runs') ? args[args.indexOf('--runs') + 1] : 3);
const loadBefore = os.loadavg();
const { server, url } = await serveDemo({ port: 0 });
const browser = await launch();

/** ms from `act` (run in the page) until `done` (a selector) shows, timed in the page. */
async function timed(page, act, done) {
  return page.evaluate(([a, d]) => new Promise((ok) => {
    const t0 = performance.now();
    const check = () => (document.querySelector(d) ? ok(performance.now() - t0) : requestAnimationFrame(check));
    document.querySelector(a).click();
    requestAnimationFrame(check);
  }), [act, done]);
}

const rows = [];
for (let r = 0; r < RUNS; r++) {
  const page = await openPage(browser, url + 'index.html', { viewport: { width: 1280, height: 1000 } });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  const fresh = await timed(page, '#guide-run', '#guide-panel[data-guide=done][data-step="1"]');
  await page.evaluate(() => { delete document.querySelector('#guide-panel').dataset.guide; });
  const again = await timed(page, '#guide-run', '#guide-panel[data-guide=done][data-step="1"]');
  await page.evaluate(() => { delete document.body.dataset.test; });
  const step4 = await timed(page, '#guide-steps > li[data-step="4"] button', 'body[data-test=done] #test-result:not([hidden]) table');
  const tokens = (await page.getAttribute('#guide-panel', 'data-ids')).split(',').length;
  rows.push({ fresh_ms: fresh, loaded_ms: again, step4_ms: step4, tokens });
  await page.close();
}
await browser.close();
server.close();

const f = (x) => x.toFixed(0);
console.log('| run | click → steps printed, fresh page (model load included) | the same, model loaded | step 4 → Test a head printed | tokens |');
console.log('|---|---:|---:|---:|---:|');
rows.forEach((x, k) => console.log(`| ${k + 1} | ${f(x.fresh_ms)} ms | ${f(x.loaded_ms)} ms | ${f(x.step4_ms)} ms | ${x.tokens} |`));
const out = {
  benchmark: 'demo-guide', browser: 'chromium (headless, build/demo)', date: new Date().toISOString(), runs: rows,
  machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, load_average: { before: loadBefore, after: os.loadavg() } },
};
writeFileSync(join(ROOT, 'bench', 'results', 'demo-guide-chromium.json'), JSON.stringify(out, null, 1) + '\n');
console.log(`\n${out.machine.cpu}, ${out.machine.cores} cores, load average ${loadBefore.map((x) => x.toFixed(1)).join(' ')} → ${out.machine.load_average.after.map((x) => x.toFixed(1)).join(' ')}; bench/results/demo-guide-chromium.json`);
