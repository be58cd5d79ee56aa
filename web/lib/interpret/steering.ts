/**
 * A steering vector (activation addition, Turner et al. 2023) from two prompts: the mean over
 * positions of blocks.{layer}.hook_resid_pre for A minus the same for B. Add it back with the
 * forward's or generate's `steer` option (docs/residual.md).
 */
import { describe } from '../errors.js';
import type { DecoderModel } from '../model/decoder.js';
import { checkOptions } from '../validate.js';
import { asDecoder } from './decoder-ids.js';

/** Options of {@link steeringVector}. */
export interface SteeringVectorOptions {
  /** The block whose resid_pre is read (and where the vector is meant to be added). */
  layer: number;
}

/** `mean_t resid_pre[layer](A)[t] - mean_t resid_pre[layer](B)[t]`: a `Float32Array(d_model)`. */
export async function steeringVector(model: DecoderModel, idsA: ArrayLike<number>, idsB: ArrayLike<number>, options: SteeringVectorOptions): Promise<Float32Array> {
  const fn = 'steeringVector';
  const dec = asDecoder(fn, model);
  const opts = checkOptions(fn, options, ['layer']);
  const { layers, d } = dec.dims;
  const layer = opts.layer;
  if (typeof layer !== 'number' || !Number.isInteger(layer) || layer < 0 || layer >= layers) {
    throw new RangeError(`${fn}: options.layer = ${describe(layer)} is not a layer in [0, ${layers})`);
  }
  const name = `blocks.${layer}.hook_resid_pre`;
  const mean = async (ids: ArrayLike<number>, what: string): Promise<Float64Array> => {
    let acts;
    try {
      acts = (await dec.forward(ids, { outputActivations: [name], logits: 'last' })).activations!;
    } catch (e) {
      throw new (e instanceof TypeError ? TypeError : e instanceof RangeError ? RangeError : Error)(`${fn}: ${what}: ${(e as Error).message}`);
    }
    const a = acts[name].data as Float32Array;
    const T = a.length / d;
    const out = new Float64Array(d);
    for (let t = 0; t < T; t++) for (let j = 0; j < d; j++) out[j] += a[t * d + j] / T;
    return out;
  };
  const a = await mean(idsA, 'idsA');
  const b = await mean(idsB, 'idsB');
  return Float32Array.from(a, (v, j) => v - b[j]);
}
