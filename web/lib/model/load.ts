/**
 * `loadModel(source, options)`: reads a Hugging Face checkpoint (config.json + model.safetensors
 * or its shards [+ tokenizer files]; a folder, a Hub id or the files) into the wasm module and returns the model its config.json's model_type
 * names: GPT2Model for gpt2 (or no model_type), LlamaModel for llama, mistral, qwen2, qwen3, gemma3_text, gemma3,
 * EncoderModel for bert, distilbert, roberta, xlm-roberta, Seq2SeqModel for bart.
 * model.safetensors streams into wasm memory with no second copy in JS: for a decoder whose
 * weights are converted on load, through a small buffer, each tensor converted as it arrives
 * (stream-load.ts); else into one buffer, which the model then owns (its tensors read there in
 * place, or converted there).
 */
import { describe, fmtBytes } from '../errors.js';
import { checkOptions } from '../validate.js';
import { MAX_HEAP_BYTES, heapU8, wasmError } from '../wasm/heap.js';
import { loadModule } from '../wasm/loader.js';
import type { QkvModule } from '../wasm/module.js';
import { optFunction, optSignal } from './cancel.js';
import { sentenceTransformerDefaults } from './embed.js';
import { EncoderModel, encoderModule, type EncoderConfig, type WasmEncoder } from './encoder.js';
import {
  filesFromObject, parseConfig, readAll, readFolder,
  type ByteStream, type GPT2Config, type ModelFiles, type ModelSource, type RawFiles,
} from './files.js';
import { modelModule, type ModelModule, type WasmDecoder } from './decoder.js';
import { joinShards, type JoinedShards, type ShardedWeights } from './shards.js';
import { streamFromHead, streamLoad, type WholeFile } from './stream-load.js';
import { ggufStream, readGgufHead } from './gguf.js';
import { ggufTokenizer } from './tokenizers/gguf-tokenizer.js';
import { GPT2Model } from './gpt2.js';
import { LLAMA_FAMILY, LlamaModel, textConfigOf, type LlamaConfig } from './llama.js';
import { Seq2SeqModel, seq2seqModule, type Seq2SeqConfig, type WasmSeq2Seq } from './seq2seq.js';
import { ByteTokenizer, loadChatTemplateEngine, tokenizerFromFiles, type Tokenizer } from './tokenizer.js';
import { isHubId, readHub } from './hub/index.js';

/**
 * The tokenizer the files describe (tokenizer.json, vocab.json + merges.txt, or vocab.txt:
 * tokenizers/from-files.ts), or byte-level when there are none and the vocab is 256.
 */
async function makeTokenizer(config: GPT2Config, raw: RawFiles, optional: boolean): Promise<Tokenizer | null> {
  let tok: Tokenizer | null;
  try {
    tok = await tokenizerFromFiles(raw.tokenizer, { where: raw.where, modelType: config.model_type });
  } catch (e) {
    if (e instanceof Error) e.message = `loadModel: ${e.message}`;
    throw e;
  }
  if (tok) {
    // Gemma 3 1B / 270M: the tokenizer's <image_soft_token> (id 262144) lies past vocab_size
    // 262144, as Google ships them; text holding it gets an id out of range at forward()
    const gemma = config.model_type === 'gemma3_text' || config.model_type === 'gemma3';
    if (tok.vocabSize > config.vocab_size && !(gemma && tok.vocabSize <= config.vocab_size + 1)) {
      throw new RangeError(`loadModel: the tokenizer has ${tok.vocabSize} tokens, more than the model's vocab_size ${config.vocab_size}`);
    }
    return tok;
  }
  if (optional) return null;
  if (config.vocab_size !== 256) {
    throw new Error(
      `loadModel: ${raw.where}: vocab_size is ${config.vocab_size}, so the model needs its tokenizer files ` +
        '(tokenizer.json, vocab.json and merges.txt, or vocab.txt); only a vocab of 256 is byte-level',
    );
  }
  return new ByteTokenizer();
}

/** How the weights are held: as stored in the file, or converted on load. */
export type WeightsOption = 'auto' | 'f32' | 'f16' | 'int8' | 'int4';

