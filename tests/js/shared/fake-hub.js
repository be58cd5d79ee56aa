// A local stand-in for the Hugging Face Hub's file API (no network here), answering as the Hub
// does for huggingface_hub (file_download.py reads these headers):
//   HEAD/GET /<owner>/<name>/resolve/<revision or commit>/<file>
//     a git file: 200, ETag "<git blob sha1>", X-Repo-Commit <commit>, Content-Length
//     an LFS file (*.safetensors): 302 to /lfs/<sha256> (an absolute URL: the CDN), with
//       X-Linked-Etag "<sha256>", X-Linked-Size, X-Repo-Commit; GET /lfs/<sha256> serves the bytes
//     a file the repo lacks: 404, X-Error-Code EntryNotFound, X-Repo-Commit
//     an unknown revision: 404 RevisionNotFound; an unknown repo: 401 RepoNotFound
// with CORS (the headers exposed) for browser pages. `requests` logs every request
// ("HEAD /o/n/resolve/main/config.json"); `cut(file)`: the body stops half-way (the socket is
// destroyed); `trickle(file)`: 64 KB every 100 ms.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';

const sha256 = (b) => createHash('sha256').update(b).digest('hex');
/** git's blob id: sha1 of "blob <size>\0" + bytes (the ETag the Hub gives a non-LFS file). */
const gitSha1 = (b) => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');
export const isLfs = (file) => /\.safetensors$/.test(file);
/** The ETag a file gets (what names its blob in the cache). */
export const etagOf = (file, bytes) => (isLfs(file) ? sha256(bytes) : gitSha1(bytes));

/**
 * repos: { 'owner/name': { revisions: { main: commit, ... }, commits: { [commit]: { file: bytes } } } }
 * (makeRepo builds one). Returns { url, requests, close, options } (options.cut / trickle may be changed).
 */
export async function serveFakeHub(repos, options = {}) {
  const requests = [];
  const lfs = new Map();
  for (const r of Object.values(repos)) for (const files of Object.values(r.commits)) for (const [f, b] of Object.entries(files)) if (isLfs(f)) lfs.set(sha256(b), { file: f, bytes: b });
  const opts = { cut: () => false, trickle: () => false, ...options };
  const cors = {
    'Access-Control-Allow-Origin': '*',
    'Access-Control-Expose-Headers': 'X-Repo-Commit, X-Linked-Etag, X-Linked-Size, X-Error-Code, ETag, Content-Length, Location',
  };
  const send = async (req, res, file, bytes, headers) => {
    res.writeHead(200, { ...cors, 'Content-Type': 'application/octet-stream', 'Content-Length': bytes.length, ...headers });
    if (req.method === 'HEAD') return res.end();
    const cut = opts.cut(file);
    const end = cut ? bytes.length >> 1 : bytes.length;
    const step = opts.trickle(file) ? 64 * 1024 : end;
    for (let o = 0; o < end && !res.destroyed; o += step) {
      res.write(bytes.subarray(o, Math.min(o + step, end)));
      if (step < end) await new Promise((ok) => setTimeout(ok, 100));
    }
    if (cut) setTimeout(() => res.destroy(), 50);  // after the first half has gone out
    else res.end();
  };
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://x');
    requests.push(`${req.method} ${url.pathname}`);
    if (req.method === 'OPTIONS') return res.writeHead(204, { ...cors, 'Access-Control-Allow-Headers': '*' }).end();
    const l = url.pathname.match(/^\/lfs\/([0-9a-f]{64})$/);
    if (l && lfs.has(l[1])) return send(req, res, lfs.get(l[1]).file, lfs.get(l[1]).bytes, {});
    const m = url.pathname.match(/^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/);
    const repo = m && repos[m[1]];
    if (!repo) return res.writeHead(401, { ...cors, 'X-Error-Code': 'RepoNotFound' }).end();
    const rev = decodeURIComponent(m[2]);
    const commit = repo.revisions[rev] ?? (repo.commits[rev] ? rev : null);
    if (!commit) return res.writeHead(404, { ...cors, 'X-Error-Code': 'RevisionNotFound' }).end();
    const file = m[3].split('/').map(decodeURIComponent).join('/');
    const bytes = repo.commits[commit][file];
    if (!bytes) return res.writeHead(404, { ...cors, 'X-Error-Code': 'EntryNotFound', 'X-Repo-Commit': commit }).end();
    if (isLfs(file)) {
      const port = server.address().port;
      return res.writeHead(302, {
        ...cors, Location: `http://127.0.0.1:${port}/lfs/${sha256(bytes)}`, 'X-Repo-Commit': commit,
        'X-Linked-Etag': `"${sha256(bytes)}"`, 'X-Linked-Size': bytes.length, 'Content-Length': 0,
      }).end();
    }
    return send(req, res, file, bytes, { ETag: `"${gitSha1(bytes)}"`, 'X-Repo-Commit': commit });
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    options: opts,
    close: () => new Promise((ok) => { server.closeAllConnections?.(); server.close(ok); }),
  };
}

/** A repo with one commit per revision: { main: files } -> the shape serveFakeHub takes, commits of 40 hex. */
export function makeRepo(byRevision) {
  const revisions = {};
  const commits = {};
  for (const [rev, files] of Object.entries(byRevision)) {
    const commit = createHash('sha1').update(`${rev}:${Object.keys(files).join(',')}`).digest('hex');
    revisions[rev] = commit;
    commits[commit] = Object.fromEntries(Object.entries(files).map(([f, b]) => [f, typeof b === 'string' ? Buffer.from(b) : Buffer.from(b)]));
  }
  return { revisions, commits };
}
