// The attention benchmark in a headless browser: the same code as Node (core.js) in a
// crossOriginIsolated page, one page per part. Prints a table; writes bench/results/js-<browser>.json.
//   node bench/js/browser.mjs [--browser chromium|firefox] [--quick] [--sizes 128,512] [--rounds 3]
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { Fastest, ROUNDS_METHOD, SIZES, ratios, roundsFor, table } from './core.js';
import { serve } from '../../tests/browser/harness.js';
import { BROWSER, launchBrowser } from '../../tests/browser/browsers.js';

const args = process.argv.slice(2);
const quick = args.includes('--quick') || process.env.QKV_BENCH_QUICK === '1';
const sizesArg = args.includes('--sizes') ? args[args.indexOf('--sizes') + 1] : process.env.QKV_BENCH_SIZES;
const sizes = sizesArg ? sizesArg.split(',').map(Number) : SIZES;
const browserName = args.includes('--browser') ? args[args.indexOf('--browser') + 1] : BROWSER;

const server = await serve({ isolated: true });
const browser = await launchBrowser(browserName);
const rounds = roundsFor(args, quick);
const fastest = new Fastest();
const loadBefore = loadavg();
let version = '';
try {
  version = browser.version;
  const parts = [...Array.from({ length: rounds }, () => ['qkv', 'ort1', 'ort2']).flat(), 'naive'];
  for (const part of parts) {
    process.stderr.write(`bench (${browserName}): ${part}\n`);
    const page = await browser.open(`${server.url}/bench/js/page.html?part=${part}&sizes=${sizes.join(',')}&quick=${quick ? 1 : 0}`);
    await page.waitFor(() => window.__bench !== undefined, null, { timeout: 0, polling: 500 });
    const r = await page.evaluate(() => window.__bench);
    await page.close();
    if (r.error) throw new Error(`part ${part}: ${r.error}`);
    fastest.add(r.rows);
  }
} finally {
  await browser.close();
  await server.close();
}
const rows = fastest.rows();
const result = {
  runtime: `${version} (headless)`, date: new Date().toISOString(), load: { before: loadBefore, after: loadavg() }, shape: { B: 1, H: 8, D: 64 }, quick, rounds,
  method: ROUNDS_METHOD, rows, ratios: ratios(rows),
};
const dir = new URL('../results/', import.meta.url);
mkdirSync(dir, { recursive: true });
writeFileSync(new URL(`js-${browserName}.json`, dir), JSON.stringify(result, null, 1) + '\n');
console.log(table(rows, `qkv attention benchmark — ${version} (B=1, H=8, D=64; median ms)`));