/**
 * Progress of a load: bytes of `file` read so far, of `total` (undefined when not known in
 * advance). A sharded checkpoint counts all its shards as one: `loaded` and `total` sum them,
 * `file` names the shard being read. `stage` 'download': a Hub file arriving into the cache
 * (each file in turn: config.json, the tokenizer files, the weights); 'load': the weights read
 * into memory (after a download, again from the cache).
 */
export interface LoadProgress {
  /** Bytes read so far (a sharded checkpoint: of all its shards together). */
  loaded: number;
  /** The bytes in all, or undefined when not known in advance. */
  total: number | undefined;
  /** The file being read or downloaded (a sharded checkpoint: the shard being read). */
  file: string;
  /** 'download': a Hub file arriving in the cache; 'load': the weights being read into the wasm module. */
  stage: 'download' | 'load';
}

/** Options of {@link loadModel}. */
export interface LoadOptions {
  /**
   * 'auto' (default): the matrices as the file stores them (F32, F16 or BF16; 16-bit weights
   * stay 16-bit and are widened inside the kernels); 'f32' / 'f16': converted on load; 'int8':
   * quantized on load to 8 bits per weight in blocks of 32 with a 16-bit float scale (like
   * ggml's q8_0): about a quarter of F32's memory and of the bytes read per generated token;
   * 'int4': 4 bits per weight in blocks of 32 with a 16-bit float scale (like ggml's q4_0,
   * 0.5625 bytes per weight): about a seventh of F32's memory, at a visible cost in accuracy
   * (docs/models.md states both). Encoders (BERT family) take 'auto', 'f32' and 'int8' (their
   * layers' matrices in 8 bits; docs/encoders.md); the encoder-decoder 'auto' and 'f32'.
   */
  weights?: WeightsOption;
  /** Called as model.safetensors (or a shard) arrives, after each chunk; for a Hub id, as each file downloads too. */
  onProgress?: (progress: LoadProgress) => void;
  /** A Hub id's branch, tag or commit hash (default 'main'); only for a Hub id. */
  revision?: string;
  /** A Hub id's GGUF file to load (`'x-Q4_0.gguf'`) instead of its safetensors checkpoint; only for a Hub id. */
  file?: string;
  /** Aborts the download and the load (the promise rejects with signal.reason). */
  signal?: AbortSignal;
}

const WEIGHTS: readonly WeightsOption[] = ['auto', 'f32', 'f16', 'int8', 'int4'];

/** onProgress for a sharded checkpoint's bytes: all shards as one, `file` the one being read. */
function shardProgress(options: LoadOptions) {
  return (loaded: number, total: number, file: string) => options.onProgress?.({ loaded, total, file, stage: 'load' });
}

/**
 * Streams model.safetensors (or the shards, joined) into a wasm buffer from modelFileAlloc;
 * returns it and its size. `taken`: what streamDecoder read before it found the load reads the
 * file in place; `joined`: `w` is joinShards' stream (which reports progress itself). The
 * buffer is freed here on any error or abort (afterwards it is GPT2Model.create's).
 */

