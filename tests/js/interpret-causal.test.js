// isCausalMap (web/lib/interpret/causal.ts): "every weight above the diagonal is exactly 0",
// the one test headPatternScores (flat [H, L, L] maps) and the demo's pattern labels
// (per-row arrays) share. A causal and a non-causal map, one weight above the diagonal that
// flips it (every such cell, one at a time), an L = 1 map, rows longer than L, and bad input.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as qkv from 'qkv';

const { isCausalMap, headPatternScores, Tensor } = qkv;

/** A row-stochastic [L, L] map as rows: uniform over keys 0..q (causal) or over all L. */
function rows(L, causal) {
  return Array.from({ length: L }, (_v, q) => {
    const r = new Float32Array(L);
    const n = causal ? q + 1 : L;
    r.fill(1 / n, 0, n);
    return r;
  });
}

test('isCausalMap: a causal map is causal, a bidirectional one is not', () => {
  const L = 6;
  assert.equal(isCausalMap((q) => rows(L, true)[q], L), true);
  assert.equal(isCausalMap((q) => rows(L, false)[q], L), false);
  // weight on the diagonal and below only (a previous-token head's) is causal too
  const prev = Array.from({ length: L }, (_v, q) => { const r = new Float32Array(L); r[Math.max(0, q - 1)] = 1; return r; });
  assert.equal(isCausalMap((q) => prev[q], L), true);
});

test('isCausalMap: any one weight above the diagonal makes it not causal; one below or on it does not', () => {
  const L = 5;
  for (let q = 0; q < L; q++) for (let k = 0; k < L; k++) {
    const m = rows(L, true);
    m[q][k] += 1e-30; // a weight too small to move a sum, but not 0 (above the diagonal: was 0)
    assert.equal(isCausalMap((i) => m[i], L), k <= q, `query ${q} key ${k}`);
  }
  // not 0 in any way: negative, NaN
  for (const w of [-0.25, NaN]) {
    const m = rows(L, true);
    m[1][3] = w;
    assert.equal(isCausalMap((i) => m[i], L), false, `weight ${w}`);
  }
  // -0 is 0
  const m = rows(L, true);
  m[0][4] = -0;
  assert.equal(isCausalMap((i) => m[i], L), true);
});

test('isCausalMap: an L = 1 map is causal, whatever its weight; L = 0 too', () => {
  assert.equal(isCausalMap(() => Float32Array.of(1), 1), true);
  assert.equal(isCausalMap(() => [0.5], 1), true);
  assert.equal(isCausalMap(() => { throw new Error('no row to read'); }, 0), true);
});

test('isCausalMap: reads only the queries 0..L-1 it is given, each row to its end', () => {
  const read = [];
  const m = rows(4, true);
  assert.equal(isCausalMap((q) => { read.push(q); return m[q]; }, 3), true);
  assert.deepEqual(read, [0, 1, 2]);
  // a row longer than L (keys past the last query) is checked to its end
  const wide = [Float32Array.of(1, 0, 0), Float32Array.of(0.5, 0.5, 0.25)];
  assert.equal(isCausalMap((q) => wide[q], 2), false);
});

test('isCausalMap: headPatternScores calls a map causal exactly when isCausalMap does, per head of a flat [H, L, L] tensor', () => {
  const L = 4, H = 2;
  const flat = new Float32Array(H * L * L);
  for (let h = 0; h < H; h++) rows(L, true).forEach((r, q) => flat.set(r, (h * L + q) * L));
  const at = (d) => [new Tensor(d, [1, H, L, L])];
  const rowOf = (d, h) => (q) => d.subarray((h * L + q) * L, (h * L + q + 1) * L);
  assert.equal(headPatternScores(at(flat)).nextToken, null);
  assert.ok([0, 1].every((h) => isCausalMap(rowOf(flat, h), L)));
  // head 1, query 2 -> key 3: that head is no longer causal, the scores measure next-token
  const one = flat.slice();
  one.set([0, 0, 0.5, 0.5], (1 * L + 2) * L);
  assert.equal(isCausalMap(rowOf(one, 0), L), true);
  assert.equal(isCausalMap(rowOf(one, 1), L), false);
  assert.deepEqual(headPatternScores(at(one)).nextToken[0], [0, 0.5 / (L - 1)]);
});

test('isCausalMap: bad arguments name the function and the argument', () => {
  assert.throws(() => isCausalMap([[1]], 1), { name: 'TypeError', message: /^isCausalMap: row must be a function \(q\) => the weights of query q, got an array of length 1$/ });
  for (const L of [-1, 1.5, NaN, '2']) {
    assert.throws(() => isCausalMap(() => [1], L), { name: 'RangeError', message: /^isCausalMap: L \(the queries\) must be an integer >= 0, got / }, String(L));
  }
});
