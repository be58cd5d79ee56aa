// The attention benchmark's calls timed by the CPU time of the threads that ran them, in Node
// and in Chromium (Linux only: /proc/<pid>/task/<tid>/schedstat). On a shared machine the wall
// time of a call includes the time its threads were runnable but waiting for a core; the
// on-CPU time does not. Per call: the wall time and, per thread that ran, its on-CPU time and
// its run-queue wait. The limit's loops (bench/js/peak.js) are timed the same way, so "of limit"
// compares on-CPU rates; 2 threads are compared by wall time and by the busiest thread's
// on-CPU time (what two free cores would give). Each public call is followed by its `kernel`
// row, the same call into wasm on inputs copied in once: "API adds" is the share of the public
// call's on-CPU time that goes to the copies in and out and the rest of the JS around it.
//   node bench/js/cpu-time.mjs [--sizes 1024,2048] [--reps 7] [--runtimes node,chromium]
// Prints a table; writes bench/results/cpu-time.json.
import { readFileSync, readdirSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import { ROOT, launch, openPage } from '../../tests/browser/harness.js';
import { runCpuTimed } from './cpu-time-core.js';

const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const sizes = opt('--sizes', '1024,2048').split(',').map(Number);
const reps = Number(opt('--reps', '7'));
const runtimes = opt('--runtimes', 'node,chromium').split(',');

/** schedstat of every thread of a process: { threads: { tid: { name, cpuMs, waitMs } } }. */
function threads(pid) {
  const out = {};
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const [cpu, wait] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
      out[tid] = { name: readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim(), cpuMs: cpu / 1e6, waitMs: wait / 1e6 };
    } catch { /* the thread ended */ }
  }
  return { threads: out };
}

/**
 * Per thread that ran during a batch of `calls` calls (on a CPU for >= 5% of it), busiest
 * first: on-CPU and run-queue wait per call. schedstat lags for a thread that is running when
 * it is read (it is updated at scheduler events): the one that reads it, Node's main thread,
 * is given the process's CPU time (getrusage, exact) less the other threads'.
 */
function delta(before, after, wallMs, calls) {
  const rows = [];
  for (const [tid, a] of Object.entries(after.threads)) {
    const b = before.threads[tid] ?? { cpuMs: 0, waitMs: 0 };
    rows.push({ tid, name: a.name, cpuMs: (a.cpuMs - b.cpuMs) / calls, waitMs: (a.waitMs - b.waitMs) / calls });
  }
  if (after.processMs !== undefined) {
    const self = rows.find((r) => r.tid === after.self);
    self.cpuMs = (after.processMs - before.processMs) / calls - rows.reduce((sum, r) => sum + (r === self ? 0 : r.cpuMs), 0);
  }
  return rows
    .filter((r) => r.cpuMs >= 0.05 * wallMs)
    .map((r) => ({ name: r.name, cpuMs: +r.cpuMs.toFixed(2), waitMs: +r.waitMs.toFixed(2) }))
    .sort((x, y) => y.cpuMs - x.cpuMs);
}

/** Rows with their per-thread deltas and rates: wall GFLOP/s, and on-CPU GFLOP/s of the busiest thread. */
function finish(rows, snapshot) {
  for (const r of rows) {
    r.threads = delta(snapshot(r.before), snapshot(r.after), r.ms, r.calls);
    delete r.before;
    delete r.after;
    r.ms = +r.ms.toFixed(2);
    r.gflops = +(r.flops / r.ms / 1e6).toFixed(2);
    r.cpuGflops = +(r.flops / Math.max(...r.threads.map((t) => t.cpuMs)) / 1e6).toFixed(2);
  }
  return rows;
}

// Node: this process's threads, read around each call.
async function node() {
  const qkv = await import('../../dist/index.js');
  const mark = () => {
    const { user, system } = process.cpuUsage();
    return { ...threads(process.pid), self: String(process.pid), processMs: (user + system) / 1000 };
  };
  return finish(await runCpuTimed(qkv, { sizes, reps, mark }), (s) => s);
}

