// The calls bench/js/relaxed.mjs times, in Node and in a page alike: the plain SIMD build and
// the relaxed-SIMD build of qkv loaded side by side (two instances of the package), one thread,
// their calls alternating so that both see the same machine load:
//   - SDPA non-causal and causal, B=1, H=8, D=64;
//   - the GPT-2-small prefill matmuls, y[M, N] = x[M, K] W (F32 weights, the module's `gemm`
//     kernel through its matmul binding), (K, N) = 768x2304, 768x768, 768x3072, 3072x768, M =
//     32, 128, 512;
//   - the limit of each build (bench/js/peak.js): f32x4 mul+add loops, and f32x4.relaxed_madd
//     loops for the relaxed build.
// Per measurement: one warm-up batch of calls sized to ~200 ms, then a timed batch: the median
// wall time per call and, where `cpuMs` is given (an async clock of on-CPU ms: Node's process
// CPU time; in Chromium the renderer main thread's, read by the server), the CPU time per call
// over the batch. runRelaxed returns every round's measurements; relaxed.mjs keeps the
// fastest of the rounds.
import { peakKernels } from './peak.js';

export const H = 8, D = 64;
export const LAYERS = [[768, 2304], [768, 768], [768, 3072], [3072, 768]]; // (K, N) of c_attn, attn c_proj, c_fc, mlp c_proj
export const MS = [32, 128, 512];
export const attentionFlops = (L, causal) => (causal ? 2 * H * D * L * (L + 1) : 4 * H * D * L * L);

async function time(call, cpuMs, minCalls = 3) {
  let t0 = performance.now();
  call();
  const n = Math.max(minCalls, Math.min(200, Math.round(200 / Math.max(0.01, performance.now() - t0))));
  for (let i = 0; i < n; i++) call();
  const ts = [];
  const c0 = cpuMs ? await cpuMs() : 0;
  for (let i = 0; i < n; i++) {
    t0 = performance.now();
    call();
    ts.push(performance.now() - t0);
  }
  const cpu = cpuMs ? ((await cpuMs()) - c0) / n : null;
  ts.sort((a, b) => a - b);
  return { ms: ts[n >> 1], cpuMs: cpu };
}

// A random F32 matrix W [K, N], x [M, K] and y [M, N] in one build's wasm heap; run() is one
// product; output() copies y out. free() releases them.
function matmulCase(build, M, K, N, seed) {
  const m = build.getModule();
  let s = seed >>> 0;
  const rand = () => ((s = (s * 1664525 + 1013904223) >>> 0) / 4294967296 - 0.5) * 2;
  const ptrs = [];
  const put = (n, scale) => {
    const p = m._malloc(4 * n);
    if (!p) throw new Error(`relaxed bench: malloc of ${4 * n} bytes failed`);
    ptrs.push(p);
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = rand() * scale;
    build.heapU8(m).set(new Uint8Array(a.buffer), p);
    return p;
  };
  const pW = put(K * N, 0.05), pX = put(M * K, 1), pY = put(M * N, 0);
  return {
    run() {
      const err = m.matmulRun('F32', false, M, K, N, pW, 0, pX, 0, pY, 1, 'gemm');
      if (err) throw new Error(`relaxed bench: matmulRun: ${err}`);
    },
    output: () => new Float32Array(build.heapU8(m).buffer.slice(pY, pY + 4 * M * N)),
    free: () => ptrs.forEach((p) => m._free(p)),
  };
}

/**
 * builds: [{ variant: 'simd' | 'simd-relaxed', qkv, getModule, heapU8 }], each initialized
 * with its variant and 1 thread. Returns { rows, peaks, diffs }: rows { what: 'sdpa' | 'matmul',
 * variant, L, causal | M, K, N, flops, ms, cpuMs, round }; peaks { variant, loop, flops, ms,
 * cpuMs, round } (timed as the rows are); diffs: per matmul shape, the
 * largest |y_relaxed - y_simd| over the largest |y_simd| (relaxed_madd fuses: rounding differs).
 */
export async function runRelaxed(builds, { sizes = [512, 1024], Ms = MS, layers = LAYERS, rounds = 3, cpuMs = null, log = () => {} } = {}) {
  const rows = [], peaks = [], diffs = [];
  const plainLoops = await peakKernels(), maddLoops = await peakKernels({ madd: true }).catch(() => ({}));
  const peakOf = async (variant, round) => {
    const loops = variant.includes('relaxed') ? maddLoops : plainLoops;
    for (const [loop, { run, flopsPerStep }] of Object.entries(loops)) {
      for (let t0 = performance.now(); performance.now() - t0 < 100; ) run(1 << 12); // tier up
      const t0 = performance.now();
      run(1 << 16);
      const steps = Math.round(((1 << 16) * 20) / Math.max(0.01, performance.now() - t0)); // ~20 ms a call
      const t = await time(() => run(steps), cpuMs);
      peaks.push({ variant, loop, round, flops: steps * flopsPerStep, ...t });
    }
  };
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 ? [...builds].reverse() : builds;
    for (const { variant } of order) await peakOf(variant, round);
    for (const L of sizes) {
      for (const causal of [false, true]) {
        for (const { variant, qkv } of order) {
          const x = (f) => new qkv.Tensor(Float32Array.from({ length: H * L * D }, (_, i) => Math.sin(i * f)), [1, H, L, D]);
          const [q, k, v] = [x(0.37), x(0.11), x(0.05)];
          const t = await time(() => qkv.scaledDotProductAttentionSync(q, k, v, { isCausal: causal }), cpuMs);
          rows.push({ what: 'sdpa', variant, L, causal, flops: attentionFlops(L, causal), round, ...t });
          log(`sdpa ${variant} L=${L} causal=${causal}: ${t.ms.toFixed(2)} ms`);
        }
      }
    }
    for (const M of Ms) {
      for (const [K, N] of layers) {
        const outputs = [];
        for (const build of order) {
          const c = matmulCase(build, M, K, N, 7 + M + K + N);
          try {
            const t = await time(c.run, cpuMs, 2);
            rows.push({ what: 'matmul', variant: build.variant, M, K, N, flops: 2 * M * K * N, round, ...t });
            log(`matmul ${build.variant} M=${M} K=${K} N=${N}: ${t.ms.toFixed(2)} ms`);
            if (round === 0) outputs.push([build.variant, c.output()]);
          } finally {
            c.free();
          }
        }
        if (round === 0) {
          const y = Object.fromEntries(outputs);
          let worst = 0, scale = 0;
          for (let i = 0; i < y.simd.length; i++) {
            worst = Math.max(worst, Math.abs(y['simd-relaxed'][i] - y.simd[i]));
            scale = Math.max(scale, Math.abs(y.simd[i]));
          }
          diffs.push({ M, K, N, maxRelDiff: worst / scale });
        }
      }
    }
  }
  return { rows, peaks, diffs };
}

