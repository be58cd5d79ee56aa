// "Test a head" on the encoders page reads the fill-mask prediction: the distribution at the
// prompt's one [MASK] (before and after removing heads), and the masked-token loss of the word
// the user says belongs there (#mask-target: -log p(word) at the [MASK], nats), when that word
// is one token of the vocabulary; otherwise the summary says why there is no loss.
import type { qkv } from './api';
import type { Readout } from './test-head';
import { $ } from './ui';

/** The target word's token id, or why it has none. */
function targetId(m: qkv.EncoderModel): number | string {
  const word = $<HTMLInputElement>('#mask-target').value.trim();
  if (!word) return 'no loss: type the word that belongs at [MASK] to see its loss';
  const ids = m.tokenizer.encode(word, { addSpecialTokens: false });
  if (ids.length !== 1) return `no loss: “${word}” is ${ids.length} tokens (${ids.map((i) => m.tokenizer.token(i)).join(' ')}), the loss needs one`;
  return ids[0];
}

/** -log softmax(logits[o .. o + V))[id], in float64. */
function nll(x: Float32Array, o: number, V: number, id: number): number {
  let m = -Infinity;
  for (let v = 0; v < V; v++) m = Math.max(m, x[o + v]);
  let s = 0;
  for (let v = 0; v < V; v++) s += Math.exp(x[o + v] - m);
  return m + Math.log(s) - x[o + id];
}

export function maskReadout(model: () => qkv.EncoderModel | null): Readout {
  const maskAt = (ids: readonly number[]) => {
    const mask = model()?.tokenizer.specialTokens.mask ?? null;
    const at = ids.flatMap((id, i) => (id === mask ? [i] : []));
    return at.length === 1 ? at[0] : `The test reads the prediction at the [MASK]: the sentence needs exactly one (it has ${at.length}).`;
  };
  return {
    caption: 'At the [MASK], top 5',
    at: maskAt,
    loss(logits, ids, V) {
      const m = model(), at = maskAt(ids);
      if (!m || typeof at === 'string') return null;
      const id = targetId(m);
      return typeof id === 'string' ? null : nll(logits, at * V, V, id);
    },
    lossName() {
      const m = model();
      const id = m ? targetId(m) : 'no loss';
      return typeof id === 'string' ? id : { name: `the masked-token loss of “${m!.tokenizer.token(id)}”`, unit: 'nats' };
    },
    key: () => $<HTMLInputElement>('#mask-target').value.trim(),
  };
}
