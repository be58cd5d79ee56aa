// flash.cpp's micro-kernel block shapes, side by side: dist copies built with other
// QKV_ATTN_S_R/S_NV/PV_R/PV_NV (each a directory like dist/ with its own wasm/qkv-simd.*),
// SDPA non-causal B=1 H=8 D=64 one thread, alternating per round, the limit (peak.js) in the
// same run, on-CPU time (Node: the process; Chromium: the renderer main thread).
//   node bench/js/attn-shape.mjs --dists /tmp/attn [--tags b24,s42] [--sizes 1024,2048] [--rounds 3] [--runtimes chromium,node]
//        [--out attn-shape]   (writes bench/results/<out>-<runtime>.json; another name keeps a one-off
//                              comparison from replacing the shape runs on record)
// The first tag is the baseline. Each dist copy (<dists>/dist-<tag>) is dist/ with
// wasm/qkv-simd.{wasm,mjs,node.cjs} from a `simd` build whose flash.cpp was compiled with the
// macros set (e.g. build/wasm-simd configured again with CMAKE_CXX_FLAGS="-DQKV_ATTN_S_R=3 ...").
import { writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { pathToFileURL } from 'node:url';
import { runShapes, summarize } from './attn-shape-core.js';
import { launch, openPage, serve } from '../../tests/browser/harness.js';
import { rendererMainThreadsMs } from './renderer-cpu.js';

const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const dists = opt('--dists', '/tmp/attn');
const tags = opt('--tags', 'b24,s42').split(',');
const sizes = opt('--sizes', '1024,2048').split(',').map(Number);
const rounds = Number(opt('--rounds', '3'));
const runtimes = opt('--runtimes', 'chromium').split(',');
const out = opt('--out', 'attn-shape');
if (!/^[\w.-]+$/.test(out)) throw new Error(`attn-shape: --out must be a file name stem, got ${out}`);
const results = new URL('../results/', import.meta.url);
mkdirSync(results, { recursive: true });

function report(name, runtime, raw) {
  if (raw.error) throw new Error(raw.error);
  const s = summarize(raw, tags, sizes);
  console.log(`${runtime} (load ${os.loadavg().map((x) => x.toFixed(1)).join(' ')})\n${s.text}\n`);
  writeFileSync(new URL(`${out}-${name}.json`, results), JSON.stringify({ runtime, date: new Date().toISOString(), load: os.loadavg(), tags, sizes, rounds, ...s, raw }, null, 1) + '\n');
}

if (runtimes.includes('node')) {
  const builds = [];
  for (const tag of tags) {
    const qkv = await import(pathToFileURL(path.join(dists, `dist-${tag}`, 'index.js')).href);
    if ((await qkv.init({ variant: 'simd', numThreads: 1 })).variant !== 'simd') throw new Error(`${tag} did not load`);
    builds.push({ tag, qkv });
  }
  const cpuMs = async () => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  };
  report('node', `node ${process.version}`, await runShapes(builds, { sizes, rounds, cpuMs }));
}


if (runtimes.includes('chromium')) {
  const server = await serve({
    mounts: Object.fromEntries(tags.map((tag) => [`/d/${tag}/`, path.join(dists, `dist-${tag}`)])),
    dynamic: { '/cpu-ms': () => rendererMainThreadsMs('--qkv-shape-bench') },
  });
  const browser = await launch(['--renderer-process-limit=1', '--qkv-shape-bench']);
  try {
    const page = await openPage(browser, `${server.url}/bench/js/attn-shape.html?tags=${tags}&sizes=${sizes}&rounds=${rounds}`);
    await page.waitForFunction(() => window.__shapes !== undefined, null, { timeout: 0, polling: 500 });
    report('chromium', `chromium ${browser.version()} (headless)`, await page.evaluate(() => window.__shapes));
  } finally {
    await browser.close();
    await server.close();
  }
}
