/**
 * GPT-2 in the browser and in Node: `loadModel(source)` reads a Hugging Face GPT-2-layout
 * checkpoint (config.json + model.safetensors [+ vocab.json + merges.txt]) into the wasm
 * module (src/model/, wasm/bindings_model.cpp), and the returned model runs `forward` (logits
 * and every head's attention) and `generate` (KV-cache decoding, one token per step, as an
 * async iterator).
 */
import { describe, fmtShape } from '../errors.js';
import { release, track, type Tracked } from '../lifetime.js';
import { Tensor } from '../tensor.js';
import {
  HeapScope, callThreads, heapU8, loadModule, wasmError,
  type EmbindHandle, type QkvModule,
} from '../wasm.js';
import { BpeTokenizer, ByteTokenizer, type Tokenizer } from './tokenizer.js';

/** config.json of a GPT-2-family model (Hugging Face keys); other keys are kept as they are. */
export interface GPT2Config {
  n_layer: number;
  n_head: number;
  n_embd: number;
  n_positions: number;
  vocab_size: number;
  n_inner?: number | null;
  layer_norm_epsilon?: number;
  [key: string]: unknown;
}

/** A model given as data rather than a location. */
export interface ModelFiles {
  /** config.json: the parsed object or its text. */
  config: GPT2Config | string;
  /** model.safetensors' bytes. */
  weights: ArrayBuffer | ArrayBufferView;
  /** vocab.json (object or text), with merges: a GPT-2 BPE tokenizer. Without: byte-level (vocab 256). */
  vocab?: Record<string, number> | string;
  /** merges.txt's text. */
  merges?: string;
}

/** Where a model is: a folder (URL, or a path in Node) holding its files, or the files themselves. */
export type ModelSource = string | URL | ModelFiles;

export interface ForwardOptions {
  /** Also return every layer's attention probabilities (default false). */
  outputAttentions?: boolean;
  /**
   * Also return every layer's per-head query and key vectors (default false): exactly what
   * attention consumes, the queries before the 1/sqrt(head_dim) scaling, so
   * softmax(q k^T / sqrt(head_dim) + causal mask) reproduces `attentions`.
   */
  outputQueriesKeys?: boolean;
}

/** One layer's per-head queries and keys (see {@link ForwardOptions.outputQueriesKeys}). */
export interface QueriesKeys {
  /** [1, n_head, L, head_dim], before the 1/sqrt(head_dim) scaling. */
  queries: Tensor;
  /** [1, n_head, L, head_dim] */
  keys: Tensor;
}

export interface ForwardResult {
  /** [1, L, vocab_size] */
  logits: Tensor;
  /** One per layer, each [1, n_head, L, L] (softmax probabilities, causal), like HF output_attentions. */
  attentions?: Tensor[];
  /** With outputQueriesKeys: one entry per layer, each { queries, keys } of shape [1, n_head, L, head_dim]. */
  queriesKeys?: QueriesKeys[];
}

export interface GenerateOptions {
  /** Tokens to generate (default 64). prompt + maxNewTokens must fit in n_positions. */
  maxNewTokens?: number;
  /** Softmax temperature (default 1); 0 = greedy (argmax). */
  temperature?: number;
  /** Sample among the k most likely tokens only (default 0 = all). */
  topK?: number;
  /** Seed of the sampler (an integer in [0, 2^53)); the same seed gives the same tokens. Default: random. */
  seed?: number;
  /** Give each step the attention rows that produced its token (default false). */
  outputAttentions?: boolean;
}

/** One generated token. */
export interface GenerationStep {
  /** The token id. */
  token: number;
  /**
   * The text this token completes: UTF-8 is decoded as a stream, so a character split over
   * several tokens appears with the token that completes it ('' before).
   */
  text: string;
  /** 0 for the first generated token. */
  index: number;
  /** The position the token will occupy (prompt length + index). */
  position: number;
  /**
   * With outputAttentions: one Tensor per layer, [n_head, position], the attention of the
   * query that predicted this token (the last prompt token for the first step, then each
   * generated token in turn) over every position up to and including itself.
   */
  attentions?: Tensor[];
}

