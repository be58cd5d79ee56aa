// The "Follow a prediction" views of the built demo (build/demo: npx vite build --config
// web/demo/vite.config.ts) in headless Chromium: the time from a view's Run button to the view
// drawn (its panel's data-state 'done', then the next animation frame) on the tiny model at
// 64 tokens. One command:
//
//   node bench/demo/views.mjs [--model tiny-kjv-bpe] [--tokens 64] [--reps 3]
//
// Each view runs --reps times on the same page (the model loaded once); each run is timed in the
// page (performance.now() around the click, the panel's state and one frame). Prints a table and
// writes bench/results/demo-views-chromium.json with the machine (CPU, cores, load average) and
// the wasm build the page loaded. The target: every view within 1 s of its button.
import { writeFileSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import * as qkv from '../../dist/index.js';
import { ROOT, launch, openPage } from '../../tests/browser/harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const MODEL = arg('--model', 'tiny-kjv-bpe');
const TOKENS = Number(arg('--tokens', 64));
const REPS = Number(arg('--reps', 3));
const TEXT = 'In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness ' +
  'was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God said, Let there be light: ' +
  'and there was light. And God saw the light, that it was good: and God divided the light from the darkness. And God called ' +
  'the light Day, and the darkness he called Night. And the evening and the morning were the first day.';

/** The views timed: the panel, its Run button. */
const VIEWS = [
  { view: 'lens', panel: '#lens-panel', button: '#lens-run' },
  { view: 'attribution', panel: '#attribution-panel', button: '#attr-run' },
  // the page's Generate settings: 20 new tokens, generated plain and steered
  { view: 'steering', panel: '#steering-panel', button: '#steer-run' },
];

/** A prompt of exactly `n` tokens of the model's tokenizer (a prefix of TEXT, decoded and checked). */
async function promptOf(n) {
  qkv.env.variant = 'simd';
  const m = await qkv.loadModel(join(ROOT, 'web/models', MODEL));
  try {
    const ids = m.tokenizer.encode(TEXT);
    if (ids.length < n) throw new Error(`views: the text is ${ids.length} tokens, fewer than --tokens ${n}`);
    for (let k = n; k <= ids.length; k++) {
      const text = m.tokenizer.decode(ids.slice(0, k));
      if (m.tokenizer.encode(text).length === n) return text;
    }
    throw new Error(`views: no prefix of the text encodes to ${n} tokens`);
  } finally {
    m.dispose();
  }
}

/** ms from the click to the panel's 'done' state and the next frame, timed in the page. */
function timeView(page, { panel, button }) {
  return page.evaluate(({ panel, button }) => new Promise((ok, fail) => {
    const p = document.querySelector(panel);
    delete p.dataset.state;
    const t0 = performance.now();
    const seen = new MutationObserver(() => {
      const s = p.dataset.state;
      if (s === 'running' || s === undefined) return;
      seen.disconnect();
      if (s !== 'done') { fail(new Error(`${panel}: ${s}: ${p.querySelector('.msg')?.textContent}`)); return; }
      requestAnimationFrame(() => ok(performance.now() - t0));
    });
    seen.observe(p, { attributes: true, attributeFilter: ['data-state'] });
    document.querySelector(button).click();
  }), { panel, button });
}

const prompt = await promptOf(TOKENS);
const { server, url } = await serveDemo({ port: 0 });
const browser = await launch();
const chromium = browser.version();
const loadBefore = os.loadavg();
const rows = [];
let variant = '';
try {
  const page = await openPage(browser, `${url}index.html#${new URLSearchParams({ model: MODEL, prompt })}`, { viewport: { width: 1280, height: 1000 } });
  await page.waitForSelector('body[data-ready=true]', { timeout: 120_000 });
  await page.waitForFunction((n) => document.body.dataset.tokens === String(n), TOKENS, { timeout: 60_000 });
  variant = await page.textContent('#runtime');
  for (const v of VIEWS) {
    const ms = [];
    for (let r = 0; r < REPS; r++) ms.push(await timeView(page, v));
    const sorted = [...ms].sort((a, b) => a - b);
    rows.push({ view: v.view, tokens: TOKENS, ms, median: sorted[Math.floor(sorted.length / 2)], best: sorted[0] });
  }
  if (page.problems.length) console.warn(`views: the page reported: ${page.problems.join('; ')}`);
} finally {
  await browser.close();
  server.close();
}

const machine = {
  cpu: os.cpus()[0]?.model, cores: os.availableParallelism?.() ?? os.cpus().length,
  loadavg_before: loadBefore, loadavg_after: os.loadavg(), node: process.version, chromium, runtime: variant,
};
console.log(`Follow a prediction views, ${MODEL}, ${TOKENS} tokens, Chromium ${machine.chromium}; ${machine.cores} cores (${machine.cpu}), ` +
  `load ${loadBefore.map((x) => x.toFixed(1)).join(' ')}; ${variant}`);
console.log('| view | tokens | runs (ms, button → view drawn) | median | best | within 1 s |');
console.log('|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.view} | ${r.tokens} | ${r.ms.map((x) => x.toFixed(0)).join(', ')} | ${r.median.toFixed(0)} | ${r.best.toFixed(0)} | ${r.median <= 1000 ? 'yes' : 'no'} |`);
}
mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
const file = join(ROOT, 'bench/results/demo-views-chromium.json');
writeFileSync(file, JSON.stringify({ bench: 'demo-views', model: MODEL, tokens: TOKENS, reps: REPS, date: new Date().toISOString(), machine, rows }, null, 2) + '\n');
console.log(`wrote ${file}`);
