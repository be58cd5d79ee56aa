/**
 * A decoder's forward pass run through its KV-cache session a chunk of tokens at a time, so
 * that a long prompt shows progress and can be cancelled (model.forward with `signal`,
 * `onProgress` or `chunkSize`). The model is causal: a chunk's queries see every key up to
 * their own position (the earlier chunks' keys come from the cache), which is exactly the
 * rows the single call computes, and the attentions, queries, keys and logits are assembled
 * from the chunks' rows. Between chunks it yields to the event loop and checks the signal.
 */
import { fmtShape } from '../errors.js';
import { Tensor } from '../tensor.js';
import { HeapScope, heapF32, wasmError } from '../wasm/heap.js';
import type { QkvModule } from '../wasm/module.js';
import { nextTask } from './cancel.js';
import type { ForwardResult, ModelDims, WasmDecoder } from './decoder.js';
import { NO_INTERVENTIONS, type WasmInterventions } from './interventions.js';
import { NO_RESIDUAL, type WasmResidual } from './residual.js';

export interface ChunkedForward {
  outputAttentions: boolean;
  outputQueriesKeys: boolean;
  logits: 'all' | 'last';
  /** Tokens per wasm call. */
  chunkSize: number;
  signal?: AbortSignal;
  onProgress?: (done: number, total: number) => void;
  /** Head interventions for the whole forward (each chunk applies its rows: src/model/interventions.hpp). */
  interventions?: WasmInterventions;
  /** Residual-stream hooks for the whole forward (each chunk its rows: src/model/residual.hpp). */
  residual?: WasmResidual;
}

/**
 * ids [L] through the session from position 0 (`handle()` gives the binding, or throws once
 * the model is disposed). The caller owns the session for the duration and resets it after.
 */
export async function forwardInChunks(
  m: QkvModule, fn: string, handle: () => WasmDecoder, x: Int32Array, dims: ModelDims, o: ChunkedForward,
): Promise<ForwardResult> {
  const L = x.length;
  const { vocab: V, heads: H, kvHeads: Hkv, layers: NL, headDim: D } = dims;
  const C = Math.min(o.chunkSize, L);
  // a last chunk of 1 token joins the one before (one row goes through the matrix-vector
  // kernel, which adds in another order than the matrix kernel: not bit for bit)
  const C1 = Math.min(C + 1, L);
  const all = o.logits === 'all';
  // the results, in JS: logits [rows, V]; per layer attentions [H, L, L] (zero above the
  // diagonal, as causal), queries [H, L, D] and keys [Hkv, L, D]
  const rows = all ? L : 1;
  const logits = new Float32Array(rows * V);
  const att = o.outputAttentions ? Array.from({ length: NL }, () => new Float32Array(H * L * L)) : null;
  const qs = o.outputQueriesKeys ? Array.from({ length: NL }, () => new Float32Array(H * L * D)) : null;
  const ks = o.outputQueriesKeys ? Array.from({ length: NL }, () => new Float32Array(Hkv * L * D)) : null;
  const scope = new HeapScope(m, fn);
  try {
    // one chunk's buffers in the heap (c <= C1 tokens), reused: logits [C1, V] (or [1, V]);
    // attentions [NL, H, C1, L] at most (a chunk at p0 fills [NL, H, c, p0 + c]); queries
    // [NL, H, C1, D], keys [NL, Hkv, C1, D]
    const pIds = scope.i32(x, `ids [${L}]`);
    const pLogits = scope.alloc(4 * (all ? C1 : 1) * V, `logits ${fmtShape([all ? C1 : 1, V])}`);
    const pAtt = att ? scope.alloc(4 * NL * H * C1 * L, `attentions of a chunk ${fmtShape([NL, H, C1, L])}`) : 0;
    const pQ = qs ? scope.alloc(4 * NL * H * C1 * D, `queries of a chunk ${fmtShape([NL, H, C1, D])}`) : 0;
    const pK = ks ? scope.alloc(4 * NL * Hkv * C1 * D, `keys of a chunk ${fmtShape([NL, Hkv, C1, D])}`) : 0;
    handle().reset();
    const reserved = handle().reserve(L); // all L positions at once, not grown chunk by chunk
    if (reserved) throw wasmError(fn, reserved);
    o.onProgress?.(0, L);
    for (let p0 = 0, c = 0; p0 < L; p0 += c) {
      c = L - p0 - C === 1 ? C + 1 : Math.min(C, L - p0);
      const Lk = p0 + c; // keys the chunk's last query sees
      const err = handle().prefill(pIds + 4 * p0, c, pLogits, pAtt, pQ, pK, all, o.interventions ?? NO_INTERVENTIONS, o.residual ?? NO_RESIDUAL);
      if (err) throw wasmError(fn, err);
      const heap = heapF32(m); // after the call: the heap may have grown
      // logits: the chunk's rows [c, V] at row p0, or the last chunk's last row
      if (all) logits.set(heap.subarray(pLogits >>> 2, (pLogits >>> 2) + c * V), p0 * V);
      else if (Lk === L) logits.set(heap.subarray(pLogits >>> 2, (pLogits >>> 2) + V));
      for (let l = 0; l < NL; l++) {
        for (let h = 0; h < H; h++) {
          // attentions: row t of the chunk [Lk] -> row p0 + t of [H, L, L] (keys past Lk stay 0)
          if (att) {
            const src = (pAtt >>> 2) + ((l * H + h) * c) * Lk;
            for (let t = 0; t < c; t++) {
              att[l].set(heap.subarray(src + t * Lk, src + (t + 1) * Lk), (h * L + p0 + t) * L);
            }
          }
          // queries: the chunk's [c, D] of head h -> rows p0.. of [H, L, D]
          if (qs) {
            const src = (pQ >>> 2) + (l * H + h) * c * D;
            qs[l].set(heap.subarray(src, src + c * D), (h * L + p0) * D);
          }
        }
        if (ks) {
          for (let h = 0; h < Hkv; h++) {
            const src = (pK >>> 2) + (l * Hkv + h) * c * D;
            ks[l].set(heap.subarray(src, src + c * D), (h * L + p0) * D);
          }
        }
      }
      o.onProgress?.(Lk, L);
      if (Lk < L) {
        // let the page paint and events (a Cancel click) run, then stop if asked to
        await nextTask();
        o.signal?.throwIfAborted();
      }
    }
  } finally {
    scope.free();
  }
  const result: ForwardResult = { logits: new Tensor(logits, [1, rows, V]) };
  if (att) result.attentions = att.map((a) => new Tensor(a, [1, H, L, L]));
  if (qs && ks) {
    result.queriesKeys = qs.map((q, l) => ({ queries: new Tensor(q, [1, H, L, D]), keys: new Tensor(ks[l], [1, Hkv, L, D]) }));
  }
  return result;
}
