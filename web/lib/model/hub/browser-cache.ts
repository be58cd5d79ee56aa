/**
 * The Hub in a browser, through Cache Storage (cache 'qkv-hub-v1', one entry per resolve URL):
 * a file is read from the cache when there, else fetched, its body counted as it streams
 * (onProgress, stage 'download') into `cache.put`, which stores it only once it is whole (an
 * interrupted or cancelled download leaves nothing). A file the Hub lacks (404) is kept as a
 * 404 entry, so a second load asks for nothing. The weights reach the loader as a Blob from the
 * cache (disk-backed, read in slices), so a 500 MB file is not held twice in JavaScript.
 * Without Cache Storage (an insecure origin, a private window that refuses) files are fetched
 * every time.
 */
import { blobFolder, type ByteStream, type Folder } from '../files.js';
import type { HubOptions, HubRepo } from './index.js';

/** The Cache Storage cache the Hub files go in. */
export const HUB_CACHE_NAME = 'qkv-hub-v1';

async function openCache(): Promise<Cache | null> {
  try {
    return 'caches' in globalThis ? await caches.open(HUB_CACHE_NAME) : null;
  } catch {
    return null;
  }
}

/** The body counted as it streams. */
function counted(res: Response, onChunk: (loaded: number) => void): Response {
  let loaded = 0;
  const count = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, out) {
      loaded += chunk.byteLength;
      onChunk(loaded);
      out.enqueue(chunk);
    },
  });
  return new Response(res.body!.pipeThrough(count), { status: res.status, statusText: res.statusText, headers: res.headers });
}

export async function browserHubFolder(repo: HubRepo, options: HubOptions): Promise<Folder & { fetchOptional(name: string): Promise<void> }> {
  const { signal, onProgress } = options;
  const cache = await openCache();
  const fn = `loadModel('${repo.id}')`;
  const blobs = new Map<string, Blob>();

  /** The file as a Blob (from the cache, or fetched into it), or null when the Hub has none. */
  const file = async (name: string, optional: boolean): Promise<Blob | null> => {
    const have = blobs.get(name);
    if (have) return have;
    const url = repo.url(name);
    const hit = await cache?.match(url);
    if (hit) {
      if (hit.status === 404) {
        if (optional) return null;
        throw new Error(`${fn}: the repository has no ${name} at ${repo.revision} (${url}: HTTP 404, cached)`);
      }
      const b = await hit.blob();
      blobs.set(name, b);
      return b;
    }
    let res: Response;
    try {
      res = await fetch(url, { signal });
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      throw new Error(`${fn}: cannot fetch ${url}: ${(e as Error).message}`);
    }
    const code = res.headers.get('x-error-code');
    if (res.status === 404 && (code ?? 'EntryNotFound') === 'EntryNotFound') {
      await cache?.put(url, new Response(null, { status: 404, statusText: 'Not Found' }));
      if (optional) return null;
      throw new Error(`${fn}: the repository has no ${name} at ${repo.revision} (${url}: HTTP 404)`);
    }
    if (!res.ok || !res.body) {
      throw new Error(`${fn}: ${url} answered HTTP ${res.status} ${res.statusText}${code ? ` (${code})` : ''}${res.status === 401 || code === 'RepoNotFound' ? ': no such repository, or it is private or gated' : ''}`);
    }
    const length = Number(res.headers.get('content-length'));
    const total = Number.isSafeInteger(length) && length > 0 && !res.headers.get('content-encoding') ? length : undefined;
    const body = counted(res, (loaded) => onProgress?.({ loaded, total, file: name, stage: 'download' }));
    let b: Blob;
    try {
      if (cache) {
        await cache.put(url, body);  // reads the whole download to disk; rejects if it breaks off
        signal?.throwIfAborted();
        const stored = await cache.match(url);
        if (!stored) throw new Error('the cache dropped it');
        b = await stored.blob();
      } else {
        b = await body.blob();
      }
    } catch (e) {
      if (signal?.aborted) {
        await cache?.delete(url);
        throw signal.reason;
      }
      throw new Error(`${fn}: downloading ${url} failed: ${(e as Error).message}`);
    }
    blobs.set(name, b);
    return b;
  };

  const folder = blobFolder(blobs, repo.id);
  return {
    where: repo.id,
    open: async (name: string, optional: boolean): Promise<ByteStream | null> => ((await file(name, optional)) ? folder.open(name, false) : null),
    size: async (name) => (await file(name, false))!.size,
    fetchOptional: async (name) => {
      await file(name, true).catch(() => {});
    },
  };
}

/** Forgets every Hub file in Cache Storage; false where there is none. */
export async function clearHubCache(): Promise<boolean> {
  return 'caches' in globalThis ? caches.delete(HUB_CACHE_NAME) : false;
}
