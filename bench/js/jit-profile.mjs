// Where the attention kernel's time goes in the machine code the engine compiled from it: Linux
// `perf` samples public SDPA calls (jit-profile-core.js) in Node or in a Chromium page, V8's
// `--perf-prof` writes the JIT code beside them, and the hottest TurboFan wasm function (the
// kernel's run_item) is split into its innermost loops: each loop's share of the function's
// samples and its instruction mix per unrolled copy. Needs `perf` (linux-perf) and may need
// kernel.perf_event_paranoid <= 2; not part of `npm test`.
//   node bench/js/jit-profile.mjs [--runtimes chromium,node] [--L 1024] [--calls 12] [--variant simd]
//        [--dist dist] [--out jit-profile]   (--dist: a build's dist/ copy; writes bench/results/<out>-<runtime>.json)
// Reading it: a product loop of the simd build has, per copy, 4 loads, 2 broadcasts, 8 vmulps,
// 8 vaddps; the limit (peak.js) is the rate at which the CPU retires vector float operations, so a
// loop's share of the samples is its share of the kernel's float work only if it runs at that rate.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { runCalls } from './jit-profile-core.js';

const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const L = Number(opt('--L', '1024'));
const calls = Number(opt('--calls', '12'));
const variant = opt('--variant', 'simd');
const V8_FLAGS = ['--perf-prof', '--no-write-protect-code-memory'];
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const dist = path.resolve(ROOT, opt('--dist', 'dist'));

// The child: the workload, under perf; prints { version, variant, ms } as its last line.
async function child(runtime) {
  if (runtime === 'node') {
    const qkv = await import(pathToFileURL(path.join(dist, 'index.js')).href);
    const got = (await qkv.init({ variant, numThreads: 1 })).variant;
    return { version: `node ${process.version}`, variant: got, ms: runCalls(qkv, { L, calls }) };
  }
  const { launch, openPage, serve } = await import('../../tests/browser/harness.js');
  const server = await serve({ isolated: false, mounts: { '/dist/': dist } });
  const browser = await launch([`--js-flags=${V8_FLAGS.join(' ')}`]);
  try {
    const page = await openPage(browser, `${server.url}/bench/js/jit-profile.html?L=${L}&calls=${calls}&variant=${variant}`);
    await page.waitForFunction(() => window.__jit, null, { timeout: 600_000 });
    const r = await page.evaluate(() => window.__jit);
    if (r.error) throw new Error(r.error);
    return { version: `Chromium ${browser.version()}`, ...r };
  } finally {
    await browser.close();
    await server.close();
  }
}

if (opt('--child')) {
  console.log(JSON.stringify(await child(opt('--child'))));
  process.exit(0);
}

// An instruction's class, from AT&T syntax (operands source first, destination last).
function classify(mnemonic, operands) {
  const mem = operands.includes('(');
  if (/^v(mul|add|sub|max|min|div|sqrt|f[n]?m(add|sub)\w*)[ps]s$/.test(mnemonic)) return 'vfloat';
  if (/^vbroadcastss$/.test(mnemonic) && mem) return 'broadcast';
  if (/^v?mov(dqu|ups|aps|dqa|ss|d|q)$/.test(mnemonic) && mem) return operands.trimEnd().endsWith(')') ? 'store' : 'load';
  if (mnemonic.startsWith('v') && operands.includes('%xmm')) return 'vint/shuffle';
  return 'scalar';
}

