/** KVCache: keys and values stored in wasm memory for incremental decoding. */
import { describeAttention, toResult, type AttentionResult } from './attention.js';
import { describe, fmtBytes, fmtShape } from './errors.js';
import { release, track, type Tracked } from './lifetime.js';
import type { Tensor } from './tensor.js';
import { checkOptions, checkTensor, optInt, MAX_DIM } from './validate.js';
import { runWasmAttention } from './wasm/attention.js';
import { HeapScope, MAX_HEAP_BYTES, wasmError } from './wasm/heap.js';
import { loadModule, requireModule } from './wasm/loader.js';
import type { QkvModule, WasmKVCache } from './wasm/module.js';

/** Sizes of a {@link KVCache}. */
export interface KVCacheOptions {
  /** Batch size B (default 1). */
  batchSize?: number;
  /** Key/value heads Hkv (queries may have a multiple of this: GQA). */
  numKvHeads: number;
  /** Capacity: the most positions the cache holds. */
  maxLength: number;
  /** Key (and query) head dim D. */
  headDim: number;
  /** Value head dim Dv (default headDim). */
  valueDim?: number;
}

/** Options of {@link KVCache.attend}: those of scaledDotProductAttention that apply. */
export interface KVCacheAttendOptions {
  /** Broadcastable to [B, H, Lq, length]; bool (1 = may attend) or float (added). */
  attnMask?: Tensor | null;
  /** The Lq queries are the last Lq cached positions: query i sees key j iff j <= i + (length - Lq). */
  isCausal?: boolean;
  /** Sliding window (with the same alignment); 0 = none. */
  window?: number;
  /** Default 1 / sqrt(D). */
  scale?: number;
  /** Grouped-query attention, as in scaledDotProductAttention: needed when the query has more heads than the cache (H % Hkv == 0). */
  enableGqa?: boolean;
  /** Also return the weights [B, H, Lq, length]. */
  returnWeights?: boolean;
  /** Write the output [B, H, Lq, Dv] into this array instead of a new one (as scaledDotProductAttention's `out`). */
  out?: Float32Array;
}

const KV_OPTIONS = ['batchSize', 'numKvHeads', 'maxLength', 'headDim', 'valueDim'] as const;
const ATTEND_OPTIONS = ['attnMask', 'isCausal', 'window', 'scale', 'enableGqa', 'returnWeights', 'out'] as const;

function checkSizes(fn: string, options: unknown) {
  if (options === undefined || options === null) {
    throw new TypeError(`${fn}: options { numKvHeads, maxLength, headDim, batchSize?, valueDim? } are required, got ${describe(options)}`);
  }
  const o = checkOptions(fn, options, KV_OPTIONS);
  const size = (key: string, fallback?: number): number => {
    if (o[key] === undefined && fallback === undefined) throw new TypeError(`${fn}: options.${key} is required`);
    return optInt(fn, o, key, fallback ?? 0, 1, MAX_DIM);
  };
  const batchSize = size('batchSize', 1);
  const numKvHeads = size('numKvHeads');
  const maxLength = size('maxLength');
  const headDim = size('headDim');
  const valueDim = size('valueDim', headDim);
  const bytes = 4 * batchSize * numKvHeads * maxLength * (headDim + valueDim);
  if (bytes > MAX_HEAP_BYTES) {
    throw new RangeError(
      `${fn}: a cache of [B, Hkv, maxLength] = ${fmtShape([batchSize, numKvHeads, maxLength])} with D=${headDim}, Dv=${valueDim} ` +
        `needs ${fmtBytes(bytes)}; the wasm heap holds at most ${fmtBytes(MAX_HEAP_BYTES)}`,
    );
  }
  return { batchSize, numKvHeads, maxLength, headDim, valueDim };
}

/**
 * A key/value cache for incremental (autoregressive) decoding, held in wasm memory:
 * `append` a step's keys and values, `attend` new queries to everything stored so far.
 *
 * @example
 * const cache = await KVCache.create({ numKvHeads: 2, maxLength: 512, headDim: 64 });
 * cache.append(k, v);                                     // [1, 2, n, 64] each
 * const { output } = await cache.attend(q, { isCausal: true }); // q [1, H, n, 64]
 * cache.dispose();
 */
export class KVCache {
  /** Batch size B. */
  readonly batchSize: number;
  /** Key/value heads Hkv. */
  readonly numKvHeads: number;
  /** Capacity: the most positions the cache holds. */
  readonly maxLength: number;
  /** Key (and query) head dim D. */
  readonly headDim: number;
  /** Value head dim Dv. */
  readonly valueDim: number;
  #t: Tracked<WasmKVCache>;
  #m: QkvModule;