async function streamIntoWasm(
  m: QkvModule, mm: ModelModule, w: ByteStream | ShardedWeights, name: string, options: LoadOptions, taken?: WholeFile,
  joined = false,
): Promise<{ ptr: number; size: number }> {
  const fn = 'loadModel';
  const alloc = (bytes: number) => {
    const ptr = bytes > MAX_HEAP_BYTES ? 0 : mm.modelFileAlloc(bytes) >>> 0;
    if (!ptr) {
      throw new RangeError(`${fn}: out of wasm memory for ${name} (${fmtBytes(bytes)}; the heap holds at most ${fmtBytes(MAX_HEAP_BYTES)})`);
    }
    return ptr;
  };
  const sharded = joined || 'indexText' in w;  // joined: w is joinShards' stream already
  const s = 'indexText' in w ? await joinShards(w, options.signal, shardProgress(options)) : w;
  // (a sharded checkpoint reports its shards' bytes as it streams: joinShards)
  const progress = (loaded: number) => { if (!sharded) options.onProgress?.({ loaded, total: s.total, file: name, stage: 'load' }); };
  if (s.total === undefined) {
    // size unknown in advance (a compressed response): gather the chunks, then one copy in
    const bytes = await readAll({ ...s, chunks: withProgress(s.chunks, progress, options.signal) });
    const ptr = alloc(Math.max(1, bytes.byteLength));
    heapU8(m).set(bytes, ptr);
    return { ptr, size: bytes.byteLength };
  }
  let ptr: number;
  try {
    ptr = alloc(Math.max(1, s.total));
  } catch (e) {
    await taken?.close();
    if ('close' in s) await (s as JoinedShards).close();
    throw e;
  }
  let loaded = 0;
  try {
    if (taken) {  // the bytes streamDecoder took before it found the load reads the file in place
      heapU8(m).set(taken.head, ptr);
      loaded = taken.head.byteLength;
    }
    for await (const chunk of withProgress(taken?.rest ?? s.chunks, () => {}, options.signal)) {
      if (loaded + chunk.byteLength > s.total) {
        throw new Error(`${fn}: ${s.where} holds more than the ${s.total} bytes announced`);
      }
      heapU8(m).set(chunk, ptr + loaded);
      loaded += chunk.byteLength;
      progress(loaded);
    }
  } catch (e) {
    mm.modelFileFree(ptr);
    await taken?.close();
    throw e;
  }
  // fewer bytes than announced: a truncated file, which the safetensors reader names
  return { ptr, size: loaded };
}

/** The chunks, checking the signal before each and reporting the running total. */
async function* withProgress(
  chunks: AsyncIterable<Uint8Array>, progress: (loaded: number) => void, signal: AbortSignal | undefined,
): AsyncGenerator<Uint8Array> {
  let loaded = 0;
  for await (const c of chunks) {
    signal?.throwIfAborted();
    loaded += c.byteLength;
    progress(loaded);
    yield c;
  }
  signal?.throwIfAborted();
}

/**
 * What loadModel returns, by config.json's model_type: GPT2Model (gpt2), LlamaModel (llama,
 * mistral, qwen2, qwen3, gemma3_text, gemma3), EncoderModel (bert, distilbert) or Seq2SeqModel (bart);
 * `model.architecture` tells which.
 */
export type Model = GPT2Model | LlamaModel | EncoderModel | Seq2SeqModel;

/**
 * The encoder path of loadModel: the encoder converts its tensors to one float32 buffer it
 * keeps (int8: its layers' matrices to Q8), as model.safetensors (or the shards, joined) streams
 * through a small wasm buffer (stream-load.ts); a download of unknown size is read whole into
 * one buffer first, freed here after.
 */
async function loadEncoder(
  m: QkvModule, raw: RawFiles, config: EncoderConfig, tokenizer: Tokenizer, opts: LoadOptions,
): Promise<EncoderModel> {
  const em = encoderModule(m);
  const mm = modelModule(m);
  const defaults = sentenceTransformerDefaults(raw.sentenceTransformers ?? {}, raw.where);  // damage named before the weights
  const int8 = opts.weights === 'int8';
  let handle: WasmEncoder | null = null;
  let taken: WholeFile | undefined;  // a stream that ended inside its header: read whole, the reader names it
  let w = raw.weights;
  if ('indexText' in w) w = await joinShards(w, opts.signal, shardProgress(opts));
  const sharded = 'indexText' in raw.weights;
  if (!('indexText' in w) && w.total !== undefined) {
    const total = w.total;
    const progress = (loaded: number) => { if (!sharded) opts.onProgress?.({ loaded, total, file: 'model.safetensors', stage: 'load' }); };
    const begin = (head: number, headSize: number, fileSize: number) => em.EncoderModelLoad.begin(raw.configText, head, headSize, fileSize, int8);
    const got = await streamLoad(m, begin, em.encoderLastError, w as ByteStream & { total: number }, opts.signal, progress);
    if ('head' in got) taken = got;
    else handle = got;
  }
  if (!handle) {
    const { ptr, size } = await streamIntoWasm(m, mm, w, 'model.safetensors', opts, taken, sharded);
    try {
      handle = em.EncoderModel.create(raw.configText, ptr, size, int8);
    } finally {
      mm.modelFileFree(ptr);
    }
  }
  if (!handle) throw wasmError('loadModel', em.encoderLastError());
  return new EncoderModel(m, handle, Object.freeze({ ...config }) as EncoderConfig, tokenizer, defaults);
}

