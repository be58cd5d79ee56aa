// The Hub panel's source: a Hub id ("Qwen/Qwen3-0.6B", "owner/name@revision"), one GGUF file of
// a repository ("owner/name/x-Q4_0.gguf", "owner/name@revision/x.gguf"), a Hub file URL
// (".../owner/name/resolve/<revision>/", or to a .gguf in it), or any folder URL. Ids and Hub URLs load through qkv's
// own Hub loading (loadModel('owner/name', { revision })): each file downloaded once with
// progress and a cancel, kept in the browser's Cache Storage so that a second visit reads them
// from disk. Another folder URL is read by loadModel(url), uncached.
import { qkv } from './api';

/** GPT-2 small (124M) on the Hub. */
export const HUB_GPT2 = 'openai-community/gpt2';
/** The cache the demo used before qkv had its own (cleared with it). */
const OLD_CACHE = 'qkv-models-v1';
const ID = /^([A-Za-z0-9][\w.-]*\/[A-Za-z0-9][\w.-]*)(?:@([^/]+))?(?:\/([^/]+\.gguf))?$/i;

/** What loadModel is given for the panel's text. */
export type HubSource =
  | { kind: 'id'; id: string; revision?: string; hubUrl?: string; file?: string }
  | { kind: 'url'; url: string };

/**
 * The panel's text as a source: an id (with @revision), a Hub URL (its host becomes env.hubUrl
 * for the load), or a folder URL.
 */
export function parseHubSource(text: string): HubSource {
  const s = text.trim();
  const id = s.match(ID);
  if (id) return { kind: 'id', id: id[1], ...(id[2] ? { revision: id[2] } : {}), ...(id[3] ? { file: id[3] } : {}) };
  const url = new URL(s, location.href);
  const m = url.pathname.match(/^(.*?)\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/?([^/]+\.gguf)?$/i);
  if (m) return { kind: 'id', id: m[2], revision: decodeURIComponent(m[3]), hubUrl: `${url.origin}${m[1]}`, ...(m[4] ? { file: decodeURIComponent(m[4]) } : {}) };
  return { kind: 'url', url: url.href };
}

/** The checkpoint's name: "owner/name" for the Hub, else the folder's last part. */
export function hubName(source: HubSource): string {
  if (source.kind === 'id') return source.file ? `${source.id}/${source.file}` : source.id;
  const parts = new URL(source.url).pathname.split('/').filter(Boolean);
  return parts.pop() ?? new URL(source.url).host;
}

/** Forgets every cached Hub file (the page's "clear cache" button). */
export async function clearCheckpointCache(): Promise<boolean> {
  const old = 'caches' in globalThis ? await caches.delete(OLD_CACHE) : false;
  return (await qkv.clearHubCache()) || old;
}
