/**
 * What attention rollout and attention flow share (Abnar & Zuidema 2020, "Quantifying Attention
 * Flow in Transformers"): checking the per-layer attention list that `model.forward(ids,
 * { outputAttentions: true })` returns, and turning each layer's heads into one
 * residual-augmented matrix
 *
 *     A'_l = normalize_rows((1 - residual) * fuse_h(A_l[h]) + residual * I)
 *
 * where fuse_h is the mean (the paper's choice), max or min over the heads. With mean fusion
 * and residual 0.5 this is the paper's code exactly ((A + I) / 2: each row of A sums to 1).
 */
import { describe, fmtShape } from '../errors.js';
import { checkTensor } from '../validate.js';

/** How a layer's heads become one matrix: their mean (default), or the elementwise max or min. */
export type HeadFusion = 'mean' | 'max' | 'min';

/** A checked attention list: one Float32Array [H_l, L, L] per layer. */
export interface CheckedAttentions {
  layers: Float32Array[];
  /** Heads of each layer. */
  heads: number[];
  /** Tokens (every layer's maps are [L, L]). */
  L: number;
}

/**
 * Checks `attentions`: a non-empty array of Tensors, each [1, H, L, L] or [H, L, L] (H may
 * differ between layers; L may not), float32. Values are checked as they are fused.
 */
export function checkAttentions(fn: string, attentions: unknown): CheckedAttentions {
  if (!Array.isArray(attentions)) {
    throw new TypeError(`${fn}: attentions must be an array of Tensors (one per layer, each [1, H, L, L], as model.forward(ids, { outputAttentions: true }) returns), got ${describe(attentions)}`);
  }
  if (attentions.length === 0) throw new RangeError(`${fn}: attentions is empty (need at least one layer)`);
  const layers: Float32Array[] = [];
  const heads: number[] = [];
  let L = -1;
  attentions.forEach((a, l) => {
    const t = checkTensor(fn, `attentions[${l}]`, a, 'float32');
    const s = t.shape;
    const ok = (s.length === 4 && s[0] === 1) || s.length === 3;
    const H = s[s.length - 3];
    const Lq = s[s.length - 2];
    const Lk = s[s.length - 1];
    if (!ok || Lq !== Lk || Lq === 0 || H === 0) {
      throw new RangeError(`${fn}: attentions[${l}] must be [1, H, L, L] or [H, L, L] (square maps: self-attention), got ${fmtShape(s)}`);
    }
    if (L >= 0 && Lq !== L) {
      throw new RangeError(`${fn}: every layer's maps must have the same L: attentions[0] is ${fmtShape((attentions[0] as { shape: number[] }).shape)}, attentions[${l}] is ${fmtShape(s)}`);
    }
    L = Lq;
    layers.push(t.data as Float32Array);
    heads.push(H);
  });
  return { layers, heads, L };
}

/** options.fusion: 'mean' (default), 'max' or 'min'. */
export function optFusion(fn: string, opts: Record<string, unknown>): HeadFusion {
  const f = opts.fusion ?? 'mean';
  if (f !== 'mean' && f !== 'max' && f !== 'min') {
    throw new TypeError(`${fn}: options.fusion must be 'mean', 'max' or 'min', got ${describe(opts.fusion)}`);
  }
  return f;
}

/** options.residual: the identity's weight, a number in [0, 1] (default 0.5). */
export function optResidual(fn: string, opts: Record<string, unknown>): number {
  const r = opts.residual ?? 0.5;
  if (typeof r !== 'number' || !(r >= 0 && r <= 1)) {
    throw new RangeError(`${fn}: options.residual must be a number in [0, 1] (the weight of the identity, 0.5 in the paper), got ${describe(opts.residual)}`);
  }
  return r;
}

/**
 * Layer l's residual-augmented fused matrix into `out` ([L, L]). Returns true when it is
 * lower triangular (every weight above the diagonal exactly 0: causal attention), which
 * rollout and flow use to skip the zeros. A weight that is negative or not finite is an Error.
 *
 * A row whose fused weights sum to 0 (a fully masked query, or every head removed) becomes
 * e_i when residual > 0 (the token keeps only itself) and stays 0 when residual is 0.
 *
 * Row by row (the row's sum over heads stays in cache), four heads per pass for the mean.
 * (Rollout's wasm path does the same in src/interpret/rollout.cpp.)
 */
export function fuseLayer(fn: string, l: number, att: CheckedAttentions, fusion: HeadFusion, residual: number,
  out: Float64Array | Float32Array): boolean {
  const { L } = att;
  const H = att.heads[l];
  const src = att.layers[l];
  const LL = L * L;
  const acc = new Float64Array(L);
  const keep = 1 - residual;
  let lower = true;
  for (let i = 0; i < L; i++) {
    const r = i * L;
    // the fused row: row[o + j], j = 0..L-1
    const row = acc;
    const o = 0;
    if (fusion === 'mean') {
      acc.fill(0);
      let h = 0;
      for (; h + 4 <= H; h += 4) {
        const o0 = h * LL + r, o1 = o0 + LL, o2 = o1 + LL, o3 = o2 + LL;
        for (let j = 0; j < L; j++) acc[j] += (src[o0 + j] + src[o1 + j]) + (src[o2 + j] + src[o3 + j]);
      }
      for (; h < H; h++) {
        const o = h * LL + r;
        for (let j = 0; j < L; j++) acc[j] += src[o + j];
      }
      const inv = 1 / H;
      for (let j = 0; j < L; j++) acc[j] *= inv;
    } else {
      for (let j = 0; j < L; j++) acc[j] = src[r + j];
      const max = fusion === 'max';
      for (let h = 1; h < H; h++) {
        const o = h * LL + r;
        for (let j = 0; j < L; j++) {
          const v = src[o + j];
          // NaN propagates (every comparison with it is false)
          if (max ? !(v <= acc[j]) : !(v >= acc[j])) acc[j] = v;
        }
      }
    }
    // the checks, the residual and the row sum; above the diagonal only whether it is all 0
    let bad = false;
    let below = 0;
    for (let j = 0; j <= i; j++) {
      const v = row[o + j];
      bad ||= !(v >= 0 && v < Infinity);
      below += v;
    }
    let above = 0;
    for (let j = i + 1; j < L; j++) {
      const v = row[o + j];
      bad ||= !(v >= 0 && v < Infinity);
      above += v;
    }
    if (bad) {
      let j = 0;
      while (row[o + j] >= 0 && row[o + j] < Infinity) j++;
      throw new RangeError(`${fn}: attentions[${l}] (shape [${H}, ${L}, ${L}]) has a negative or non-finite weight in row ${i} (fused: ${row[o + j]}); attention weights are probabilities`);
    }
    const sum = keep * (below + above) + residual;
    const inv = sum > 0 ? 1 / sum : 1;
    const ki = keep * inv;
    if (above === 0) {
      for (let j = 0; j <= i; j++) out[r + j] = row[o + j] * ki;
      for (let j = i + 1; j < L; j++) out[r + j] = 0;
    } else {
      for (let j = 0; j < L; j++) out[r + j] = row[o + j] * ki;
    }
    out[r + i] += residual * inv;
    if (above !== 0) lower = false;
  }
  return lower;
}
