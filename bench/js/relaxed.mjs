// Relaxed SIMD vs plain SIMD vs onnxruntime-web, one thread, in Node and in Chromium (headless),
// both qkv builds loaded side by side and ORT's wasm backend beside them, their calls
// alternating (bench/js/relaxed-core.js): SDPA non-causal and causal (B=1, H=8, D=64), the
// GPT-2-small prefill matmuls (M = 32, 128, 512), and each build's limit (bench/js/peak.js) in
// the same run. Timed by on-CPU time (the machine is shared): Node by the process's CPU time,
// Chromium by its renderer main thread's (Linux /proc); the wall-clock figures of the same run
// are in the JSON and printed below. Node 20 needs relaxed SIMD switched on:
//   node --experimental-wasm-relaxed-simd bench/js/relaxed.mjs [--sizes 512,1024] [--Ms 32,128,512]
//        [--rounds 3] [--runtimes node,chromium] [--no-ort]
// Prints a table per runtime; writes bench/results/relaxed-node.json and relaxed-chromium.json.
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import os from 'node:os';
import { runRelaxed, summarize, table } from './relaxed-core.js';
import { ROOT, launch, openPage, serve } from '../../tests/browser/harness.js';
import { rendererMainThreadsMs } from './renderer-cpu.js';

const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const sizes = opt('--sizes', '512,1024').split(',').map(Number);
const Ms = opt('--Ms', '32,128,512').split(',').map(Number);
const rounds = Number(opt('--rounds', '3'));
const runtimes = opt('--runtimes', 'node,chromium').split(',');
const withOrt = !args.includes('--no-ort');
const dist = path.join(ROOT, 'dist');
const results = new URL('../results/', import.meta.url);
const ortVersion = `onnxruntime-web ${JSON.parse(readFileSync(path.join(ROOT, 'node_modules/onnxruntime-web/package.json'), 'utf8')).version}`;
mkdirSync(results, { recursive: true });

function report(name, runtime, raw, cpuClock, load) {
  const summary = summarize(raw, { cpu: true, cpuClock });
  const result = {
    runtime, cpu: os.cpus()[0]?.model, load, date: new Date().toISOString(), rounds, threads: 1, ort: withOrt ? ortVersion : null,
    method: 'builds (and ORT) alternating per call site and round; per row the fastest of `rounds` (a warm-up batch of ~200 ms, then a batch: ' +
      'median wall ms per call, on-CPU ms per call: Node the process, Chromium the renderer main thread); limit: the fastest peak.js loop on the same clock (relaxed: its relaxed_madd loops)',
    ...summary, wall: summarize(raw, { cpu: false }), raw,
  };
  writeFileSync(new URL(`relaxed-${name}.json`, results), JSON.stringify(result, null, 1) + '\n');
  console.log(table(summary, `relaxed vs plain SIMD${withOrt ? " vs onnxruntime-web" : ""}, 1 thread — ${runtime} (load ${load.map((x) => x.toFixed(1)).join(' ')})`));
  console.log(table(result.wall, '(the same run by wall time)'));
  console.log('');
}

// Node: two instances of the package, each with its own module loaded: the second is a copy of
// dist/ (a query string on index.js would not reach the modules it imports, which hold the state).
if (runtimes.includes('node')) {
  const copy = mkdtempSync(path.join(os.tmpdir(), 'qkv-dist-'));
  try {
    cpSync(dist, copy, { recursive: true });
    const builds = [];
    for (const [variant, dir] of [['simd', dist], ['simd-relaxed', copy]]) {
      const url = (f) => pathToFileURL(path.join(dir, f)).href;
      const qkv = await import(url('index.js'));
      if ((await qkv.init({ variant, numThreads: 1 })).variant !== variant) throw new Error(`${variant} did not load`);
      const { getModule } = await import(url('wasm/loader.js'));
      const { heapU8 } = await import(url('wasm/heap.js'));
      builds.push({ variant, qkv, getModule, heapU8 });
    }
    const cpuMs = async () => {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1000;
    };
    let ort = null;
    if (withOrt) {
      ort = await import('onnxruntime-web');
      ort.env.wasm.numThreads = 1;
    }
    const raw = await runRelaxed(builds, { sizes, Ms, rounds, cpuMs, ort });
    for (const { qkv } of builds) qkv.dispose();
    report('node', `node ${process.version} ${process.execArgv.join(' ')}`, raw, 'process CPU time', os.loadavg());
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
}

// Chromium: the page loads the package from /dist/ and from /dist-b/ (a second URL, the same
// files), and asks /cpu-ms for its main thread's on-CPU time: the main threads of this
// browser's renderers (launched with --qkv-relaxed-bench; a spare renderer's stays ~0), from
// /proc/<pid>/task/<pid>/schedstat (Linux).

if (runtimes.includes('chromium')) {
  const server = await serve({
    mounts: { '/dist-b/': path.join(ROOT, 'dist') },
    dynamic: { '/cpu-ms': () => rendererMainThreadsMs('--qkv-relaxed-bench') },
  });
  const browser = await launch(['--renderer-process-limit=1', '--qkv-relaxed-bench']);
  try {
    const page = await openPage(browser, `${server.url}/bench/js/relaxed.html?sizes=${sizes}&Ms=${Ms}&rounds=${rounds}&ort=${withOrt ? 1 : 0}`);
    await page.waitForFunction(() => window.__relaxed !== undefined, null, { timeout: 0, polling: 500 });
    const raw = await page.evaluate(() => window.__relaxed);
    if (raw.error) throw new Error(`relaxed page: ${raw.error}`);
    report('chromium', `chromium ${browser.version()} (headless)`, raw, 'on-CPU time of the renderer main thread', os.loadavg());
  } finally {
    await browser.close();
    await server.close();
  }
}
