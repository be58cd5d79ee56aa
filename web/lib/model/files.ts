/**
 * Reading a model's files: a folder by URL (fetch) or, in Node, by path (fs), or files given
 * as data; and config.json parsed. The small files are read whole; model.safetensors is
 * handed on as a stream of chunks (fetch's body, a Node read stream, a Blob's slices) for the
 * loader to copy straight into wasm memory. What is inside the weights is the wasm loader's
 * to check.
 */
import type { GgufFile } from './gguf.js';
import { describe } from '../errors.js';
import { dynamicImport, isNode } from '../platform.js';
import { INDEX_FILE, type ShardedWeights } from './shards.js';
import { parseModules, poolingPath, type SentenceTransformerFiles } from './embed.js';
import { readTokenizerFiles, type TokenizerFiles } from './tokenizers/from-files.js';

/** config.json of a GPT-2-family model (Hugging Face keys); other keys are kept as they are. */
export interface GPT2Config {
  /** Transformer blocks. */
  n_layer: number;
  /** Attention heads per block (head dim n_embd / n_head). */
  n_head: number;
  /** Model width (the residual stream's size). */
  n_embd: number;
  /** Learned positions: the context length. */
  n_positions: number;
  /** Vocabulary size (rows of the token embedding, tied to the LM head). */
  vocab_size: number;
  /** The MLP's hidden size; null or absent: 4 n_embd. */
  n_inner?: number | null;
  /** The layer norms' epsilon (default 1e-5). */
  layer_norm_epsilon?: number;
  [key: string]: unknown;
}

/** A model given as data rather than a location. */
export interface ModelFiles {
  /** config.json: the parsed object or its text. */
  config: GPT2Config | string;
  /**
   * model.safetensors' bytes, or a Blob / File holding them (read as a stream); with `index`, a
   * sharded checkpoint's shards by file name (`{ 'model-00001-of-00002.safetensors': file, ... }`).
   */
  weights: ArrayBuffer | ArrayBufferView | Blob | Record<string, ArrayBuffer | ArrayBufferView | Blob>;
  /** model.safetensors.index.json (object or text) of a sharded checkpoint: `weights` then holds its shards. */
  index?: object | string;
  /** vocab.json (object or text), with merges: a GPT-2 BPE tokenizer. Without: byte-level (vocab 256). */
  vocab?: Record<string, number> | string;
  /** merges.txt's text. */
  merges?: string;
  /** tokenizer.json (object or text): a Hugging Face tokenizer (BPE or WordPiece). */
  tokenizer?: object | string;
  /** tokenizer_config.json (object or text), beside tokenizer or vocabTxt. */
  tokenizerConfig?: object | string;
  /** vocab.txt's text: a BERT WordPiece tokenizer. */
  vocabTxt?: string;
  /** chat_template.jinja's text (a chat template kept apart from tokenizer_config.json). */
  chatTemplate?: string;
  /** sentence-transformers' modules.json (array or text): embed's normalization (an encoder). */
  modules?: object | string;
  /** sentence-transformers' 1_Pooling/config.json (object or text): embed's pooling (an encoder). */
  pooling?: object | string;
}

/** Where a model is: a folder (URL, or a path in Node) holding its files, or the files themselves. */
export type ModelSource = string | URL | ModelFiles | Blob | GgufFile;

/** A file's bytes, to be read once, chunk by chunk. */
export interface ByteStream {
  /** Its size when known before reading (a file's size, Content-Length of an unencoded response). */
  total: number | undefined;
  /** Its bytes in order; a chunk is valid until the next is asked for (its buffer may be reused). */
  chunks: AsyncIterable<Uint8Array>;
  /** Where it comes from, for messages. */
  where: string;
}

/** The files of one model, read (the weights as a stream). */
export interface RawFiles {
  configText: string;
  /** model.safetensors as a stream, or a sharded checkpoint's index and shards. */
  weights: ByteStream | ShardedWeights;
  /** The tokenizer files found (none for a byte-level model). */
  tokenizer: TokenizerFiles;
  /** An encoder's sentence-transformers files, when found. */
  sentenceTransformers?: SentenceTransformerFiles;
  where: string;
}

const ENCODER_TYPES = ['bert', 'distilbert', 'roberta', 'xlm-roberta'];

/**
 * Whether to look for sentence-transformers' files: an encoder whose config.json names no
 * *ForMaskedLM architecture (a BertModel, as sentence-transformers saves it). A fill-mask
 * checkpoint is not asked for them (each miss is a 404 in a browser console).
 */
