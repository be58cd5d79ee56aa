// The calls bench/js/relaxed.mjs times, in Node and in a page alike: the plain SIMD build and
// the relaxed-SIMD build of qkv loaded side by side (two instances of the package), and
// onnxruntime-web's wasm backend beside them (where the caller passes it), one thread each,
// their calls alternating so that all see the same machine load:
//   - SDPA non-causal and causal, B=1, H=8, D=64 (ORT: MatMul -> Softmax -> MatMul, onnx.js);
//   - the GPT-2-small prefill matmuls, y[M, N] = x[M, K] W (F32 weights, the module's `gemm`
//     kernel through its matmul binding; ORT: one MatMul with W an initializer, relaxed-onnx.js),
//     (K, N) = 768x2304, 768x768, 768x3072, 3072x768, M = 32, 128, 512; every implementation
//     gets the same x and W;
//   - the limit of each build (bench/js/peak.js): f32x4 mul+add loops, and f32x4.relaxed_madd
//     loops for the relaxed build.
// Per measurement: one warm-up batch of calls sized to ~200 ms, then a timed batch: the median
// wall time per call and, where `cpuMs` is given (an async clock of on-CPU ms: Node's process
// CPU time; in Chromium the renderer main thread's, read by the server), the CPU time per call
// over the batch. runRelaxed returns every round's measurements; relaxed.mjs keeps the
// fastest of the rounds.
import { attentionModel, causalMask } from './onnx.js';
import { peakKernels } from './peak.js';
import { matmulModel } from './relaxed-onnx.js';

export const H = 8, D = 64;
export const LAYERS = [[768, 2304], [768, 768], [768, 3072], [3072, 768]]; // (K, N) of c_attn, attn c_proj, c_fc, mlp c_proj
export const MS = [32, 128, 512];
export const attentionFlops = (L, causal) => (causal ? 2 * H * D * L * (L + 1) : 4 * H * D * L * L);

// call() may return a promise (ORT's session.run), which is awaited inside the timed span
async function time(call, cpuMs, minCalls = 3) {
  const once = async () => {
    const r = call();
    if (r?.then) await r;
  };
  let t0 = performance.now();
  await once();
  const n = Math.max(minCalls, Math.min(200, Math.round(200 / Math.max(0.01, performance.now() - t0))));
  for (let i = 0; i < n; i++) await once();
  const ts = [];
  const c0 = cpuMs ? await cpuMs() : 0;
  for (let i = 0; i < n; i++) {
    t0 = performance.now();
    await once();
    ts.push(performance.now() - t0);
  }
  const cpu = cpuMs ? ((await cpuMs()) - c0) / n : null;
  ts.sort((a, b) => a - b);
  return { ms: ts[n >> 1], cpuMs: cpu };
}

// n random values in [-scale, scale), from a seeded LCG (every implementation gets the same)
function randomArray(n, seed, scale) {
  let s = seed >>> 0;
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = (((s = (s * 1664525 + 1013904223) >>> 0) / 4294967296 - 0.5) * 2) * scale;
  return a;
}

// W [K, N], x [M, K] and y [M, N] in one build's wasm heap; run() is one product; output()
// copies y out. free() releases them.
function matmulCase(build, M, K, N, W, x) {
  const m = build.getModule();
  const ptrs = [];
  const put = (a) => {
    const p = m._malloc(4 * a.length);
    if (!p) throw new Error(`relaxed bench: malloc of ${4 * a.length} bytes failed`);
    ptrs.push(p);
    build.heapU8(m).set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), p);
    return p;
  };
  const pW = put(W), pX = put(x), pY = put(new Float32Array(M * N));
  return {
    run() {
      const err = m.matmulRun('F32', false, M, K, N, pW, 0, pX, 0, pY, 1, 'gemm');
      if (err) throw new Error(`relaxed bench: matmulRun: ${err}`);
    },
    output: () => new Float32Array(build.heapU8(m).buffer.slice(pY, pY + 4 * M * N)),
    free: () => ptrs.forEach((p) => m._free(p)),
  };
}

// onnxruntime-web's sessions, created once per graph and kept for every round
function ortSessions(ort) {
  const sessions = new Map();
  const options = { executionProviders: ['wasm'], graphOptimizationLevel: 'all' };
  return {
    async get(key, bytes) {
      if (!sessions.has(key)) sessions.set(key, await ort.InferenceSession.create(bytes(), options));
      return sessions.get(key);
    },
    async release() {
      for (const s of sessions.values()) await s.release();
    },
  };
}

const maxRelDiff = (y, ref) => {
  let worst = 0, scale = 0;
  for (let i = 0; i < ref.length; i++) {
    worst = Math.max(worst, Math.abs(y[i] - ref[i]));
    scale = Math.max(scale, Math.abs(ref[i]));
  }
  return worst / scale;
};

