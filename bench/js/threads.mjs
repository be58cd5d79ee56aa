// Where the time of a 2-thread call goes, in Node and in Chromium (Linux only): for 1 and 2
// threads, the wall time of a call and, per thread of the process that ran it, the time it
// spent on a CPU and the time it spent runnable but waiting for one (the run-queue wait,
// from /proc/<pid>/task/<tid>/schedstat). If 2 threads gain less than 2x while their threads
// waited in the run queue, other processes held the cores: noise, not the kernel; the
// on-CPU times show the split of the work and what two free cores would give.
//   node bench/js/threads.mjs [--sizes 1024,2048] [--reps 7]
// Prints a table; writes bench/results/threads.json.
import { readFileSync, readdirSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import { ROOT, launch, openPage } from '../../tests/browser/harness.js';
import { runThreadCalls } from './threads-core.js';

const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const sizes = opt('--sizes', '1024,2048').split(',').map(Number);
const reps = Number(opt('--reps', '7'));

/** schedstat of every thread of a process: { tid: { name, cpuMs, waitMs } }. */
function threads(pid) {
  const out = {};
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const [cpu, wait] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
      out[tid] = { name: readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim(), cpuMs: cpu / 1e6, waitMs: wait / 1e6 };
    } catch { /* the thread ended */ }
  }
  return out;
}

/** The threads that ran during a call (on a CPU for >= 5% of it), busiest first. */
function delta(before, after, wallMs) {
  const rows = [];
  for (const [tid, a] of Object.entries(after)) {
    const b = before[tid] ?? { cpuMs: 0, waitMs: 0 };
    const cpuMs = a.cpuMs - b.cpuMs, waitMs = a.waitMs - b.waitMs;
    if (cpuMs >= 0.05 * wallMs) rows.push({ name: a.name, cpuMs: +cpuMs.toFixed(1), waitMs: +waitMs.toFixed(1) });
  }
  return rows.sort((x, y) => y.cpuMs - x.cpuMs);
}

// Node: this process's threads, read around each call.
async function node() {
  const qkv = await import('../../dist/index.js');
  return runThreadCalls(qkv, { sizes, reps, mark: () => threads(process.pid), delta });
}

// Chromium: the page asks this server to read the renderer's threads (GET /mark) around each call.
async function chromium() {
  let renderer = null, snapshots = [];
  const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://x');
    const headers = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp', 'Cache-Control': 'no-store' };
    if (url.pathname === '/mark') {
      renderer ??= Number(url.searchParams.get('pid')) || findRenderer();
      snapshots.push(threads(renderer));
      res.writeHead(200, { ...headers, 'Content-Type': 'text/plain' }).end(String(snapshots.length - 1));
      return;
    }
    const file = join(ROOT, normalize(decodeURIComponent(url.pathname)));
    try {
      if (!file.startsWith(ROOT) || !(await stat(file)).isFile()) throw new Error('not found');
      res.writeHead(200, { ...headers, 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(await readFile(file));
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const browser = await launch(['--renderer-process-limit=1', '--qkv-threads-bench']);
  const version = browser.version();
  try {
    const page = await openPage(browser, `http://127.0.0.1:${server.address().port}/bench/js/threads.html?sizes=${sizes}&reps=${reps}`);
    await page.waitForFunction(() => window.__threads !== undefined, null, { timeout: 0, polling: 500 });
    const r = await page.evaluate(() => window.__threads);
    if (r.error) throw new Error(r.error);
    // the page reports snapshot indices; turn them into per-thread deltas here
    for (const row of r.rows) {
      row.threads = delta(snapshots[row.before], snapshots[row.after], row.ms);
      delete row.before;
      delete row.after;
    }
    return { version, rows: r.rows };
  } finally {
    await browser.close();
    server.close();
  }
}

// The renderer whose main thread has run longest among those of the browser launched above.
function findRenderer() {
  let best = null, bestNs = -1;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer')) continue;
      let ours = false;
      for (let p = pid; p && p !== '0' && p !== '1'; p = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ')[1]) {
        if (readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('--qkv-threads-bench')) { ours = true; break; }
      }
      const ns = Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]);
      if (ours && ns > bestNs) [best, bestNs] = [pid, ns];
    } catch { /* gone */ }
  }
  if (!best) throw new Error('threads: the renderer process was not found');
  return best;
}

const result = { date: new Date().toISOString(), node: { version: process.version, rows: await node() }, chromium: await chromium() };
mkdirSync(new URL('../results/', import.meta.url), { recursive: true });
// cpu 2t/1t: the 1-thread call's on-CPU time over the busiest thread's in the 2-thread call,
// the speed-up two free cores would give
const busiest = (r) => Math.max(...r.threads.map((x) => x.cpuMs));
console.log('runtime                 L causal thr  wall ms  2t/1t  cpu 2t/1t  threads (on-CPU ms / run-queue wait ms)');
for (const [runtime, rows] of [[`node ${process.version}`, result.node.rows], [`chromium ${result.chromium.version}`, result.chromium.rows]]) {
  for (const r of rows) {
    const one = rows.find((x) => x.L === r.L && x.causal === r.causal && x.threadCount === 1);
    const two = r.threadCount === 2;
    if (two) Object.assign(r, { wallSpeedup: +(one.ms / r.ms).toFixed(2), cpuSpeedup: +(busiest(one) / busiest(r)).toFixed(2) });
    const t = r.threads.slice(0, 3).map((x) => `${x.name} ${x.cpuMs}/${x.waitMs}`).join(', ');
    console.log(`${runtime.slice(0, 22).padEnd(22)} ${String(r.L).padStart(5)} ${String(r.causal).padStart(6)} ${String(r.threadCount).padStart(3)} ${r.ms.toFixed(1).padStart(8)}  ${two ? r.wallSpeedup.toFixed(2) : '    '}  ${two ? r.cpuSpeedup.toFixed(2).padStart(9) : '         '}  ${t}`);
  }
}
writeFileSync(new URL('../results/threads.json', import.meta.url), JSON.stringify(result, null, 1) + '\n');
