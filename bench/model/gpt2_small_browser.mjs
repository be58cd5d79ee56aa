// GPT-2 small (124M, random weights of its shape: make_gpt2_small.mjs) in headless Chromium:
// the companion of gpt2_small.mjs (Node). One command:
//
//   node bench/model/gpt2_small_browser.mjs [--dir /tmp/qkv-gpt2-small] [--reps 3] [--tokens 16]
//        [--weights f32,f16,int8] [--threads 1,2] [--variant simd[,simd-relaxed]] [--prefill 32,128] [--contexts 8]
//        [--source url|blob]
//
// The checkpoint is made on first use in --dir (~725 MB: F32 and F16 folders; never in the
// repository). A local server streams it (Content-Length, so loadModel reports progress) with
// COOP/COEP, so the page is crossOriginIsolated and the threads build runs. Each setting
// (weights x threads) runs in a browser of its own, in one page (gpt2_small_page.js):
//  - load: loadModel(url) from the server (fetch body streamed into wasm memory; int8 quantizes
//    the F32 file on load, F16 is read as stored), seconds, and the renderer's RSS after it and
//    after a full GC (Chromium runs with --expose-gc: what the load left as garbage);
//    with --source blob, the demo's Hub path instead: the files are fetched and model.safetensors
//    is put in Cache Storage first (not timed), then loadModel({ config, vocab, merges, weights:
//    the cached response's Blob }) is (a Blob is read in 4 MB slices, each a fresh buffer left
//    to the GC, where a fetch body is read into one reused buffer);
//  - prefill: a forward of 32 / 128 tokens to the last position's logits;
//  - decode: greedy tokens/s after an 8-token prompt (KV cache, one token per step);
//  - peak RSS of the renderer: the highest VmHWM read at any mark.
// The server reads the renderers' threads' CPU time (/proc/<pid>/task/*/schedstat) and RSS
// around every timed region (GET /mark), so 1-thread figures are given on CPU time, as in the
// Node benchmark (the machine is shared), 2 threads on wall time; both clocks are in the JSON.
// Each figure is the best of --reps runs (noise only slows). Writes
// bench/results/model-gpt2-small-chromium.json (-blob.json for --source blob) and prints a table.
import { execFileSync } from 'node:child_process';
import { createReadStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT, launch, launchWithProfile, openPage } from '../../tests/browser/harness.js';
import { ourRenderers, processCpuMs } from '../renderers.mjs';

const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const list = (name, fallback) => arg(name, fallback).split(',');
const DIR = path.resolve(arg('--dir', process.env.QKV_GPT2_DIR ?? '/tmp/qkv-gpt2-small'));
const REPS = Number(arg('--reps', 3));
const TOKENS = Number(arg('--tokens', 16));
const WEIGHTS = list('--weights', 'f32,f16,int8');
const THREADS = list('--threads', '1,2').map(Number);
// the builds: plain SIMD (as the Node benchmark) and/or its relaxed-SIMD twin (what 'auto' loads in Chromium)
const VARIANTS = list('--variant', 'simd');
const PREFILL = list('--prefill', '32,128').map(Number);
const CONTEXTS = list('--contexts', '8').map(Number);
const SOURCE = arg('--source', 'url');
if (!['url', 'blob'].includes(SOURCE)) throw new Error(`gpt2_small_browser: --source must be url or blob, got ${SOURCE}`);
const FLAG = '--qkv-gpt2-small-bench';

// ---- the renderer, read from /proc ---------------------------------------------------------

/** A process's CPU time over all its threads (ms, schedstat) and its RSS and peak RSS (MB). */
function reading(pid) {
  const cpuMs = processCpuMs(pid);
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kB = (key) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
  return { cpuMs, rssMB: kB('VmRSS') / 1024, peakRssMB: kB('VmHWM') / 1024 };
}

// ---- the server -----------------------------------------------------------------------------

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.json': 'application/json', '.wasm': 'application/wasm' };
const HEADERS = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp', 'Cache-Control': 'no-store' };
let marks = []; // per GET /mark: { pid: reading } of every renderer of the run's browser

async function handle(req, res) {
  const url = new URL(req.url, 'http://x');
  if (url.pathname === '/mark') {
    const now = {};
    for (const pid of ourRenderers(FLAG)) {
      try { now[pid] = reading(pid); } catch { /* it ended */ }
    }
    marks.push(now);
    return res.writeHead(200, { ...HEADERS, 'Content-Type': 'text/plain' }).end(String(marks.length - 1));
  }
  // /weights/<f32|f16>/<file> from --dir, streamed; everything else from the repository
  const rel = decodeURIComponent(url.pathname);
  const [base, sub] = rel.startsWith('/weights/') ? [DIR, rel.slice('/weights'.length)] : [ROOT, rel];
  const file = path.join(base, path.normalize(sub));
  try {
    if (!file.startsWith(base + path.sep)) throw new Error('outside');
    const st = await stat(file);
    if (!st.isFile()) throw new Error('not a file');
    const headers = { ...HEADERS, 'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream', 'Content-Length': st.size };
    if (st.size < 1 << 20) return res.writeHead(200, headers).end(await readFile(file));
    res.writeHead(200, headers);
    createReadStream(file, { highWaterMark: 1 << 20 }).pipe(res);
  } catch {
    res.writeHead(404).end('not found');
  }
}