/** The GPT2Model binding (wasm/bindings_model.cpp). */
interface WasmGPT2 extends EmbindHandle {
  forward(ids: number, L: number, logits: number, attentions: number, queries: number, keys: number): string;
  prefill(ids: number, L: number, logits: number, attentions: number): string;
  step(id: number, logits: number, attentions: number): string;
  reset(): void;
  position(): number;
  setThreads(threads: number): void;
}
interface WasmSampler extends EmbindHandle {
  sample(logits: number, n: number, temperature: number, topK: number): number;
}
interface ModelModule {
  GPT2Model: { create(config: string, bytes: number, size: number): WasmGPT2 | null };
  Sampler: { create(seed: number): WasmSampler };
  modelLastError(): string;
}

function modelModule(m: QkvModule): ModelModule {
  const mm = m as unknown as Partial<ModelModule>;
  if (!mm.GPT2Model || !mm.Sampler) {
    throw new Error('loadModel: this build of the wasm module lacks the model bindings (wasm/bindings_model.cpp)');
  }
  return mm as ModelModule;
}

const isNode =
  typeof process === 'object' && typeof process.versions === 'object' && typeof process.versions.node === 'string' &&
  typeof (globalThis as { window?: unknown }).window === 'undefined';

/** Imports a Node builtin without bundlers trying to resolve it. */
const nodeImport = (specifier: string): Promise<any> => import(/* @vite-ignore */ /* webpackIgnore: true */ specifier);

// ---- reading the files ---------------------------------------------------------------

interface RawFiles {
  configText: string;
  weights: Uint8Array;
  vocabText?: string;
  merges?: string;
  where: string;
}

/** Reads `name` in `base` (a folder URL or path); null when absent and optional. */
type Reader = (name: string, optional: boolean) => Promise<Uint8Array | null>;

async function nodeReader(dir: string): Promise<Reader> {
  const [{ readFile }, path] = await Promise.all([nodeImport('node:fs/promises'), nodeImport('node:path')]);
  return async (name, optional) => {
    const file = path.join(dir, name);
    try {
      const b: Uint8Array = await readFile(file);
      return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    } catch (e) {
      if (optional && (e as { code?: string }).code === 'ENOENT') return null;
      throw new Error(`loadModel: cannot read ${file}: ${(e as Error).message}`);
    }
  };
}

function fetchReader(base: URL): Reader {
  return async (name, optional) => {
    const url = new URL(name, base);
    let res: Response;
    try {
      res = await fetch(url);
    } catch (e) {
      throw new Error(`loadModel: cannot fetch ${url.href}: ${(e as Error).message}`);
    }
    if (!res.ok) {
      if (optional && res.status === 404) return null;
      throw new Error(`loadModel: fetching ${url.href} failed: HTTP ${res.status} ${res.statusText}`);
    }
    return new Uint8Array(await res.arrayBuffer());
  };
}

function folderUrl(s: string | URL): URL {
  const href = typeof s === 'string' ? s : s.href;
  const withSlash = href.endsWith('/') ? href : href + '/';
  const base = (globalThis as { location?: { href: string } }).location?.href;
  return base ? new URL(withSlash, base) : new URL(withSlash);
}

async function readFolder(source: string | URL): Promise<RawFiles> {
  let read: Reader;
  let where: string;
  const isFileUrl = source instanceof URL ? source.protocol === 'file:' : /^file:/i.test(source);
  const isHttp = source instanceof URL ? /^https?:$/.test(source.protocol) : /^https?:\/\//i.test(source);
  if (isNode && !isHttp) {
    const { fileURLToPath } = await nodeImport('node:url');
    const dir = isFileUrl ? fileURLToPath(source) : String(source);
    read = await nodeReader(dir);
    where = dir;
  } else {
    const base = folderUrl(source);
    read = fetchReader(base);
    where = base.href;
  }
  const text = (b: Uint8Array) => new TextDecoder('utf-8').decode(b);
  const configText = text((await read('config.json', false))!);
  const config = parseConfig(configText, `${where}/config.json`);
  const weights = (await read('model.safetensors', false))!;
  // A byte-level model (the tiny one) needs no tokenizer files: don't ask for them.
  const byteLevel = config.vocab_size === 256 && !(config.qkv && (config.qkv as { tokenizer?: string }).tokenizer === 'bpe');
  let vocabText: string | undefined;
  let merges: string | undefined;
  if (!byteLevel) {
    const [v, m] = await Promise.all([read('vocab.json', true), read('merges.txt', true)]);
    if (v) vocabText = text(v);
    if (m) merges = text(m);
  }
  return { configText, weights, vocabText, merges, where };
}