/**
 * Loads a model: GPT-2 family; the Llama family (llama, mistral, qwen2, qwen3, gemma3_text, gemma3); a BERT / DistilBERT encoder with its masked-LM head
 * (config.json's model_type "bert" / "distilbert", tokenizer from vocab.txt or tokenizer.json);
 * or (model_type "bart") an encoder-decoder.
 *
 * `source`: a folder holding config.json, model.safetensors (or model.safetensors.index.json
 * and its shards, read as one file: shards.ts) and the tokenizer files — as a URL (fetched;
 * relative URLs resolve against the page) or, in Node, a file path or file: URL — or a Hugging
 * Face Hub id 'owner/name' (from env.hubUrl, cached: Cache Storage in browsers, Hugging Face's
 * cache layout in Node; hub/, docs/hub.md) — or the files themselves: `{ config, weights,
 * vocab?, merges?, tokenizer?, tokenizerConfig?, vocabTxt?, chatTemplate? }` (weights: an
 * ArrayBuffer, a typed array or a Blob / File) — or a GGUF file (llama.cpp's format: config,
 * tokenizer and weights in one; docs/gguf.md): a path or URL ending in .gguf, a Blob / File,
 * `{ gguf }`, or a Hub id with `options.file`.
 * `options`: `weights` ('auto' | 'f32' | 'f16' | 'int8' | 'int4'), `onProgress`, `signal`, `revision`
 * (a Hub id's branch, tag or commit), `file` (a Hub id's GGUF file) ({@link LoadOptions}).
 * Every tensor is checked against the file and the config; damage is an Error naming the
 * tensor and the numbers.
 */
