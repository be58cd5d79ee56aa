/** MultiHeadAttention with PyTorch nn.MultiheadAttention's weights, layout and mask polarity. */
import type { AttentionResult } from './attention.js';
import { describe, fmtBytes, fmtShape } from './errors.js';
import { release, track, type Tracked } from './lifetime.js';
import { Tensor } from './tensor.js';
import { checkOptions, checkTensor, optBool, MAX_DIM } from './validate.js';
import { HeapScope, MAX_HEAP_BYTES, wasmError } from './wasm/heap.js';
import { callThreads, loadModule, requireModule } from './wasm/loader.js';
import type { QkvModule, WasmMhaArgs, WasmMultiHeadAttention } from './wasm/module.js';

/** A weight: a Float32Array (row-major) or a float32 Tensor of the expected shape. */
export type Weight = Float32Array | Tensor;

/** nn.MultiheadAttention's parameters (E = embedDim). */
export interface MultiHeadAttentionWeights {
  /** `[3E, E]`: rows [0, E) project queries, [E, 2E) keys, [2E, 3E) values. */
  inProjWeight: Weight;
  /** [3E] (optional: no bias). */
  inProjBias?: Weight | null;
  /** [E, E]. */
  outProjWeight: Weight;
  /** [E] (optional: no bias). */
  outProjBias?: Weight | null;
}

/** Options of the {@link MultiHeadAttention} constructor. */
export interface MultiHeadAttentionOptions {
  /** Model width E, an integer in [1, 65536] (nn.MultiheadAttention's `embed_dim`). */
  embedDim: number;
  /** Heads H; E must be a multiple of it (each head has E / H dimensions). */
  numHeads: number;
  /** The projections, copied into wasm memory at construction. */
  weights: MultiHeadAttentionWeights;
}

/** Options of {@link MultiHeadAttention.forward}, as nn.MultiheadAttention.forward (camelCase). */
export interface MultiHeadAttentionForwardOptions {
  /** [B, Lk] (or [Lk] unbatched), bool: 1 = ignore this key (PyTorch polarity). */
  keyPaddingMask?: Tensor | null;
  /** [Lq, Lk] or [B * numHeads, Lq, Lk]; bool: 1 = ignore (PyTorch polarity), or float: added. */
  attnMask?: Tensor | null;
  /** Return attention weights (default true, as PyTorch). */
  needWeights?: boolean;
  /** Average the weights over heads: [B, Lq, Lk] (default true), else [B, H, Lq, Lk]. */
  averageAttnWeights?: boolean;
  /** Causal mask, bottom-right aligned (query i sees key j iff j <= i + Lk - Lq). */
  isCausal?: boolean;
}

const CTOR = 'MultiHeadAttention';
const FWD_OPTIONS = ['keyPaddingMask', 'attnMask', 'needWeights', 'averageAttnWeights', 'isCausal'] as const;

function weight(fn: string, name: string, w: unknown, shape: number[], optional: boolean): Float32Array | null {
  if (w === undefined || w === null) {
    if (optional) return null;
    throw new TypeError(`${fn}: weights.${name} is required (shape ${fmtShape(shape)})`);
  }
  const size = shape.reduce((a, b) => a * b, 1);
  if (w instanceof Float32Array) {
    if (w.length !== size) throw new RangeError(`${fn}: weights.${name} has ${w.length} elements but shape ${fmtShape(shape)} needs ${size}`);
    return w;
  }
  if (!(w instanceof Tensor)) throw new TypeError(`${fn}: weights.${name} must be a Float32Array or a Tensor, got ${describe(w)}`);
  const t = checkTensor(fn, `weights.${name}`, w, 'float32');
  const flat = t.shape.length === 1 && shape.length === 1 && t.shape[0] === shape[0];
  const same = t.shape.length === shape.length && t.shape.every((d, i) => d === shape[i]);
  if (!same && !flat) throw new Error(`${fn}: weights.${name} must have shape ${fmtShape(shape)}, got ${fmtShape(t.shape)}`);
  return t.data as Float32Array;
}

/**
 * Multi-head attention exactly as PyTorch's `nn.MultiheadAttention(embedDim, numHeads,
 * batch_first=True)`: packed in-projection, scaled dot-product attention per head,
 * out-projection. Inputs are batch-first [B, L, E] (or unbatched [L, E]).
 *
 * Mask polarity is PyTorch's: in keyPaddingMask and a bool attnMask, 1 = ignore (the opposite
 * of scaledDotProductAttention's attnMask). A query row that can see no key gives output
 * bias-only and weights 0 (PyTorch gives NaN).
 */
export class MultiHeadAttention {
  /** Model width E. */
  readonly embedDim: number;
  /** Heads H (each of E / H dimensions). */
  readonly numHeads: number;
  #pending: { inW: Float32Array; inB: Float32Array | null; outW: Float32Array; outB: Float32Array | null } | null;
  #t: Tracked<WasmMultiHeadAttention> | null = null;
  #disposed = false;

