// The MiniLM embedding benchmark (minilm.mjs) in headless Chromium: qkv's model.embed against
// onnxruntime-web F32 and q8 on the same weights, in one page per thread count.
//
//   node bench/encoder/minilm_browser.mjs [--rounds 3] [--threads 1,2] [--variant simd] [--lengths 16,64,256] [--batches 1,32] [--tag T]
//
// The model is build/bench-minilm/ (made on first use by make_minilm.py, as in Node). A local
// server (tests/browser/harness.js) serves the repository with COOP/COEP, so the page is
// crossOriginIsolated and both runtimes' threaded builds run; qkv runs `--variant` (simd as in
// Node; simd-relaxed is what 'auto' loads in Chromium) and its -threads twin. The page
// (minilm_page.js) runs minilm_common.js's loop; its clock reads the renderer's CPU time over all
// its threads from /proc (GET /cpu-ms), so both clocks are in the JSON. Writes
// bench/results/encoder-minilm-chromium.json (-<variant>.json for another --variant) and prints the table.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, launch, openPage, serve } from '../../tests/browser/harness.js';
import { rendererThreadsMs } from '../js/renderer-cpu.js';
import { BATCHES, LENGTHS } from './minilm_common.js';
import { printTable } from './minilm_table.js';

const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const ROUNDS = Number(arg('--rounds', 3));
const THREADS = arg('--threads', '1,2').split(',').map(Number);
const VARIANT = arg('--variant', 'simd');
const FLAG = '--qkv-minilm-bench';
const OUT_DIR = path.join(ROOT, 'build', 'bench-minilm');

if (!existsSync(path.join(OUT_DIR, 'done'))) execFileSync('/usr/bin/python3', [path.join(ROOT, 'bench/encoder/make_minilm.py')], { stdio: 'inherit' });
if (!existsSync(path.join(ROOT, 'dist', 'index.js'))) throw new Error('minilm_browser: build first (npm run build)');
const t0 = performance.now();
const loadBefore = os.loadavg();
const server = await serve({ dynamic: { '/cpu-ms': () => rendererThreadsMs(FLAG) } });
const runs = [];
let version;
try {
  for (const threads of THREADS) {
    const browser = await launch(['--renderer-process-limit=1', FLAG]);
    version = browser.version();
    try {
      const q = new URLSearchParams({ threads, variant: VARIANT, rounds: ROUNDS, lengths: arg('--lengths', LENGTHS.join(',')), batches: arg('--batches', BATCHES.join(',')) });
      const page = await openPage(browser, `${server.url}/bench/encoder/minilm_browser.html?${q}`);
      await page.waitForFunction(() => window.__minilm !== undefined, null, { timeout: 0, polling: 1000 });
      const r = await page.evaluate(() => window.__minilm);
      if (r.error) throw new Error(`minilm_browser: ${threads} thread(s): ${r.error}`);
      if (page.problems.length) r.problems = page.problems;
      runs.push(r);
      console.error(`  ${threads}t: ${r.variant}, crossOriginIsolated ${r.crossOriginIsolated}`);
    } finally {
      await browser.close();
    }
  }
} finally {
  await server.close();
}
const ortVersion = JSON.parse(readFileSync(path.join(ROOT, 'node_modules', 'onnxruntime-web', 'package.json'), 'utf8')).version;
const out = {
  benchmark: 'encoder-minilm-chromium',
  date: new Date().toISOString(),
  browser: version,
  machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, load_average: { before: loadBefore, after: os.loadavg() } },
  model: 'build/bench-minilm/minilm (bench/encoder/make_minilm.py): all-MiniLM-L6-v2 shape, random weights; minilm.onnx and minilm-q8.onnx (bench/onnx_q8.py)',
  onnxruntime_web: ortVersion,
  method: 'as bench/results/encoder-minilm-node.json, in one headless Chromium page per thread count (crossOriginIsolated); ' +
    'cpu = the renderer\'s threads\' CPU time (/proc schedstat, read around each timing)',
  runs,
  total_s: (performance.now() - t0) / 1000,
};
mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
const file = `encoder-minilm-chromium${VARIANT === 'simd' ? '' : `-${VARIANT}`}${arg('--tag', '') ? `-${arg('--tag')}` : ''}.json`;
writeFileSync(path.join(ROOT, 'bench', 'results', file), JSON.stringify(out, null, 2) + '\n');
printTable(out, `Chromium, qkv ${VARIANT}`);
console.log(`wrote bench/results/${file}`);