export async function loadModel(source: ModelSource, options: LoadOptions = {}): Promise<Model> {
  const fn = 'loadModel';
  const opts = checkOptions(fn, options, ['weights', 'onProgress', 'signal', 'revision', 'file']) as LoadOptions;
  const weights = opts.weights ?? 'auto';
  if (!WEIGHTS.includes(weights)) {
    throw new TypeError(`${fn}: options.weights must be ${WEIGHTS.map((w) => `'${w}'`).join(', ')}, got ${describe(opts.weights)}`);
  }
  optFunction(fn, opts as Record<string, unknown>, 'onProgress');
  const signal = optSignal(fn, opts as Record<string, unknown>);
  signal?.throwIfAborted();
  if (opts.revision !== undefined && (typeof opts.revision !== 'string' || opts.revision === '')) {
    throw new TypeError(`${fn}: options.revision must be a branch, tag or commit hash (a non-empty string), got ${describe(opts.revision)}`);
  }
  if (opts.file !== undefined && (typeof opts.file !== 'string' || !/\.gguf$/i.test(opts.file))) {
    throw new TypeError(`${fn}: options.file must name a .gguf file of the repository, got ${describe(opts.file)}`);
  }
  // ('dir/x.gguf' is a file's path, not a Hub id, unless options.file names the Hub file)
  const hubId = typeof source === 'string' && !(opts.file === undefined && /\.gguf$/i.test(source)) && (await isHubId(source));
  const gguf = await ggufStream(source, hubId, { ...opts, signal });
  if (gguf) return loadGguf(gguf, weights, opts, signal);
  let raw: RawFiles;
  if (hubId) {
    raw = await readHub(source, { revision: opts.revision, signal, onProgress: opts.onProgress });
  } else if (opts.revision !== undefined) {
    throw new TypeError(`${fn}: options.revision is only for a Hub id ('owner/name'), and source is ${describe(source)}`);
  } else if (typeof source === 'string' || source instanceof URL) {
    if (source === '') throw new TypeError('loadModel: source is an empty string');
    raw = await readFolder(source, signal);
  } else if (source && typeof source === 'object') {
    raw = filesFromObject(source as ModelFiles);
  } else {
    throw new TypeError(`loadModel: source must be a folder URL/path or { config, weights, vocab?, merges? }, got ${describe(source)}`);
  }
  const config = parseConfig(raw.configText, raw.where === 'source' ? 'source.config' : `${raw.where}/config.json`);
  const modelType = config.model_type;
  const llama = typeof modelType === 'string' && LLAMA_FAMILY.includes(modelType);
  const encoder = modelType === 'bert' || modelType === 'distilbert' || modelType === 'roberta' || modelType === 'xlm-roberta';
  const isSeq2Seq = modelType === 'bart';
  if (modelType !== undefined && modelType !== 'gpt2' && !llama && !encoder && !isSeq2Seq) {
    throw new Error(`${fn}: model_type ${describe(modelType)} is not supported (gpt2, ${LLAMA_FAMILY.join(', ')}, bert, distilbert, roberta, xlm-roberta, bart)`);
  }
  if ((encoder || isSeq2Seq) && weights !== 'auto' && weights !== 'f32' && !(encoder && weights === 'int8')) {
    // encoders and the encoder-decoder convert their tensors to float32 on load; encoders can
    // then quantize their layers' matrices to 8 bits
    const allowed = encoder ? "'auto', 'f32' and 'int8'" : "'auto' and 'f32'";
    throw new TypeError(`${fn}: options.weights '${weights}' is not supported for model_type "${modelType}" (only ${allowed})`);
  }
  // a Llama-family folder without tokenizer files loads with tokenizer null (ids in and out)
  // (gemma3: the vocabulary is text_config's)
  // (the promise settles once a chat template's engine is loaded: applyChatTemplate is then synchronous)
  const tokenizer = await makeTokenizer(llama ? textConfigOf(config as unknown as LlamaConfig) as unknown as GPT2Config : config, raw, llama);

  const m = await loadModule();
  signal?.throwIfAborted();
  if (encoder) return loadEncoder(m, raw, config as unknown as EncoderConfig, tokenizer!, opts);
  const sm = isSeq2Seq ? seq2seqModule(m) : null;
  const mm = modelModule(m);
  if (llama && (!mm.LlamaModel || !mm.llamaLastError)) {
    throw new Error(`${fn}: this build of the wasm module lacks the Llama bindings (wasm/bindings_llama.cpp)`);
  }
  // a decoder whose weights are converted on load streams through a small buffer (stream-load.ts);
  // a sharded checkpoint as one file whose joined header leads (shards.ts)
  let taken: WholeFile | undefined;
  let w = raw.weights;
  if ('indexText' in w) w = await joinShards(w, signal, shardProgress(opts));
  const sharded = 'indexText' in raw.weights;
  if (sm && !('indexText' in w) && w.total !== undefined) {
    // the encoder-decoder converts every tensor to float32: it always streams
    const total = w.total;
    const progress = (loaded: number) => { if (!sharded) opts.onProgress?.({ loaded, total, file: 'model.safetensors', stage: 'load' }); };
    const begin = (head: number, headSize: number, fileSize: number) => sm.Seq2SeqModelLoad.begin(raw.configText, head, headSize, fileSize);
    const got = await streamLoad(m, begin, sm.seq2seqLastError, w as ByteStream & { total: number }, signal, progress);
    if (!('head' in got)) return seq2seqModel(m, got, config, tokenizer!);
    taken = got;
  } else if (!sm && !('indexText' in w) && w.total !== undefined) {
    const cls = llama ? mm.LlamaModelLoad! : mm.GPT2ModelLoad;
    const lastError = llama ? mm.llamaLastError! : mm.modelLastError;
    const total = w.total;
    const progress = (loaded: number) => { if (!sharded) opts.onProgress?.({ loaded, total, file: 'model.safetensors', stage: 'load' }); };
    const begin = (head: number, headSize: number, fileSize: number) => cls.begin(raw.configText, head, headSize, fileSize, weights);
    const got = await streamLoad(m, begin, lastError, w as ByteStream & { total: number }, signal, progress);
    if (!('head' in got)) return decoderModel(m, mm, llama, got, config, tokenizer);
    taken = got;
  }
  const { ptr, size } = await streamIntoWasm(m, mm, w, 'model.safetensors', opts, taken, sharded);
  if (sm) {
    const handle = sm.Seq2SeqModel.create(raw.configText, ptr, size);  // takes the buffer (freed on error too)
    if (!handle) throw wasmError(fn, sm.seq2seqLastError());
    return seq2seqModel(m, handle, config, tokenizer!);
  }
  // the buffer is the model's from here (freed by create on error)
  const handle: WasmDecoder | null = (llama ? mm.LlamaModel! : mm.GPT2Model).create(raw.configText, ptr, size, weights);
  if (!handle) throw wasmError(fn, llama ? mm.llamaLastError!() : mm.modelLastError());
  return decoderModel(m, mm, llama, handle, config, tokenizer);
}

