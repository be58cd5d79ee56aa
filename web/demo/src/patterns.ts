// Per-head summaries read off the weights alone: mean row entropy and a label for a few
// recognisable patterns. The labels describe where the weight went, not what the head is for.
import { qkv } from './api';
import type { AttnData } from './contract';

export type PatternLabel = 'previous token' | 'next token' | 'first-token sink' | 'self' | 'broad' | 'mixed';

export interface HeadStats {
  /** mean row entropy in bits over rows 1..L-1 */
  entropy: number;
  /** mean of entropy / log2(visible keys): 0 = one key, 1 = uniform */
  normEntropy: number;
  /** next: the mean weight on the token after (rows 0..L-2); 0 where the head is causal */
  prev: number; next: number; sink: number; self: number;
  label: PatternLabel;
  /** the mean weight behind the label (for broad: normEntropy) */
  strength: number;
}

export const PATTERN_NOTE: Record<PatternLabel, string> = {
  'previous token': 'most weight on the token just before',
  'next token': 'most weight on the token just after',
  'first-token sink': 'most weight parked on the first token',
  self: 'most weight on the token itself',
  broad: 'weight spread over many tokens',
  mixed: 'no single simple pattern',
};

const THRESHOLD = 0.45;

/**
 * One head's summary from its rows (row q: the weights of query q over all L keys). A causal
 * head (no weight above the diagonal: qkv's isCausalMap) sees keys 0..q from row q; any other
 * (an encoder's) sees all L, and its entropy is normalised by log2 L and its next-token weight read.
 */
export function headStats(rows: Float32Array[]): HeadStats {
  const L = rows.length;
  const causal = qkv.isCausalMap((q) => rows[q], L);
  let H = 0, nH = 0, prev = 0, next = 0, sink = 0, self = 0, n = 0;
  for (let q = 1; q < L; q++) {
    const r = rows[q];
    const keys = causal ? q + 1 : L;
    let h = 0;
    for (let k = 0; k < keys; k++) { const p = r[k]; if (p > 0) h -= p * Math.log2(p); }
    H += h;
    nH += h / Math.log2(keys);
    prev += r[q - 1]; sink += r[0]; self += r[q];
    n++;
  }
  if (!causal) for (let q = 0; q + 1 < L; q++) next += rows[q][q + 1];
  if (n === 0) return { entropy: 0, normEntropy: 0, prev: 0, next: 0, sink: 0, self: 1, label: 'self', strength: 1 };
  const s = { entropy: H / n, normEntropy: nH / n, prev: prev / n, next: next / (L - 1), sink: sink / n, self: self / n };
  const ranked: [PatternLabel, number][] = [['previous token', s.prev], ['next token', s.next], ['first-token sink', s.sink], ['self', s.self]];
  ranked.sort((a, b) => b[1] - a[1]);
  let label: PatternLabel = 'mixed', strength = ranked[0][1];
  if (ranked[0][1] >= THRESHOLD) label = ranked[0][0];
  else if (s.normEntropy >= 0.75) { label = 'broad'; strength = s.normEntropy; }
  return { ...s, label, strength };
}

export const allHeadStats = (d: AttnData): HeadStats[][] => d.attn.map((layer) => layer.map(headStats));

export const CAVEAT = 'A map shows which values were mixed into each position at this step, not why the model ' +
  'predicted what it did: the values themselves, the other heads, the MLPs and the residual stream all ' +
  'shape the output, and a head that looks like a "previous token" head here may do something else on other text.';

export const badgeClass = (l: PatternLabel): string =>
  ({ 'previous token': 'prev', 'next token': 'next', 'first-token sink': 'sink', self: 'self', broad: 'broad', mixed: 'mixed' })[l];