  /** Needs the module loaded (`await init()`); {@link KVCache.create} loads it. */
  constructor(options: KVCacheOptions) {
    const s = checkSizes('KVCache', options);
    const m = requireModule('KVCache');
    const handle = m.KVCache.create(s.batchSize, s.numKvHeads, s.maxLength, s.headDim, s.valueDim);
    if (!handle) throw wasmError('KVCache', m.lastError() || 'bad_alloc|allocation failed');
    this.batchSize = s.batchSize;
    this.numKvHeads = s.numKvHeads;
    this.maxLength = s.maxLength;
    this.headDim = s.headDim;
    this.valueDim = s.valueDim;
    this.#m = m;
    this.#t = track(this, handle);
  }

  /** Loads the module if needed, then constructs. */
  static async create(options: KVCacheOptions): Promise<KVCache> {
    checkSizes('KVCache.create', options);
    await loadModule();
    return new KVCache(options);
  }

  #live(fn: string): WasmKVCache {
    if (this.#t.released) throw new Error(`${fn}: the cache was disposed`);
    return this.#t.handle;
  }

  /** Positions stored. */
  get length(): number {
    return this.#t.released ? 0 : this.#t.handle.length();
  }

  /** The most positions it can hold (maxLength). */
  get capacity(): number {
    return this.maxLength;
  }

  /** True after dispose(). */
  get disposed(): boolean {
    return this.#t.released;
  }

  /** Appends n positions: key [B, Hkv, n, D], value [B, Hkv, n, Dv]. */
  append(key: Tensor, value: Tensor): void {
    const fn = 'KVCache.append';
    const c = this.#live(fn);
    const k = checkTensor(fn, 'key', key, 'float32');
    const v = checkTensor(fn, 'value', value, 'float32');
    const want = `[B, Hkv, n, D] = [${this.batchSize}, ${this.numKvHeads}, n, ${this.headDim}] and [B, Hkv, n, Dv] = [${this.batchSize}, ${this.numKvHeads}, n, ${this.valueDim}]`;
    const got = `got key ${fmtShape(k.shape)}, value ${fmtShape(v.shape)}`;
    const ok = (s: readonly number[], d: number) =>
      s.length === 4 && s[0] === this.batchSize && s[1] === this.numKvHeads && s[2] >= 1 && s[3] === d;
    if (!ok(k.shape, this.headDim) || !ok(v.shape, this.valueDim) || k.shape[2] !== v.shape[2]) {
      throw new Error(`${fn}: key and value must be ${want} with the same n >= 1 (${got})`);
    }
    const n = k.shape[2];
    const length = c.length();
    if (length + n > this.maxLength) {
      throw new RangeError(`${fn}: appending ${n} positions to a cache holding ${length} would exceed its maxLength ${this.maxLength} (${got})`);
    }
    const heap = new HeapScope(this.#m, fn);
    try {
      const err = c.append(heap.f32(k.data as Float32Array, 'key'), heap.f32(v.data as Float32Array, 'value'), n);
      if (err) throw wasmError(fn, err);
    } finally {
      heap.free();
    }
  }

  /** Forgets every position (length 0); the memory stays reserved. */
  clear(): void {
    this.#live('KVCache.clear').clear();
  }

  /** Attends query [B, H, Lq, D] (H a multiple of Hkv) to the cached positions. */
  async attend(query: Tensor, options?: KVCacheAttendOptions): Promise<AttentionResult> {
    return this.attendSync(query, options, 'KVCache.attend');
  }

  /** Synchronous {@link KVCache.attend}. */
  attendSync(query: Tensor, options?: KVCacheAttendOptions, fn = 'KVCache.attendSync'): AttentionResult {
    const c = this.#live(fn);
    const q = checkTensor(fn, 'query', query, 'float32');
    const o = checkOptions(fn, options, ATTEND_OPTIONS);
    const Lk = c.length();
    const got = `got query ${fmtShape(q.shape)}, cache [B, Hkv, length, D] = ${fmtShape([this.batchSize, this.numKvHeads, Lk, this.headDim])}`;
    if (q.shape.length !== 4 || q.shape[0] !== this.batchSize || q.shape[3] !== this.headDim || q.shape[1] < 1 || q.shape[2] < 1) {
      throw new Error(`${fn}: query must be [B, H, Lq, D] with B=${this.batchSize}, D=${this.headDim}, H, Lq >= 1 (${got})`);
    }
    const [B, H, Lq] = q.shape;
    if (H % this.numKvHeads !== 0) throw new Error(`${fn}: query heads (${H}) must be a multiple of the cache's kv heads (${this.numKvHeads}) (${got})`);
    if (Lk === 0) throw new Error(`${fn}: the cache is empty; append keys and values first (${got})`);
    const sizes = { B, H, Hkv: this.numKvHeads, Lq, Lk, D: this.headDim, Dv: this.valueDim };
    const call = describeAttention(fn, sizes, q.data as Float32Array, o, got, [B, H]);
    return toResult(call, runWasmAttention(fn, this.#m, call, { cache: c }));
  }

  /** Frees the cache's wasm memory (idempotent). */
  dispose(): void {
    release(this.#t);
  }
}
