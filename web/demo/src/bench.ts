// Benchmark page: times scaledDotProductAttention in this tab on each backend (wasm scalar,
// SIMD, SIMD + threads, WebGPU), L doubling up to the chosen maximum; log-log plot of time vs L
// with an L² guide and the WebGPU crossover, the memory of naive vs tiled attention, and the
// environment.
import './style.css';
import { showRuntime } from './runtime-line';
import { settled } from './isolation';
import * as d3 from 'd3';
import * as Plot from '@observablehq/plot';
import { $, download, fmt, message, progress, yieldToEvents } from './ui';
import { qkv } from './api';
import { randn, rng } from './math';
import { setupDecode } from './bench-decode';

interface Backend {
  id: string;
  label: string;
  available: boolean;
  why?: string;
  /** loads what the backend needs; returns a short description */
  prepare(): Promise<string>;
  run(q: Float32Array, k: Float32Array, v: Float32Array, H: number, L: number, D: number, causal: boolean): Promise<void>;
}

interface Point { backend: string; L: number; ms: number; runs: number; gflops: number }

const SLOW_MS = 4000;
const hc = navigator.hardwareConcurrency || 1;
let stop = false;
let points: Point[] = [];
/** Per backend, each warm-up call's time (ms), in the saved JSON */
let warmups: Record<string, number[]> = {};
let envInfo: Record<string, string> = {};

function simdSupported(): boolean {
  try {
    return WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]));
  } catch { return false; }
}

// three i32x4.splat results into f32x4.relaxed_madd (0xfd 0x85 0x02): the library's probe
function relaxedSimdSupported(): boolean {
  try {
    return WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 19, 1, 17, 0,
      65, 0, 253, 17, 65, 0, 253, 17, 65, 0, 253, 17, 253, 133, 2, 11]));
  } catch { return false; }
}

async function gpuAdapter(): Promise<{ ok: boolean; text: string }> {
  const gpu = (navigator as unknown as { gpu?: { requestAdapter(): Promise<{ info?: Record<string, string> } | null> } }).gpu;
  if (!gpu) return { ok: false, text: 'navigator.gpu absent' };
  try {
    const a = await gpu.requestAdapter();
    if (!a) return { ok: false, text: 'no adapter' };
    const i = a.info ?? {};
    return { ok: true, text: [i.vendor, i.architecture, i.device, i.description].filter(Boolean).join(' · ') || 'adapter (no info)' };
  } catch (e) { return { ok: false, text: `requestAdapter failed: ${(e as Error).message}` }; }
}

function libBackends(gpu: boolean): Backend[] {
  const { init, dispose, Tensor: T } = qkv;
  const call = async (q: Float32Array, k: Float32Array, v: Float32Array, H: number, L: number, D: number, causal: boolean, backend: qkv.Backend) => {
    await qkv.scaledDotProductAttention(new T(q, [1, H, L, D]), new T(k, [1, H, L, D]), new T(v, [1, H, L, D]), { isCausal: causal, backend });
  };
  const wasm = (id: string, label: string, variant: qkv.Variant, threads: number, available: boolean, why?: string): Backend => ({
    id, label, available, why,
    async prepare() { dispose(); const r = await init({ variant, numThreads: threads }); void showRuntime({ load: false }); return `${r.variant}, ${r.threads} thread${r.threads > 1 ? 's' : ''}`; },
    run: (q, k, v, H, L, D, c) => call(q, k, v, H, L, D, c, 'wasm'),
  });
  const simd = simdSupported();
  const relaxed = relaxedSimdSupported();
  const threads = Math.min(hc, 8);
  return [
    wasm('scalar', 'wasm scalar', 'scalar', 1, true),
    wasm('simd', 'wasm SIMD', 'simd', 1, simd, 'no WebAssembly SIMD'),
    wasm('threads', `wasm SIMD × ${threads} threads`, 'simd-threads', threads, simd && crossOriginIsolated && threads > 1,
      !crossOriginIsolated ? 'page not crossOriginIsolated' : threads < 2 ? 'one core' : 'no SIMD'),
    wasm('relaxed', 'wasm relaxed SIMD', 'simd-relaxed', 1, relaxed, 'no WebAssembly relaxed SIMD'),
    wasm('relaxed-threads', `wasm relaxed SIMD × ${threads} threads`, 'simd-relaxed-threads', threads, relaxed && crossOriginIsolated && threads > 1,
      !relaxed ? 'no WebAssembly relaxed SIMD' : !crossOriginIsolated ? 'page not crossOriginIsolated' : 'one core'),
    {
      id: 'webgpu', label: 'WebGPU', available: gpu, why: 'no WebGPU adapter',
      async prepare() { dispose(); await init({ variant: 'auto' }); return 'WebGPU'; },
      run: (q, k, v, H, L, D, c) => call(q, k, v, H, L, D, c, 'webgpu'),
    },
  ];
}

