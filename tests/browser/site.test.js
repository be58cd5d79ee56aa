// The demo as a static site (npm run site -> build/site/, docs/site.md) in the browser
// browsers.js drives (Chromium in stage 60, QKV_BROWSER=firefox in stage 65). The folder is
// served as it is by a plain static server that sends no COOP/COEP headers, as GitHub Pages or a
// CDN does: the page's service worker must make it cross-origin isolated (one reload), and
// every page must say so in the line a reader sees in its header (#runtime): the wasm build,
// the thread count and the mode. The model page must then generate with threads. With the
// server's own headers (tools/serve-demo.mjs, as npm start serves) the line names the server
// and no service worker is registered, and so it does when a host starts sending them under an
// installed worker; where the service worker cannot install (the host answers 404 for it) the
// page runs one thread, says why, does not reload, and still generates; a worker that adds no
// headers costs one reload, never a loop.
// Each case has its own server, so its own origin: no service worker carries over between them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createReadStream, existsSync, readFileSync } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import { ROOT } from './harness.js';
import { BROWSER, launchBrowser } from './browsers.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

const SITE = join(ROOT, 'build/site');
const ART = join(ROOT, `build/artifacts/site-${BROWSER}`);
const DESKTOP = { width: 1280, height: 800 };
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css',
  '.json': 'application/json', '.wasm': 'application/wasm', '.txt': 'text/plain', '.svg': 'image/svg+xml' };

/**
 * A plain static file server over build/site/: Content-Type and nothing else. `missing` paths
 * answer 404; `replaced` maps a path to the JavaScript served there instead of the file. Setting
 * `isolating` on the returned host makes it send COOP/COEP from then on.
 */
