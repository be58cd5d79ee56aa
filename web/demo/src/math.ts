// Pure attention maths for the demo, in plain TypeScript: seeded random numbers, masks,
// softmax, entropy and the online-softmax (flash) recurrence. No DOM, no library: the
// playground shows these step by step and checks them against qkv's own kernels.

/** Row-major matrix: rows x cols float32. */
export interface Mat { rows: number; cols: number; data: Float32Array }

export function mat(rows: number, cols: number, data?: ArrayLike<number>): Mat {
  const m = { rows, cols, data: new Float32Array(rows * cols) };
  if (data) m.data.set(data);
  return m;
}
export const row = (m: Mat, i: number): Float32Array => m.data.subarray(i * m.cols, (i + 1) * m.cols);
export const get = (m: Mat, i: number, j: number): number => m.data[i * m.cols + j];

/** mulberry32: small, fast, seeded uniform [0, 1). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Standard normal samples (Box-Muller) from a seeded uniform source. */
export function randn(rand: () => number): () => number {
  let spare: number | null = null;
  return () => {
    if (spare !== null) { const s = spare; spare = null; return s; }
    let u = 0;
    while (u === 0) u = rand();
    const v = rand();
    const r = Math.sqrt(-2 * Math.log(u));
    spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  };
}

/** A rows x cols matrix of N(0, 1) entries, reproducible from (seed, salt). */
export function randomMat(rows: number, cols: number, seed: number, salt: number): Mat {
  const g = randn(rng(seed * 7919 + salt * 104729 + 1));
  const m = mat(rows, cols);
  for (let i = 0; i < m.data.length; i++) m.data[i] = g();
  return m;
}

export type MaskKind = 'bidirectional' | 'causal' | 'window';

export interface MaskSpec {
  kind: MaskKind;
  /** sliding window size (kind 'window'): query i sees keys i - window < j <= i */
  window: number;
  /** key j is padding (never attended to) */
  padded: boolean[];
}

/** allowed[i][j]: may query i attend to key j (Lq == Lk; bottom-right alignment is then the identity). */
export function allowed(spec: MaskSpec, i: number, j: number): boolean {
  if (spec.padded[j]) return false;
  if (spec.kind === 'causal' && j > i) return false;
  if (spec.kind === 'window' && (j > i || j <= i - spec.window)) return false;
  return true;
}

export interface AttentionResult {
  /** q . k for every pair (before scale and mask) */
  scores: Mat;
  /** scale * q . k, -Infinity where masked */
  logits: Mat;
  /** softmax rows; all-zero for a row with no allowed key */
  weights: Mat;
  output: Mat;
}

/** Reference attention: softmax(scale Q K^T + mask) V, computed in float64 per row. */
export function attention(Q: Mat, K: Mat, V: Mat, scale: number, spec: MaskSpec): AttentionResult {
  const L = Q.rows, Lk = K.rows, D = Q.cols, Dv = V.cols;
  const scores = mat(L, Lk), logits = mat(L, Lk), weights = mat(L, Lk), output = mat(L, Dv);
  for (let i = 0; i < L; i++) {
    let m = -Infinity;
    for (let j = 0; j < Lk; j++) {
      let s = 0;
      for (let d = 0; d < D; d++) s += Q.data[i * D + d] * K.data[j * D + d];
      scores.data[i * Lk + j] = s;
      const z = allowed(spec, i, j) ? s * scale : -Infinity;
      logits.data[i * Lk + j] = z;
      if (z > m) m = z;
    }
    if (m === -Infinity) continue;
    let sum = 0;
    const e = new Float64Array(Lk);
    for (let j = 0; j < Lk; j++) { e[j] = Math.exp(logits.data[i * Lk + j] - m); sum += e[j]; }
    for (let j = 0; j < Lk; j++) {
      const p = e[j] / sum;
      weights.data[i * Lk + j] = p;
      for (let d = 0; d < Dv; d++) output.data[i * Dv + d] += p * V.data[j * Dv + d];
    }
  }
  return { scores, logits, weights, output };
}

/** Shannon entropy of a probability row, in bits (zeros contribute nothing). */
export function entropyBits(p: ArrayLike<number>, n = p.length): number {
  let h = 0;
  for (let j = 0; j < n; j++) { const x = p[j]; if (x > 0) h -= x * Math.log2(x); }
  return h;
}

/** Mean row entropy over rows that have at least one allowed key. */
export function meanEntropy(W: Mat): number {
  let total = 0, n = 0;
  for (let i = 0; i < W.rows; i++) {
    const r = row(W, i);
    let s = 0;
    for (const x of r) s += x;
    if (s === 0) continue;
    total += entropyBits(r);
    n++;
  }
  return n ? total / n : 0;
}

export const rowSum = (r: ArrayLike<number>): number => { let s = 0; for (let j = 0; j < r.length; j++) s += r[j]; return s; };

/** One step of the online softmax for a single query row, after consuming keys [start, end). */
export interface TileState {
  start: number;
  end: number;
  /** logits of this tile (scaled, -Infinity where masked) */
  tileLogits: number[];
  /** running max before and after this tile */
  mPrev: number;
  m: number;
  /** exp(mPrev - m): how much the old sum and accumulator shrink */
  rescale: number;
  /** running sum of exp(logit - m) */
  l: number;
  /** unnormalised accumulator sum_j exp(logit_j - m) v_j */
  acc: number[];
  /** acc / l: the output if the row ended here */
  out: number[];
  /** max |out - exact| */
  err: number;
}

/**
 * The flash-attention recurrence for query row i over key tiles of `tile` keys:
 *   m' = max(m, max tile logits); l' = l e^(m - m') + sum e^(s - m'); acc' = acc e^(m - m') + sum e^(s - m') v
 * Only one tile of logits exists at a time; the L x L matrix is never stored.
 */
export function onlineSoftmax(Q: Mat, K: Mat, V: Mat, i: number, scale: number, spec: MaskSpec,
                              tile: number, exact: ArrayLike<number>): TileState[] {
  const Lk = K.rows, D = Q.cols, Dv = V.cols;
  let m = -Infinity, l = 0;
  let acc = new Array<number>(Dv).fill(0);
  const states: TileState[] = [];
  for (let start = 0; start < Lk; start += tile) {
    const end = Math.min(Lk, start + tile);
    const tileLogits: number[] = [];
    for (let j = start; j < end; j++) {
      let s = 0;
      for (let d = 0; d < D; d++) s += Q.data[i * D + d] * K.data[j * D + d];
      tileLogits.push(allowed(spec, i, j) ? s * scale : -Infinity);
    }
    const mPrev = m;
    const mNew = Math.max(m, ...tileLogits);
    const rescale = mNew === -Infinity ? 1 : Math.exp(mPrev - mNew);
    l *= rescale;
    acc = acc.map((a) => a * rescale);
    if (mNew !== -Infinity) {
      tileLogits.forEach((z, t) => {
        if (z === -Infinity) return;
        const e = Math.exp(z - mNew);
        l += e;
        for (let d = 0; d < Dv; d++) acc[d] += e * V.data[(start + t) * Dv + d];
      });
    }
    m = mNew;
    const out = acc.map((a) => (l > 0 ? a / l : 0));
    let err = 0;
    for (let d = 0; d < Dv; d++) err = Math.max(err, Math.abs(out[d] - exact[d]));
    states.push({ start, end, tileLogits, mPrev, m, rescale, l, acc: acc.slice(), out, err });
  }
  return states;
}