async function showEnv(): Promise<{ gpu: boolean }> {
  const gpu = await gpuAdapter();
  envInfo = {
    crossOriginIsolated: String(crossOriginIsolated),
    'hardware threads': String(hc),
    'WebAssembly SIMD': simdSupported() ? 'yes' : 'no',
    'WebAssembly relaxed SIMD': relaxedSimdSupported() ? 'yes' : 'no',
    SharedArrayBuffer: typeof SharedArrayBuffer === 'function' ? 'yes' : 'no',
    'WebGPU adapter': gpu.text,
    'user agent': navigator.userAgent,
  };
  const dl = $('#env');
  dl.replaceChildren(...Object.entries(envInfo).flatMap(([k, v]) => {
    const dt = document.createElement('dt'); dt.textContent = k;
    const dd = document.createElement('dd'); dd.textContent = v; dd.dataset.key = k;
    return [dt, dd];
  }));
  return { gpu: gpu.ok };
}

function renderBackendChoices(backends: Backend[]): void {
  $('#backends').replaceChildren(...backends.map((b) => {
    const l = document.createElement('label');
    const c = document.createElement('input');
    c.type = 'checkbox'; c.value = b.id; c.checked = b.available; c.disabled = !b.available;
    l.append(c, ` ${b.label}`);
    if (!b.available) { const s = document.createElement('span'); s.className = 'small muted'; s.textContent = ` (${b.why})`; l.append(s); }
    return l;
  }));
}

function lengths(maxL: number): number[] {
  const out: number[] = [];
  for (let L = 128; L <= maxL; L *= 2) out.push(L);
  return out;
}

/**
 * Calls `call` until its time stops falling: the engine runs new wasm code unoptimised at
 * first and optimises it while it runs, and WebGPU compiles its pipelines on the first call
 * (measured in Chromium, each backend's module loaded afresh as prepare() does: wasm SIMD at
 * L = 128 took 1.7-2.6 ms a call without this, 0.66-0.70 ms with it; scalar 3.0-4.2 against
 * 1.5; SwiftShader's first WebGPU call 2.9-4.1 s, the next 63-83 ms). At least 3 calls
 * and 200 ms; done when the last 3 are within 10 % of each other or 3 s after the first call,
 * on a call after the first over SLOW_MS (the first may be a compile), or on Stop. Returns each
 * call's time.
 */
async function warmUp(call: () => Promise<void>): Promise<number[]> {
  const times: number[] = [];
  const start = performance.now();
  for (;;) {
    const t = performance.now();
    await call();
    times.push(performance.now() - t);
    const last = times.slice(-3), elapsed = performance.now() - start;
    const steady = Math.max(...last) <= 1.1 * Math.min(...last);
    if (stop || (times.length > 1 && times.at(-1)! > SLOW_MS) || (times.length >= 3 && ((steady && elapsed >= 200) || elapsed - times[0] > 3000))) return times;
    await yieldToEvents();
  }
}

function randomData(n: number, seed: number): Float32Array {
  const g = randn(rng(seed));
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = g();
  return a;
}

