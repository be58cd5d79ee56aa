#!/usr/bin/env node
// Static server for the built demo (build/demo/) with the COOP/COEP headers that make the
// pages crossOriginIsolated, so SharedArrayBuffer and the wasm threads variant are available.
// usage: node tools/serve-demo.mjs [--root DIR] [--port N] [--host H]   (PORT env also works)
// Prints "qkv demo: http://localhost:<port>/" once listening. A busy port tries the next one.
import { createServer } from 'node:http';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { extname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript',
  '.css': 'text/css', '.json': 'application/json', '.wasm': 'application/wasm', '.wgsl': 'text/plain',
  '.png': 'image/png', '.svg': 'image/svg+xml', '.ico': 'image/x-icon', '.txt': 'text/plain; charset=utf-8',
  '.safetensors': 'application/octet-stream', '.bin': 'application/octet-stream', '.map': 'application/json',
};

export const ISOLATION_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

/** Serves root; resolves { server, url, port }. */
export async function serveDemo({ root, port = 5173, host = '127.0.0.1', tries = 20 } = {}) {
  root = resolve(root ?? fileURLToPath(new URL('../build/demo', import.meta.url)));
  const server = createServer(async (req, res) => {
    try {
      let path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname));
      if (path.endsWith('/')) path += 'index.html';
      let file = join(root, path);
      if (!file.startsWith(root)) { res.writeHead(403).end('forbidden'); return; }
      let info = await stat(file).catch(() => null);
      if (info?.isDirectory()) { file = join(file, 'index.html'); info = await stat(file).catch(() => null); }
      if (!info && !extname(file)) { file += '.html'; info = await stat(file).catch(() => null); }
      if (!info?.isFile()) { res.writeHead(404, { 'Content-Type': 'text/plain', ...ISOLATION_HEADERS }).end('not found'); return; }
      res.writeHead(200, {
        'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream',
        'Content-Length': info.size,
        'Cache-Control': 'no-cache',
        ...ISOLATION_HEADERS,
      });
      if (req.method === 'HEAD') { res.end(); return; }
      createReadStream(file).pipe(res);
    } catch (e) {
      res.writeHead(500).end(String(e));
    }
  });
  for (let i = 0; ; i++) {
    try {
      await new Promise((ok, fail) => { server.once('error', fail); server.listen(port + i, host, () => { server.off('error', fail); ok(); }); });
      const p = server.address().port;
      const shown = host === '127.0.0.1' || host === '0.0.0.0' ? 'localhost' : host;
      return { server, port: p, url: `http://${shown}:${p}/` };
    } catch (e) {
      if (e.code !== 'EADDRINUSE' || i + 1 >= tries || port === 0) throw e;
    }
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const arg = (name) => { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : undefined; };
  const { url } = await serveDemo({
    root: arg('--root'),
    port: Number(arg('--port') ?? process.env.PORT ?? 5173),
    host: arg('--host') ?? process.env.HOST ?? '127.0.0.1',
  });
  console.log(`qkv demo: ${url}  (model page; also playground.html, bench.html) — Ctrl-C to stop`);
}
