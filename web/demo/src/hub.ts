// A checkpoint from the Hugging Face Hub (or any folder URL laid out like one): config.json
// first, then the files its model_type needs (GPT-2: vocab.json and merges.txt, then an optional
// tokenizer_config.json (its add_prefix_space); the Llama family: tokenizer.json and
// tokenizer_config.json, each optional), then model.safetensors, fetched with
// progress and a cancel, kept in the browser's Cache Storage so that a second visit reads them
// from disk. The weights reach qkv's loadModel as a Blob (disk-backed when it comes from the
// cache), which it streams into wasm memory: no second copy of 500 MB in JavaScript.
import { qkv } from './api';

/** GPT-2 small (124M) on the Hub; `resolve/main/` serves the raw files. */
export const HUB_GPT2 = 'https://huggingface.co/openai-community/gpt2/resolve/main/';
const CACHE = 'qkv-models-v1';
const WEIGHTS = 'model.safetensors';
/** The tokenizer files by config.json's model_type: GPT-2's are required, tokenizer.json's optional (ids then). */
const GPT2_FILES = ['vocab.json', 'merges.txt'];
const HF_FILES = ['tokenizer.json', 'tokenizer_config.json'];

export type Progress = (fraction: number | null, what: string) => void;

export interface HubLoad {
  files: qkv.ModelFiles;
  /** how many of the files came from the browser cache */
  fromCache: number;
  /** how many files there were (config, tokenizer files found, weights) */
  fetched: number;
}

const mib = (n: number) => (n / 1048576).toFixed(1);

/** Where a file is, relative to the folder URL (a trailing slash is added when missing). */
function fileUrl(base: string, name: string): string {
  return new URL(name, new URL(base.endsWith('/') ? base : `${base}/`, location.href)).href;
}

/** The cache, or null where the page has none (an insecure origin, a private window that refuses). */
async function openCache(): Promise<Cache | null> {
  try {
    return 'caches' in globalThis ? await caches.open(CACHE) : null;
  } catch {
    return null;
  }
}

/** The body counted as it streams, so that a download shows its bytes. */
function counted(res: Response, name: string, onProgress: Progress): Response {
  const total = Number(res.headers.get('content-length')) || 0;
  let loaded = 0;
  const count = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, out) {
      loaded += chunk.byteLength;
      onProgress(total ? loaded / total : null, `downloading ${name}: ${mib(loaded)} MiB${total ? ` of ${mib(total)} MiB` : ''}`);
      out.enqueue(chunk);
    },
  });
  return new Response(res.body!.pipeThrough(count), { headers: res.headers });
}

/** The checkpoint's name from its folder URL: "owner/name" on the Hub, else the folder's last part. */
export function hubName(base: string): string {
  const parts = new URL(base, location.href).pathname.split('/').filter(Boolean);
  const resolve = parts.indexOf('resolve');
  if (resolve >= 2) return parts.slice(resolve - 2, resolve).join('/');
  return parts.pop() ?? new URL(base, location.href).host;
}

/**
 * One file: from the cache, else fetched (and stored in the cache on the way). An optional
 * file that the server does not have (404) is null.
 */
async function getFile(cache: Cache | null, url: string, name: string, signal: AbortSignal, onProgress: Progress, optional: true): Promise<{ res: Response; cached: boolean } | null>;
async function getFile(cache: Cache | null, url: string, name: string, signal: AbortSignal, onProgress: Progress, optional?: false): Promise<{ res: Response; cached: boolean }>;
async function getFile(cache: Cache | null, url: string, name: string, signal: AbortSignal, onProgress: Progress, optional = false): Promise<{ res: Response; cached: boolean } | null> {
  const hit = await cache?.match(url);
  if (hit) return { res: hit, cached: true };
  let res: Response;
  try {
    res = await fetch(url, { signal });
  } catch (e) {
    if (signal.aborted) throw e;
    throw new Error(`${name}: cannot fetch ${url} (${(e as Error).message})`);
  }
  if (optional && res.status === 404) return null;
  if (!res.ok || !res.body) throw new Error(`${name}: ${url} answered HTTP ${res.status} ${res.statusText}`);
  const body = counted(res, name, onProgress);
  if (!cache) return { res: body, cached: false };
  await cache.put(url, body); // reads the whole download to disk (rejects if it is cancelled)
  signal.throwIfAborted();
  return { res: (await cache.match(url))!, cached: false };
}

/**
 * Fetches (or reads from the cache) a checkpoint folder: config.json first, whose model_type says
 * which tokenizer files to ask for, then the weights; the caller hands `files` to loadModel
 * (which checks what is inside).
 */
export async function fetchCheckpoint(base: string, signal: AbortSignal, onProgress: Progress): Promise<HubLoad> {
  const cache = await openCache();
  let fromCache = 0, fetched = 0;
  const text = async (name: string, optional: boolean): Promise<string | undefined> => {
    onProgress(null, `${name}…`);
    const got = optional
      ? await getFile(cache, fileUrl(base, name), name, signal, onProgress, true)
      : await getFile(cache, fileUrl(base, name), name, signal, onProgress);
    if (!got) return undefined;
    fetched++;
    fromCache += got.cached ? 1 : 0;
    return got.res.text();
  };
  const config = (await text('config.json', false))!;
  let modelType: unknown;
  try {
    modelType = (JSON.parse(config) as { model_type?: unknown }).model_type;
  } catch {
    modelType = undefined; // qkv's loadModel names what is wrong with it
  }
  const gpt2 = modelType === undefined || modelType === 'gpt2';
  const files: qkv.ModelFiles = { config, weights: new Blob() };
  if (gpt2) {
    files.vocab = await text(GPT2_FILES[0], false);
    files.merges = await text(GPT2_FILES[1], false);
    const tokenizerConfig = await text(HF_FILES[1], true);
    if (tokenizerConfig !== undefined) files.tokenizerConfig = tokenizerConfig;
  } else {
    const tokenizer = await text(HF_FILES[0], true);
    if (tokenizer !== undefined) {
      files.tokenizer = tokenizer;
      const tokenizerConfig = await text(HF_FILES[1], true);
      if (tokenizerConfig !== undefined) files.tokenizerConfig = tokenizerConfig;
    }
  }
  const { res, cached } = await getFile(cache, fileUrl(base, WEIGHTS), WEIGHTS, signal, onProgress);
  fetched++;
  fromCache += cached ? 1 : 0;
  if (cached) onProgress(null, `${WEIGHTS}: from the browser cache`);
  files.weights = await res.blob();
  return { files, fromCache, fetched };
}

/** Forgets every cached checkpoint file (the page's "clear cache" button). */
export async function clearCheckpointCache(): Promise<boolean> {
  return 'caches' in globalThis ? caches.delete(CACHE) : false;
}