async function runBench(backends: Backend[]): Promise<void> {
  const chosen = new Set([...document.querySelectorAll<HTMLInputElement>('#backends input:checked')].map((c) => c.value));
  const list = backends.filter((b) => chosen.has(b.id));
  const msg = $('#msg');
  message(msg, '');
  if (!list.length) { message(msg, 'Choose at least one backend.', 'error'); return; }
  const maxL = Number($<HTMLSelectElement>('#maxl').value), H = Number($<HTMLSelectElement>('#heads').value), D = Number($<HTMLSelectElement>('#dim').value);
  const causal = $<HTMLInputElement>('#causal').checked;
  const Ls = lengths(maxL);
  const bar = $<HTMLProgressElement>('#bar'), status = $('#status');
  stop = false; points = []; warmups = {};
  document.body.dataset.benchDone = 'false';
  $<HTMLButtonElement>('#run').disabled = true; $<HTMLButtonElement>('#stop').disabled = false; $<HTMLButtonElement>('#save').disabled = true;
  const total = list.length * Ls.length;
  let done = 0;
  const notes: string[] = [];
  for (const b of list) {
    if (stop) break;
    let desc: string;
    try {
      desc = await b.prepare();
      progress(bar, done / total, `${b.label} (${desc}): warming up at L = ${Ls[0]}…`, status);
      await yieldToEvents();
      const n = H * Ls[0] * D;
      const [q, k, v] = [1, 2, 3].map((seed) => randomData(n, seed));
      warmups[b.label] = await warmUp(() => b.run(q, k, v, H, Ls[0], D, causal));
    } catch (e) { notes.push(`${b.label}: ${(e as Error).message}`); done += Ls.length; continue; }
    for (const L of Ls) {
      if (stop) break;
      progress(bar, done / total, `${b.label} (${desc}): L = ${L}…`, status);
      await yieldToEvents();
      const n = H * L * D;
      const q = randomData(n, 1), k = randomData(n, 2), v = randomData(n, 3);
      try {
        let t = performance.now();
        await b.run(q, k, v, H, L, D, causal); // warm-up
        let first = performance.now() - t;
        const times: number[] = [];
        if (first < SLOW_MS) {
          const start = performance.now();
          while (!stop && (times.length < 3 || performance.now() - start < 300) && times.length < 15 && performance.now() - start < 2000) {
            t = performance.now();
            await b.run(q, k, v, H, L, D, causal);
            times.push(performance.now() - t);
          }
        } else times.push(first);
        const ms = d3.median(times)!;
        const flops = 4 * H * L * L * D * (causal ? 0.5 : 1);
        points.push({ backend: b.label, L, ms, runs: times.length, gflops: flops / (ms * 1e6) });
        renderResults();
        done++;
        if (ms > SLOW_MS || first > SLOW_MS) { notes.push(`${b.label} stopped at L = ${L} (one call took ${fmt.ms(Math.max(ms, first))})`); done += Ls.length - Ls.indexOf(L) - 1; break; }
        first = 0;
      } catch (e) {
        notes.push(`${b.label} at L = ${L}: ${(e as Error).message}`);
        done += Ls.length - Ls.indexOf(L);
        break;
      }
    }
  }
  progress(bar, 1, stop ? 'Stopped.' : `Done: ${points.length} measurements.`, status);
  if (notes.length) message(msg, notes.join(' · '), 'info');
  $<HTMLButtonElement>('#run').disabled = false; $<HTMLButtonElement>('#stop').disabled = true; $<HTMLButtonElement>('#save').disabled = !points.length;
  renderResults();
  document.body.dataset.benchDone = 'true';
}

function renderResults(): void {
  const width = Math.min(760, $('#plot-time').clientWidth || 700);
  if (points.length) {
    const series = d3.group(points, (p) => p.backend);
    // L² guide through the slowest backend's first point
    const first = d3.greatest(points.filter((p) => p.L === d3.min(points, (q) => q.L)), (p) => p.ms)!;
    const Lmax = d3.max(points, (p) => p.L)!;
    const guide = d3.range(Math.log2(first.L), Math.log2(Lmax) + 0.01, 0.5).map((e) => ({ L: 2 ** e, ms: first.ms * (2 ** e / first.L) ** 2 }));
    const gpu = series.get('WebGPU');
    const cpuBest = (L: number) => d3.min(points.filter((p) => p.L === L && p.backend !== 'WebGPU'), (p) => p.ms);
    const cross = gpu?.find((p) => { const c = cpuBest(p.L); return c !== undefined && p.ms < c; });
    $('#crossover').textContent = !gpu ? 'WebGPU was not measured, so there is no crossover to show.'
      : cross ? `WebGPU is faster than the best wasm backend from L = ${cross.L} (${fmt.ms(cross.ms)} vs ${fmt.ms(cpuBest(cross.L)!)}).`
      : 'WebGPU did not overtake wasm in this range; its fixed cost per call dominates at these lengths.';
    const plot = Plot.plot({
      width, height: 340, marginLeft: 56, marginRight: 20,
      // ticks at the lengths measured (powers of 2; d3's log ticks fall back to 200, 300, ... over a few octaves)
      x: { type: 'log', base: 2, label: 'sequence length L', ticks: [...new Set(points.map((p) => p.L))], tickFormat: (d: number) => (d >= 1024 ? `${d / 1024}k` : String(d)) },
      y: { type: 'log', label: 'time per call (ms)', grid: true },
      color: { legend: true, scheme: 'tableau10' },
      marks: [
        Plot.line(guide, { x: 'L', y: 'ms', stroke: '#999', strokeDasharray: '4,4' }),
        Plot.text(guide.slice(-1), { x: 'L', y: 'ms', text: () => '∝ L²', dx: -16, dy: -8, fill: '#666' }),
        ...(cross ? [Plot.ruleX([cross.L], { stroke: '#e15759', strokeDasharray: '2,3' }), Plot.text([cross], { x: 'L', y: 'ms', text: () => 'WebGPU crossover', dy: 14, fill: '#e15759' })] : []),
        Plot.line(points, { x: 'L', y: 'ms', stroke: 'backend', strokeWidth: 2 }),
        Plot.dot(points, { x: 'L', y: 'ms', fill: 'backend', r: 3.5, title: (p: Point) => `${p.backend}, L = ${p.L}: ${fmt.ms(p.ms)} (${p.gflops.toFixed(2)} GFLOP/s, ${p.runs} runs)` }),
      ],
    });
    $('#plot-time').replaceChildren(plot);
  }
  const backends = [...new Set(points.map((p) => p.backend))];
  const Ls = [...new Set(points.map((p) => p.L))].sort((a, b) => a - b);
  const t = $<HTMLTableElement>('#results');
  t.innerHTML = `<thead><tr><th>L</th>${backends.map((b) => `<th>${b}</th>`).join('')}</tr></thead><tbody>` +
    Ls.map((L) => `<tr><td>${L}</td>${backends.map((b) => { const p = points.find((x) => x.L === L && x.backend === b); return `<td>${p ? `${fmt.ms(p.ms)} <span class="muted">${p.gflops.toFixed(1)} GF/s</span>` : '–'}</td>`; }).join('')}</tr>`).join('') + '</tbody>';
}