export function mayBeSentenceTransformer(config: GPT2Config): boolean {
  if (!ENCODER_TYPES.includes(config.model_type as string)) return false;
  const arch = config.architectures;
  return !(Array.isArray(arch) && arch.some((a) => typeof a === 'string' && a.endsWith('ForMaskedLM')));
}

/** Opens `name` in a folder (URL or path) as a stream; null when absent and optional. */
export type Opener = (name: string, optional: boolean) => Promise<ByteStream | null>;

/** A folder of model files: how to open one, and a file's size without reading it (for shards). */
export interface Folder {
  open: Opener;
  size: (name: string) => Promise<number | undefined>;
  /** The folder, for messages. */
  where: string;
}

/** Bytes asked for per read when the stream lets us bring our own buffer. */
const READ_BYTES = 1 << 20;
/** Bytes per slice of a Blob. */
const BLOB_SLICE_BYTES = 4 << 20;

/**
 * The chunks of a web ReadableStream (not every browser makes it async-iterable). A byte
 * stream (fetch's body) is read into one buffer reused for every read, so a 500 MB download
 * leaves no 500 MB of chunks for the GC to find: a chunk is valid only until the next is asked
 * for (streamIntoWasm copies it into wasm at once; readAll copies it).
 */
async function* readerChunks(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  let byob: ReadableStreamBYOBReader | null = null;
  try {
    byob = stream.getReader({ mode: 'byob' });
  } catch {
    // not a byte stream: the default reader, a fresh chunk per read
  }
  const reader = byob ?? stream.getReader();
  try {
    let buffer = new ArrayBuffer(byob ? READ_BYTES : 0);
    for (;;) {
      const { done, value } = byob ? await byob.read(new Uint8Array(buffer)) : await (reader as ReadableStreamDefaultReader<Uint8Array>).read();
      if (done || !value) return;
      if (byob) buffer = value.buffer as ArrayBuffer;  // the read transferred it: take it back for the next
      yield value;
    }
  } finally {
    await reader.cancel().catch(() => {});  // stops the download when the consumer stops early
  }
}

/**
 * A Blob's bytes (the demo's Hub file from Cache Storage, a dropped File) in 4 MB slices, one
 * `slice().arrayBuffer()` at a time. Not Blob.stream(): in Chromium 156 a BYOB read of a Blob
 * from Cache Storage now and then never resolves (the demo's Hub load stopped after 1-3 MiB in
 * 3 of ~35 runs of its long-prompt test on a loaded machine), and the default reader's fresh
 * chunks pile up as garbage faster than the GC finds them. GPT-2 small's 498 MB F32 file in
 * Chromium 156 (`bench/model/gpt2_small_browser.mjs --source blob`, the renderer's peak RSS):
 * default reader 833-988 MB, these slices 831-853 (fetch: 717); quantized to int8 on load,
 * 987-1077 against 807-840 (fetch: 779). The slices take 0.2-0.5 s longer (1.3 s for F32).
 */
export async function* blobChunks(blob: Blob): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < blob.size; at += BLOB_SLICE_BYTES) {
    yield new Uint8Array(await blob.slice(at, Math.min(at + BLOB_SLICE_BYTES, blob.size)).arrayBuffer());
  }
}

/** A folder on disk (Node). */
export async function nodeFolder(dir: string, signal: AbortSignal | undefined): Promise<Folder> {
  const [fs, fsp, path] = await Promise.all([dynamicImport('node:fs'), dynamicImport('node:fs/promises'), dynamicImport('node:path')]);
  const size = async (name: string) => {
    const file = path.join(dir, name);
    try {
      return (await fsp.stat(file)).size;
    } catch (e) {
      throw new Error(`cannot read ${file}: ${(e as Error).message}`);
    }
  };
  const open: Opener = async (name, optional) => {
    const file = path.join(dir, name);
    let size: number;
    try {
      size = (await fsp.stat(file)).size;
    } catch (e) {
      if (optional && (e as { code?: string }).code === 'ENOENT') return null;
      throw new Error(`loadModel: cannot read ${file}: ${(e as Error).message}`);
    }
    async function* chunks(): AsyncGenerator<Uint8Array> {
      const stream = fs.createReadStream(file, { highWaterMark: 1 << 20, signal });  // opened when read
      try {
        for await (const b of stream as AsyncIterable<Uint8Array>) yield b;
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        throw new Error(`loadModel: cannot read ${file}: ${(e as Error).message}`);
      } finally {
        stream.destroy();
      }
    }
    return { total: size, chunks: chunks(), where: file };
  };
  return { open, size, where: dir };
}