function parseConfig(text: string, where: string): GPT2Config {
  let c: unknown;
  try {
    c = JSON.parse(text);
  } catch (e) {
    throw new SyntaxError(`loadModel: ${where} is not valid JSON: ${(e as Error).message}`);
  }
  if (c === null || typeof c !== 'object' || Array.isArray(c)) {
    throw new TypeError(`loadModel: ${where} must hold a JSON object, got ${describe(c)}`);
  }
  return c as GPT2Config;
}

function filesFromObject(files: ModelFiles): RawFiles {
  const keys = Object.keys(files);
  for (const k of keys) {
    if (!['config', 'weights', 'vocab', 'merges'].includes(k)) {
      throw new TypeError(`loadModel: unknown key '${k}' in source (expected config, weights, vocab?, merges?)`);
    }
  }
  let configText: string;
  if (typeof files.config === 'string') configText = files.config;
  else if (files.config && typeof files.config === 'object') configText = JSON.stringify(files.config);
  else throw new TypeError(`loadModel: source.config must be the config.json object or text, got ${describe(files.config)}`);
  parseConfig(configText, 'source.config'); // a damaged config.json is reported before anything else
  let weights: Uint8Array;
  if (files.weights instanceof ArrayBuffer) weights = new Uint8Array(files.weights);
  else if (ArrayBuffer.isView(files.weights)) {
    weights = new Uint8Array(files.weights.buffer, files.weights.byteOffset, files.weights.byteLength);
  } else {
    throw new TypeError(`loadModel: source.weights must be an ArrayBuffer (model.safetensors' bytes), got ${describe(files.weights)}`);
  }
  let vocabText: string | undefined;
  if (files.vocab !== undefined) {
    if (typeof files.vocab === 'string') vocabText = files.vocab;
    else if (files.vocab && typeof files.vocab === 'object') vocabText = JSON.stringify(files.vocab);
    else throw new TypeError(`loadModel: source.vocab must be vocab.json's object or text, got ${describe(files.vocab)}`);
  }
  if (files.merges !== undefined && typeof files.merges !== 'string') {
    throw new TypeError(`loadModel: source.merges must be merges.txt's text, got ${describe(files.merges)}`);
  }
  return { configText, weights, vocabText, merges: files.merges, where: 'source' };
}

function makeTokenizer(config: GPT2Config, raw: RawFiles): Tokenizer {
  const hasVocab = raw.vocabText !== undefined;
  const hasMerges = raw.merges !== undefined;
  if (hasVocab !== hasMerges) {
    throw new Error(`loadModel: ${raw.where}: a BPE tokenizer needs both vocab.json and merges.txt; only ${hasVocab ? 'vocab.json' : 'merges.txt'} was given`);
  }
  if (hasVocab) {
    let vocab: Record<string, number>;
    try {
      vocab = JSON.parse(raw.vocabText!);
    } catch (e) {
      throw new SyntaxError(`loadModel: ${raw.where}: vocab.json is not valid JSON: ${(e as Error).message}`);
    }
    const tok = new BpeTokenizer(vocab, raw.merges!);
    if (tok.vocabSize > config.vocab_size) {
      throw new RangeError(`loadModel: vocab.json has ${tok.vocabSize} tokens, more than the model's vocab_size ${config.vocab_size}`);
    }
    return tok;
  }
  if (config.vocab_size !== 256) {
    throw new Error(
      `loadModel: ${raw.where}: vocab_size is ${config.vocab_size}, so the model needs its tokenizer files ` +
        '(vocab.json and merges.txt); only a vocab of 256 is byte-level',
    );
  }
  return new ByteTokenizer();
}

