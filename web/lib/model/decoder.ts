/**
 * What every loaded decoder-only model shares, GPT-2 (gpt2.ts) and the Llama family (llama.ts):
 * `forward` (logits and every head's attention, queries and keys) and `generate` (KV-cache
 * decoding, one token per step, as an async iterator), over a model in the wasm module whose
 * binding has the same methods (wasm/bindings_model.cpp, wasm/bindings_llama.cpp).
 */
import { describe, fmtShape } from '../errors.js';
import { release, track, type Tracked } from '../lifetime.js';
import { Tensor } from '../tensor.js';
import { checkOptions, intsBelow, isNumberArray, optBool, optInt } from '../validate.js';
import { HeapScope, heapU8, wasmError } from '../wasm/heap.js';
import { callThreads } from '../wasm/loader.js';
import type { EmbindHandle, QkvModule } from '../wasm/module.js';
import { optFunction, optSignal } from './cancel.js';
import { forwardInChunks, type ChunkedForward } from './chunked.js';
import { GenerationSlot, once } from './generation.js';
import { FORWARD_CHUNK, type ForwardOptions, type ForwardResult, type GenerateOptions, type GenerationStep, type ModelMemoryUsage, type QueriesKeys } from './decoder-options.js';
import { readHeadOutputs, stackPlan, toWasm, type WasmInterventions } from './interventions.js';
import { parseSteer, readResidual, residualPlan, residualToWasm, NO_RESIDUAL, type WasmResidual } from './residual.js';
import type { DecoderLoadClass } from './stream-load.js';
import type { Tokenizer } from './tokenizer.js';

// the options and results, kept apart (decoder-options.ts), are part of this module's exports
export type { ForwardOptions, ForwardResult, GenerateOptions, GenerationStep, ModelMemoryUsage, QueriesKeys } from './decoder-options.js';
export { FORWARD_CHUNK } from './decoder-options.js';

/** A model binding (GPT2Model in wasm/bindings_model.cpp, LlamaModel in wasm/bindings_llama.cpp). */
interface WasmMemory {
  file: number;
  matrices: number;
  vectors: number;
  converted: number;
  kvCache: number;
  scratch: number;
  matrixType: string;
}
export interface WasmDecoder extends EmbindHandle {
  forward(ids: number, L: number, logits: number, attentions: number, queries: number, keys: number, lastOnly: boolean, iv: WasmInterventions, rh: WasmResidual): string;
  memory(): WasmMemory;
  prefill(ids: number, L: number, logits: number, attentions: number, queries: number, keys: number, allLogits: boolean, iv: WasmInterventions, rh: WasmResidual): string;
  step(id: number, logits: number, attentions: number, iv: WasmInterventions, rh: WasmResidual): string;
  /** Rows x [n, d] -> logits [n, V]: the final norm per row, then the LM head (one product). */
  unembed(x: number, n: number, logits: number): string;
  attributionLayout(): { posEmbed: boolean; attnBias: boolean; finalBias: boolean; count: number };
  attribute(ids: number, L: number, position: number, a: number, b: number, parts: number, total: number): string;
  /** A patching sweep (null with the message in the family's last-error string). */
  sweepBegin(clean: number, corrupted: number, T: number, correct: number, wrong: number): WasmSweep | null;
  /** Room for `positions` in the KV caches now ('' or the error). */
  reserve(positions: number): string;
  reset(): void;
  position(): number;
  setThreads(threads: number): void;
}
/** A patching sweep over a decoder (src/model/patching.hpp). */
export interface WasmSweep extends EmbindHandle {
  cleanMetric(): number;
  corruptedMetric(): number;
  run(kind: number, begin: number, end: number, out: number): string;
}
interface WasmSampler extends EmbindHandle {
  sample(logits: number, n: number, temperature: number, topK: number): number;
}
export interface ModelModule {
  /** Takes ownership of `bytes` (from modelFileAlloc), freed on error too. */
  GPT2Model: { create(config: string, bytes: number, size: number, weights: string): WasmDecoder | null };
  /** The Llama family (wasm/bindings_llama.cpp); absent from builds without it. */
  LlamaModel?: { create(config: string, bytes: number, size: number, weights: string): WasmDecoder | null };
  llamaLastError?(): string;
  /** The same loads from a file that streams in (wasm/decoder_bindings.hpp, stream-load.ts). */
  GPT2ModelLoad: DecoderLoadClass;
  LlamaModelLoad?: DecoderLoadClass;
  /** A buffer for the safetensors file, or 0 when the heap cannot grow to it. */
  modelFileAlloc(size: number): number;
  modelFileFree(bytes: number): void;
  Sampler: { create(seed: number): WasmSampler };
  modelLastError(): string;
}