// ---- runs -----------------------------------------------------------------------------------

/**
 * The page's marks resolved on its renderer (the one that ran the most from the first mark to
 * the last; a spare renderer may exist beside it): CPU ms per region, RSS, and per figure the
 * best of the runs on each clock (prefill ms, decode tokens/s).
 */
function resolve(r) {
  const pids = Object.keys(marks[r.end]).filter((pid) => marks[0][pid]);
  const pid = pids.sort((a, b) => (marks[r.end][b].cpuMs - marks[0][b].cpuMs) - (marks[r.end][a].cpuMs - marks[0][a].cpuMs))[0];
  if (!pid) throw new Error('gpt2_small_browser: no renderer of the benchmark browser was found in /proc');
  const cpu = (s) => marks[s.to][pid].cpuMs - marks[s.from][pid].cpuMs;
  const best = (runs, f, pick) => ({ wall: pick(...runs.map((s) => f(s, s.wall))), cpu: pick(...runs.map((s) => f(s, cpu(s)))) });
  return {
    ...r,
    load: { ...r.load, cpu: cpu(r.load) },
    peakRssBeforeLoadMB: marks[r.beforeLoad][pid].peakRssMB,
    rssAfterLoadMB: marks[r.afterLoad][pid].rssMB,
    rssAfterGcMB: r.afterGc === null ? null : marks[r.afterGc][pid].rssMB,
    // VmHWM read at every mark, the highest: Chromium may reset a process's VmHWM (it was seen
    // below an earlier VmRSS at the end of a run), so the last reading alone can miss the peak
    peakRssMB: Math.max(...marks.slice(0, r.end + 1).map((m) => m[pid]?.peakRssMB ?? 0)),
    prefill: Object.fromEntries(Object.entries(r.prefill).map(([L, runs]) => [L, { ...best(runs, (s, ms) => ms, Math.min), runs }])),
    decode: Object.fromEntries(Object.entries(r.decode).map(([c, runs]) => [c, { ...best(runs, (s, ms) => (1000 * s.tokens) / ms, Math.max), runs }])),
  };
}

async function runOne(origin, spec) {
  marks = [];
  const flags = ['--renderer-process-limit=1', '--js-flags=--expose-gc', FLAG];
  // the Blob source stores 500 MB in Cache Storage: a profile on disk, as the demo's users have
  const profile = spec.source === 'blob' ? mkdtempSync(path.join(os.tmpdir(), 'qkv-gpt2-profile-')) : null;
  const browser = profile ? await launchWithProfile(profile, flags) : await launch(flags);
  const t0 = performance.now();
  try {
    const q = new URLSearchParams({ ...spec, prefill: PREFILL.join(','), contexts: CONTEXTS.join(','), reps: REPS, tokens: TOKENS });
    const page = await openPage(browser, `${origin}/bench/model/gpt2_small_browser.html?${q}`);
    await page.waitForFunction(() => window.__gpt2 !== undefined, null, { timeout: 0, polling: 500 });
    const r = await page.evaluate(() => window.__gpt2);
    if (r.error) throw new Error(`gpt2_small_browser: ${JSON.stringify(spec)}: ${r.error}`);
    if (page.problems.length) r.problems = page.problems;
    return { ...resolve(r), version: (browser.browser?.() ?? browser).version(), run_s: (performance.now() - t0) / 1000 };
  } finally {
    await browser.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  }
}

if (!existsSync(path.join(DIR, 'f32', 'done')) || !existsSync(path.join(DIR, 'f16', 'done'))) {
  execFileSync(process.execPath, [path.join(ROOT, 'bench/model/make_gpt2_small.mjs'), '--out', DIR], { stdio: 'inherit' });
}
if (!existsSync(path.join(ROOT, 'dist', 'index.js'))) throw new Error('gpt2_small_browser: build first (npm run build)');
const t0 = performance.now();
const loadBefore = os.loadavg();
const server = createServer((req, res) => { handle(req, res).catch((e) => res.writeHead(500).end(String(e))); });
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const origin = `http://127.0.0.1:${server.address().port}`;
const runs = [];
try {
  for (const base of VARIANTS) {
    for (const threads of THREADS) {
      for (const weights of WEIGHTS) {
        const variant = threads > 1 ? `${base}-threads` : base;
        const r = await runOne(origin, { weights, variant, threads, source: SOURCE });
        console.error(`  ${weights} ${r.variant} ${r.threads}t: ${r.run_s.toFixed(0)} s`);
        runs.push(r);
      }
    }
  }
} finally {
  server.close();
}

