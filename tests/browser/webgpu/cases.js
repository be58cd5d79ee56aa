// Seeded random attention cases for the WebGPU parity tests (same seed -> same case, in Node
// and in a page). Every option the kernels support is drawn: B > 1, GQA/MQA, cross-attention
// (Lq != Lk, both directions), odd sizes, D and Dv from 1 to 300 (Dv != D), bool and float
// masks with every broadcast pattern (including -inf entries, +inf entries and rows with
// nothing visible), causal, window, custom scale, returnWeights, and a few long sequences.

export function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pick = (r, xs) => xs[Math.floor(r() * xs.length)];
const int = (r, lo, hi) => lo + Math.floor(r() * (hi - lo + 1));

function fill(r, n, amp = 1) {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = (r() * 2 - 1) * amp;
  return a;
}

function maskDims(r, B, H, Lq, Lk) {
  // each dim full size or 1; the last two mostly full
  return [r() < 0.5 ? 1 : B, r() < 0.5 ? 1 : H, r() < 0.25 ? 1 : Lq, r() < 0.15 ? 1 : Lk];
}

/**
 * Case number `n` of the suite with seed `seed`. `long` forces a long sequence (L up to 2048).
 * `bothMasks`: a case may carry a bool and a float mask at once (the kernels take both; the
 * public API takes one attnMask, so the WASM comparison uses bothMasks = false).
 */
export function makeCase(seed, n, { long = false, bothMasks = false } = {}) {
  const r = rng(seed * 1000003 + n * 7919 + 1);
  // long cases stay small elsewhere (software WebGPU is slow): one batch, one or two heads
  const Hkv = long ? 1 : pick(r, [1, 1, 2, 3]);
  const H = Hkv * (long ? pick(r, [1, 2]) : pick(r, [1, 1, 2, 4]));   // GQA / MQA when > Hkv
  const B = long ? 1 : pick(r, [1, 1, 2, 3]);
  let Lq, Lk;
  if (long) {
    Lk = [2048, 1024, 1500, 2048, 1536, 1111][n % 6];
    Lq = [2048, 1024, 1, 77, 1536, 513][n % 6];
  } else {
    Lk = pick(r, [1, 2, 5, 17, 31, 32, 33, 64, 100, 127, 200, 257]);
    Lq = r() < 0.6 ? Lk : pick(r, [1, 3, 16, 33, 65, 130]);
  }
  const D = long ? pick(r, [32, 64]) : pick(r, [1, 3, 4, 7, 16, 31, 32, 33, 64, 65, 100, 128, 200, 256]);
  const Dv = long ? pick(r, [D, 48]) : (r() < 0.6 ? D : pick(r, [1, 5, 24, 64, 130, 256, 300]));
  const causal = r() < 0.4;
  const window = r() < 0.25 ? int(r, 1, Math.max(1, Lk)) : 0;
  const scaleGiven = r() < 0.3;
  const scale = scaleGiven ? pick(r, [0.05, 0.5, 1 / Math.sqrt(D), 2.5]) : 1 / Math.sqrt(D);
  const returnWeights = r() < 0.45;
  const c = {
    B, H, Hkv, Lq, Lk, D, Dv, causal, window, scale: Math.fround(scale), scaleGiven, returnWeights,
    query: fill(r, B * H * Lq * D), key: fill(r, B * Hkv * Lk * D), value: fill(r, B * Hkv * Lk * Dv, 2),
  };
  const kind = r();
  if (kind < 0.25 || (kind >= 0.6 && kind < 0.75)) {
    const dims = maskDims(r, B, H, Lq, Lk);
    const n = dims.reduce((x, y) => x * y, 1);
    const density = pick(r, [0.1, 0.5, 0.9]);
    const data = new Uint8Array(n);
    for (let i = 0; i < n; i++) data[i] = r() < density ? 1 : 0;
    c.boolMask = { data, dims };
  }
  if (kind >= 0.4 && !(c.boolMask && !bothMasks)) {
    const dims = maskDims(r, B, H, Lq, Lk);
    const n = dims.reduce((x, y) => x * y, 1);
    const data = fill(r, n, 3);
    const ninf = r() < 0.5 ? 0.2 : 0;
    const pinf = r() < 0.15 ? 0.02 : 0;
    for (let i = 0; i < n; i++) {
      const u = r();
      if (u < ninf) data[i] = -Infinity;
      else if (u < ninf + pinf) data[i] = Infinity;
    }
    // sometimes a whole row (query 0 of every head) with nothing visible
    if (r() < 0.3 && dims[2] !== 1) for (let j = 0; j < dims[3]; j++) data[j] = -Infinity;
    c.floatMask = { data, dims };
  }
  return c;
}

/** Short text describing a case, for failure messages. */
export function describe(c) {
  const m = (x) => (x ? `[${x.dims}]` : '-');
  return `B=${c.B} H=${c.H} Hkv=${c.Hkv} Lq=${c.Lq} Lk=${c.Lk} D=${c.D} Dv=${c.Dv} causal=${c.causal} ` +
    `window=${c.window} scale=${c.scale} weights=${c.returnWeights} bool=${m(c.boolMask)} float=${m(c.floatMask)}`;
}

/** Max |a - b| (NaN if either has a NaN where the other has not the same). */
export function maxAbsDiff(a, b) {
  if (a.length !== b.length) return Infinity;
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (!(d <= m)) m = Number.isNaN(d) ? (Number.isNaN(a[i]) && Number.isNaN(b[i]) ? m : NaN) : d;
    if (Number.isNaN(m)) return NaN;
  }
  return m;
}
