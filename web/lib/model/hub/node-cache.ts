/**
 * The Hub in Node, through Hugging Face's own cache (huggingface_hub's file_download.py layout),
 * so a model a Python user downloaded loads with no network and one qkv downloads is there for
 * Python:
 *
 *   $HF_HUB_CACHE (default $HF_HOME/hub, HF_HOME default ~/.cache/huggingface)
 *     models--owner--name/
 *       refs/<revision>                 the commit hash the revision resolved to
 *       blobs/<etag>                    each file's bytes, named by its ETag (git sha1, or sha256 for LFS files)
 *       blobs/<etag>.incomplete         a download under way (renamed to blobs/<etag> only when whole)
 *       snapshots/<commit>/<file>       a relative symlink to ../../blobs/<etag>
 *       .no_exist/<commit>/<file>       an empty file: the Hub has no such file at that commit
 *
 * A file is read from the cache when refs/<revision> (or a commit-hash revision) names a
 * snapshot holding it (or a .no_exist entry), with no request; else it is asked for as
 * huggingface_hub asks: HEAD without following redirects to another host, the commit from
 * X-Repo-Commit, the ETag from X-Linked-Etag or ETag (W/ and quotes dropped), the size from
 * X-Linked-Size or Content-Length, the bytes from Location (a CDN) or the URL itself.
 * HF_HUB_OFFLINE=1 makes no request at all.
 */
import { fmtBytes } from '../../errors.js';
import { dynamicImport } from '../../platform.js';
import { nodeFolder, type ByteStream, type Folder } from '../files.js';
import type { HubOptions, HubRepo } from './index.js';

const COMMIT = /^[0-9a-f]{40}$/;

type Env = Record<string, string | undefined>;

/**
 * The Hub cache folder: HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub (XDG_CACHE_HOME respected).
 *
 * @param environment the variables to read (default `process.env`)
 */
export function hubCacheDir(environment?: Record<string, string | undefined>): string {
  const e: Env = environment ?? (globalThis as { process?: { env: Env } }).process?.env ?? {};
  const home = e.HOME ?? e.USERPROFILE ?? '.';
  if (e.HF_HUB_CACHE) return e.HF_HUB_CACHE;
  if (e.HUGGINGFACE_HUB_CACHE) return e.HUGGINGFACE_HUB_CACHE;
  const hfHome = e.HF_HOME ?? `${e.XDG_CACHE_HOME ?? `${home}/.cache`}/huggingface`;
  return `${hfHome}/hub`;
}