// ---- the model ------------------------------------------------------------------------

/**
 * Loads a GPT-2-family model.
 *
 * `source`: a folder holding config.json, model.safetensors and, for a BPE model, vocab.json
 * and merges.txt — as a URL (fetched; relative URLs resolve against the page) or, in Node,
 * a file path or file: URL — or the files themselves: `{ config, weights, vocab?, merges? }`.
 * Every tensor is checked against the file and the config; damage is an Error naming the
 * tensor and the numbers.
 */
export async function loadModel(source: ModelSource): Promise<GPT2Model> {
  let raw: RawFiles;
  if (typeof source === 'string' || source instanceof URL) {
    if (source === '') throw new TypeError('loadModel: source is an empty string');
    raw = await readFolder(source);
  } else if (source && typeof source === 'object') {
    raw = filesFromObject(source);
  } else {
    throw new TypeError(`loadModel: source must be a folder URL/path or { config, weights, vocab?, merges? }, got ${describe(source)}`);
  }
  const config = parseConfig(raw.configText, raw.where === 'source' ? 'source.config' : `${raw.where}/config.json`);
  const tokenizer = makeTokenizer(config, raw);

  const m = await loadModule();
  const mm = modelModule(m);
  const scope = new HeapScope(m, 'loadModel');
  let handle: WasmGPT2 | null;
  try {
    const ptr = scope.alloc(raw.weights.byteLength, `model.safetensors (${raw.weights.byteLength} bytes)`);
    heapU8(m).set(raw.weights, ptr);
    handle = mm.GPT2Model.create(raw.configText, ptr, raw.weights.byteLength);
  } finally {
    scope.free();
  }
  if (!handle) throw wasmError('loadModel', mm.modelLastError());
  return new GPT2Model(m, handle, Object.freeze({ ...config }) as GPT2Config, tokenizer);
}

/** A loaded model. Holds wasm memory: call {@link GPT2Model.dispose} when done. */
export class GPT2Model {
  /** config.json as loaded (frozen). */
  readonly config: GPT2Config;
  /** The model's tokenizer: byte-level (vocab 256) or GPT-2 BPE. */
  readonly tokenizer: Tokenizer;
  readonly #m: QkvModule;
  readonly #mm: ModelModule;
  readonly #tracked: Tracked<WasmGPT2>;
  #generating = false;

  /** @internal use {@link loadModel} */
  constructor(m: QkvModule, handle: WasmGPT2, config: GPT2Config, tokenizer: Tokenizer) {
    this.#m = m;
    this.#mm = modelModule(m);
    this.#tracked = track(this, handle);
    this.config = config;
    this.tokenizer = tokenizer;
  }

  /** True after {@link GPT2Model.dispose} (or the top-level dispose()). */
  get disposed(): boolean {
    return this.#tracked.released;
  }

  #handle(fn: string): WasmGPT2 {
    if (this.#tracked.released) throw new Error(`${fn}: the model has been disposed`);
    const h = this.#tracked.handle;
    h.setThreads(callThreads());
    return h;
  }