async function plainHost({ missing = [], replaced = {} } = {}) {
  const host = { isolating: false };
  const server = createServer(async (req, res) => {
    let path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname));
    if (path.endsWith('/')) path += 'index.html';
    if (Object.hasOwn(replaced, path)) { res.writeHead(200, { 'Content-Type': 'text/javascript' }).end(replaced[path]); return; }
    const file = join(SITE, path);
    const info = file.startsWith(SITE) && !missing.includes(path) ? await stat(file).catch(() => null) : null;
    if (!info?.isFile()) { res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found'); return; }
    const isolation = host.isolating ? { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' } : {};
    res.writeHead(200, { 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream', 'Content-Length': info.size, ...isolation });
    if (req.method === 'HEAD') res.end(); else createReadStream(file).pipe(res);
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return Object.assign(host, { url: `http://127.0.0.1:${server.address().port}/`, close: () => server.close() });
}

let browser;
const servers = [];
before(async () => {
  assert.ok(existsSync(join(SITE, 'index.html')) && existsSync(join(SITE, 'coi-sw.js')),
    'build/site/ is missing: run `npm run site` (the stage scripts run tools/site.sh --no-library)');
  await mkdir(ART, { recursive: true });
  browser = await launchBrowser(BROWSER);
});
after(async () => { await browser?.close(); for (const s of servers) s.close(); });

const LINE = /^wasm (\S+) · (?:threads: (\d+) \((.+)\)|1 thread: (not cross-origin isolated \(.+\)))$/;

/**
 * Opens `path` (in a new tab, or in `page`, as following a link does) and waits until the page is
 * ready and its header line names a loaded build (after the service worker's one reload, where
 * there is one; `loaded` false: a line that says the build is not loaded yet). Returns the tab,
 * the line's text and parts, and how the page came to be.
 */
async function open(url, path, { loaded = true, page } = {}) {
  if (page) await page.raw.goto(url + path);
  else page = await browser.open(url + path, { viewport: DESKTOP });
  await page.waitFor((loaded) => {
    const t = document.querySelector('#runtime')?.innerText ?? '';
    return document.body.dataset.ready === 'true' && (loaded ? /^wasm [a-z-]+ ·/.test(t) : !/^checking|reloading/.test(t));
  }, loaded, { timeout: 90_000 });
  const text = (await page.text('#runtime')).trim();
  const m = LINE.exec(text);
  const state = await page.evaluate(() => ({
    isolated: self.crossOriginIsolated,
    navigation: performance.getEntriesByType('navigation')[0]?.type,
    controlled: !!navigator.serviceWorker?.controller,
    cores: navigator.hardwareConcurrency,
    pendingReload: sessionStorage.getItem('qkv-coi-reloaded'),
  }));
  return { page, text, variant: m?.[1], threads: m?.[2] === undefined ? (m?.[4] ? 1 : undefined) : Number(m[2]), mode: m?.[3] ?? m?.[4], ...state };
}

/** What the model page shows after Generate: the text added after the prompt, and its backend line. */
async function generate(page) {
  await page.waitForSelector('#generate:not([disabled])', { timeout: 60_000 });
  const prompt = (await page.evaluate(() => document.querySelector('#prompt').value)).trim();
  await page.waitFor((p) => document.querySelector('#output').innerText.trim() === p, prompt, { timeout: 60_000 });
  await page.fill('#max-new', '12');
  await page.click('#generate');
  await page.waitForSelector('body[data-generating=false][data-generated]', { timeout: 180_000 });
  const output = await page.text('#output');
  // the default model's tokenizer adds GPT-2's prefix space (add_prefix_space), and the output
  // shows the tokenizer's decode
  assert.ok(output.startsWith(` ${prompt}`), `#output should start with the prompt after one space: "${output}"`);
  return { added: output.slice(prompt.length), count: await page.text('#count'), backend: await page.text('#backend') };
}

/** The threads qkv uses by default: env.numThreads = min(4, cores); the threads build only when that is > 1. */
const expectedThreads = (cores) => Math.min(4, cores);

test(`${BROWSER}: a host without COOP/COEP: the service worker isolates every page and the model generates with threads`, async () => {
  const host = await plainHost();
  servers.push(host);
  const s = await open(host.url, 'index.html');
  const want = expectedThreads(s.cores);
  assert.equal(s.mode, 'cross-origin isolated via service worker', `model page's line: "${s.text}"`);
  assert.equal(s.isolated, true, 'crossOriginIsolated');
  assert.equal(s.threads, want, `threads shown: "${s.text}" (${s.cores} cores)`);
  if (want > 1) assert.match(s.variant, /-threads$/, `the build shown runs threads: "${s.text}"`);
  assert.equal(s.navigation, 'reload', 'the page reloads once to be served through its service worker');
  assert.equal(s.controlled, true, 'controlled by the service worker');
  assert.equal(s.pendingReload, null, 'the reload marker is cleared once isolated');
  const g = await generate(s.page);
  assert.ok(g.added.trim().length >= 3, `generating added only "${g.added}"`);
  assert.equal(g.count, '12');
  assert.equal(g.backend, `qkv wasm ${s.variant}${want > 1 ? ` × ${want} threads` : ''}`);
  await s.page.screenshot(join(ART, 'model-service-worker-1280x800.png'));
  assert.deepEqual(s.page.problems, [], 'model page: console errors/warnings');

  // the other pages, opened from the same tab, are served through the installed worker from their first load: no reload
  for (const [name, path, loaded] of [['encoders', 'encoders.html', true], ['playground', 'playground.html', true], ['bench', 'bench.html', false]]) {
    const p = await open(host.url, path, { loaded, page: s.page });
    assert.equal(p.isolated, true, `${name}: crossOriginIsolated`);
    assert.equal(p.navigation, 'navigate', `${name}: no reload once the worker is installed`);
    assert.match(p.text, /\(cross-origin isolated via service worker\)$/, `${name}'s line`);
    if (loaded) assert.equal(p.threads, want, `${name}: threads shown: "${p.text}"`);
    else assert.equal(p.text, 'wasm not loaded yet · threads available (cross-origin isolated via service worker)', `${name}'s line before a run`);
    if (name === 'bench' && want > 1) {
      const choices = await p.page.text('#backends');
      assert.match(choices, new RegExp(`wasm SIMD × ${Math.min(s.cores, 8)} threads(?! \\()`), `bench offers threads: "${choices}"`);
      assert.doesNotMatch(choices, /not crossOriginIsolated/, `bench backends: "${choices}"`);
    }
    await p.page.screenshot(join(ART, `${name}-service-worker-1280x800.png`));
    assert.deepEqual(p.page.problems, [], `${name}: console errors/warnings`);
  }
  await s.page.close();
});

test(`${BROWSER}: the API reference is part of the site (api/): the index links every kind of export, an options page lists its options`, async () => {
  const host = await plainHost();
  servers.push(host);
  const page = await browser.open(`${host.url}api/index.html`, { viewport: DESKTOP });
  await page.waitForSelector('.tsd-page-title', { timeout: 30_000 });
  const links = await page.evaluate(() => [...document.querySelectorAll('a[href]')].map((a) => a.getAttribute('href')));
  for (const href of ['functions/loadModel.html', 'functions/scaledDotProductAttention.html', 'classes/Tensor.html',
    'interfaces/LoadOptions.html', 'types/Variant.html', 'variables/env.html']) {
    assert.ok(links.includes(href), `api/index.html links ${href}`);
  }
  await page.raw.goto(`${host.url}api/interfaces/LoadOptions.html`);
  await page.waitForSelector('.tsd-page-title', { timeout: 30_000 });
  const members = await page.evaluate(() => [...document.querySelectorAll('.tsd-member .tsd-anchor-link')].map((e) => e.id));
  // every option the package declares (dist/model/load.d.ts), as the page's anchors spell them
  const declared = readFileSync(join(ROOT, 'dist', 'model', 'load.d.ts'), 'utf8').match(/export interface LoadOptions \{[^]*?\n\}/)[0];
  const options = [...declared.matchAll(/^ {4}(\w+)\??:/gm)].map((m) => m[1].toLowerCase());
  assert.ok(options.length >= 4, `LoadOptions declares ${options.length} options`);
  assert.deepEqual(members.sort(), options.sort(), 'LoadOptions: every option');
  assert.match(await page.text('.tsd-page-title'), /LoadOptions/);
  assert.deepEqual(page.problems, [], 'console errors/warnings');
  await page.close();
});

test(`${BROWSER}: a server that sends COOP/COEP: the line names the server's headers and no service worker is registered`, async () => {
  const { server, url } = await serveDemo({ root: SITE, port: 0 });
  servers.push(server);
  const s = await open(url, 'index.html');
  assert.equal(s.isolated, true, 'crossOriginIsolated');
  assert.equal(s.mode, "cross-origin isolated by the server's headers", `line: "${s.text}"`);
  assert.equal(s.threads, expectedThreads(s.cores), `threads shown: "${s.text}"`);
  assert.equal(s.navigation, 'navigate', 'no reload');
  assert.equal(s.controlled, false, 'no service worker controls the page');
  assert.equal(await s.page.evaluate(async () => (await navigator.serviceWorker.getRegistrations()).length), 0, 'service worker registrations');
  assert.deepEqual(s.page.problems, [], 'console errors/warnings');
  await s.page.close();
});

test(`${BROWSER}: a host that starts sending COOP/COEP under an installed service worker: the line names the server's headers`, async () => {
  const host = await plainHost();
  servers.push(host);
  const first = await open(host.url, 'index.html');
  assert.equal(first.mode, 'cross-origin isolated via service worker', `line: "${first.text}"`);
  host.isolating = true;
  const s = await open(host.url, 'index.html', { page: first.page });
  assert.equal(s.controlled, true, 'the service worker still controls the page');
  assert.equal(s.isolated, true, 'crossOriginIsolated');
  assert.equal(s.mode, "cross-origin isolated by the server's headers", `line: "${s.text}"`);
  assert.deepEqual(s.page.problems, [], 'console errors/warnings');
  await s.page.close();
});

test(`${BROWSER}: a service worker that cannot install: one thread, the page says why, no reload, and it still generates`, async () => {
  const host = await plainHost({ missing: ['/coi-sw.js'] });
  servers.push(host);
  const s = await open(host.url, 'index.html');
  assert.equal(s.isolated, false, 'crossOriginIsolated');
  assert.equal(s.mode, 'not cross-origin isolated (the service worker could not install)', `line: "${s.text}"`);
  assert.ok((await s.page.evaluate(() => document.querySelector('#runtime').title)).length > 0, "the line's title holds the browser's message");
  assert.equal(s.threads, 1, `line: "${s.text}"`);
  assert.doesNotMatch(s.variant, /threads/, `build shown: "${s.text}"`);
  assert.equal(s.navigation, 'navigate', 'no reload');
  const origin = await s.page.evaluate(() => performance.timeOrigin);
  const g = await generate(s.page);
  assert.ok(g.added.trim().length >= 3, `generating added only "${g.added}"`);
  assert.equal(g.backend, `qkv wasm ${s.variant}`);
  assert.equal(await s.page.evaluate(() => performance.timeOrigin), origin, 'the page never reloaded');
  await s.page.screenshot(join(ART, 'model-one-thread-1280x800.png'));
  // the browser reports the failed registration (the 404) in the console; nothing else may appear
  const others = s.page.problems.filter((p) => !/coi-sw\.js|ServiceWorker|service worker|404|Not Found/i.test(p));
  assert.deepEqual(others, [], 'console errors/warnings other than the failed registration');
  await s.page.close();
});

test(`${BROWSER}: a service worker that installs but adds no headers: one reload, never a second, and one thread said so`, async () => {
  const host = await plainHost({ replaced: { '/coi-sw.js': "self.addEventListener('install', () => self.skipWaiting());\n" +
    "self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));\n" } });
  servers.push(host);
  const s = await open(host.url, 'index.html');
  assert.equal(s.isolated, false, 'crossOriginIsolated');
  assert.equal(s.mode, 'not cross-origin isolated (the service worker is installed, yet the reloaded page is not isolated)', `line: "${s.text}"`);
  assert.equal(s.navigation, 'reload', 'reloaded once');
  assert.equal(s.pendingReload, null, 'the reload marker is cleared, so a reload by the user tries again');
  const origin = await s.page.evaluate(() => performance.timeOrigin);
  const g = await generate(s.page);
  assert.ok(g.added.trim().length >= 3, `generating added only "${g.added}"`);
  assert.equal(g.backend, `qkv wasm ${s.variant}`);
  assert.equal(await s.page.evaluate(() => performance.timeOrigin), origin, 'no second reload');
  assert.deepEqual(s.page.problems, [], 'console errors/warnings');
  await s.page.close();
});