// 1 thread on CPU time (as gpt2_small.mjs in Node), more on wall time
const clock = (r) => (r.threads > 1 ? 'wall' : 'cpu');
const cfg = JSON.parse(readFileSync(path.join(DIR, 'f32', 'config.json'), 'utf8'));
const out = {
  benchmark: 'model-gpt2-small-chromium',
  date: new Date().toISOString(),
  browser: runs[0]?.version,
  machine: { cpu: os.cpus()[0]?.model, cores: os.availableParallelism?.() ?? os.cpus().length, load_average: { before: loadBefore, after: os.loadavg() } },
  model: { n_layer: cfg.n_layer, n_embd: cfg.n_embd, vocab_size: cfg.vocab_size, file_mb: statSync(path.join(DIR, 'f32', 'model.safetensors')).size / 2 ** 20 },
  source: SOURCE,
  method: 'one browser per setting, loadModel(url) from a local server (streamed, no-store; --source blob: loadModel of a Blob from Cache Storage, the demo\'s Hub path); 1 thread: the renderer\'s CPU time (all its threads, ' +
    '/proc schedstat), 2 threads: wall time (both clocks in each run); best of reps; prefill = forward to the last position\'s logits; ' +
    `decode = greedy, ${TOKENS} tokens after the prompt, steps only; RSS = the renderer's (VmRSS after load and after a full GC; peak: the highest VmHWM read at any mark)`,
  reps: REPS,
  runs,
  total_s: (performance.now() - t0) / 1000,
};
mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
const file = path.join(ROOT, 'bench', 'results', `model-gpt2-small-chromium${SOURCE === 'url' ? '' : `-${SOURCE}`}.json`);
writeFileSync(file, JSON.stringify(out, null, 2) + '\n');

const fmt = (x, d = 1) => (x === undefined || x === null || Number.isNaN(x) ? '' : x.toFixed(d));
const head = ['run', 'clock', 'load s', 'RSS after load MB', 'after GC MB', ...PREFILL.map((L) => `prefill ${L} ms`), ...CONTEXTS.map((c) => `decode tok/s @${c}`), 'peak RSS MB'];
const rows = runs.map((r) => [
  `qkv ${r.weights}, ${r.variant}, ${r.threads}t`, clock(r), fmt(r.load.wall / 1000, 2), fmt(r.rssAfterLoadMB, 0), fmt(r.rssAfterGcMB, 0),
  ...PREFILL.map((L) => fmt(r.prefill[L][clock(r)], 0)), ...CONTEXTS.map((c) => fmt(r.decode[c][clock(r)], 1)), fmt(r.peakRssMB, 0),
]);
const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
const line = (r) => '| ' + r.map((c, i) => c.padEnd(w[i])).join(' | ') + ' |';
console.log(`GPT-2 small (random weights), loaded from ${SOURCE === 'url' ? 'a URL (fetch)' : 'a Blob (Cache Storage)'}, ${out.browser} (headless), ${out.machine.cores} cores, load ${loadBefore[0].toFixed(1)} -> ${os.loadavg()[0].toFixed(1)}; ` +
  `crossOriginIsolated ${runs.every((r) => r.crossOriginIsolated)}`);
console.log(line(head));
console.log('|' + w.map((x) => '-'.repeat(x + 2)).join('|') + '|');
for (const r of rows) console.log(line(r));
const one = (wt) => runs.find((r) => r.weights === wt && r.threads === 1 && r.variant === VARIANTS[0]);
const two = (wt) => runs.find((r) => r.weights === wt && r.threads > 1 && r.variant === `${VARIANTS[0]}-threads`);
for (const wt of WEIGHTS) {
  const a = one(wt), b = two(wt);
  if (a && b) console.log(`${wt}: 2t/1t on wall time: decode @${CONTEXTS[0]} ${(b.decode[CONTEXTS[0]].wall / a.decode[CONTEXTS[0]].wall).toFixed(2)}x, prefill ${PREFILL.at(-1)} ${(a.prefill[PREFILL.at(-1)].wall / b.prefill[PREFILL.at(-1)].wall).toFixed(2)}x`);
}
if (one('f32')) {
  for (const wt of WEIGHTS.filter((x) => x !== 'f32' && one(x))) {
    console.log(`${wt} / f32 decode @${CONTEXTS[0]}, 1 thread: ${(one(wt).decode[CONTEXTS[0]].cpu / one('f32').decode[CONTEXTS[0]].cpu).toFixed(2)}x`);
  }
}
for (const other of VARIANTS.slice(1)) {
  for (const wt of WEIGHTS) {
    const a = one(wt), b = runs.find((r) => r.weights === wt && r.threads === 1 && r.variant === other);
    if (a && b) console.log(`${wt}, 1 thread, ${other} / ${VARIANTS[0]} on CPU time: prefill ${PREFILL.at(-1)} ${(a.prefill[PREFILL.at(-1)].cpu / b.prefill[PREFILL.at(-1)].cpu).toFixed(2)}x, decode @${CONTEXTS[0]} ${(b.decode[CONTEXTS[0]].cpu / a.decode[CONTEXTS[0]].cpu).toFixed(2)}x`);
  }
}
console.log(`wrote ${path.relative(ROOT, file)} (${out.total_s.toFixed(0)} s)`);