/** A folder by URL (fetch). */
function fetchFolder(base: URL, signal: AbortSignal | undefined): Folder {
  const size = async (name: string) => {
    const url = new URL(name, base);
    let res: Response;
    try {
      res = await fetch(url, { method: 'HEAD', signal });
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      throw new Error(`cannot fetch ${url.href}: ${(e as Error).message}`);
    }
    if (!res.ok) throw new Error(`HEAD ${url.href} failed: HTTP ${res.status} ${res.statusText}`);
    return contentLength(res);
  };
  const open: Opener = async (name, optional) => {
    const url = new URL(name, base);
    let res: Response;
    try {
      res = await fetch(url, { signal });
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      throw new Error(`loadModel: cannot fetch ${url.href}: ${(e as Error).message}`);
    }
    if (!res.ok) {
      if (optional && res.status === 404) return null;
      throw new Error(`loadModel: fetching ${url.href} failed: HTTP ${res.status} ${res.statusText}`);
    }
    const total = contentLength(res);
    if (!res.body) return { total: 0, chunks: (async function* () {})(), where: url.href };
    const body = res.body;
    async function* chunks(): AsyncGenerator<Uint8Array> {
      try {
        yield* readerChunks(body);
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        throw new Error(`loadModel: reading ${url.href} failed: ${(e as Error).message}`);
      }
    }
    return { total, chunks: chunks(), where: url.href };
  };
  return { open, size, where: base.href };
}

/** A response's body size when its headers tell it: Content-Length counts the bytes on the wire, the file's size only without Content-Encoding. */
function contentLength(res: Response): number | undefined {
  const length = Number(res.headers.get('content-length') ?? NaN);
  const encoding = (res.headers.get('content-encoding') ?? 'identity').toLowerCase();
  return Number.isSafeInteger(length) && length >= 0 && encoding === 'identity' ? length : undefined;
}

/** A folder of Blobs by file name (the browser's Hub cache): absent names are absent files. */
export function blobFolder(blobs: Map<string, Blob>, where: string): Folder {
  const open: Opener = async (name, optional) => {
    const b = blobs.get(name);
    if (!b) {
      if (optional) return null;
      throw new Error(`loadModel: ${where} has no ${name}`);
    }
    return { total: b.size, chunks: blobChunks(b), where: `${where}/${name}` };
  };
  return { open, size: async (name) => blobs.get(name)?.size, where };
}

/** All of a (small) stream's bytes. */
export async function readAll(s: ByteStream): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const c of s.chunks) {
    parts.push(c.slice());  // a chunk's buffer may be reused by the next read
    n += c.byteLength;
  }
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

function folderUrl(s: string | URL): URL {
  const href = typeof s === 'string' ? s : s.href;
  const withSlash = href.endsWith('/') ? href : href + '/';
  const base = (globalThis as { location?: { href: string } }).location?.href;
  return base ? new URL(withSlash, base) : new URL(withSlash);
}

/**
 * Reads a folder's config.json and tokenizer files, and opens its model.safetensors as a
 * stream (not read yet), or its model.safetensors.index.json and the shards it names.
 * `signal` aborts the reads.
 */
export async function readFolder(source: string | URL, signal?: AbortSignal): Promise<RawFiles> {
  const isFileUrl = source instanceof URL ? source.protocol === 'file:' : /^file:/i.test(source);
  const isHttp = source instanceof URL ? /^https?:$/.test(source.protocol) : /^https?:\/\//i.test(source);
  if (isNode && !isHttp) {
    const { fileURLToPath } = await dynamicImport('node:url');
    const dir = isFileUrl ? fileURLToPath(source) : String(source);
    return readFromFolder(await nodeFolder(dir, signal));
  }
  return readFromFolder(fetchFolder(folderUrl(source), signal));
}

/**
 * One file (a GGUF file) by URL, file: URL or, in Node, path, opened as a stream (not read yet).
 * `signal` aborts the read.
 */