/** The fastest of the rounds per row and per peak loop, and the relaxed / SIMD ratios: a table's rows. */
export function summarize({ rows, peaks, diffs }, { cpu, cpuClock = 'on-CPU time' }) {
  const clock = cpu ? 'cpuMs' : 'ms';
  const best = new Map();
  for (const r of rows) {
    const key = JSON.stringify([r.what, r.variant, r.L, r.causal, r.M, r.K, r.N]);
    const b = best.get(key);
    if (!b || r[clock] < b[clock]) best.set(key, r);
  }
  const get = (r, variant) => best.get(JSON.stringify([r.what, variant, r.L, r.causal, r.M, r.K, r.N]));
  const limit = (variant) => Math.max(...peaks.filter((p) => p.variant === variant).map((p) => p.flops / p[clock] / 1e6));
  const limits = { simd: limit('simd'), 'simd-relaxed': limit('simd-relaxed') };
  const out = [];
  for (const r of best.values()) {
    if (r.variant !== 'simd') continue;
    const s = r, x = get(r, 'simd-relaxed');
    const g = (b) => b.flops / b[clock] / 1e6;
    out.push({
      what: r.what, ...(r.what === 'sdpa' ? { L: r.L, causal: r.causal } : { M: r.M, K: r.K, N: r.N }),
      simdGflops: +g(s).toFixed(2), relaxedGflops: +g(x).toFixed(2), relaxedVsSimd: +(s[clock] / x[clock]).toFixed(3),
      simdOfLimit: +(g(s) / limits.simd).toFixed(3), relaxedOfLimit: +(g(x) / limits['simd-relaxed']).toFixed(3),
      ...(r.what === 'matmul' ? { maxRelDiff: diffs.find((d) => d.M === r.M && d.K === r.K && d.N === r.N)?.maxRelDiff } : {}),
    });
  }
  // per M, the four layers together (the prefill's matmul time): total FLOPs over total time
  for (const M of [...new Set(out.filter((r) => r.what === 'matmul').map((r) => r.M))]) {
    const layers = [...best.values()].filter((r) => r.what === 'matmul' && r.M === M);
    const sum = (variant, f) => layers.filter((r) => r.variant === variant).reduce((a, r) => a + f(r), 0);
    const flops = sum('simd', (r) => r.flops), ts = sum('simd', (r) => r[clock]), tx = sum('simd-relaxed', (r) => r[clock]);
    out.push({ what: 'matmul', M, K: 'all', N: 'all', simdGflops: +(flops / ts / 1e6).toFixed(2), relaxedGflops: +(flops / tx / 1e6).toFixed(2),
      relaxedVsSimd: +(ts / tx).toFixed(3), simdOfLimit: +(flops / ts / 1e6 / limits.simd).toFixed(3), relaxedOfLimit: +(flops / tx / 1e6 / limits['simd-relaxed']).toFixed(3) });
  }
  return { clock: cpu ? cpuClock : 'wall (median of a batch)', limits, rows: out };
}

export function table({ clock, limits, rows }, title) {
  const f = (x, w) => (typeof x === 'number' ? x.toFixed(1) : String(x)).padStart(w);
  const lines = [title, `clock: ${clock}; limit (peak.js loops, same clock): SIMD ${limits.simd.toFixed(1)}, relaxed ${limits['simd-relaxed'].toFixed(1)} GFLOP/s`,
    'kernel  shape                 SIMD GFLOP/s  relaxed GFLOP/s  relaxed/SIMD  SIMD of limit  relaxed of limit  max rel diff'];
  for (const r of rows) {
    const shape = r.what === 'sdpa' ? `L=${r.L}${r.causal ? ' causal' : ''}` : `M=${r.M} ${r.K === 'all' ? 'all 4 layers' : `${r.K}x${r.N}`}`;
    lines.push(`${r.what.padEnd(7)} ${shape.padEnd(21)} ${f(r.simdGflops, 12)} ${f(r.relaxedGflops, 16)} ${r.relaxedVsSimd.toFixed(2).padStart(13)} ${(100 * r.simdOfLimit).toFixed(1).padStart(13)}% ${(100 * r.relaxedOfLimit).toFixed(1).padStart(16)}%  ${r.maxRelDiff === undefined ? '' : r.maxRelDiff.toExponential(1).padStart(12)}`);
  }
  return lines.join('\n');
}