/**
 * builds: [{ variant: 'simd' | 'simd-relaxed', qkv, getModule, heapU8 }], each initialized
 * with its variant and 1 thread; ort: onnxruntime-web with ort.env.wasm set up for 1 thread
 * (or null: no ORT rows). Returns { rows, peaks, diffs }: rows { what: 'sdpa' | 'matmul',
 * variant ('simd' | 'simd-relaxed' | 'ort'), L, causal | M, K, N, flops, ms, cpuMs, round };
 * peaks { variant, loop, flops, ms, cpuMs, round } (timed as the rows are); diffs: per matmul
 * shape, the largest |y - y_simd| over the largest |y_simd| of the relaxed build and of ORT
 * (relaxed_madd fuses, ORT sums in another order: rounding differs).
 */
export async function runRelaxed(builds, { sizes = [512, 1024], Ms = MS, layers = LAYERS, rounds = 3, cpuMs = null, ort = null, log = () => {} } = {}) {
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
  const sessions = ort ? ortSessions(ort) : null;
  // the implementations of one round, in its order: the builds, then ORT; reversed every other round
  const contenders = [...builds, ...(ort ? [{ variant: 'ort' }] : [])];
  const weights = new Map(); // `${K}x${N}` -> W, the same in every round and for every M
  const W = (K, N) => weights.get(`${K}x${N}`) ?? weights.set(`${K}x${N}`, randomArray(K * N, 7 + K + N, 0.05)).get(`${K}x${N}`);
  try {
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 ? [...contenders].reverse() : contenders;
      for (const { variant } of round % 2 ? [...builds].reverse() : builds) await peakOf(variant, round);
      for (const L of sizes) {
        const x = (f) => Float32Array.from({ length: H * L * D }, (_, i) => Math.sin(i * f));
        const [q, k, v] = [x(0.37), x(0.11), x(0.05)];
        for (const causal of [false, true]) {
          for (const { variant, qkv } of order) {
            let call;
            if (variant === 'ort') {
              const session = await sessions.get(`sdpa ${L} ${causal}`, () => attentionModel({ H, L, D, causal }));
              const T = (a) => new ort.Tensor('float32', a, [1, H, L, D]);
              const feeds = { Q: T(q), K: T(k), V: T(v), ...(causal ? { mask: new ort.Tensor('float32', causalMask(L), [L, L]) } : {}) };
              call = async () => (await session.run(feeds)).out.dispose?.();
            } else {
              const T = (a) => new qkv.Tensor(a, [1, H, L, D]);
              const [tq, tk, tv] = [T(q), T(k), T(v)];
              call = () => qkv.scaledDotProductAttentionSync(tq, tk, tv, { isCausal: causal });
            }
            const t = await time(call, cpuMs);
            rows.push({ what: 'sdpa', variant, L, causal, flops: attentionFlops(L, causal), round, ...t });
            log(`sdpa ${variant} L=${L} causal=${causal}: ${t.ms.toFixed(2)} ms`);
          }
        }
      }
      for (const M of Ms) {
        for (const [K, N] of layers) {
          const w = W(K, N), xs = randomArray(M * K, 11 + M + K, 1);
          const outputs = {};
          for (const build of order) {
            let call, output, free = () => {};
            if (build.variant === 'ort') {
              const session = await sessions.get(`matmul ${K}x${N}`, () => matmulModel(w, K, N));
              const feeds = { X: new ort.Tensor('float32', xs, [M, K]) };
              let last = null;
              call = async () => {
                last?.dispose?.();
                last = (await session.run(feeds)).Y;
              };
              output = () => Float32Array.from(last.data);
            } else {
              const c = matmulCase(build, M, K, N, w, xs);
              ({ run: call, output, free } = c);
            }
            try {
              const t = await time(call, cpuMs, 2);
              rows.push({ what: 'matmul', variant: build.variant, M, K, N, flops: 2 * M * K * N, round, ...t });
              log(`matmul ${build.variant} M=${M} K=${K} N=${N}: ${t.ms.toFixed(2)} ms`);
              if (round === 0) outputs[build.variant] = output();
            } finally {
              free();
            }
          }
          if (round === 0) {
            diffs.push({ M, K, N, maxRelDiff: maxRelDiff(outputs['simd-relaxed'], outputs.simd), ...(ort ? { ortMaxRelDiff: maxRelDiff(outputs.ort, outputs.simd) } : {}) });
          }
        }
      }
    }
  } finally {
    await sessions?.release();
  }
  return { rows, peaks, diffs };
}

/**
 * The fastest of the rounds per row and per peak loop, and the ratios: a table's rows. With
 * ORT rows (runRelaxed's `ort`), each row also has ORT's rate and relaxed / ORT, SIMD / ORT.
 */
