// Vite multi-page build of the demo: index.html (model page), encoders.html, playground.html,
// bench.html. The model files (web/models/) are served at /models/ in dev and copied into the
// build, and public/ (the service worker coi-sw.js) is copied next to the pages, so build/demo/
// is a self-contained static site (npm run site copies it to build/site/). COOP/COEP headers
// make pages crossOriginIsolated (SharedArrayBuffer, so the wasm threads variant can run) in dev
// and preview alike; on a host without them the service worker adds them (src/isolation.ts).
import { defineConfig, type Plugin } from 'vite';
import { cpSync, createReadStream, existsSync, statSync } from 'node:fs';
import { dirname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '../..');
const modelsDir = resolve(repo, 'web/models');
const outDir = resolve(repo, 'build/demo');

export const ISOLATION_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

/** /models/* from web/models/ in dev; copied to <outDir>/models/ after a build. */
function models(): Plugin {
  return {
    name: 'qkv-models',
    configureServer(server) {
      server.middlewares.use('/models', (req, res, next) => {
        const rel = normalize(decodeURIComponent((req.url ?? '/').split('?')[0]));
        const file = join(modelsDir, rel);
        if (!file.startsWith(modelsDir) || !existsSync(file) || !statSync(file).isFile()) return next();
        res.setHeader('Content-Type', file.endsWith('.json') ? 'application/json' : 'application/octet-stream');
        res.setHeader('Content-Length', String(statSync(file).size));
        for (const [k, v] of Object.entries(ISOLATION_HEADERS)) res.setHeader(k, v);
        createReadStream(file).pipe(res);
      });
    },
    closeBundle() {
      if (existsSync(modelsDir)) cpSync(modelsDir, join(outDir, 'models'), { recursive: true });
    },
  };
}

export default defineConfig({
  root: here,
  base: './',
  publicDir: resolve(here, 'public'),
  logLevel: 'warn',
  plugins: [models()],
  // the library as a user imports it: the package's entry point, built into dist/ by npm run build
  resolve: { alias: { qkv: resolve(repo, 'dist/index.js') } },
  server: { headers: ISOLATION_HEADERS, fs: { allow: [repo] } },
  preview: { headers: ISOLATION_HEADERS },
  worker: { format: 'es' },
  build: {
    outDir,
    emptyOutDir: true,
    target: 'es2022',
    chunkSizeWarningLimit: 2000,
    // never inline assets as data: URLs: the wasm threads build's pthread worker must be a
    // same-origin file (a data: worker is opaque-origin and cannot import the main script)
    assetsInlineLimit: 0,
    rollupOptions: {
      input: {
        index: resolve(here, 'index.html'),
        encoders: resolve(here, 'encoders.html'),
        playground: resolve(here, 'playground.html'),
        bench: resolve(here, 'bench.html'),
      },
    },
  },
});