/** huggingface_hub's _normalize_etag: W/ and the quotes dropped. */
const normalizeEtag = (etag: string) => etag.replace(/^W\//, '').replace(/^"|"$/g, '');

/** A fetch that failed to reach the server (not an HTTP error, not an abort). */
class Unreachable extends Error {}

export async function nodeHubFolder(repo: HubRepo, options: HubOptions): Promise<Folder & { fetchOptional(name: string): Promise<void> }> {
  const [fs, fsp, path] = await Promise.all([dynamicImport('node:fs'), dynamicImport('node:fs/promises'), dynamicImport('node:path')]);
  const { signal, onProgress } = options;
  const environment = (globalThis as { process?: { env: Env } }).process?.env ?? {};
  const offline = ['1', 'ON', 'YES', 'TRUE'].includes((environment.HF_HUB_OFFLINE ?? '').toUpperCase());
  const storage = path.join(hubCacheDir(), `models--${repo.id.replace('/', '--')}`);
  const exists = async (p: string) => fsp.access(p).then(() => true, () => false);
  const fn = `loadModel('${repo.id}')`;

  let commit: string | null = COMMIT.test(repo.revision) ? repo.revision : null;
  if (!commit) {
    try {
      const ref = (await fsp.readFile(path.join(storage, 'refs', repo.revision), 'utf8')).trim();
      if (COMMIT.test(ref)) commit = ref;
    } catch {
      // not cached yet
    }
  }
  /** Why the Hub cannot be asked (offline, or a first request that could not connect). */
  let unreachable: string | null = offline ? 'HF_HUB_OFFLINE is set' : null;

  const setCommit = async (c: string) => {
    if (commit === c) return;
    commit = c;
    if (repo.revision !== c) {
      const ref = path.join(storage, 'refs', repo.revision);
      await fsp.mkdir(path.dirname(ref), { recursive: true });
      await fsp.writeFile(ref, c);
    }
  };

  /** HEAD, following redirects on the same host only (a renamed repo), as huggingface_hub does. */
  const head = async (url: string): Promise<Response> => {
    for (let hops = 0; ; hops++) {
      let res: Response;
      try {
        res = await fetch(url, { method: 'HEAD', redirect: 'manual', headers: { 'Accept-Encoding': 'identity' }, signal });
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        throw new Unreachable(`${url}: ${(e as Error).message}${(e as { cause?: Error }).cause ? ` (${(e as { cause: Error }).cause.message})` : ''}`);
      }
      const location = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && location && hops < 5 && new URL(location, url).host === new URL(url).host && !res.headers.get('x-linked-etag')) {
        url = new URL(location, url).href;
        continue;
      }
      return res;
    }
  };

  /** Downloads `url` to blob (via blob.incomplete), checking its size; progress as it arrives. */
  const download = async (url: string, blob: string, name: string, size: number | undefined) => {
    let res: Response;
    try {
      res = await fetch(url, { headers: { 'Accept-Encoding': 'identity' }, signal });
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      throw new Error(`${fn}: cannot download ${name} from ${url}: ${(e as Error).message}`);
    }
    if (!res.ok || !res.body) throw new Error(`${fn}: downloading ${name} from ${url} failed: HTTP ${res.status} ${res.statusText}`);
    const incomplete = `${blob}.incomplete`;
    await fsp.mkdir(path.dirname(blob), { recursive: true });
    const out = fs.createWriteStream(incomplete);  // truncates what an interrupted download left
    const closed = new Promise<void>((ok, fail) => { out.on('close', ok); out.on('error', fail); });
    let loaded = 0;
    try {
      const reader = res.body.getReader();
      for (;;) {
        const { done, value } = await reader.read().catch((e: Error) => {
          if (signal?.aborted) throw signal.reason;
          throw new Error(`${fn}: downloading ${name} from ${url} failed after ${fmtBytes(loaded)}: ${e.message}`);
        });
        if (done) break;
        if (!out.write(value)) await new Promise((ok) => out.once('drain', ok));
        loaded += value.byteLength;
        onProgress?.({ loaded, total: size, file: name, stage: 'download' });
      }
      signal?.throwIfAborted();
      if (size !== undefined && loaded !== size) {
        throw new Error(`${fn}: downloading ${name} from ${url}: ${loaded} bytes arrived of the ${size} announced`);
      }
    } finally {
      out.end();
      await closed;
    }
    await fsp.rename(incomplete, blob);  // whole: only now is it in the cache
  };

  /** The file's path in the snapshot (downloaded when not cached), or null when the Hub has none. */
  const file = async (name: string, optional: boolean): Promise<string | null> => {
    if (commit) {
      const pointer = path.join(storage, 'snapshots', commit, name);
      if (await exists(pointer)) return pointer;
      if (await exists(path.join(storage, '.no_exist', commit, name))) {
        if (optional) return null;
        throw new Error(`${fn}: the repository has no ${name} at ${repo.revision} (cached: ${path.join(storage, '.no_exist', commit, name)})`);
      }
    }
    if (unreachable) {
      if (optional && commit) return null;  // a partial snapshot: what a Python user downloaded
      throw new Error(`${fn}: ${name} is not in the cache (${storage}) and the Hub cannot be asked: ${unreachable}`);
    }
    const url = repo.url(name, commit ?? repo.revision);
    let res: Response;
    try {
      res = await head(url);
    } catch (e) {
      if (!(e instanceof Unreachable)) throw e;
      unreachable = `cannot reach ${e.message}`;
      if (optional && commit) return null;
      throw new Error(`${fn}: ${name} is not in the cache (${storage}) and the Hub cannot be reached: ${e.message}`);
    }
    const h = res.headers;
    const repoCommit = h.get('x-repo-commit');
    if (res.status === 404 && (h.get('x-error-code') ?? 'EntryNotFound') === 'EntryNotFound') {
      if (repoCommit && COMMIT.test(repoCommit)) {
        await setCommit(repoCommit);
        const marker = path.join(storage, '.no_exist', repoCommit, name);
        await fsp.mkdir(path.dirname(marker), { recursive: true });
        await fsp.writeFile(marker, '');
      }
      if (optional) return null;
      throw new Error(`${fn}: the repository has no ${name} at ${repo.revision} (${url}: HTTP 404)`);
    }
    if (!(res.ok || (res.status >= 300 && res.status < 400))) {
      const code = h.get('x-error-code');
      throw new Error(`${fn}: ${url} answered HTTP ${res.status} ${res.statusText}${code ? ` (${code})` : ''}${res.status === 401 || code === 'RepoNotFound' ? ': no such repository, or it is private or gated' : ''}`);
    }
    if (!repoCommit || !COMMIT.test(repoCommit)) throw new Error(`${fn}: ${url} is not a Hugging Face Hub file (no X-Repo-Commit commit hash in its headers)`);
    const etagHeader = h.get('x-linked-etag') ?? h.get('etag');
    if (!etagHeader) throw new Error(`${fn}: ${url} has no ETag (X-Linked-Etag or ETag): the cache could not tell versions apart`);
    const etag = normalizeEtag(etagHeader);
    if (!/^[\w-]+$/.test(etag)) throw new Error(`${fn}: ${url}: ETag ${JSON.stringify(etagHeader)} is not a file name`);
    const sizeText = h.get('x-linked-size') ?? h.get('content-length');
    const size = sizeText !== null && /^\d+$/.test(sizeText) ? Number(sizeText) : undefined;
    const location = res.status >= 300 && res.status < 400 && h.get('location') ? new URL(h.get('location')!, url).href : url;
    await setCommit(repoCommit);
    const blob = path.join(storage, 'blobs', etag);
    const pointer = path.join(storage, 'snapshots', repoCommit, name);
    if (!(await exists(blob))) await download(location, blob, name, size);
    await fsp.mkdir(path.dirname(pointer), { recursive: true });
    await fsp.rm(pointer, { force: true });
    await fsp.symlink(path.relative(path.dirname(pointer), blob), pointer);
    return pointer;
  };

  const local = async (p: string) => nodeFolder(path.dirname(p), signal);
  const open = async (name: string, optional: boolean): Promise<ByteStream | null> => {
    const p = await file(name, optional);
    return p === null ? null : (await local(p)).open(path.basename(p), false);
  };
  return {
    where: repo.id,
    open,
    size: async (name) => {
      const p = (await file(name, false))!;
      return (await fsp.stat(p)).size;
    },
    fetchOptional: async (name) => {
      try {
        await file(name, true);
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        // an extra file: its failure does not fail the load
      }
    },
  };
}
