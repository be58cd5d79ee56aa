/**
 * The logit lens (nostalgebraist 2020): each block's input read out as if it were the last, through
 * the final norm (recomputed on that row: its own mean and divisor) and the unembedding
 * (docs/residual.md). The (numLayers + 1) x T rows go through the LM head as one matrix product
 * in wasm (the model's unembed); the probabilities, top tokens and KL are formed here.
 */
import { describe } from '../errors.js';
import { optFunction, optSignal, nextTask } from '../model/cancel.js';
import { DecoderModel } from '../model/decoder.js';
import { EncoderModel } from '../model/encoder.js';
import { NO_INTERVENTIONS } from '../model/interventions.js';
import { NO_RESIDUAL } from '../model/residual.js';
import { checkOptions, optInt } from '../validate.js';
import { HeapScope, heapU8, wasmError } from '../wasm/heap.js';
import { checkIds } from './decoder-ids.js';
import { encoderLogitLens } from './lens-encoder.js';
import type { LensCell, LensToken, LogitLensOptions, LogitLensResult } from './lens-types.js';

export type { LensCell, LensToken, LogitLensOptions, LogitLensResult } from './lens-types.js';

/** lensStatistics in wasm/bindings_interpret.cpp: '' or the error. */
type LensStatistics = (logits: number, R: number, T: number, V: number, k: number, target: number, t0: number, t1: number,
  topIds: number, topP: number, kl: number, targetP: number, targetRank: number) => string;

/**
 * The logit lens: `layers[l][t]` for l = 0..numLayers, position t. For l < numLayers the final
 * norm is recomputed on `blocks.{l}.hook_resid_pre` (its own statistics, the norm's weight and
 * bias) and unembedded; for l = numLayers the last block's output, which gives the model's own
 * logits. Each cell: the topK tokens with their probabilities, `kl` = KL(final || layer) in nats,
 * and with a target its probability and rank (0 = the most probable). A masked-LM encoder
 * (BERT, DistilBERT, RoBERTa) is read through its MLM head on each layer's hidden state.
 */
export async function logitLens(model: DecoderModel | EncoderModel, ids: ArrayLike<number>, options: LogitLensOptions = {}): Promise<LogitLensResult> {
  const fn = 'logitLens';
  if (!(model instanceof DecoderModel)) {
    if (model instanceof EncoderModel) return encoderLogitLens(model, ids, options);
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
    // per row, in wasm a few positions (every layer's rows of each) at a time: the top tokens,
    // their probabilities, the target's probability and rank, KL(final || row)
    const pTarget = target ? scope.i32(target, `target [${T}]`) : 0;
    const pTop = scope.alloc(4 * R * topK, `top ids [${R}, ${topK}]`);
    const pTopP = scope.alloc(4 * R * topK, `top p [${R}, ${topK}]`);
    const pKl = scope.alloc(4 * R, `kl [${R}]`);
    const pTp = scope.alloc(4 * R, `target p [${R}]`);
    const pRank = scope.alloc(4 * R, `target rank [${R}]`);
    const stats = (m as unknown as { lensStatistics: LensStatistics }).lensStatistics;
    const step = Math.max(1, Math.floor(T / 8));
    for (let t0 = 0; t0 < T; t0 += step) {
      const t1 = Math.min(T, t0 + step);
      err = stats(pLogits, R, T, V, topK, pTarget, t0, t1, pTop, pTopP, pKl, pTp, pRank);
      if (err) throw wasmError(fn, err);
      onProgress?.(2 + t1 * (NL + 1), R + 2);
      if (t1 < T) {
        await nextTask();
        signal?.throwIfAborted();
      }
    }
    const topIds = new Int32Array(heapU8(m).buffer.slice(pTop, pTop + 4 * R * topK));
    const rank = new Int32Array(heapU8(m).buffer.slice(pRank, pRank + 4 * R));
    const topP = scope.read(pTopP, R * topK), kl = scope.read(pKl, R), tp = scope.read(pTp, R);
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
        const r = l * T + t;
        const top: LensToken[] = [];
        for (let i = 0; i < topK; i++) top.push({ id: topIds[r * topK + i], token: decode(topIds[r * topK + i]), p: topP[r * topK + i] });
        const cell: LensCell = { top, kl: kl[r] };
        if (target) {
          cell.targetP = tp[r];
          cell.targetRank = rank[r];
        }
        row.push(cell);
      }
      layers.push(row);
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
