/**
 * The logit lens of a masked-LM encoder (BERT, DistilBERT, RoBERTa, XLM-R): the model's own
 * masked-LM head (dense, GELU, LayerNorm, the tied decoder and its bias, as `fillMask` uses it)
 * read on every hidden state of one forward pass, so each layer's guess at every position shows
 * how the prediction forms. The decoders' lens is lens.ts; both return lens-types.ts's result.
 *
 *   hidden_states[l]  [T, E]       l = 0..numLayers (HF's output_hidden_states: embeddings, then layers)
 *   logits_l = head(hidden_states[l])  [T, V]   every layer's rows through the head in one wasm call
 *   p_l[t] = softmax(logits_l[t]);  kl = KL(p_final[t] || p_l[t]) = sum_v p_final (log p_final - log p_l)
 *
 * The last layer's row is the model's own MLM logits (the same head on the same rows, bit for bit).
 */
import { describe } from '../errors.js';
import { EncoderModel } from '../model/encoder.js';
import { nextTask, optFunction, optSignal } from '../model/cancel.js';
import { Tensor } from '../tensor.js';
import { checkOptions, intsBelow, isNumberArray, optInt } from '../validate.js';
import type { LensCell, LensToken, LogitLensOptions, LogitLensResult } from './lens-types.js';

/**
 * The head's logits held at once, at most (bytes): the rows of as many whole layers as fit go
 * through the head in one call (every layer at once for the models and lengths a page runs;
 * BERT-base's 13 x 128 rows of 30522 logits take four calls).
 */
const HEAD_CHUNK_BYTES = 64 * 2 ** 20;

/**
 * The masked-LM logit lens: layers[l][t], for l = 0..numLayers and every position t, is the
 * model's masked-LM head applied to hidden state l (the embeddings' output for l = 0, layer
 * l - 1's output after) at position t: its topK tokens with their probabilities, KL(final ||
 * layer) in nats, and with `target` the target's probability and rank (0 = most probable).
 * l = numLayers is the model's own MLM prediction. `ids`: one sequence, special tokens included
 * (`model.tokenizer.encode(text)`). Rejects with `signal.reason` when cancelled; onProgress(done,
 * total) after the forward and after each layer.
 */
export async function encoderLogitLens(model: EncoderModel, ids: ArrayLike<number>, options: LogitLensOptions = {}): Promise<LogitLensResult> {
  const fn = 'encoderLogitLens';
  if (!(model instanceof EncoderModel)) {
    throw new TypeError(`${fn}: model must be an EncoderModel (bert, distilbert, roberta, xlm-roberta), got ${describe(model)}`);
  }
  if (model.disposed) throw new Error(`${fn}: the model has been disposed`);
  if (!model.hasMaskedLmHead) {
    throw new Error(`${fn}: this ${model.architecture} checkpoint has no masked-LM head (a sentence-embedding model): the lens reads every layer through that head`);
  }
  const opts = checkOptions(fn, options, ['topK', 'target', 'signal', 'onProgress']);
  const V = model.config.vocab_size;
  const topK = optInt(fn, opts, 'topK', 5, 1, V);
  const signal = optSignal(fn, opts);
  const onProgress = optFunction<(done: number, total: number) => void>(fn, opts, 'onProgress');
  if (!isNumberArray(ids)) throw new TypeError(`${fn}: ids must be an array of token ids, got ${describe(ids)}`);
  if (ids.length === 0) throw new RangeError(`${fn}: ids is empty (need at least 1 token)`);
  if (ids.length > model.maxPositions) {
    throw new RangeError(`${fn}: ids has ${ids.length} tokens, more than the model's ${model.maxPositions} positions`);
  }
  const x = intsBelow(fn, 'ids', ids, V, 'a token id');
  const T = x.length;
  const targets = targetIds(fn, opts.target, T, V);
  signal?.throwIfAborted();

  const NL = model.layers;
  const E = model.hidden;
  const total = NL + 2;  // the forward, then each of the NL + 1 layers' cells
  onProgress?.(0, total);
  const { logits, hiddenStates } = await model.forward(x, { outputHiddenStates: true });
  logits.dispose();
  const states = hiddenStates!;  // [NL + 1] x [1, T, E]
  onProgress?.(1, total);

  // layers in the order they go through the head: the last first, whose distribution KL needs
  const order = [NL, ...Array.from({ length: NL }, (_, l) => l)];
  const perCall = Math.max(1, Math.floor(HEAD_CHUNK_BYTES / (4 * T * V)));
  const layers: LensCell[][] = new Array(NL + 1);
  const tokens = new Map<number, string>();
  const token = (id: number): string => {
    let s = tokens.get(id);
    if (s === undefined) tokens.set(id, (s = model.tokenizer.decode([id])));
    return s;
  };
  let finalRows: Float32Array | null = null;  // [T, V] the last layer's logits
  let finalP: Float32Array | null = null;     // [T, V] its probabilities
  let finalLse: Float64Array | null = null;   // [T] its log-sum-exp
  let done = 1;
  for (let c = 0; c < order.length; c += perCall) {
    await nextTask();
    signal?.throwIfAborted();
    const chunk = order.slice(c, c + perCall);
    // rows [chunk.length, T, E] -> the head's logits [chunk.length, T, V], one wasm call
    const rows = new Float32Array(chunk.length * T * E);
    chunk.forEach((l, i) => rows.set(states[l].data as Float32Array, i * T * E));
    const out = await model.maskedLmHead(new Tensor(rows, [chunk.length, T, E]));
    const all = out.data as Float32Array;
    for (let i = 0; i < chunk.length; i++) {
      const l = chunk[i];
      if (l === NL) [finalRows, finalP, finalLse] = finalDistribution(all.subarray(0, T * V), T, V);
      const cells: LensCell[] = [];
      for (let t = 0; t < T; t++) {
        const row = all.subarray((i * T + t) * V, (i * T + t + 1) * V);
        const fRow = finalRows!.subarray(t * V, (t + 1) * V);
        cells.push(lensCell(row, fRow, finalP!.subarray(t * V, (t + 1) * V), finalLse![t], topK, targets?.[t], token));
      }
      layers[l] = cells;
      onProgress?.(++done, total);
    }
  }
  for (const s of states) s.dispose();
  return { numLayers: NL, positions: T, layers };
}

