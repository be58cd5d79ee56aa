// A checkpoint from the Hugging Face Hub (or any folder URL laid out like one): config.json,
// vocab.json, merges.txt and model.safetensors, fetched with progress and a cancel, kept in the
// browser's Cache Storage so that a second visit reads them from disk. The weights reach qkv's
// loadModel as a Blob (disk-backed when it comes from the cache), which it streams into wasm
// memory: no second copy of 500 MB in JavaScript.
import { qkv } from './api';

/** GPT-2 small (124M) on the Hub; `resolve/main/` serves the raw files. */
export const HUB_GPT2 = 'https://huggingface.co/openai-community/gpt2/resolve/main/';
const CACHE = 'qkv-models-v1';
const TEXT_FILES = ['config.json', 'vocab.json', 'merges.txt'] as const;
const WEIGHTS = 'model.safetensors';

export type Progress = (fraction: number | null, what: string) => void;

export interface HubLoad {
  files: qkv.ModelFiles;
  /** how many of the four files came from the browser cache */
  fromCache: number;
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

/** One file: from the cache, else fetched (and stored in the cache on the way). */
async function getFile(cache: Cache | null, url: string, name: string, signal: AbortSignal, onProgress: Progress): Promise<{ res: Response; cached: boolean }> {
  const hit = await cache?.match(url);
  if (hit) return { res: hit, cached: true };
  let res: Response;
  try {
    res = await fetch(url, { signal });
  } catch (e) {
    if (signal.aborted) throw e;
    throw new Error(`${name}: cannot fetch ${url} (${(e as Error).message})`);
  }
  if (!res.ok || !res.body) throw new Error(`${name}: ${url} answered HTTP ${res.status} ${res.statusText}`);
  const body = counted(res, name, onProgress);
  if (!cache) return { res: body, cached: false };
  await cache.put(url, body); // reads the whole download to disk (rejects if it is cancelled)
  signal.throwIfAborted();
  return { res: (await cache.match(url))!, cached: false };
}

/** Fetches (or reads from the cache) a GPT-2-layout folder; the caller hands `files` to loadModel. */
export async function fetchCheckpoint(base: string, signal: AbortSignal, onProgress: Progress): Promise<HubLoad> {
  const cache = await openCache();
  let fromCache = 0;
  const text: Record<string, string> = {};
  for (const name of TEXT_FILES) {
    onProgress(null, `${name}…`);
    const { res, cached } = await getFile(cache, fileUrl(base, name), name, signal, onProgress);
    text[name] = await res.text();
    fromCache += cached ? 1 : 0;
  }
  const { res, cached } = await getFile(cache, fileUrl(base, WEIGHTS), WEIGHTS, signal, onProgress);
  fromCache += cached ? 1 : 0;
  if (cached) onProgress(null, `${WEIGHTS}: from the browser cache`);
  const weights = await res.blob();
  return { files: { config: text['config.json'], vocab: text['vocab.json'], merges: text['merges.txt'], weights }, fromCache };
}

/** Forgets every cached checkpoint file (the page's "clear cache" button). */
export async function clearCheckpointCache(): Promise<boolean> {
  return 'caches' in globalThis ? caches.delete(CACHE) : false;
}
