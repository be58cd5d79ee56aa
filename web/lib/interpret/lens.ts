/**
 * The logit lens (nostalgebraist 2020): each block's input read out as if it were the last, through
 * the final norm (recomputed on that row: its own mean and divisor) and the unembedding
 * (docs/residual.md). The (numLayers + 1) x T rows go through the LM head as one matrix product
 * in wasm (the model's unembed); the probabilities, top tokens and KL are formed here.
 */
import { describe } from '../errors.js';
import { optFunction, optSignal, nextTask } from '../model/cancel.js';
import { DecoderModel } from '../model/decoder.js';
import { NO_INTERVENTIONS } from '../model/interventions.js';
import { NO_RESIDUAL } from '../model/residual.js';
import { checkOptions, optInt } from '../validate.js';
import { HeapScope, heapF32, wasmError } from '../wasm/heap.js';
import { checkIds } from './decoder-ids.js';
import type { LensCell, LensToken, LogitLensOptions, LogitLensResult } from './lens-types.js';

export type { LensCell, LensToken, LogitLensOptions, LogitLensResult } from './lens-types.js';

/**
 * The masked-LM encoders' lens (lens-encoder.ts, where the package has it): the MLM head on each
 * layer's hidden state. Loaded on first use, so the decoders' lens does not depend on it.
 */
type EncoderLens = (model: unknown, ids: ArrayLike<number>, options?: LogitLensOptions) => Promise<LogitLensResult>;
const ENCODER_LENS = './lens-encoder.js';
async function encoderLens(): Promise<EncoderLens> {
  const mod = (await import(/* @vite-ignore */ ENCODER_LENS)) as { encoderLogitLens: EncoderLens };
  return mod.encoderLogitLens;
}

/**
 * The logit lens: `layers[l][t]` for l = 0..numLayers, position t. For l < numLayers the final
 * norm is recomputed on `blocks.{l}.hook_resid_pre` (its own statistics, the norm's weight and
 * bias) and unembedded; for l = numLayers the last block's output, which gives the model's own
 * logits. Each cell: the topK tokens with their probabilities, `kl` = KL(final || layer) in nats,
 * and with a target its probability and rank (0 = the most probable). A masked-LM encoder
 * (BERT, DistilBERT, RoBERTa) is read through its MLM head on each layer's hidden state.
 */