  #ids(fn: string, ids: unknown, room = 0, what = 'ids'): Int32Array {
    const V = this.config.vocab_size;
    const P = this.config.n_positions;
    if (!Array.isArray(ids) && !(ArrayBuffer.isView(ids) && !(ids instanceof DataView))) {
      throw new TypeError(`${fn}: ${what} must be ${what === 'ids' ? '' : 'a string or '}an array of token ids, got ${describe(ids)}`);
    }
    const a = ids as ArrayLike<number>;
    if (a.length === 0) throw new RangeError(`${fn}: ${what} is empty (need at least 1 token)`);
    if (a.length + room > P) {
      throw new RangeError(
        room
          ? `${fn}: the prompt (${a.length} tokens) + maxNewTokens (${room}) = ${a.length + room} exceed the context of n_positions = ${P}`
          : `${fn}: ids has ${a.length} tokens, more than the model's context (n_positions = ${P})`,
      );
    }
    const out = new Int32Array(a.length);
    for (let i = 0; i < a.length; i++) {
      const id = Number(a[i]);
      if (!Number.isInteger(id) || id < 0 || id >= V) {
        throw new RangeError(`${fn}: ${what}[${i}] = ${String(a[i])} is not a token id in [0, ${V})`);
      }
      out[i] = id;
    }
    return out;
  }

  /**
   * Runs the whole sequence (no cache): logits [1, L, vocab]; with outputAttentions, one
   * [1, n_head, L, L] Tensor per layer; with outputQueriesKeys, per layer the heads' queries
   * and keys, each [1, n_head, L, head_dim].
   */
  async forward(ids: ArrayLike<number>, options: ForwardOptions = {}): Promise<ForwardResult> {
    const fn = 'model.forward';
    const opts = checkOpts(fn, options, ['outputAttentions', 'outputQueriesKeys']);
    const want = optBoolean(fn, opts, 'outputAttentions', false);
    const wantQK = optBoolean(fn, opts, 'outputQueriesKeys', false);
    const h = this.#handle(fn);
    const x = this.#ids(fn, ids);
    const L = x.length;
    const { vocab_size: V, n_head: H, n_layer: NL } = this.config;
    const D = this.config.n_embd / H;
    const scope = new HeapScope(this.#m, fn);
    try {
      const pIds = scope.alloc(4 * L, `ids [${L}]`);
      new Int32Array(heapU8(this.#m).buffer, pIds, L).set(x);
      const pLogits = scope.alloc(4 * L * V, `logits ${fmtShape([1, L, V])}`);
      const pAtt = want ? scope.alloc(4 * NL * H * L * L, `attentions ${fmtShape([NL, 1, H, L, L])}`) : 0;
      const pQ = wantQK ? scope.alloc(4 * NL * H * L * D, `queries ${fmtShape([NL, 1, H, L, D])}`) : 0;
      const pK = wantQK ? scope.alloc(4 * NL * H * L * D, `keys ${fmtShape([NL, 1, H, L, D])}`) : 0;
      const err = h.forward(pIds, L, pLogits, pAtt, pQ, pK);
      if (err) throw wasmError(fn, err);
      const result: ForwardResult = { logits: new Tensor(scope.read(pLogits, L * V), [1, L, V]) };
      if (want) {
        const per = H * L * L;
        result.attentions = [];
        for (let l = 0; l < NL; l++) result.attentions.push(new Tensor(scope.read(pAtt + 4 * l * per, per), [1, H, L, L]));
      }
      if (wantQK) {
        const per = H * L * D;
        result.queriesKeys = [];
        for (let l = 0; l < NL; l++) {
          result.queriesKeys.push({
            queries: new Tensor(scope.read(pQ + 4 * l * per, per), [1, H, L, D]),
            keys: new Tensor(scope.read(pK + 4 * l * per, per), [1, H, L, D]),
          });
        }
      }
      return result;
    } finally {
      scope.free();
    }
  }

  /**
   * Generates tokens after `prompt` (text, tokenized with model.tokenizer, or token ids), one
   * step per token through the KV cache: prefill once, then each token attends to the cached
   * keys and values (nothing is recomputed). An async iterator of {@link GenerationStep}s;
   * breaking out of the loop stops it. One generation per model at a time.
   *
   * Prompts that do not fit: prompt + maxNewTokens > n_positions is an Error (no sliding window).
   */
  async *generate(prompt: string | ArrayLike<number>, options: GenerateOptions = {}): AsyncGenerator<GenerationStep, void, undefined> {
    const fn = 'model.generate';
    const opts = checkOpts(fn, options, ['maxNewTokens', 'temperature', 'topK', 'seed', 'outputAttentions']);
    const maxNew = optInteger(fn, opts, 'maxNewTokens', 64, 1, this.config.n_positions);
    const temperature = opts.temperature === undefined ? 1 : opts.temperature;
    if (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature < 0) {
      throw new RangeError(`${fn}: options.temperature must be a finite number >= 0 (0 = greedy), got ${describe(opts.temperature)}`);
    }
    const topK = optInteger(fn, opts, 'topK', 0, 0, this.config.vocab_size);
    const seed = optInteger(fn, opts, 'seed', Math.floor(Math.random() * 2 ** 32), 0, Number.MAX_SAFE_INTEGER);
    const want = optBoolean(fn, opts, 'outputAttentions', false);
    const ids = typeof prompt === 'string' ? this.tokenizer.encode(prompt) : prompt;
    const x = this.#ids(fn, ids, maxNew, 'prompt');
    const h = this.#handle(fn);
    if (this.#generating) {
      throw new Error(`${fn}: another generation is running on this model; finish it (or break out of its loop) first`);
    }
    this.#generating = true;
    const L = x.length;
    const { vocab_size: V, n_head: H, n_layer: NL } = this.config;
    const sampler = this.#mm.Sampler.create(seed);
    const scope = new HeapScope(this.#m, fn);
    const decoder = new TextDecoder('utf-8');
    try {
      const pIds = scope.alloc(4 * L, `ids [${L}]`);
      new Int32Array(heapU8(this.#m).buffer, pIds, L).set(x);
      const pLogits = scope.alloc(4 * V, `logits [${V}]`);
      // prefill needs [NL, H, L, L]; each later step [NL, H, L + k]: the largest is the prefill's
      const attFloats = want ? NL * H * Math.max(L * L, L + maxNew) : 0;
      const pAtt = want ? scope.alloc(4 * attFloats, `attentions (${attFloats} floats)`) : 0;
      h.reset();
      let err = h.prefill(pIds, L, pLogits, pAtt);
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
        const text = decoder.decode(this.tokenizer.decodeBytes([token]), { stream: !last });
        const step: GenerationStep = { token, text, index: k, position: L + k };
        if (attentions) step.attentions = attentions;
        yield step;
        if (last) break;
        if (this.#tracked.released) throw new Error(`${fn}: the model was disposed during generation`);
        err = this.#handle(fn).step(token, pLogits, pAtt);
        if (err) throw wasmError(fn, err);
        if (want) attentions = rows(1, L + k + 1);
      }
    } finally {
      scope.free();
      sampler.delete();
      this.#generating = false;
    }
  }

  /** Frees the model's wasm memory (idempotent); using it afterwards is an Error. */
  dispose(): void {
    release(this.#tracked);
  }

  toString(): string {
    const c = this.config;
    return `GPT2Model(n_layer ${c.n_layer}, n_head ${c.n_head}, n_embd ${c.n_embd}, n_positions ${c.n_positions}, vocab ${c.vocab_size}${this.disposed ? ', disposed' : ''})`;
  }
}

// ---- option checks ---------------------------------------------------------------------

function checkOpts(fn: string, options: unknown, keys: readonly string[]): Record<string, any> {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`${fn}: options must be an object, got ${describe(options)}`);
  }
  for (const k of Object.keys(options)) {
    if (!keys.includes(k)) throw new TypeError(`${fn}: unknown option '${k}' (expected ${keys.join(', ')})`);
  }
  return options as Record<string, any>;
}

function optBoolean(fn: string, o: Record<string, any>, key: string, fallback: boolean): boolean {
  const v = o[key];
  if (v === undefined) return fallback;
  if (typeof v !== 'boolean') throw new TypeError(`${fn}: options.${key} must be a boolean, got ${describe(v)}`);
  return v;
}

function optInteger(fn: string, o: Record<string, any>, key: string, fallback: number, lo: number, hi: number): number {
  const v = o[key];
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < lo || v > hi) {
    throw new RangeError(`${fn}: options.${key} must be an integer in [${lo}, ${hi}], got ${describe(v)}`);
  }
  return v;
}