function renderMemory(): void {
  const H = Number($<HTMLSelectElement>('#heads').value), D = Number($<HTMLSelectElement>('#dim').value);
  const threads = Math.min(hc, 8), B = 64;
  const data = d3.range(7, 15.01, 0.5).flatMap((e) => {
    const L = 2 ** e, io = 4 * 4 * H * L * D;
    return [
      { L, bytes: io + 4 * H * L * L, kind: 'naive: Q, K, V, O + L × L scores' },
      { L, bytes: io + 4 * threads * (B * B + 2 * B + B * D), kind: 'tiled: Q, K, V, O + one tile per thread' },
      { L, bytes: 4 * H * L * L, kind: 'the score matrix alone' },
    ];
  });
  // y ticks at whole binary units (1 MiB, 16 MiB, 256 MiB, 4 GiB, ...): powers of 16 across the data
  const [lo, hi] = d3.extent(data, (d) => d.bytes) as [number, number];
  const yTicks = d3.range(Math.ceil(Math.log2(lo) / 4) * 4, Math.log2(hi) + 1e-9, 4).map((e) => 2 ** e);
  $('#plot-mem').replaceChildren(Plot.plot({
    width: Math.min(760, $('#plot-mem').clientWidth || 700), height: 260, marginLeft: 64,
    x: { type: 'log', base: 2, label: 'sequence length L', tickFormat: (d: number) => (d >= 1024 ? `${d / 1024}k` : String(d)) },
    y: { type: 'log', base: 2, label: 'bytes', grid: true, ticks: yTicks, tickFormat: (d: number) => fmt.bytes(d) },
    color: { legend: true, range: ['#e15759', '#4e79a7', '#bab0ac'] },
    marks: [Plot.line(data, { x: 'L', y: 'bytes', stroke: 'kind', strokeWidth: 2 }), Plot.dot(data.filter((d) => d.L === 16384), { x: 'L', y: 'bytes', fill: 'kind' }),
      Plot.text(data.filter((d) => d.L === 16384 && d.kind.startsWith('naive')), { x: 'L', y: 'bytes', text: (d: { bytes: number }) => fmt.bytes(d.bytes), dx: -30, dy: -10 })],
  }));
}

async function main(): Promise<void> {
  void showRuntime({ load: false });
  renderMemory();
  await settled;
  const { gpu } = await showEnv();
  const backends = libBackends(gpu);
  renderBackendChoices(backends);
  $('#run').addEventListener('click', () => void runBench(backends));
  $('#stop').addEventListener('click', () => { stop = true; });
  $('#save').addEventListener('click', () => download(new Blob([JSON.stringify({ env: envInfo, warmups, points }, null, 1)], { type: 'application/json' }), 'qkv-bench.json'));
  for (const id of ['#heads', '#dim']) $(id).addEventListener('change', renderMemory);
  setupDecode();
  let resize = 0;
  window.addEventListener('resize', () => { clearTimeout(resize); resize = window.setTimeout(() => { renderMemory(); renderResults(); }, 150); });
  const auto = new URLSearchParams(location.search).get('run');
  if (auto) { $<HTMLSelectElement>('#maxl').value = auto; void runBench(backends); }
  document.body.dataset.ready = 'true';
}

void main();
