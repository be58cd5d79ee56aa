/**
 * `loadModel(source)`: reads a Hugging Face GPT-2-layout checkpoint (config.json +
 * model.safetensors [+ vocab.json + merges.txt]) into the wasm module and returns the model.
 */
import { describe } from '../errors.js';
import { HeapScope, heapU8, wasmError } from '../wasm/heap.js';
import { loadModule } from '../wasm/loader.js';
import { filesFromObject, parseConfig, readFolder, type GPT2Config, type ModelSource, type RawFiles } from './files.js';
import { GPT2Model, modelModule, type WasmGPT2 } from './gpt2.js';
import { ByteTokenizer, tokenizerFromFiles, type Tokenizer } from './tokenizer.js';

/**
 * The tokenizer the files describe (tokenizer.json, vocab.json + merges.txt, or vocab.txt:
 * tokenizers/from-files.ts), or byte-level when there are none and the vocab is 256.
 */
function makeTokenizer(config: GPT2Config, raw: RawFiles): Tokenizer {
  let tok: Tokenizer | null;
  try {
    tok = tokenizerFromFiles(raw.tokenizer, { where: raw.where, modelType: config.model_type });
  } catch (e) {
    if (e instanceof Error) e.message = `loadModel: ${e.message}`;
    throw e;
  }
  if (tok) {
    if (tok.vocabSize > config.vocab_size) {
      throw new RangeError(`loadModel: the tokenizer has ${tok.vocabSize} tokens, more than the model's vocab_size ${config.vocab_size}`);
    }
    return tok;
  }
  if (config.vocab_size !== 256) {
    throw new Error(
      `loadModel: ${raw.where}: vocab_size is ${config.vocab_size}, so the model needs its tokenizer files ` +
        '(tokenizer.json, vocab.json and merges.txt, or vocab.txt); only a vocab of 256 is byte-level',
    );
  }
  return new ByteTokenizer();
}

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