export function modelModule(m: QkvModule): ModelModule {
  const mm = m as unknown as Partial<ModelModule>;
  if (!mm.GPT2Model || !mm.Sampler || !mm.modelFileAlloc) {
    throw new Error('loadModel: this build of the wasm module lacks the model bindings (wasm/bindings_model.cpp)');
  }
  return mm as ModelModule;
}

/** Resolves when `p` settles or `signal` aborts, whichever comes first. */
function untilSettledOrAborted(p: Promise<unknown>, signal: AbortSignal | undefined): Promise<unknown> {
  if (!signal) return p;
  return new Promise((resolve) => {
    const stop = () => resolve(undefined);
    signal.addEventListener('abort', stop, { once: true });
    p.finally(() => { signal.removeEventListener('abort', stop); resolve(undefined); });
  });
}

/** The sizes a model's buffers are made from, read from its config.json. */
export interface ModelDims {
  /** Layers. */
  layers: number;
  /** Query heads. */
  heads: number;
  /** Key/value heads (= heads without grouped-query attention). */
  kvHeads: number;
  /** Dimensions of each query, key and value head. */
  headDim: number;
  /** d_model: the residual stream's width (GPT-2 n_embd, Llama hidden_size). */
  d: number;
  /** Vocabulary size: the logits' last dimension. */
  vocab: number;
  /** The context: positions the model accepts. */
  positions: number;
  /** The config.json key `positions` comes from, for messages. */
  positionsKey: string;
  /**
   * Each layer's sliding window (0 = full causal attention): query i sees keys j with
   * i - window < j <= i. GPT-2: all 0; the Llama family: {@link LlamaModel.slidingWindows}.
   */
  windows: readonly number[];
}

/** The architectures loadModel knows (config.json's model_type). */
export type Architecture = 'gpt2' | 'llama' | 'mistral' | 'qwen2' | 'qwen3' | 'gemma3_text' | 'gemma3';

/** A loaded model. Holds wasm memory: call {@link DecoderModel.dispose} when done. */
export class DecoderModel<C extends object = Record<string, unknown>> {
  /** config.json as loaded (frozen), keys as Hugging Face writes them. */
  readonly config: C;
  /** Which architecture runs it (config.json's model_type). */
  readonly architecture: Architecture;
  /**
   * The model's tokenizer, or null when its folder has none (forward and generate then take
   * token ids, and generated steps carry text '').
   */
  readonly tokenizer: Tokenizer | null;
  readonly #m: QkvModule;
  readonly #mm: ModelModule;
  readonly #tracked: Tracked<WasmDecoder>;
  readonly #dims: ModelDims;
  /** The generation holding the KV cache session, if any (a newer one supersedes it). */
  readonly #generation = new GenerationSlot();
  /** True while a chunked forward holds the session. */
  #chunking = false;
  /** Settles when the last chunked forward queued so far ends: the next one waits for it. */
  #chunkQueue: Promise<void> = Promise.resolve();

  /** @internal use {@link loadModel} */
  constructor(m: QkvModule, handle: WasmDecoder, config: C, tokenizer: Tokenizer | null, dims: ModelDims, architecture: Architecture) {
    this.#m = m;
    this.#mm = modelModule(m);
    this.#tracked = track(this, handle);
    this.config = config;
    this.tokenizer = tokenizer;
    this.#dims = dims;
    this.architecture = architecture;
  }

