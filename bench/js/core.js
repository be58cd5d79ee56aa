// The attention benchmark, environment-agnostic (Node and Chromium run this same code).
// One problem shape: B=1, H=8, D=64, L in SIZES, causal and not; every implementation gets the
// same inputs. Times are medians (ms) after a warm-up (WARM_MS); GFLOP/s counts the dense work,
// 4 * H * L^2 * D, for causal runs too (so skipping masked tiles shows as a higher rate).
import { attentionModel, causalMask } from './onnx.js';
import { peakGflops } from './peak.js';

export const H = 8, D = 64;
export const SIZES = [128, 512, 1024, 2048];
export const flops = (L) => 4 * H * L * L * D;
/** The FLOPs a call needs: causal rows see L(L+1)/2 of the L² scores. */
export const usefulFlops = (L, causal) => (causal ? (flops(L) * (L + 1)) / (2 * L) : flops(L));
export const PEAK = 'peak-mul-add', PEAK_MADD = 'peak-relaxed-madd';

const now = () => performance.now();

/** The benchmark's q, k, v for length L: [1, H, L, D] each, as flat Float32Arrays. */
export function inputs(L) {
  const n = H * L * D;
  const q = new Float32Array(n), k = new Float32Array(n), v = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    q[i] = Math.sin(i * 0.37);
    k[i] = Math.cos(i * 0.11);
    v[i] = Math.sin(i * 0.05 + 1);
  }
  return { q, k, v };
}

export function repsFor(L, quick) {
  const r = L <= 128 ? 15 : L <= 512 ? 7 : L <= 1024 ? 5 : 3;
  return quick ? Math.max(2, Math.ceil(r / 3)) : r;
}

// Warm-up until WARM_MS have passed (at least one call): V8 tiers hot wasm functions up per
// isolate, so every pthread worker of a freshly loaded module starts on baseline code.
const WARM_MS = 300;

async function median(fn, reps) {
  for (const t0 = now(); ; ) {
    await fn();
    if (now() - t0 >= WARM_MS) break;
  }
  const t = [];
  for (let i = 0; i < reps; i++) {
    const t0 = now();
    await fn();
    t.push(now() - t0);
  }
  t.sort((a, b) => a - b);
  return t[Math.floor(t.length / 2)];
}

const row = (impl, threads, L, causal, ms, reps) => ({ impl, threads, L, causal, ms, gflops: flops(L) / ms / 1e6, reps });

/**
 * The machine is shared and noisy, and noise only ever slows a run down: runners repeat the
 * parts in alternating rounds (`rounds`, default 3; 1 with quick) and keep each row's fastest
 * median. add() takes one part's rows; rows() gives the kept ones, each with its round count.
 */
