// The logit lens on the encoders page's tiny BERT (lens-panel.ts's panel): every layer's hidden
// state read through the masked-LM head (qkv's logitLens on an EncoderModel), on the fill-mask
// sentence, with the [MASK]'s column marked.
import { qkv } from './api';
import { argmaxRows, type LensSource } from './lens-panel';
import { showToken } from './ui';

/** The encoders page's sentence under the lens's heading. */
export const ENCODER_LENS_INTRO = 'Each cell reads one layer\'s hidden state (row) at one token (column) through the ' +
  'masked-LM head (qkv\'s logitLens on the encoder): the token it would fill in there and its probability, shaded. ' +
  'The last row is the model\'s own prediction; the [MASK]\'s column is marked. Hover or focus a cell (arrow keys ' +
  'move) for its top 5 and its KL to the output.';

/** The lens's source: the sentence in `input` as the encoder tokenizes it ([CLS] ... [SEP]). */
export function encoderLensSource(m: qkv.EncoderModel, input: HTMLInputElement): LensSource {
  const V = m.config.vocab_size, mask = m.tokenizer.specialTokens.mask;
  return {
    ids() {
      const ids = m.tokenizer.encode(input.value).slice(0, m.maxPositions);
      if (!ids.length) throw new Error('Type a sentence first.');
      return ids;
    },
    async predictions(ids, signal) {
      signal.throwIfAborted();
      const out = await m.forward(ids);
      const best = argmaxRows(out.logits.data as Float32Array, ids.length, V);
      out.logits.dispose();
      return best;
    },
    lens: (ids, options) => qkv.logitLens(m, ids, options),
    tok: { encode: (text) => m.tokenizer.encode(text, { addSpecialTokens: false }), show: (id) => showToken(m.tokenizer.token(id)), text: (id) => m.tokenizer.token(id) },
    vocab: V,
    reads: 'at',
    marked: (ids) => ids.flatMap((id, t) => (id === mask ? [t] : [])),
  };
}
