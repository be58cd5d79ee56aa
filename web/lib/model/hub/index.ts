/**
 * `loadModel('owner/name', { revision })`: a checkpoint on the Hugging Face Hub (host
 * `env.hubUrl`), read file by file through a cache — Hugging Face's own cache layout on disk in
 * Node (node-cache.ts), Cache Storage in browsers (browser-cache.ts) — as a {@link Folder} that
 * loadModel reads as any other: config.json, the tokenizer files it finds, model.safetensors or
 * the index and its shards. Each file is downloaded once (with progress, cancelled by the
 * signal), then read from the cache; a second load makes no request.
 */
import { env } from '../../env.js';
import { describe } from '../../errors.js';
import { dynamicImport, isNode } from '../../platform.js';
import { readFromFolder, type ByteStream, type Folder, type RawFiles } from '../files.js';
import type { LoadProgress } from '../load.js';
import { browserHubFolder } from './browser-cache.js';
import { nodeHubFolder } from './node-cache.js';

export { hubCacheDir } from './node-cache.js';
export { clearHubCache, HUB_CACHE_NAME } from './browser-cache.js';

/** 'owner/name': one slash, no leading '.', '/' or scheme (those are folders or URLs). */
const HUB_ID = /^[A-Za-z0-9][\w.-]*\/[A-Za-z0-9][\w.-]*$/;

/** What a Hub read needs to know. */
export interface HubOptions {
  revision?: string;
  signal?: AbortSignal;
  onProgress?: (p: LoadProgress) => void;
}

/** One repository at one revision, and where its files go. */
export interface HubRepo {
  id: string;
  revision: string;
  /** The resolve URL of a file at `rev` (the revision, or the commit once known). */
  url(file: string, rev?: string): string;
}

/** Files qkv does not read but a Python user of the same cache wants beside the rest (optional). */
export const HUB_EXTRA_FILES = ['generation_config.json', 'special_tokens_map.json'];

/**
 * Whether `source` is a Hub id: 'owner/name', and in Node not a folder by that relative path
 * (a folder wins, as in transformers). A relative folder URL in a browser is written './a/b'.
 */
export async function isHubId(source: string): Promise<boolean> {
  if (!HUB_ID.test(source)) return false;
  if (!isNode) return true;
  const fsp = await dynamicImport('node:fs/promises');
  try {
    return !(await fsp.stat(source)).isDirectory();
  } catch {
    return true;
  }
}

export function hubRepo(id: string, revision: string | undefined): HubRepo {
  const rev = revision ?? 'main';
  if (rev.split('/').some((part) => part === '' || part === '.' || part === '..')) {
    throw new TypeError(`loadModel: options.revision ${describe(rev)} is not a branch, tag or commit hash`);
  }
  const base = env.hubUrl;
  return {
    id,
    revision: rev,
    url: (file, at = rev) => `${base}/${id}/resolve/${encodeURIComponent(at)}/${file.split('/').map(encodeURIComponent).join('/')}`,
  };
}

/**
 * Reads a Hub checkpoint through the cache: the files loadModel asks for, fetched when not
 * cached; then the extra files a Python user of the cache expects (when they exist).
 */
export async function readHub(id: string, options: HubOptions): Promise<RawFiles> {
  const repo = hubRepo(id, options.revision);
  const folder: Folder & { fetchOptional(name: string): Promise<void> } = isNode
    ? await nodeHubFolder(repo, options)
    : await browserHubFolder(repo, options);
  const raw = await readFromFolder(folder);
  if (isNode) for (const name of HUB_EXTRA_FILES) await folder.fetchOptional(name);
  return raw;
}

/**
 * One file of a Hub repository (a GGUF file: `loadModel('owner/name', { file })`), through the
 * same cache: downloaded once, then opened from the cache as a stream.
 */
export async function openHubFile(id: string, file: string, options: HubOptions): Promise<ByteStream> {
  const repo = hubRepo(id, options.revision);
  const folder = isNode ? await nodeHubFolder(repo, options) : await browserHubFolder(repo, options);
  return (await folder.open(file, false))!;
}