/** perf annotate's lines of one symbol -> [{ addr, pct, mnemonic, operands, target }]. */
function parseAnnotate(text) {
  const rows = [];
  for (const line of text.split('\n')) {
    const m = /^\s*([\d.]+)\s*:\s+([0-9a-f]+):\s+(\S+)\s*(.*)$/.exec(line);
    if (!m) continue;
    const [, pct, addr, mnemonic, rest] = m;
    const operands = rest.replace(/\s*<.*$/, '').replace(/\s*#.*$/, '');
    const target = /^j/.test(mnemonic) && /^[0-9a-f]+$/.test(operands.trim()) ? parseInt(operands, 16) : null;
    rows.push({ addr: parseInt(addr, 16), pct: Number(pct), mnemonic, operands, target });
  }
  return rows;
}

/** Innermost loops (ranges of backward jumps that hold no other), with their samples and mix. */
function loops(rows) {
  const ranges = rows.filter((r) => r.target !== null && r.target <= r.addr).map((r) => [r.target, r.addr]);
  const inner = ranges.filter(([a, b]) => !ranges.some(([c, d]) => (c !== a || d !== b) && a <= c && d <= b));
  const total = rows.reduce((s, r) => s + r.pct, 0);
  const out = inner.map(([start, end]) => {
    const body = rows.filter((r) => r.addr >= start && r.addr <= end);
    // one register compare per unrolled copy (V8 tests the induction variable once a copy)
    const copies = Math.max(1, body.filter((r) => r.mnemonic === 'cmp' && !r.operands.includes('(')).length);
    const mix = {};
    for (const r of body) {
      const c = classify(r.mnemonic, r.operands);
      mix[c] = (mix[c] ?? 0) + 1;
    }
    const perCopy = Object.fromEntries(Object.entries(mix).map(([k, n]) => [k, +(n / copies).toFixed(1)]));
    const share = body.reduce((s, r) => s + r.pct, 0) / total;
    return { start: start.toString(16), end: end.toString(16), share: +share.toFixed(4), copies, perCopy };
  });
  return out.sort((x, y) => y.share - x.share);
}

function profile(runtime) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'qkv-jit-'));
  try {
    const node = runtime === 'node' ? [...V8_FLAGS, ...(variant === 'relaxed' ? ['--experimental-wasm-relaxed-simd'] : [])] : [];
    const run = spawnSync('perf', ['record', '-k', '1', '-F', '4000', '-o', 'perf.data', '--', process.execPath, ...node,
      fileURLToPath(import.meta.url), '--child', runtime, '--L', String(L), '--calls', String(calls), '--variant', variant, '--dist', dist],
    { cwd: dir, encoding: 'utf8', maxBuffer: 1 << 26 });
    if (run.status !== 0) throw new Error(`jit-profile: perf record failed (${run.status}): ${run.stderr.slice(-2000)}`);
    const result = JSON.parse(run.stdout.trim().split('\n').pop());
    execFileSync('perf', ['inject', '--jit', '-i', 'perf.data', '-o', 'perf.jit.data'], { cwd: dir, stdio: 'ignore' });
    const report = execFileSync('perf', ['report', '-i', 'perf.jit.data', '--sort', 'sym', '--stdio'], { cwd: dir, encoding: 'utf8', maxBuffer: 1 << 26, stdio: ['ignore', 'pipe', 'ignore'] });
    const hot = /^\s*([\d.]+)%\s+\[\.\]\s+(JS:wasm-function\[\d+\]-\d+-turbofan)\s*$/m.exec(report);
    if (!hot) throw new Error('jit-profile: no TurboFan wasm function among the samples');
    const annotate = execFileSync('perf', ['annotate', '-i', 'perf.jit.data', '--stdio', '-s', hot[2]], { cwd: dir, encoding: 'utf8', maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'ignore'] });
    return { runtime: result.version, variant: result.variant, L, ms: result.ms, function: hot[2], shareOfAllSamples: Number(hot[1]) / 100, loops: loops(parseAnnotate(annotate)) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const results = new URL('../results/', import.meta.url);
mkdirSync(results, { recursive: true });
const out = opt('--out', 'jit-profile');
if (!/^[\w.-]+$/.test(out)) throw new Error(`jit-profile: --out must be a file name stem, got ${out}`);
for (const runtime of opt('--runtimes', 'chromium,node').split(',')) {
  const p = profile(runtime);
  const classes = ['vfloat', 'load', 'broadcast', 'store', 'vint/shuffle', 'scalar'];
  console.log(`${p.runtime}, ${p.variant}, L=${L}: ${p.function} has ${(100 * p.shareOfAllSamples).toFixed(1)}% of the samples; calls ${p.ms.join(' ')} ms`);
  console.log(`loop          share  copies  per copy: ${classes.join(' / ')}`);
  for (const l of p.loops.filter((x) => x.share >= 0.005)) {
    console.log(`${l.start.padStart(5)}-${l.end.padEnd(5)} ${(100 * l.share).toFixed(1).padStart(6)}% ${String(l.copies).padStart(6)}  ${classes.map((c) => l.perCopy[c] ?? 0).join(' / ')}`);
  }
  const rest = 1 - p.loops.filter((x) => x.share >= 0.005).reduce((s, x) => s + x.share, 0);
  console.log(`elsewhere   ${(100 * rest).toFixed(1).padStart(6)}%\n`);
  writeFileSync(new URL(`${out}-${runtime}.json`, results), JSON.stringify({ date: new Date().toISOString(), load: os.loadavg(), ...p }, null, 1) + '\n');
}
