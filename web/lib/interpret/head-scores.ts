/**
 * Per-head scores read off attention maps (pure functions over what `model.forward(ids,
 * { outputAttentions: true })` returns). A is one head's map, A[i][j] the weight query i gives
 * key j; every score is a mean over query rows, so it lies in [0, 1] (entropy: [0, ln L]).
 *
 *  - previous-token: mean over i >= 1 of A[i][i-1], the weight on the token just before.
 *  - next-token: mean over i = 0..L-2 of A[i][i+1], the weight on the token just after (row
 *    L-1 has none). A bidirectional head that reads its right neighbour scores near 1.
 *    Causal maps (every weight above the diagonal exactly 0, in every head of every layer)
 *    score 0 by construction, whatever their heads do, so they get null instead of a table of
 *    zeros: "0 because the model cannot look ahead" must not read as a measured 0 (a
 *    bidirectional head that gives its right neighbour nothing). The maps decide, not the
 *    model's kind, so the rule holds for any model whose maps these are.
 *  - sink (first-token share): mean over i >= 1 of A[i][0]. Row 0 is left out of it and of
 *    previous-token (in a causal model it can only attend to itself).
 *  - entropy: mean over i >= 1 of -sum_j A[i][j] ln A[i][j], in nats (0 * ln 0 = 0).
 *  - induction (Olsson et al. 2022, "In-context Learning and Induction Heads"): on a sequence
 *    prefix + x + x (x: T random tokens, repeated once), the mean over the second copy's
 *    positions q = P + T + t (t = 0..T-1) of A[q][P + t + 1]: the weight each token of the
 *    second copy gives to the token that followed its first occurrence (for t = T - 1 that is
 *    the second copy's first token). An induction head scores near 1, a uniform causal head
 *    about 1 / q.
 */
import { fmtShape } from '../errors.js';
import type { Tensor } from '../tensor.js';
import { isCausalMap } from './causal.js';
import { checkAttentions } from './fuse.js';

/** One score per head: `table[layer][head]`. */
export type HeadTable = number[][];

/** Previous-token, next-token, sink and entropy scores of every head, [layer][head] each. */
export interface HeadPatternScores {
  /** Mean over queries i >= 1 of A[i][i-1], the weight on the token just before; in [0, 1]. */
  previousToken: HeadTable;
  /**
   * Mean over queries i = 0..L-2 of A[i][i+1], the weight on the token just after; in [0, 1].
   * null when the maps are causal (every weight above the diagonal 0: the score would be 0 by
   * construction, not measured).
   */
  nextToken: HeadTable | null;
  /** First-token share: mean over queries i >= 1 of A[i][0]; in [0, 1]. */
  sink: HeadTable;
  /** Mean over queries i >= 1 of -sum_j A[i][j] ln A[i][j], in nats; in [0, ln L]. */
  entropy: HeadTable;
}

/** Whether every weight above the diagonal of every head's [L, L] map is exactly 0 (causal maps). */
function causal(layers: readonly Float32Array[], heads: readonly number[], L: number): boolean {
  return layers.every((a, l) => {
    for (let h = 0; h < heads[l]; h++) if (!isCausalMap((q) => a.subarray((h * L + q) * L, (h * L + q + 1) * L), L)) return false;
    return true;
  });
}

/** The previous-token, next-token, sink and entropy scores of every head of `attentions` (L >= 2). */
export function headPatternScores(attentions: readonly Tensor[]): HeadPatternScores {
  const fn = 'headPatternScores';
  const att = checkAttentions(fn, attentions);
  const { L } = att;
  if (L < 2) throw new RangeError(`${fn}: the maps are [${L}, ${L}]: the scores average over queries 1..L-1, so L must be at least 2`);
  const previousToken: HeadTable = [], sink: HeadTable = [], entropy: HeadTable = [];
  // next-token: measured only where a query can see the key after it (not in causal maps)
  const nextToken: HeadTable | null = causal(att.layers, att.heads, L) ? null : [];
  att.layers.forEach((a, l) => {
    const H = att.heads[l];
    const p: number[] = [], n: number[] = [], s: number[] = [], e: number[] = [];
    for (let h = 0; h < H; h++) {
      if (nextToken) {
        let sn = 0;
        for (let i = 0; i + 1 < L; i++) sn += a[(h * L + i) * L + i + 1];
        n.push(sn / (L - 1));
      }
      let sp = 0, ss = 0, se = 0;
      for (let i = 1; i < L; i++) {
        const r = (h * L + i) * L;
        sp += a[r + i - 1];
        ss += a[r];
        let ent = 0;
        for (let j = 0; j < L; j++) {
          const w = a[r + j];
          if (w > 0) ent -= w * Math.log(w);
        }
        se += ent;
      }
      p.push(sp / (L - 1));
      s.push(ss / (L - 1));
      e.push(se / (L - 1));
    }
    previousToken.push(p);
    nextToken?.push(n);
    sink.push(s);
    entropy.push(e);
  });
  return { previousToken, nextToken, sink, entropy };
}

/**
 * The induction score of every head, [layer][head], from the maps of one forward pass over
 * prefix (P tokens) + x + x, x of `length` T tokens: mean over t = 0..T-1 of A[P+T+t][P+t+1].
 */
export function inductionScores(attentions: readonly Tensor[], length: number, prefixLength = 0): HeadTable {
  const fn = 'inductionScores';
  const att = checkAttentions(fn, attentions);
  const T = length, P = prefixLength;
  if (!Number.isInteger(T) || T < 1 || !Number.isInteger(P) || P < 0 || P + 2 * T !== att.L) {
    throw new RangeError(`${fn}: maps of ${fmtShape([att.L, att.L])} do not come from prefix (${P} tokens) + a sequence of length ${T} twice (${P} + 2 * ${T} tokens)`);
  }
  return att.layers.map((a, l) => {
    const out: number[] = [];
    for (let h = 0; h < att.heads[l]; h++) {
      let s = 0;
      for (let t = 0; t < T; t++) s += a[(h * att.L + P + T + t) * att.L + P + t + 1];
      out.push(s / T);
    }
    return out;
  });
}