  /** True after {@link DecoderModel.dispose} (or the top-level dispose()). */
  get disposed(): boolean {
    return this.#tracked.released;
  }

  #handle(fn: string): WasmDecoder {
    if (this.#tracked.released) throw new Error(`${fn}: the model has been disposed`);
    const h = this.#tracked.handle;
    h.setThreads(callThreads());
    return h;
  }

  #ids(fn: string, ids: unknown, room = 0, what = 'ids'): Int32Array {
    const { vocab: V, positions: P, positionsKey } = this.#dims;
    if (!isNumberArray(ids)) {
      throw new TypeError(`${fn}: ${what} must be ${what === 'ids' ? '' : 'a string or '}an array of token ids, got ${describe(ids)}`);
    }
    const a = ids;
    if (a.length === 0) throw new RangeError(`${fn}: ${what} is empty (need at least 1 token)`);
    if (a.length + room > P) {
      throw new RangeError(
        room
          ? `${fn}: the prompt (${a.length} tokens) + maxNewTokens (${room}) = ${a.length + room} exceed the context of ${positionsKey} = ${P}`
          : `${fn}: ids has ${a.length} tokens, more than the model's context (${positionsKey} = ${P})`,
      );
    }
    return intsBelow(fn, what, a, V, 'a token id');
  }

  /**
   * Runs the whole sequence: logits [1, L, vocab] (logits: 'last': [1, 1, vocab]); with
   * outputAttentions, one [1, n_head, L, L] Tensor per layer; with outputQueriesKeys, per
   * layer the heads' queries and keys, each [1, n_head, L, head_dim]. One wasm call without a
   * cache; with `signal`, `onProgress` or `chunkSize`, chunk by chunk through the KV-cache
   * session, with progress and cancellation (the same numbers: see {@link ForwardOptions.chunkSize}).
   */
  async forward(ids: ArrayLike<number>, options: ForwardOptions = {}): Promise<ForwardResult> {
    const fn = 'model.forward';
    const opts = checkOptions(fn, options, ['outputAttentions', 'outputQueriesKeys', 'logits', 'signal', 'onProgress', 'chunkSize',
      'headMask', 'knockout', 'outputHeadOutputs', 'patchHeadOutputs', 'outputHiddenStates', 'outputActivations', 'patchActivations', 'steer']);
    const want = optBool(fn, opts, 'outputAttentions', false);
    const wantQK = optBool(fn, opts, 'outputQueriesKeys', false);
    const which = opts.logits ?? 'all';
    if (which !== 'all' && which !== 'last') {
      throw new TypeError(`${fn}: options.logits must be 'all' or 'last', got ${describe(opts.logits)}`);
    }
    const signal = optSignal(fn, opts);
    const onProgress = optFunction<(done: number, total: number) => void>(fn, opts, 'onProgress');
    const chunkSize = opts.chunkSize ?? FORWARD_CHUNK;
    if (typeof chunkSize !== 'number' || !Number.isSafeInteger(chunkSize) || chunkSize < 1) {
      throw new RangeError(`${fn}: options.chunkSize must be an integer >= 1 (tokens per chunk), got ${describe(opts.chunkSize)}`);
    }
    const wantHO = optBool(fn, opts, 'outputHeadOutputs', false);
    const h = this.#handle(fn);
    const x = this.#ids(fn, ids);
    const L = x.length;
    const { vocab: V, heads: H, kvHeads: Hkv, layers: NL, headDim: D } = this.#dims;
    const names = { headMask: 'headMask', knockout: 'knockout', patch: 'patchHeadOutputs' };
    const plan = stackPlan(fn, opts, names, wantHO, { layers: NL, heads: H, valueDim: D }, L, L);
    const rplan = residualPlan(fn, opts, optBool(fn, opts, 'outputHiddenStates', false), NL, this.#dims.d, L);
    signal?.throwIfAborted();
    const scope = new HeapScope(this.#m, fn);
    try {
      const iv = toWasm(scope, plan);
      const rh = residualToWasm(scope, rplan);
      if (signal || onProgress || opts.chunkSize !== undefined) {
        const result = await this.#forwardInChunks(fn, x, { outputAttentions: want, outputQueriesKeys: wantQK, logits: which, chunkSize, signal, onProgress, interventions: iv.arg, residual: rh });
        if (plan && iv.outputs) result.headOutputs = readHeadOutputs(scope, iv.outputs, plan);
        if (rplan) Object.assign(result, readResidual(scope, rh, rplan));
        return result;
      }
      const pIds = scope.i32(x, `ids [${L}]`);
      const rows = which === 'last' ? 1 : L;
      const pLogits = scope.alloc(4 * rows * V, `logits ${fmtShape([1, rows, V])}`);
      const pAtt = want ? scope.alloc(4 * NL * H * L * L, `attentions ${fmtShape([NL, 1, H, L, L])}`) : 0;
      const pQ = wantQK ? scope.alloc(4 * NL * H * L * D, `queries ${fmtShape([NL, 1, H, L, D])}`) : 0;
      const pK = wantQK ? scope.alloc(4 * NL * Hkv * L * D, `keys ${fmtShape([NL, 1, Hkv, L, D])}`) : 0;
      const err = h.forward(pIds, L, pLogits, pAtt, pQ, pK, which === 'last', iv.arg, rh);
      if (err) throw wasmError(fn, err);
      const result: ForwardResult = { logits: new Tensor(scope.read(pLogits, rows * V), [1, rows, V]) };
      if (plan && iv.outputs) result.headOutputs = readHeadOutputs(scope, iv.outputs, plan);
      if (rplan) Object.assign(result, readResidual(scope, rh, rplan));
      if (want) {
        const per = H * L * L;
        result.attentions = [];
        for (let l = 0; l < NL; l++) result.attentions.push(new Tensor(scope.read(pAtt + 4 * l * per, per), [1, H, L, L]));
      }
      if (wantQK) {
        const perQ = H * L * D;
        const perK = Hkv * L * D;
        result.queriesKeys = [];
        for (let l = 0; l < NL; l++) {
          result.queriesKeys.push({
            queries: new Tensor(scope.read(pQ + 4 * l * perQ, perQ), [1, H, L, D]),
            keys: new Tensor(scope.read(pK + 4 * l * perK, perK), [1, Hkv, L, D]),
          });
        }
      }
      return result;
    } finally {
      scope.free();
    }
  }

  /** forward() through the session a chunk at a time, once earlier chunked forwards have ended. */
  async #forwardInChunks(fn: string, x: Int32Array, o: ChunkedForward): Promise<ForwardResult> {
    // the next chunked forward waits for this one and every earlier one (this one may leave
    // the queue early, when aborted while it waits)
    const earlier = this.#chunkQueue;
    let done!: () => void;
    const mine = new Promise<void>((resolve) => { done = resolve; });
    this.#chunkQueue = Promise.all([earlier, mine]).then(() => {});
    let owner = false;
    try {
      await untilSettledOrAborted(earlier, o.signal);
      o.signal?.throwIfAborted();
      this.#handle(fn);
      // the same KV cache as a generation's: this forward ends one that is suspended at a step
      this.#generation.supersede();
      this.#chunking = owner = true;
      const handle = () => {
        if (this.#tracked.released) throw new Error(`${fn}: the model was disposed during the forward pass`);
        return this.#handle(fn);
      };
      return await forwardInChunks(this.#m, fn, handle, x, this.#dims, o);
    } finally {
      // only the call that holds the session resets it (one that left the queue early never held it)
      if (owner) {
        if (!this.#tracked.released) this.#tracked.handle.reset();
        this.#chunking = false;
      }
      done();
    }
  }

  /**
   * Generates tokens after `prompt` (text, tokenized with model.tokenizer, or token ids), one
   * step per token through the KV cache: prefill once, then each token attends to the cached
   * keys and values (nothing is recomputed). An async iterator of {@link GenerationStep}s;
   * breaking out of the loop stops it. One generation per model at a time: a newer generate()
   * (or a forward with signal, onProgress or chunkSize, which runs through the same KV cache)
   * supersedes a generation suspended at a step, which frees its buffers; the superseded
   * iterator's next next() returns `{ done: true }`. A dropped iterator so never locks the model.
   *
   * Prompts that do not fit: prompt + maxNewTokens past the context is an Error (no rolling of the cache).
   */
  async *generate(prompt: string | ArrayLike<number>, options: GenerateOptions = {}): AsyncGenerator<GenerationStep, void, undefined> {
    const fn = 'model.generate';
    const opts = checkOptions(fn, options, ['maxNewTokens', 'temperature', 'topK', 'seed', 'outputAttentions', 'headMask', 'steer']);
    const maxNew = optInt(fn, opts, 'maxNewTokens', 64, 1, this.#dims.positions);
    const steer = parseSteer(fn, opts.steer, this.#dims.layers, this.#dims.d, null);
    const maskPlan = stackPlan(fn, opts, { headMask: 'headMask' }, false, { layers: this.#dims.layers, heads: this.#dims.heads, valueDim: this.#dims.headDim }, 1, 1);
    const temperature = opts.temperature === undefined ? 1 : opts.temperature;
    if (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature < 0) {
      throw new RangeError(`${fn}: options.temperature must be a finite number >= 0 (0 = greedy), got ${describe(opts.temperature)}`);
    }
    const topK = optInt(fn, opts, 'topK', 0, 0, this.#dims.vocab);
    const seed = optInt(fn, opts, 'seed', Math.floor(Math.random() * 2 ** 32), 0, Number.MAX_SAFE_INTEGER);
    const want = optBool(fn, opts, 'outputAttentions', false);
    const tokenizer = this.tokenizer;
    if (typeof prompt === 'string' && !tokenizer) {
      throw new TypeError(`${fn}: this model has no tokenizer (its folder has no tokenizer files): give the prompt as token ids`);
    }
    const ids = typeof prompt === 'string' ? tokenizer!.encode(prompt) : prompt;
    const x = this.#ids(fn, ids, maxNew, 'prompt');
    const h = this.#handle(fn);
    if (this.#chunking) {
      throw new Error(`${fn}: a forward pass with signal, onProgress or chunkSize is running on this model (through the same KV cache); await it (or abort it) first`);
    }
    const L = x.length;
    const { vocab: V, heads: H, layers: NL } = this.#dims;
    const sampler = this.#mm.Sampler.create(seed);
    const scope = new HeapScope(this.#m, fn);
    const freeBuffers = once(() => {
      scope.free();
      sampler.delete();
    });
    const ticket = this.#generation.begin(freeBuffers);  // supersedes (and frees) the one before
    const decoder = new TextDecoder('utf-8');
    try {
      const pIds = scope.i32(x, `ids [${L}]`);
      const pLogits = scope.alloc(4 * V, `logits [${V}]`);
      const iv = toWasm(scope, maskPlan).arg; // a head mask alone: the same for every step
      // steering at every row: the same for every step
      const rh = steer ? residualToWasm(scope, { layers: NL, d: this.#dims.d, T: 0, hidden: false, record: [], finalScale: false, patch: null, steer }) : NO_RESIDUAL;
      // prefill needs [NL, H, L, L]; each later step [NL, H, L + k]: the largest is the prefill's
      const attFloats = want ? NL * H * Math.max(L * L, L + maxNew) : 0;
      const pAtt = want ? scope.alloc(4 * attFloats, `attentions (${attFloats} floats)`) : 0;
      h.reset();
      let err = h.reserve(L + maxNew); // the caches' size for the whole generation, allocated once
      if (err) throw wasmError(fn, err);
      err = h.prefill(pIds, L, pLogits, pAtt, 0, 0, false, iv, rh);
      if (err) throw wasmError(fn, err);
      // rows[l] = [H, Lk] from the buffer: the last query row of each layer and head
      const rows = (Lq: number, Lk: number): Tensor[] => {
        const all = scope.read(pAtt, NL * H * Lq * Lk);
        const out: Tensor[] = [];
        for (let l = 0; l < NL; l++) {
          const r = new Float32Array(H * Lk);
          for (let hh = 0; hh < H; hh++) {
            const src = ((l * H + hh) * Lq + (Lq - 1)) * Lk;
            r.set(all.subarray(src, src + Lk), hh * Lk);
          }
          out.push(new Tensor(r, [H, Lk]));
        }
        return out;
      };
      let attentions = want ? rows(L, L) : undefined;
      for (let k = 0; k < maxNew; k++) {
        if (this.#tracked.released) throw new Error(`${fn}: the model was disposed during generation`);
        const token = sampler.sample(pLogits, V, temperature, topK);
        if (token < 0) throw wasmError(fn, this.#mm.modelLastError());
        const last = k === maxNew - 1;
        const text = tokenizer ? decoder.decode(tokenizer.decodeBytes([token]), { stream: !last }) : '';
        const step: GenerationStep = { token, text, index: k, position: L + k };
        if (attentions) step.attentions = attentions;
        yield step;
        if (last || !this.#generation.holds(ticket)) break;  // done, or superseded (buffers freed)
        if (this.#tracked.released) throw new Error(`${fn}: the model was disposed during generation`);
        err = this.#handle(fn).step(token, pLogits, pAtt, iv, rh);
        if (err) throw wasmError(fn, err);
        if (want) attentions = rows(1, L + k + 1);
      }
    } finally {
      this.#generation.end(ticket);
      freeBuffers();
    }
  }

  /**
   * @internal The binding (threads set), the module and the sizes, for the measures over the
   * residual stream (web/lib/interpret/lens.ts, attribution.ts, patching.ts). Throws once disposed.
   */
  _wasm(fn: string): { m: QkvModule; handle: WasmDecoder; dims: Readonly<ModelDims>; lastError: () => string } {
    const handle = this.#handle(fn);
    const lastError = () => (this.architecture === 'gpt2' ? this.#mm.modelLastError() : this.#mm.llamaLastError?.() ?? '');
    return { m: this.#m, handle, dims: this.#dims, lastError };
  }

  /** Where the model's bytes are: its weights, caches and buffers, and the wasm heap they are in. */
  memoryUsage(): ModelMemoryUsage {
    if (this.#tracked.released) throw new Error('model.memoryUsage: the model has been disposed');
    const w = this.#tracked.handle.memory();
    return {
      wasmHeap: heapU8(this.#m).byteLength,
      weights: w.matrices,
      dtype: w.matrixType,
      file: w.file,
      converted: w.converted,
      vectors: w.vectors,
      kvCache: w.kvCache,
      scratch: w.scratch,
    };
  }

  /** Frees the model's wasm memory (idempotent); using it afterwards is an Error. */
  dispose(): void {
    release(this.#tracked);
  }

  /**
   * The model's shape in one place for either family: layers, query heads, key/value heads
   * (query head h reads key/value head floor(h / (heads / kvHeads))), head_dim, vocab,
   * context and each layer's sliding window.
   */
  get dims(): Readonly<ModelDims> {
    return this.#dims;
  }

  /** A one-line summary, e.g. `GPT2Model(gpt2, layers 12, heads 12, head_dim 64, n_positions 1024, vocab 50257)` (`, disposed` once disposed). */
  toString(): string {
    const d = this.#dims;
    const kv = d.kvHeads === d.heads ? '' : `, kv_heads ${d.kvHeads}`;
    return `${this.constructor.name}(${this.architecture}, layers ${d.layers}, heads ${d.heads}${kv}, head_dim ${d.headDim}, ${d.positionsKey} ${d.positions}, vocab ${d.vocab}${this.disposed ? ', disposed' : ''})`;
  }
}