  constructor(options: MultiHeadAttentionOptions) {
    const o = checkOptions(CTOR, options ?? undefined, ['embedDim', 'numHeads', 'weights']);
    const E = o.embedDim, H = o.numHeads;
    if (typeof E !== 'number' || !Number.isInteger(E) || E < 1 || E > 65536) {
      throw new RangeError(`${CTOR}: embedDim must be an integer in [1, 65536], got ${describe(E)}`);
    }
    if (typeof H !== 'number' || !Number.isInteger(H) || H < 1) throw new RangeError(`${CTOR}: numHeads must be a positive integer, got ${describe(H)}`);
    if (E % H !== 0) throw new Error(`${CTOR}: embedDim (${E}) must be divisible by numHeads (${H})`);
    if (12 * E * E > MAX_HEAP_BYTES / 2) throw new RangeError(`${CTOR}: embedDim ${E} needs ${fmtBytes(16 * E * E)} of weights, too large for the wasm heap`);
    const w = o.weights as Record<string, unknown> | undefined;
    if (!w || typeof w !== 'object') throw new TypeError(`${CTOR}: weights { inProjWeight, inProjBias?, outProjWeight, outProjBias? } are required, got ${describe(w)}`);
    checkOptions(`${CTOR}: weights`, w, ['inProjWeight', 'inProjBias', 'outProjWeight', 'outProjBias']);
    this.embedDim = E;
    this.numHeads = H;
    this.#pending = {
      inW: weight(CTOR, 'inProjWeight', w.inProjWeight, [3 * E, E], false)!.slice(),
      inB: weight(CTOR, 'inProjBias', w.inProjBias, [3 * E], true)?.slice() ?? null,
      outW: weight(CTOR, 'outProjWeight', w.outProjWeight, [E, E], false)!.slice(),
      outB: weight(CTOR, 'outProjBias', w.outProjBias, [E], true)?.slice() ?? null,
    };
  }

  /** True after dispose(). */
  get disposed(): boolean {
    return this.#disposed || (this.#t?.released ?? false);
  }

  /** The wasm object, created on first use (the weights move into wasm memory then). */
  #handle(fn: string, m: QkvModule): WasmMultiHeadAttention {
    if (this.disposed) throw new Error(`${fn}: this MultiHeadAttention was disposed`);
    if (this.#t) return this.#t.handle;
    const p = this.#pending!;
    const heap = new HeapScope(m, fn);
    try {
      const inW = heap.f32(p.inW, 'inProjWeight');
      const inB = p.inB ? heap.f32(p.inB, 'inProjBias') : 0;
      const outW = heap.f32(p.outW, 'outProjWeight');
      const outB = p.outB ? heap.f32(p.outB, 'outProjBias') : 0;
      const h = m.MultiHeadAttention.create(this.embedDim, this.numHeads, inW, inB, outW, outB);
      if (!h) throw wasmError(fn, m.lastError() || 'bad_alloc|allocation failed');
      this.#t = track(this, h);
      this.#pending = null;
      return h;
    } finally {
      heap.free();
    }
  }

  /**
   * query [B, Lq, E], key [B, Lk, E], value [B, Lk, E] (or all unbatched [L, E]) ->
   * output [B, Lq, E]; weights [B, Lq, Lk] (averaged) or [B, H, Lq, Lk] when needWeights.
   */
  async forward(query: Tensor, key: Tensor, value: Tensor, options?: MultiHeadAttentionForwardOptions): Promise<AttentionResult> {
    await loadModule();
    return this.forwardSync(query, key, value, options, 'MultiHeadAttention.forward');
  }

  /** Synchronous {@link MultiHeadAttention.forward}; the module must be loaded (`await init()`). */
  forwardSync(
    query: Tensor, key: Tensor, value: Tensor, options?: MultiHeadAttentionForwardOptions, fn = 'MultiHeadAttention.forwardSync',
  ): AttentionResult {
    if (this.disposed) throw new Error(`${fn}: this MultiHeadAttention was disposed`);
    const E = this.embedDim, H = this.numHeads;
    const q = checkTensor(fn, 'query', query, 'float32');
    const k = checkTensor(fn, 'key', key, 'float32');
    const v = checkTensor(fn, 'value', value, 'float32');
    const o = checkOptions(fn, options, FWD_OPTIONS);
    const got = `got query ${fmtShape(q.shape)}, key ${fmtShape(k.shape)}, value ${fmtShape(v.shape)}`;
    const rank = q.shape.length;
    const fail = (what: string): never => {
      throw new Error(`${fn}: ${what} (${got})`);
    };
    if ((rank !== 2 && rank !== 3) || k.shape.length !== rank || v.shape.length !== rank) {
      fail('query, key and value must all be [B, L, E] (batch first) or all [L, E] (unbatched)');
    }
    const batched = rank === 3;
    const [B, Lq, Eq] = batched ? q.shape : [1, ...q.shape];
    const [Bk, Lk, Ek] = batched ? k.shape : [1, ...k.shape];
    const [Bv, Lv, Ev] = batched ? v.shape : [1, ...v.shape];
    if (Eq !== E || Ek !== E || Ev !== E) fail(`the last dim of query, key and value must be embedDim = ${E}`);
    if (Bk !== B || Bv !== B) fail('key and value must have the batch size of query');
    if (Lv !== Lk) fail('key and value must have the same length');
    if (B < 1 || Lq < 1 || Lk < 1) fail('batch and lengths must be >= 1');
    if (B * Lq > MAX_DIM || B * Lk > MAX_DIM) fail('too many positions');
    const needWeights = optBool(fn, o, 'needWeights', true);
    const average = optBool(fn, o, 'averageAttnWeights', true);
    const isCausal = optBool(fn, o, 'isCausal', false);
    let kpm: Uint8Array | null = null;
    if (o.keyPaddingMask !== undefined && o.keyPaddingMask !== null) {
      const t = checkTensor(fn, 'options.keyPaddingMask', o.keyPaddingMask);
      const want = batched ? [B, Lk] : [Lk];
      if (t.dtype !== 'bool') fail(`options.keyPaddingMask must be a bool (Uint8Array) tensor of shape ${fmtShape(want)}, got a float32 tensor`);
      if (t.shape.length !== want.length || t.shape.some((d, i) => d !== want[i])) {
        fail(`options.keyPaddingMask must have shape ${fmtShape(want)} ([B, Lk]), got ${fmtShape(t.shape)}`);
      }
      kpm = t.data as Uint8Array;
    }
    let boolMask: Uint8Array | null = null, floatMask: Float32Array | null = null, perHead = false;
    if (o.attnMask !== undefined && o.attnMask !== null) {
      const t = checkTensor(fn, 'options.attnMask', o.attnMask);
      const s = t.shape;
      const is2d = s.length === 2 && s[0] === Lq && s[1] === Lk;
      const is3d = s.length === 3 && s[0] === B * H && s[1] === Lq && s[2] === Lk;
      if (!is2d && !is3d) {
        fail(`options.attnMask must have shape [Lq, Lk] = ${fmtShape([Lq, Lk])} or [B * numHeads, Lq, Lk] = ${fmtShape([B * H, Lq, Lk])}, got ${fmtShape(s)}`);
      }
      perHead = is3d;
      if (t.dtype === 'bool') boolMask = t.data as Uint8Array;
      else floatMask = t.data as Float32Array;
    }
    const m = requireModule(fn);
    const outN = B * Lq * E;
    const wN = needWeights ? (average ? B * Lq * Lk : B * H * Lq * Lk) : 0;
    const need = 4 * (q.data.length + k.data.length + v.data.length + outN + wN + 3 * B * (Lq + 2 * Lk) * E + B * H * Lq * Lk);
    if (need > MAX_HEAP_BYTES) {
      throw new RangeError(`${fn}: the call needs about ${fmtBytes(need)} of wasm memory; the heap holds at most ${fmtBytes(MAX_HEAP_BYTES)} (${got})`);
    }
    const handle = this.#handle(fn, m);
    const heap = new HeapScope(m, fn);
    try {
      const args: WasmMhaArgs = {
        batch: B, lq: Lq, lk: Lk,
        query: heap.f32(q.data as Float32Array, 'query'),
        key: heap.f32(k.data as Float32Array, 'key'),
        value: heap.f32(v.data as Float32Array, 'value'),
        output: heap.alloc(outN * 4, 'output'),
        weights: needWeights ? heap.alloc(wN * 4, 'weights') : 0,
        keyPaddingMask: kpm ? heap.u8(kpm, 'keyPaddingMask') : 0,
        boolAttnMask: boolMask ? heap.u8(boolMask, 'attnMask') : 0,
        floatAttnMask: floatMask ? heap.f32(floatMask, 'attnMask') : 0,
        attnMaskPerHead: perHead, isCausal, needWeights, averageAttnWeights: average,
        threads: callThreads(),
      };
      const err = handle.forward(args);
      if (err) throw wasmError(fn, err);
      const result: AttentionResult = { output: new Tensor(heap.read(args.output, outN), batched ? [B, Lq, E] : [Lq, E]) };
      if (needWeights) {
        const shape = average ? [B, Lq, Lk] : [B, H, Lq, Lk];
        result.weights = new Tensor(heap.read(args.weights, wN), batched ? shape : shape.slice(1));
      }
      return result;
    } finally {
      heap.free();
    }
  }

  /** Frees the wasm memory (idempotent). */
  dispose(): void {
    this.#disposed = true;
    this.#pending = null;
    if (this.#t) release(this.#t);
  }
}
