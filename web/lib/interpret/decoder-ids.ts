/**
 * What the residual-stream measures (lens.ts, attribution.ts, patching.ts) share: the decoder
 * checked, token ids checked against it, and a heap scope for one call.
 */
import { describe } from '../errors.js';
import { DecoderModel } from '../model/decoder.js';
import { intsBelow, isNumberArray } from '../validate.js';

/** `model` as a decoder (GPT-2, the Llama family), or a TypeError naming fn. */
export function asDecoder(fn: string, model: unknown): DecoderModel {
  if (!(model instanceof DecoderModel)) {
    throw new TypeError(`${fn}: model must be a loaded decoder (GPT-2 or the Llama family, from loadModel), got ${describe(model)}`);
  }
  return model;
}

/** ids as Int32Array, 1..positions tokens each below vocab, or an Error naming fn and `what`. */
export function checkIds(fn: string, what: string, ids: unknown, model: DecoderModel): Int32Array {
  const { vocab, positions, positionsKey } = model.dims;
  if (!isNumberArray(ids)) throw new TypeError(`${fn}: ${what} must be an array of token ids, got ${describe(ids)}`);
  if (ids.length === 0) throw new RangeError(`${fn}: ${what} is empty (need at least 1 token)`);
  if (ids.length > positions) throw new RangeError(`${fn}: ${what} has ${ids.length} tokens, more than the model's context (${positionsKey} = ${positions})`);
  return intsBelow(fn, what, ids, vocab, 'a token id');
}