export function summarize({ rows, peaks, diffs }, { cpu, cpuClock = 'on-CPU time' }) {
  const clock = cpu ? 'cpuMs' : 'ms';
  const best = new Map();
  const keyOf = (r, variant) => JSON.stringify([r.what, variant, r.L, r.causal, r.M, r.K, r.N]);
  for (const r of rows) {
    const key = keyOf(r, r.variant);
    const b = best.get(key);
    if (!b || r[clock] < b[clock]) best.set(key, r);
  }
  const get = (r, variant) => best.get(keyOf(r, variant));
  const limit = (variant) => Math.max(...peaks.filter((p) => p.variant === variant).map((p) => p.flops / p[clock] / 1e6));
  const limits = { simd: limit('simd'), 'simd-relaxed': limit('simd-relaxed') };
  const gflops = (flops, ms) => +(flops / ms / 1e6).toFixed(2);
  const ratio = (a, b) => +(a / b).toFixed(3);
  // one table row from the three times (ms on `clock`) of the same work
  const line = (head, flops, ts, tx, to) => ({
    ...head, simdGflops: gflops(flops, ts), relaxedGflops: gflops(flops, tx), relaxedVsSimd: ratio(ts, tx),
    simdOfLimit: ratio(flops / ts / 1e6, limits.simd), relaxedOfLimit: ratio(flops / tx / 1e6, limits['simd-relaxed']),
    ...(to === undefined ? {} : { ortGflops: gflops(flops, to), relaxedVsOrt: ratio(to, tx), simdVsOrt: ratio(to, ts) }),
  });
  const out = [];
  for (const r of best.values()) {
    if (r.variant !== 'simd') continue;
    const head = r.what === 'sdpa' ? { what: r.what, L: r.L, causal: r.causal } : { what: r.what, M: r.M, K: r.K, N: r.N };
    const o = get(r, 'ort');
    out.push({
      ...line(head, r.flops, r[clock], get(r, 'simd-relaxed')[clock], o?.[clock]),
      ...(r.what === 'matmul' ? (({ M, K, N, ...d }) => d)(diffs.find((d) => d.M === r.M && d.K === r.K && d.N === r.N) ?? {}) : {}),
    });
  }
  // per M, the four layers together (the prefill's matmul time): total FLOPs over total time
  for (const M of [...new Set(out.filter((r) => r.what === 'matmul').map((r) => r.M))]) {
    const layers = [...best.values()].filter((r) => r.what === 'matmul' && r.M === M);
    const sum = (variant) => layers.filter((r) => r.variant === variant).reduce((a, r) => a + r[clock], 0);
    const flops = layers.filter((r) => r.variant === 'simd').reduce((a, r) => a + r.flops, 0);
    const hasOrt = layers.some((r) => r.variant === 'ort');
    out.push(line({ what: 'matmul', M, K: 'all', N: 'all' }, flops, sum('simd'), sum('simd-relaxed'), hasOrt ? sum('ort') : undefined));
  }
  return { clock: cpu ? cpuClock : 'wall (median of a batch)', limits, rows: out };
}

export function table({ clock, limits, rows }, title) {
  const f = (x, w) => (typeof x === 'number' ? x.toFixed(1) : String(x ?? '')).padStart(w);
  const r2 = (x, w) => (typeof x === 'number' ? x.toFixed(2) : '').padStart(w);
  const pct = (x, w) => `${(100 * x).toFixed(1).padStart(w - 1)}%`;
  const lines = [title, `clock: ${clock}; limit (peak.js loops, same clock): SIMD ${limits.simd.toFixed(1)}, relaxed ${limits['simd-relaxed'].toFixed(1)} GFLOP/s; ORT: onnxruntime-web, wasm, 1 thread`,
    'kernel  shape                 SIMD GFLOP/s  relaxed GFLOP/s  ORT GFLOP/s  relaxed/SIMD  relaxed/ORT  SIMD/ORT  SIMD of limit  relaxed of limit  max rel diff (relaxed, ORT)'];
  for (const r of rows) {
    const shape = r.what === 'sdpa' ? `L=${r.L}${r.causal ? ' causal' : ''}` : `M=${r.M} ${r.K === 'all' ? 'all 4 layers' : `${r.K}x${r.N}`}`;
    const diff = r.maxRelDiff === undefined ? '' : `${r.maxRelDiff.toExponential(1)}, ${r.ortMaxRelDiff?.toExponential(1) ?? '-'}`;
    lines.push(`${r.what.padEnd(7)} ${shape.padEnd(21)} ${f(r.simdGflops, 12)} ${f(r.relaxedGflops, 16)} ${f(r.ortGflops, 12)} ${r2(r.relaxedVsSimd, 13)} ${r2(r.relaxedVsOrt, 12)} ${r2(r.simdVsOrt, 9)} ${pct(r.simdOfLimit, 14)} ${pct(r.relaxedOfLimit, 17)}  ${diff}`);
  }
  return lines.join('\n');
}