export async function openFile(source: string | URL, signal?: AbortSignal): Promise<ByteStream> {
  const href = typeof source === 'string' ? source : source.href;
  const isFileUrl = source instanceof URL ? source.protocol === 'file:' : /^file:/i.test(href);
  const isHttp = source instanceof URL ? /^https?:$/.test(source.protocol) : /^https?:\/\//i.test(href);
  if (isNode && !isHttp) {
    const [{ fileURLToPath }, path] = await Promise.all([dynamicImport('node:url'), dynamicImport('node:path')]);
    const file = isFileUrl ? fileURLToPath(source) : String(source);
    return (await (await nodeFolder(path.dirname(file), signal)).open(path.basename(file), false))!;
  }
  const base = (globalThis as { location?: { href: string } }).location?.href;
  const url = base ? new URL(href, base) : new URL(href);
  const name = decodeURIComponent(url.pathname.slice(url.pathname.lastIndexOf('/') + 1));
  return (await fetchFolder(new URL('./', url), signal).open(name, false))!;
}

/** {@link readFolder} over any {@link Folder}. */
export async function readFromFolder(folder: Folder): Promise<RawFiles> {
  const { open, where } = folder;
  const read = async (name: string, optional: boolean) => {
    const s = await open(name, optional);
    return s ? readAll(s) : null;
  };
  const configText = new TextDecoder('utf-8').decode((await read('config.json', false))!);
  const config = parseConfig(configText, `${where}/config.json`);
  // A byte-level model (the tiny one) needs no tokenizer files: don't ask for them.
  const byteLevel = config.vocab_size === 256 && !(config.qkv && (config.qkv as { tokenizer?: string }).tokenizer === 'bpe');
  const tokenizer = byteLevel ? {} : await readTokenizerFiles((name) => read(name, true), config.model_type);
  const text = (b: Uint8Array | null) => (b === null ? undefined : new TextDecoder('utf-8').decode(b));
  let sentenceTransformers: SentenceTransformerFiles | undefined;
  if (mayBeSentenceTransformer(config)) {
    const modules = text(await read('modules.json', true));
    if (modules !== undefined) {
      const path = poolingPath(parseModules(modules, `${where}/modules.json`));
      const pooling = path === null ? undefined : text(await read(`${path.replace(/\/+$/, '')}/config.json`, true));
      sentenceTransformers = { modules, pooling, poolingPath: path ?? undefined };
    }
  }
  // the big one last: its errors (a missing file) come after the small files', and the loader reads it
  const single = await open('model.safetensors', true);
  if (single) return { configText, weights: single, tokenizer, sentenceTransformers, where };
  const index = await read(INDEX_FILE, true);
  if (!index) throw new Error(`loadModel: ${where} has neither model.safetensors nor ${INDEX_FILE} (a sharded checkpoint)`);
  const weights: ShardedWeights = {
    indexText: new TextDecoder('utf-8').decode(index),
    where: `${where}/${INDEX_FILE}`,
    size: folder.size,
    open: async (name) => (await open(name, false))!,
  };
  return { configText, weights, tokenizer, sentenceTransformers, where };
}