export const roundsFor = (args, quick) => Number(args.includes('--rounds') ? args[args.indexOf('--rounds') + 1] : quick ? 1 : 3);
export class Fastest {
  #best = new Map();
  add(rows) {
    for (const row of rows) {
      const key = `${row.impl}/${row.threads}/${row.L}/${row.causal}`;
      const seen = this.#best.get(key);
      if (!seen || row.ms < seen.ms) this.#best.set(key, { ...row, rounds: (seen?.rounds ?? 0) + 1 });
      else seen.rounds += 1;
    }
  }
  rows() {
    return [...this.#best.values()];
  }
}
export const ROUNDS_METHOD = 'per row: the fastest of `rounds` medians (parts alternate qkv, ORT 1t, ORT 2t per round; the naive loop runs once); the limit (peak-mul-add, bench/js/peak.js): the fastest of its medians, measured before and after the qkv variants in each qkv part';

/**
 * The machine's limit in this runtime (bench/js/peak.js), as a row: gflops is one thread's
 * rate on the fastest pure f32x4 multiply-add loop; ms is per GFLOP, so that Fastest keeps the
 * fastest measurement.
 */
export async function benchPeak({ log = () => {} } = {}) {
  const p = await peakGflops();
  const limit = (impl, { gflops, loop, loops }) => ({ impl, threads: 1, L: 0, causal: false, ms: 1000 / gflops, gflops, loop, loops });
  const rows = [limit(PEAK, p), ...(p.madd ? [limit(PEAK_MADD, p.madd)] : [])];
  rows.forEach((r) => log(r));
  return rows;
}

/**
 * benchQkv on each wasm variant in turn: scalar, SIMD, SIMD + 2 threads, and the relaxed-SIMD
 * twins of the SIMD two where the engine has relaxed SIMD (skipped elsewhere); the limit
 * before and after.
 */
export async function benchQkvVariants(qkv, opts) {
  const rows = [...(await benchPeak(opts))];
  const variants = [['scalar', 1], ['simd', 1], ['simd-threads', 2], ['simd-relaxed', 1], ['simd-relaxed-threads', 2]];
  for (const [variant, threads] of variants) {
    qkv.dispose();
    qkv.env.variant = variant;
    qkv.env.numThreads = threads;
    try {
      await qkv.init();
    } catch (e) {
      if (/needs WebAssembly relaxed SIMD/.test(e.message)) continue;
      throw e;
    }
    rows.push(...(await benchQkv(qkv, opts)));
  }
  qkv.dispose();
  rows.push(...(await benchPeak(opts)));
  return rows;
}

/** qkv through its public sync API, on one variant already loaded. */
export async function benchQkv(qkv, { sizes = SIZES, quick = false, log = () => {} } = {}) {
  const variant = qkv.env.loadedVariant, threads = qkv.env.threads;
  const rows = [];
  for (const L of sizes) {
    const { q, k, v } = inputs(L);
    const T = (x) => new qkv.Tensor(x, [1, H, L, D]);
    const [tq, tk, tv] = [T(q), T(k), T(v)];
    for (const causal of [false, true]) {
      const ms = await median(() => qkv.scaledDotProductAttentionSync(tq, tk, tv, { isCausal: causal }), repsFor(L, quick));
      rows.push(row(`qkv-${variant}`, threads, L, causal, ms, repsFor(L, quick)));
      log(rows[rows.length - 1]);
    }
  }
  return rows;
}

/** onnxruntime-web's wasm backend on MatMul -> Softmax -> MatMul (ort.env set up by the caller). */
export async function benchOrt(ort, { sizes = SIZES, quick = false, log = () => {} } = {}) {
  const threads = ort.env.wasm.numThreads;
  const rows = [];
  for (const L of sizes) {
    const { q, k, v } = inputs(L);
    const T = (x) => new ort.Tensor('float32', x, [1, H, L, D]);
    for (const causal of [false, true]) {
      const session = await ort.InferenceSession.create(attentionModel({ H, L, D, causal }), {
        executionProviders: ['wasm'], graphOptimizationLevel: 'all',
      });
      const feeds = { Q: T(q), K: T(k), V: T(v) };
      if (causal) feeds.mask = new ort.Tensor('float32', causalMask(L), [L, L]);
      const ms = await median(async () => { const out = await session.run(feeds); out.out.dispose?.(); }, repsFor(L, quick));
      await session.release();
      rows.push(row('onnxruntime-web', threads, L, causal, ms, repsFor(L, quick)));
      log(rows[rows.length - 1]);
    }
  }
  return rows;
}

/** The loop a user would write by hand: scores, softmax, weighted sum, one row at a time. */
export function naiveAttention(q, k, v, L, causal) {
  const out = new Float32Array(H * L * D);
  const s = new Float32Array(L);
  const scale = 1 / Math.sqrt(D);
  for (let h = 0; h < H; h++) {
    const base = h * L * D;
    for (let i = 0; i < L; i++) {
      const end = causal ? i + 1 : L;
      let m = -Infinity;
      for (let j = 0; j < end; j++) {
        let dot = 0;
        for (let d = 0; d < D; d++) dot += q[base + i * D + d] * k[base + j * D + d];
        s[j] = dot * scale;
        if (s[j] > m) m = s[j];
      }
      let sum = 0;
      for (let j = 0; j < end; j++) { s[j] = Math.exp(s[j] - m); sum += s[j]; }
      const o = base + i * D;
      for (let j = 0; j < end; j++) {
        const p = s[j] / sum;
        for (let d = 0; d < D; d++) out[o + d] += p * v[base + j * D + d];
      }
    }
  }
  return out;
}

export async function benchNaive({ sizes = SIZES, quick = false, log = () => {} } = {}) {
  const rows = [];
  for (const L of sizes) {
    const { q, k, v } = inputs(L);
    const reps = L >= 1024 ? 1 : Math.max(1, Math.ceil(repsFor(L, quick) / 3));
    for (const causal of [false, true]) {
      const ms = await median(() => naiveAttention(q, k, v, L, causal), reps);
      rows.push(row('naive-js', 1, L, causal, ms, reps));
      log(rows[rows.length - 1]);
    }
  }
  return rows;
}

/**
 * A row's share of the machine's limit: the FLOPs the call needs (causal: the visible half) per
 * second, over `threads` times one thread's multiply-add rate measured in the same run (for the
 * relaxed-SIMD builds, the rate of f32x4.relaxed_madd, which their micro-kernel uses).
 */
export function fractionOfLimit(rows, row) {
  const isLimit = (r) => r.impl === PEAK || r.impl === PEAK_MADD;
  const peak = rows.find((r) => r.impl === (row.impl.includes('relaxed') ? PEAK_MADD : PEAK));
  if (!peak || isLimit(row)) return null;
  return +(usefulFlops(row.L, row.causal) / row.ms / 1e6 / (row.threads * peak.gflops)).toFixed(3);
}

/** Ratios that the targets are stated in, per (L, causal). */
export function ratios(rows) {
  const get = (impl, threads, L, causal) => rows.find((r) => r.impl === impl && r.threads === threads && r.L === L && r.causal === causal);
  const out = [];
  const Ls = [...new Set(rows.filter((r) => r.impl !== PEAK && r.impl !== PEAK_MADD).map((r) => r.L))].sort((a, b) => a - b);
  for (const L of Ls) {
    for (const causal of [false, true]) {
      const scalar = get('qkv-scalar', 1, L, causal), simd = get('qkv-simd', 1, L, causal);
      const t2 = get('qkv-simd-threads', 2, L, causal), ort1 = get('onnxruntime-web', 1, L, causal);
      const ort2 = get('onnxruntime-web', 2, L, causal), naive = get('naive-js', 1, L, causal);
      const relaxed = get('qkv-simd-relaxed', 1, L, causal), relaxed2 = get('qkv-simd-relaxed-threads', 2, L, causal);
      const r = (a, b) => (a && b ? +(b.ms / a.ms).toFixed(2) : null);
      const f = (a) => (a ? fractionOfLimit(rows, a) : null);
      out.push({
        L, causal,
        simdVsScalar: r(simd, scalar),
        simdVsOrt1: r(simd, ort1),
        threads2VsOrt2: r(t2, ort2),
        threads2VsSimd: r(t2, simd),
        simdVsNaive: r(simd, naive),
        relaxedVsSimd: r(relaxed, simd),
        relaxedVsOrt1: r(relaxed, ort1),
        relaxed2VsThreads2: r(relaxed2, t2),
        simdOfLimit: f(simd),
        threads2OfLimit: f(t2),
        relaxedOfLimit: f(relaxed),
      });
    }
  }
  return out;
}

/** A plain-text table of rows and ratios. */
export function table(rows, title) {
  const lines = [`${title}`];
  for (const [impl, what] of [[PEAK, 'limit'], [PEAK_MADD, 'limit of the relaxed builds']]) {
    const peak = rows.find((r) => r.impl === impl);
    if (!peak) continue;
    const loops = Object.entries(peak.loops).map(([k, v]) => `${k} ${v}`).join(', ');
    lines.push(`${what}: ${peak.gflops.toFixed(2)} GFLOP/s per thread (${peak.loop}; the fastest of ${peak.rounds ?? 1} medians; its loops then: ${loops})`);
  }
  lines.push('impl                 thr     L causal      ms   GFLOP/s  of limit');
  for (const r of rows.filter((x) => x.impl !== PEAK && x.impl !== PEAK_MADD)) {
    const f = fractionOfLimit(rows, r);
    lines.push(`${r.impl.padEnd(20)} ${String(r.threads).padStart(3)} ${String(r.L).padStart(5)} ${String(r.causal).padStart(6)} ${r.ms.toFixed(2).padStart(9)} ${r.gflops.toFixed(2).padStart(9)} ${f === null ? '        -' : `${(100 * f).toFixed(1).padStart(8)}%`}`);
  }
  lines.push('', '    L causal  simd/scalar  simd/ort(1t)  2t/ort(2t)  2t/1t  simd/naive  relaxed/simd  relaxed/ort(1t)  relaxed-2t/2t');
  for (const x of ratios(rows)) {
    const f = (v) => (v === null ? '-' : v.toFixed(2)).padStart(11);
    lines.push(`${String(x.L).padStart(5)} ${String(x.causal).padStart(6)} ${f(x.simdVsScalar)}  ${f(x.simdVsOrt1)} ${f(x.threads2VsOrt2)} ${f(x.threads2VsSimd).slice(4)} ${f(x.simdVsNaive)}  ${f(x.relaxedVsSimd).padStart(12)}  ${f(x.relaxedVsOrt1).padStart(15)}  ${f(x.relaxed2VsThreads2).padStart(13)}`);
  }
  lines.push('', 'of limit: the FLOPs a call needs (causal: the visible L(L+1)/2 scores) per second, over threads x the limit');
  return lines.join('\n');
}