/** options.target: one id for every position or one per position -> [T] ids, or null. */
function targetIds(fn: string, target: unknown, T: number, V: number): Int32Array | null {
  if (target === undefined) return null;
  if (typeof target === 'number') {
    if (!Number.isInteger(target) || target < 0 || target >= V) {
      throw new RangeError(`${fn}: options.target must be a token id in [0, ${V}), got ${describe(target)}`);
    }
    return new Int32Array(T).fill(target);
  }
  if (!isNumberArray(target)) {
    throw new TypeError(`${fn}: options.target must be a token id or one id per position (${T}), got ${describe(target)}`);
  }
  if (target.length !== T) {
    throw new RangeError(`${fn}: options.target has ${target.length} ids, ids has ${T} positions (one target per position)`);
  }
  return intsBelow(fn, 'options.target', target, V, 'a token id');
}

/** The last layer's logits [T, V] -> (those rows, their probabilities [T, V], log-sum-exp [T]). */
function finalDistribution(rows: Float32Array, T: number, V: number): [Float32Array, Float32Array, Float64Array] {
  const p = new Float32Array(T * V);
  const lse = new Float64Array(T);
  for (let t = 0; t < T; t++) {
    const row = rows.subarray(t * V, (t + 1) * V);
    lse[t] = logSumExp(row);
    for (let v = 0; v < V; v++) p[t * V + v] = Math.exp(row[v] - lse[t]);
  }
  return [rows.slice(), p, lse];
}

/** log sum_v exp(row[v]), max-shifted, in double. */
function logSumExp(row: Float32Array): number {
  let mx = -Infinity;
  for (let v = 0; v < row.length; v++) if (row[v] > mx) mx = row[v];
  let sum = 0;
  for (let v = 0; v < row.length; v++) sum += Math.exp(row[v] - mx);
  return mx + Math.log(sum);
}

/**
 * One cell: row [V] the layer's logits at a position, fRow / fP / fLse the final layer's there.
 * KL(final || layer) = sum_v pf (log pf - log p) = sum_v pf (xf - x) - lse_f + lse (as sum pf = 1).
 * Ties rank the lower id first.
 */
function lensCell(row: Float32Array, fRow: Float32Array, fP: Float32Array, fLse: number, topK: number,
  target: number | undefined, token: (id: number) => string): LensCell {
  const V = row.length;
  let mx = -Infinity;
  for (let v = 0; v < V; v++) if (row[v] > mx) mx = row[v];
  let sum = 0;    // sum_v exp(x - max)
  let cross = 0;  // sum_v pf (xf - x)
  for (let v = 0; v < V; v++) {
    sum += Math.exp(row[v] - mx);
    cross += fP[v] * (fRow[v] - row[v]);
  }
  const lse = mx + Math.log(sum);  // as logSumExp(row)
  const cell: LensCell = { top: topTokens(row, topK, lse, token), kl: Math.max(0, cross - fLse + lse) };
  if (target !== undefined) {
    const xt = row[target];
    let rank = 0;
    for (let v = 0; v < V; v++) if (row[v] > xt || (row[v] === xt && v < target)) rank++;
    cell.targetP = Math.exp(xt - lse);
    cell.targetRank = rank;
  }
  return cell;
}

/** The k largest logits of a row, largest first (ties: lower id first), as probabilities. */
function topTokens(row: Float32Array, k: number, lse: number, token: (id: number) => string): LensToken[] {
  const V = row.length;
  let ids: number[];
  if (k > 64) {
    ids = Array.from({ length: V }, (_, v) => v).sort((a, b) => row[b] - row[a] || a - b).slice(0, k);
  } else {
    ids = [];  // kept sorted: row[ids[0]] >= row[ids[1]] >= ...
    for (let v = 0; v < V; v++) {
      const xv = row[v];
      if (ids.length === k && !(xv > row[ids[k - 1]])) continue;
      let at = ids.length;
      while (at > 0 && row[ids[at - 1]] < xv) at--;
      ids.splice(at, 0, v);
      if (ids.length > k) ids.pop();
    }
  }
  return ids.map((id) => ({ id, token: token(id), p: Math.exp(row[id] - lse) }));
}
