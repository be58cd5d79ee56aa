/**
 * Whether one head's attention map is causal: every weight above the diagonal (key k > query q)
 * exactly 0, so no query reads a token after it. One test for both shapes the maps come in:
 * head-scores.ts's flat [H, L, L] tensors and the demo's per-row arrays, each through a row
 * accessor. A weight that is not 0 (NaN or negative included) makes the map not causal.
 */
import { describe } from '../errors.js';

/**
 * True when, for every query q in 0..L-1, `row(q)` (the weights of query q over the keys) is
 * exactly 0 from key q+1 to the row's end (L for an [L, L] map). An L = 1 map is causal.
 */
export function isCausalMap(row: (q: number) => ArrayLike<number>, L: number): boolean {
  const fn = 'isCausalMap';
  if (typeof row !== 'function') throw new TypeError(`${fn}: row must be a function (q) => the weights of query q, got ${describe(row)}`);
  if (!Number.isInteger(L) || L < 0) throw new RangeError(`${fn}: L (the queries) must be an integer >= 0, got ${describe(L)}`);
  // each query's keys after it, up to the row's end
  for (let q = 0; q < L; q++) {
    const r = row(q);
    for (let k = q + 1; k < r.length; k++) if (r[k] !== 0) return false;
  }
  return true;
}