// Chromium: the page asks this server to read the renderer's threads (GET /mark) around each call.
async function chromium() {
  let renderers = null;
  const snapshots = [];
  const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://x');
    const headers = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp', 'Cache-Control': 'no-store' };
    if (url.pathname === '/mark') {
      // every renderer of this browser (a spare one may exist); finish() keeps the one that ran
      renderers ??= ourRenderers();
      snapshots.push(Object.fromEntries(renderers.map((pid) => [pid, threads(pid)])));
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
  const browser = await launch(['--renderer-process-limit=1', '--qkv-cpu-time-bench']);
  try {
    const page = await openPage(browser, `http://127.0.0.1:${server.address().port}/bench/js/cpu-time.html?sizes=${sizes}&reps=${reps}`);
    await page.waitForFunction(() => window.__cpuTime !== undefined, null, { timeout: 0, polling: 500 });
    const r = await page.evaluate(() => window.__cpuTime);
    if (r.error) throw new Error(r.error);
    // each row's renderer: the one whose main thread ran during the measurement
    for (const row of r.rows) {
      const ran = (pid) => snapshots[row.after][pid].threads[pid].cpuMs - snapshots[row.before][pid].threads[pid].cpuMs;
      const pid = renderers.reduce((a, b) => (ran(b) > ran(a) ? b : a));
      [row.before, row.after] = [snapshots[row.before][pid], snapshots[row.after][pid]];
    }
    return { version: browser.version(), rows: finish(r.rows, (snapshot) => snapshot) };
  } finally {
    await browser.close();
    server.close();
  }
}

// The renderer processes of the browser launched above (its command line carries --qkv-cpu-time-bench).
function ourRenderers() {
  const pids = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer')) continue;
      for (let p = pid; p && p !== '0' && p !== '1'; p = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ')[1]) {
        if (readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('--qkv-cpu-time-bench')) { pids.push(pid); break; }
      }
    } catch { /* gone */ }
  }
  if (!pids.length) throw new Error('cpu-time: no renderer process of the benchmark browser was found');
  return pids;
}

const result = {
  date: new Date().toISOString(), shape: { B: 1, H: 8, D: 64 }, reps,
  method: 'per measurement: the rep with the median wall time; on-CPU and run-queue wait per thread from /proc schedstat; ' +
    'cpu GFLOP/s = the FLOPs the call needs (causal: L(L+1)/2 scores) over the busiest thread\'s on-CPU time; ' +
    'of limit = cpu GFLOP/s over threads x the fastest peak loop\'s cpu GFLOP/s; ' +
    '`kernel` rows: the bare call into wasm on inputs copied in once; `out` rows: the public call with options.out (one output array reused); apiAdds = 1 - the API call\'s cpu GFLOP/s over its kernel row\'s',
  ...(runtimes.includes('node') ? { node: { version: process.version, rows: await node() } } : {}),
  ...(runtimes.includes('chromium') ? { chromium: await chromium() } : {}),
};

console.log('runtime                impl                     L causal thr  wall ms  GFLOP/s  cpu GFLOP/s  of limit  API adds  2t/1t wall  cpu   threads (on-CPU ms / run-queue wait ms)');
const measured = [result.node && [`node ${process.version}`, result.node.rows], result.chromium && [`chromium ${result.chromium.version}`, result.chromium.rows]];
for (const [runtime, rows] of measured.filter(Boolean)) {
  const limit = Math.max(...rows.filter((r) => r.impl.startsWith('peak')).map((r) => r.cpuGflops));
  // 'kernel' (the bare call), 'out' (the API writing into a reused output array) or '' (the API)
  const kind = (r) => r.impl.split(' ')[1] ?? '';
  const base = (r) => r.impl.split(' ')[0];
  for (const r of rows) {
    r.ofLimit = +(r.cpuGflops / (r.threadCount * limit)).toFixed(3);
    const qkv = !r.impl.startsWith('peak');
    // the same call's 1-thread row (of the same kind), and for an API row its bare kernel call
    const one = rows.find((x) => x.L === r.L && x.causal === r.causal && x.threadCount === 1 && !x.impl.startsWith('peak') && kind(x) === kind(r));
    const bare = qkv && kind(r) !== 'kernel' ? rows.find((x) => x.impl === `${base(r)} kernel` && x.L === r.L && x.causal === r.causal) : null;
    // what the public API adds to the kernel, as a share of the API call's on-CPU time (busiest thread)
    if (bare) r.apiAdds = +(1 - r.cpuGflops / bare.cpuGflops).toFixed(3);
    const two = r.threadCount === 2;
    if (two) Object.assign(r, { wallSpeedup: +(one.ms / r.ms).toFixed(2), cpuSpeedup: +(r.cpuGflops / one.cpuGflops).toFixed(2) });
    const t = r.threads.slice(0, 2).map((x) => `${x.name} ${x.cpuMs.toFixed(1)}/${x.waitMs.toFixed(1)}`).join(', ');
    console.log(`${runtime.slice(0, 22).padEnd(22)} ${r.impl.padEnd(23)} ${String(r.L ?? '').padStart(5)} ${String(r.causal ?? '').padStart(6)} ${String(r.threadCount).padStart(3)} ${r.ms.toFixed(1).padStart(8)} ${r.gflops.toFixed(2).padStart(8)} ${r.cpuGflops.toFixed(2).padStart(12)} ${(100 * r.ofLimit).toFixed(1).padStart(8)}%  ${bare ? `${(100 * r.apiAdds).toFixed(1).padStart(7)}%` : '        '}  ${two ? r.wallSpeedup.toFixed(2).padStart(10) : '          '} ${two ? r.cpuSpeedup.toFixed(2).padStart(5) : '     '}   ${t}`);
  }
}
mkdirSync(new URL('../results/', import.meta.url), { recursive: true });
writeFileSync(new URL('../results/cpu-time.json', import.meta.url), JSON.stringify(result, null, 1) + '\n');