export async function logitLens(model: DecoderModel | object, ids: ArrayLike<number>, options: LogitLensOptions = {}): Promise<LogitLensResult> {
  const fn = 'logitLens';
  if (!(model instanceof DecoderModel)) {
    if (model && typeof (model as { fillMask?: unknown }).fillMask === 'function') return (await encoderLens())(model, ids, options);
    throw new TypeError(`${fn}: model must be a loaded decoder (GPT-2, the Llama family) or a masked-LM encoder, got ${describe(model)}`);
  }
  const opts = checkOptions(fn, options, ['topK', 'target', 'signal', 'onProgress']);
  const x = checkIds(fn, 'ids', ids, model);
  const T = x.length;
  const { m, handle, dims } = model._wasm(fn);
  const { layers: NL, d, vocab: V } = dims;
  const topK = optInt(fn, opts, 'topK', 5, 1, V);
  const target = targetIds(fn, opts.target, T, V);
  const signal = optSignal(fn, opts);
  const onProgress = optFunction<(done: number, total: number) => void>(fn, opts, 'onProgress');
  const R = (NL + 1) * T; // rows read out: every block's input and the last block's output
  signal?.throwIfAborted();
  onProgress?.(0, R + 2);
  const scope = new HeapScope(m, fn);
  try {
    // the forward records resid_pre [NL, T, d] and the final norm's input [T, d] into one buffer
    // rows [NL + 1, T, d]; then one unembed call: logits [NL + 1, T, V]
    const pIds = scope.i32(x, `ids [${T}]`);
    const pRows = scope.alloc(4 * R * d, `residual rows [${NL + 1}, ${T}, ${d}]`);
    const pLast = scope.alloc(4 * V, `logits [1, ${V}]`);
    const rh = { ...NO_RESIDUAL, layers: NL, d, length: T, residPre: pRows, finalResid: pRows + 4 * NL * T * d };
    let err = handle.forward(pIds, T, pLast, 0, 0, 0, true, NO_INTERVENTIONS, rh);
    if (err) throw wasmError(fn, err);
    onProgress?.(1, R + 2);
    await nextTask();
    signal?.throwIfAborted();
    const pLogits = scope.alloc(4 * R * V, `lens logits [${NL + 1}, ${T}, ${V}]`);
    err = model._wasm(fn).handle.unembed(pRows, R, pLogits);
    if (err) throw wasmError(fn, err);
    onProgress?.(2, R + 2);
    // per row: log-softmax statistics; the final layer's rows first (KL's reference)
    const heap = () => heapF32(m).subarray(pLogits >>> 2, (pLogits >>> 2) + R * V);
    const lse = new Float64Array(R);
    for (let r = 0; r < R; r++) lse[r] = logSumExp(heap().subarray(r * V, (r + 1) * V));
    // the final distribution p_f at each position, and sum_v p_f(v) f(v): then for every layer
    // KL(final || layer) = sum p_f f - lse_f - sum p_f z + lse_z, one dot product per cell
    const pf = Array.from({ length: T }, (_, t) => {
      const f = heap().subarray((NL * T + t) * V, (NL * T + t + 1) * V);
      return Float64Array.from(f, (v) => Math.exp(v - lse[NL * T + t]));
    });
    const pff = pf.map((p, t) => dotF(p, heap().subarray((NL * T + t) * V, (NL * T + t + 1) * V)));
    // a token as the tokenizer decodes it alone ('' without one, or for an id past its vocabulary)
    const decode = (id: number) => {
      try {
        return model.tokenizer ? model.tokenizer.decode([id]) : '';
      } catch {
        return '';
      }
    };
    const layers: LensCell[][] = [];
    for (let l = 0; l <= NL; l++) {
      const row: LensCell[] = [];
      for (let t = 0; t < T; t++) {
        const all = heap();
        const r = l * T + t;
        const z = all.subarray(r * V, (r + 1) * V);
        const kl = l === NL ? 0 : Math.max(0, pff[t] - lse[NL * T + t] - dotF(pf[t], z) + lse[r]);
        const cell: LensCell = { top: topTokens(z, lse[r], topK, decode), kl };
        if (target) {
          const id = target[t];
          cell.targetP = Math.exp(z[id] - lse[r]);
          let rank = 0;
          for (let v = 0; v < V; v++) if (z[v] > z[id] || (z[v] === z[id] && v < id)) rank++;
          cell.targetRank = rank;
        }
        row.push(cell);
      }
      layers.push(row);
      onProgress?.(2 + (l + 1) * T, R + 2);
      if (l < NL) {
        await nextTask();
        signal?.throwIfAborted();
      }
    }
    return { numLayers: NL, positions: T, layers };
  } finally {
    scope.free();
  }
}

/** options.target -> one id per position, or null. */
function targetIds(fn: string, v: unknown, T: number, V: number): Int32Array | null {
  if (v === undefined) return null;
  const ok = (id: unknown) => typeof id === 'number' && Number.isInteger(id) && id >= 0 && id < V;
  if (typeof v === 'number') {
    if (!ok(v)) throw new RangeError(`${fn}: options.target = ${describe(v)} is not a token id in [0, ${V})`);
    return new Int32Array(T).fill(v);
  }
  const a = v as ArrayLike<unknown>;
  if (!a || typeof a.length !== 'number' || a.length !== T) {
    throw new RangeError(`${fn}: options.target must be a token id or ${T} token ids (one per position), got ${describe(v)}`);
  }
  const out = new Int32Array(T);
  for (let t = 0; t < T; t++) {
    if (!ok(a[t])) throw new RangeError(`${fn}: options.target[${t}] = ${describe(a[t])} is not a token id in [0, ${V})`);
    out[t] = a[t] as number;
  }
  return out;
}

function logSumExp(z: Float32Array): number {
  let max = -Infinity;
  for (let i = 0; i < z.length; i++) if (z[i] > max) max = z[i];
  let s = 0;
  for (let i = 0; i < z.length; i++) s += Math.exp(z[i] - max);
  return max + Math.log(s);
}

/** sum_i p[i] z[i] */
function dotF(p: Float64Array, z: Float32Array): number {
  let s = 0;
  for (let i = 0; i < z.length; i++) s += p[i] * z[i];
  return s;
}

/** The k largest logits of z, most probable first (ties: the lower id first). */
function topTokens(z: Float32Array, lse: number, k: number, decode: (id: number) => string): LensToken[] {
  const ids: number[] = [];
  for (let v = 0; v < z.length; v++) {
    if (ids.length === k && z[v] <= z[ids[k - 1]]) continue;
    let i = ids.length === k ? k - 1 : ids.length;
    if (ids.length < k) ids.push(v);
    while (i > 0 && z[ids[i - 1]] < z[v]) {
      ids[i] = ids[i - 1];
      i--;
    }
    ids[i] = v;
  }
  return ids.map((id) => ({ id, token: decode(id), p: Math.exp(z[id] - lse) }));
}