export function parseConfig(text: string, where: string): GPT2Config {
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

export function filesFromObject(files: ModelFiles): RawFiles {
  const keys = Object.keys(files);
  for (const k of keys) {
    if (!['config', 'weights', 'index', 'vocab', 'merges', 'tokenizer', 'tokenizerConfig', 'vocabTxt', 'chatTemplate', 'modules', 'pooling'].includes(k)) {
      throw new TypeError(`loadModel: unknown key '${k}' in source (expected config, weights, index?, vocab?, merges?, tokenizer?, tokenizerConfig?, vocabTxt?, chatTemplate?, modules?, pooling?)`);
    }
  }
  let configText: string;
  if (typeof files.config === 'string') configText = files.config;
  else if (files.config && typeof files.config === 'object') configText = JSON.stringify(files.config);
  else throw new TypeError(`loadModel: source.config must be the config.json object or text, got ${describe(files.config)}`);
  parseConfig(configText, 'source.config'); // a damaged config.json is reported before anything else
  const weights = files.index === undefined ? bytesStream(files.weights, 'source.weights') : shardsOf(files.index, files.weights);
  const st = (v: unknown, key: string) => {
    if (v === undefined || typeof v === 'string') return v;
    if (v !== null && typeof v === 'object') return JSON.stringify(v);
    throw new TypeError(`loadModel: source.${key} must be the file's object or text, got ${describe(v)}`);
  };
  const modules = st(files.modules, 'modules');
  const pooling = st(files.pooling, 'pooling');
  const sentenceTransformers = modules === undefined && pooling === undefined ? undefined : { modules, pooling };
  return { configText, weights, tokenizer: tokenizerFilesFromObject(files), sentenceTransformers, where: 'source' };
}

/** One file's bytes (an ArrayBuffer, a view, a Blob) as a stream; `where` names it in messages. */
function bytesStream(b: unknown, where: string): ByteStream {
  const one = (u: Uint8Array): ByteStream => ({ total: u.byteLength, chunks: (async function* () { yield u; })(), where });
  if (b instanceof ArrayBuffer) return one(new Uint8Array(b));
  if (ArrayBuffer.isView(b)) return one(new Uint8Array(b.buffer, b.byteOffset, b.byteLength));
  if (typeof Blob !== 'undefined' && b instanceof Blob) return { total: b.size, chunks: blobChunks(b), where };
  throw new TypeError(`loadModel: ${where} must be an ArrayBuffer or a Blob (model.safetensors' bytes), got ${describe(b)}`);
}

/** A `{ index, weights: { shard name: bytes } }` source as a sharded checkpoint (shards.ts checks the index against the shards). */
function shardsOf(index: unknown, shards: unknown): ShardedWeights {
  let indexText: string;
  if (typeof index === 'string') indexText = index;
  else if (index !== null && typeof index === 'object') indexText = JSON.stringify(index);
  else throw new TypeError(`loadModel: source.index must be ${INDEX_FILE}'s object or text, got ${describe(index)}`);
  const isBytes = (v: unknown) => v instanceof ArrayBuffer || ArrayBuffer.isView(v) || (typeof Blob !== 'undefined' && v instanceof Blob);
  if (shards === null || typeof shards !== 'object' || isBytes(shards) || Array.isArray(shards)) {
    throw new TypeError(`loadModel: with source.index, source.weights must be the shards by file name ({ 'model-00001-of-00002.safetensors': bytes, ... }), got ${describe(shards)}`);
  }
  const byName = shards as Record<string, unknown>;
  const get = (name: string) => {
    if (!Object.prototype.hasOwnProperty.call(byName, name)) {
      const have = Object.keys(byName);
      throw new Error(`source.weights has no ${name} (the shards given: ${have.length ? have.join(', ') : 'none'})`);
    }
    return byName[name];
  };
  return {
    indexText,
    where: `source.index (${INDEX_FILE})`,
    size: async (name) => {
      const b = get(name);
      if (typeof Blob !== 'undefined' && b instanceof Blob) return b.size;
      if (b instanceof ArrayBuffer || ArrayBuffer.isView(b)) return b.byteLength;
      return bytesStream(b, `source.weights[${JSON.stringify(name)}]`).total;
    },
    open: async (name) => bytesStream(get(name), `source.weights[${JSON.stringify(name)}]`),
  };
}

/** The tokenizer files of a `{ vocab?, merges?, tokenizer?, tokenizerConfig?, vocabTxt? }` source, type-checked. */
function tokenizerFilesFromObject(files: ModelFiles): TokenizerFiles {
  const jsonFile = (v: unknown, key: string, file: string) => {
    if (v === undefined || typeof v === 'string' || (v !== null && typeof v === 'object')) return v as object | string | undefined;
    throw new TypeError(`loadModel: source.${key} must be ${file}'s object or text, got ${describe(v)}`);
  };
  const textFile = (v: unknown, key: string, file: string) => {
    if (v === undefined || typeof v === 'string') return v;
    throw new TypeError(`loadModel: source.${key} must be ${file}'s text, got ${describe(v)}`);
  };
  const out: TokenizerFiles = {
    vocabJson: jsonFile(files.vocab, 'vocab', 'vocab.json'),
    merges: textFile(files.merges, 'merges', 'merges.txt'),
    tokenizerJson: jsonFile(files.tokenizer, 'tokenizer', 'tokenizer.json'),
    tokenizerConfig: jsonFile(files.tokenizerConfig, 'tokenizerConfig', 'tokenizer_config.json'),
    vocabTxt: textFile(files.vocabTxt, 'vocabTxt', 'vocab.txt'),
    chatTemplate: textFile(files.chatTemplate, 'chatTemplate', 'chat_template.jinja'),
  };
  for (const k of Object.keys(out) as (keyof TokenizerFiles)[]) if (out[k] === undefined) delete out[k];
  return out;
}
