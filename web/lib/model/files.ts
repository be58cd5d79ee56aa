/**
 * Reading a model's files: a folder by URL (fetch) or, in Node, by path (fs), or files given
 * as data; and config.json parsed. What is inside the weights is the wasm loader's to check.
 */
import { describe } from '../errors.js';
import { dynamicImport, isNode } from '../platform.js';
import { readTokenizerFiles, type TokenizerFiles } from './tokenizers/from-files.js';

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
  /** tokenizer.json (object or text): a Hugging Face tokenizer (BPE or WordPiece). */
  tokenizer?: object | string;
  /** tokenizer_config.json (object or text), beside tokenizer or vocabTxt. */
  tokenizerConfig?: object | string;
  /** vocab.txt's text: a BERT WordPiece tokenizer. */
  vocabTxt?: string;
}

/** Where a model is: a folder (URL, or a path in Node) holding its files, or the files themselves. */
export type ModelSource = string | URL | ModelFiles;

/** The files of one model, read. */
export interface RawFiles {
  configText: string;
  weights: Uint8Array;
  /** The tokenizer files found (none for a byte-level model). */
  tokenizer: TokenizerFiles;
  where: string;
}

/** Reads `name` in `base` (a folder URL or path); null when absent and optional. */
type Reader = (name: string, optional: boolean) => Promise<Uint8Array | null>;

async function nodeReader(dir: string): Promise<Reader> {
  const [{ readFile }, path] = await Promise.all([dynamicImport('node:fs/promises'), dynamicImport('node:path')]);
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

export async function readFolder(source: string | URL): Promise<RawFiles> {
  let read: Reader;
  let where: string;
  const isFileUrl = source instanceof URL ? source.protocol === 'file:' : /^file:/i.test(source);
  const isHttp = source instanceof URL ? /^https?:$/.test(source.protocol) : /^https?:\/\//i.test(source);
  if (isNode && !isHttp) {
    const { fileURLToPath } = await dynamicImport('node:url');
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
  const tokenizer = byteLevel ? {} : await readTokenizerFiles((name) => read(name, true), config.model_type);
  return { configText, weights, tokenizer, where };
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
    if (!['config', 'weights', 'vocab', 'merges', 'tokenizer', 'tokenizerConfig', 'vocabTxt'].includes(k)) {
      throw new TypeError(`loadModel: unknown key '${k}' in source (expected config, weights, vocab?, merges?, tokenizer?, tokenizerConfig?, vocabTxt?)`);
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
  return { configText, weights, tokenizer: tokenizerFilesFromObject(files), where: 'source' };
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
  };
  for (const k of Object.keys(out) as (keyof TokenizerFiles)[]) if (out[k] === undefined) delete out[k];
  return out;
}
