/**
 * The masked-LM loss headProbes uses as an encoder's ablation effect: what a user of fill-mask
 * expects a head to matter for. A text is masked as in BERT's pre-training, from a fixed seed:
 * each ordinary token (not a special token: [CLS], [SEP], [PAD], [MASK] ...) is chosen with
 * probability MASK_SHARE (at least one is), and every chosen token is replaced by the mask
 * token (no 80 / 10 / 10 split: the model sees [MASK] as fill-mask gives it). The loss is the
 * mean cross-entropy, in nats, of the original tokens at the chosen positions.
 * Tokens that were [MASK] in the text already have no known answer: they stay masked and are
 * not scored.
 */
import { Tensor } from '../tensor.js';

/** BERT's share of masked tokens. */
export const MASK_SHARE = 0.15;

/** A masked text: the ids fed to the model and the [position, original id] pairs scored. */
export interface MaskedText {
  ids: number[];
  targets: [number, number][];
}

/**
 * Masks `ids` from `rand` (uniform [0, 1)): positions whose id is not in `special` are chosen
 * with probability MASK_SHARE (one at random when none was), each replaced by `maskId`.
 * Null when the text has no ordinary token.
 */
export function maskText(ids: readonly number[], maskId: number, special: ReadonlySet<number>, rand: () => number): MaskedText | null {
  const ordinary = ids.flatMap((id, i) => (special.has(id) || id === maskId ? [] : [i]));
  if (!ordinary.length) return null;
  let chosen = ordinary.filter(() => rand() < MASK_SHARE);
  if (!chosen.length) chosen = [ordinary[Math.floor(rand() * ordinary.length)]];
  const out = ids.slice();
  for (const i of chosen) out[i] = maskId;
  return { ids: out, targets: chosen.map((i) => [i, ids[i]]) };
}

/** Sum over targets of -log softmax(logits[position])[id], nats (logits [1, L, V]). */
export function maskedLossSum(logits: Tensor, targets: readonly [number, number][]): number {
  const V = logits.shape[2];
  const x = logits.data as Float32Array;
  let total = 0;
  for (const [p, id] of targets) {
    const o = p * V;
    let m = -Infinity;
    for (let v = 0; v < V; v++) if (x[o + v] > m) m = x[o + v];
    let s = 0;
    for (let v = 0; v < V; v++) s += Math.exp(x[o + v] - m);
    total += m + Math.log(s) - x[o + id];
  }
  return total;
}
