/**
 * Direct logit attribution (docs/residual.md): the final residual at a position as a sum of parts
 * (the embeddings, every head through its slice of the output projection, the projection's bias,
 * every MLP, the final norm's bias), each read out through the final norm with its divisor frozen
 * at the forward's and the token's unembedding row. Computed in wasm (src/model/readout.cpp).
 */
import { describe } from '../errors.js';
import type { DecoderModel } from '../model/decoder.js';
import { checkOptions } from '../validate.js';
import { HeapScope, wasmError } from '../wasm/heap.js';
import { asDecoder, checkIds } from './decoder-ids.js';

/** Options of {@link logitAttribution}. */
export interface LogitAttributionOptions {
  /** The position read (default the last, T - 1). */
  position?: number;
  /** `[id]`: that token's logit; `[idA, idB]`: the logit difference A - B. */
  tokens: readonly number[] | ArrayLike<number>;
}

/** One part of the final residual and what it adds to the logit. */
export interface AttributionPart {
  /** 'embed', 'pos_embed', 'L{l}H{h}', 'L{l}.attn_bias', 'L{l}.mlp' or 'ln_final.bias'. */
  name: string;
  /** What the part adds to the logit (or the logit difference), through the frozen final norm. */
  value: number;
}

/** What {@link logitAttribution} returns: the parts sum to `total`, the forward's logit (difference). */
export interface LogitAttributionResult {
  /** The forward's logit (or logit difference A - B) at the position. */
  total: number;
  /** Every part of the final residual: the embeddings, then per layer its heads, attention bias and MLP, then the final norm's bias. */
  parts: AttributionPart[];
}

/**
 * Direct logit attribution at `position` for `tokens` ([id] or [idA, idB]). The parts sum to
 * `total`, the forward's logit (or logit difference) at that position, within float32 rounding
 * (Gemma 3: the logit before the soft-cap, whose parts also pass through the attention's and the
 * MLP's output norms with their divisors frozen at the forward's).
 */
export async function logitAttribution(model: DecoderModel, ids: ArrayLike<number>, options: LogitAttributionOptions): Promise<LogitAttributionResult> {
  const fn = 'logitAttribution';
  const dec = asDecoder(fn, model);
  const opts = checkOptions(fn, options, ['position', 'tokens']);
  const x = checkIds(fn, 'ids', ids, dec);
  const T = x.length;
  const { m, handle, dims } = dec._wasm(fn);
  const position = opts.position ?? T - 1;
  if (typeof position !== 'number' || !Number.isInteger(position) || position < 0 || position >= T) {
    throw new RangeError(`${fn}: options.position = ${describe(opts.position)} is not a position in [0, ${T}) (ids has ${T} tokens)`);
  }
  const tokens = opts.tokens as ArrayLike<unknown> | undefined;
  if (!tokens || typeof tokens.length !== 'number' || (tokens.length !== 1 && tokens.length !== 2)) {
    throw new TypeError(`${fn}: options.tokens must be [id] or [idA, idB], got ${describe(opts.tokens)}`);
  }
  const tok = Array.from(tokens, (t, i) => {
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t >= dims.vocab) {
      throw new RangeError(`${fn}: options.tokens[${i}] = ${describe(t)} is not a token id in [0, ${dims.vocab})`);
    }
    return t;
  });
  const layout = handle.attributionLayout();
  const scope = new HeapScope(m, fn);
  try {
    const pIds = scope.i32(x, `ids [${T}]`);
    const pParts = scope.alloc(4 * layout.count, `parts [${layout.count}]`);
    const pTotal = scope.alloc(4, 'total [1]');
    const err = handle.attribute(pIds, T, position, tok[0], tok.length === 2 ? tok[1] : -1, pParts, pTotal);
    if (err) throw wasmError(fn, err);
    const values = scope.read(pParts, layout.count);
    const names = ['embed'];
    if (layout.posEmbed) names.push('pos_embed');
    for (let l = 0; l < dims.layers; l++) {
      for (let h = 0; h < dims.heads; h++) names.push(`L${l}H${h}`);
      if (layout.attnBias) names.push(`L${l}.attn_bias`);
      names.push(`L${l}.mlp`);
    }
    if (layout.finalBias) names.push('ln_final.bias');
    return { total: scope.read(pTotal, 1)[0], parts: names.map((name, i) => ({ name, value: values[i] })) };
  } finally {
    scope.free();
  }
}