/**
 * A GGUF file (gguf.ts): its header read first (the config.json and the tokenizer made from its
 * metadata), then its weights through the decoder's streaming load as a safetensors file's; the
 * whole file into one buffer when the load reads it in place.
 */
async function loadGguf(s: ByteStream, weights: WeightsOption, opts: LoadOptions, signal: AbortSignal | undefined): Promise<GPT2Model | LlamaModel> {
  const m = await loadModule();
  const mm = modelModule(m);
  const g = await readGgufHead(m, s, signal);
  let taken: WholeFile | undefined;
  try {
    const config = g.config as unknown as GPT2Config;
    const llama = config.model_type !== 'gpt2';
    if (llama && (!mm.LlamaModelLoad || !mm.LlamaModel || !mm.llamaLastError)) {
      throw new Error('loadModel: this build of the wasm module lacks the Llama bindings (wasm/bindings_llama.cpp)');
    }
    const tokenizer = ggufTokenizer(g.metadata, s.where);
    if (!llama && !tokenizer) throw new Error(`loadModel: ${s.where}: a GPT-2 GGUF file needs its tokenizer (tokenizer.ggml.*)`);
    if (tokenizer?.hasChatTemplate) await loadChatTemplateEngine();
    const cls = llama ? mm.LlamaModelLoad! : mm.GPT2ModelLoad;
    const lastError = llama ? mm.llamaLastError! : mm.modelLastError;
    const file = s.where;
    const progress = (loaded: number) => opts.onProgress?.({ loaded, total: g.total, file, stage: 'load' });
    const begin = (head: number, headSize: number, fileSize: number) => cls.begin(g.configText, head, headSize, fileSize, weights);
    const got = await streamFromHead(m, begin, lastError, g.pull, g.head, g.total, signal, progress);
    if (!('head' in got)) return decoderModel(m, mm, llama, got, config, tokenizer);
    taken = got;
    const { ptr, size } = await streamIntoWasm(m, mm, { total: g.total, chunks: got.rest, where: file }, file, opts, taken);
    const handle: WasmDecoder | null = (llama ? mm.LlamaModel! : mm.GPT2Model).create(g.configText, ptr, size, weights);
    if (!handle) throw wasmError('loadModel', lastError());
    return decoderModel(m, mm, llama, handle, config, tokenizer);
  } catch (e) {
    if (!taken) await g.pull.close();
    throw e;
  }
}

/** The model over a loaded encoder-decoder's handle. */
function seq2seqModel(m: QkvModule, handle: WasmSeq2Seq, config: GPT2Config, tokenizer: Tokenizer): Seq2SeqModel {
  // the special ids as the C++ config resolved them (HF's defaults where config.json has none)
  const resolved = { decoder_start_token_id: handle.decoderStartTokenId(), eos_token_id: handle.eosTokenId() };
  return new Seq2SeqModel(m, handle, Object.freeze({ ...config, ...resolved }) as unknown as Seq2SeqConfig, tokenizer);
}

/** The model over a loaded decoder's handle. */
function decoderModel(
  m: QkvModule, mm: ModelModule, llama: boolean, handle: WasmDecoder, config: GPT2Config, tokenizer: Tokenizer | null,
): GPT2Model | LlamaModel {
  const frozen = Object.freeze({ ...config });
  if (llama) return new LlamaModel(m, handle, frozen as unknown as LlamaConfig, tokenizer);
  if (!tokenizer) {
    handle.delete();
    throw new Error('loadModel: internal: no tokenizer for a GPT-2 model');
  }
  return new GPT2Model(m, handle, frozen as GPT2Config, tokenizer);
}
