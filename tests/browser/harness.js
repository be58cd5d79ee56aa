// Shared by every browser test: a static file server over the repository root (optionally
// with the COOP/COEP headers that make a page crossOriginIsolated, so wasm threads can run)
// and headless Debian Chromium with SwiftShader WebGPU, driven by playwright-core.
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));

const TYPES = {
  '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.json': 'application/json',
  '.wasm': 'application/wasm', '.wgsl': 'text/plain', '.css': 'text/css', '.png': 'image/png',
  '.safetensors': 'application/octet-stream', '.bin': 'application/octet-stream', '.txt': 'text/plain',
};

/**
 * Serves `root` on 127.0.0.1 (random port). isolated: send COOP/COEP. mounts: URL path prefixes
 * ('/d/x/') served from other folders. dynamic: URL paths answered with the text a function
 * returns at each request (a benchmark's /cpu-ms). Returns { url, close }.
 */
export async function serve({ root = ROOT, isolated = true, mounts = {}, dynamic = {} } = {}) {
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname));
    const headers = { 'Cache-Control': 'no-store' };
    if (isolated) {
      headers['Cross-Origin-Opener-Policy'] = 'same-origin';
      headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
    }
    if (Object.hasOwn(dynamic, path)) { res.writeHead(200, { ...headers, 'Content-Type': 'text/plain' }).end(String(dynamic[path]())); return; }
    const prefix = Object.keys(mounts).find((p) => path.startsWith(p));
    const base = prefix ? mounts[prefix] : root;
    const rel = prefix ? path.slice(prefix.length) : path;
    const file = join(base, rel === '' || rel.endsWith('/') ? rel + 'index.html' : rel);
    if (!file.startsWith(base)) { res.writeHead(403).end(); return; }
    try {
      if (!(await stat(file)).isFile()) throw new Error('not a file');
      res.writeHead(200, { ...headers, 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(await readFile(file));
    } catch {
      res.writeHead(404).end('not found');
    }
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address();
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((ok) => server.close(ok)) };
}

const CHROMIUM = process.env.QKV_CHROMIUM ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--headless=new', '--no-sandbox', '--disable-gpu-sandbox', '--no-first-run', '--disable-quic',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-vulkan=swiftshader',
  '--use-webgpu-adapter=swiftshader',
];

/** Launches headless Debian Chromium with SwiftShader WebGPU. extraArgs are appended. */
export async function launch(extraArgs = []) {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS, ...extraArgs] });
}

/**
 * Chromium with a profile on disk (userDataDir), as a user's browser has: Cache Storage and the
 * storage quota are then the disk's, where a fresh context keeps them in memory with a small
 * quota. A BrowserContext: it has newPage() as a Browser has, browser() is the Browser, and
 * close() closes it.
 */
export async function launchWithProfile(userDataDir, extraArgs = []) {
  return chromium.launchPersistentContext(userDataDir, { executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS, ...extraArgs] });
}

/** Opens `url` in a new page and collects console errors/warnings and page errors into page.problems. */
export async function openPage(browser, url, { viewport } = {}) {
  const page = await browser.newPage(viewport ? { viewport } : {});
  page.problems = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') page.problems.push(`${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => page.problems.push(`pageerror: ${e.message}`));
  await page.goto(url);
  return page;
}

/**
 * For a test's failure message: a DevTools session with the debugger on, so that `stack()` can
 * say where the page's main thread is ("function (file:line:column)" frames, innermost first) even
 * when it never returns to its event loop (V8 takes the pause between statements and inside
 * wasm loops; the debugger must be on before the hang, as enabling it needs the main thread).
 * While it is on, V8 runs wasm in its debuggable tier: watch a short step, then `stop()`.
 */
export async function watchMainThread(page) {
  const cdp = await page.context().newCDPSession(page);
  const scripts = new Map(); // scriptId -> its file's name
  cdp.on('Debugger.scriptParsed', (s) => scripts.set(s.scriptId, s.url.split('/').pop()));
  await cdp.send('Debugger.enable');
  return {
    async stack(ms = 10_000) {
      try {
        const paused = new Promise((ok) => cdp.once('Debugger.paused', ok));
        await cdp.send('Debugger.pause');
        const ev = await Promise.race([paused, new Promise((ok) => setTimeout(ok, ms, null))]);
        if (!ev) {
          // else the pending pause would stop the next script the page runs (an evaluate too)
          await cdp.send('Debugger.disable');
          await cdp.send('Debugger.enable');
          return `the main thread did not pause within ${ms} ms: no script ran (the page waits for an event)`;
        }
        await cdp.send('Debugger.resume');
        const at = ({ scriptId, lineNumber, columnNumber }) => `${scripts.get(scriptId) || scriptId}:${lineNumber + 1}:${(columnNumber ?? 0) + 1}`;
        return ev.callFrames.map((f) => `${f.functionName || '(anonymous)'} (${at(f.location)})`).join(' <- ');
      } catch (e) {
        return `no stack: ${e.message}`;
      }
    },
    stop: () => cdp.detach().catch(() => {}),
  };
}

/**
 * Clicks `cancel` as soon as the progress bar `bar` has moved, while the panel `panel` still says
 * data-state=running (in the page: no round trip between seeing and clicking). Rejects when the
 * run ends before its bar moved.
 */
export const cancelWhenMoving = (page, panel, bar, cancel) => page.evaluate(([p, b, c]) => new Promise((ok, fail) => {
  const t = setInterval(() => {
    if (document.querySelector(b).value > 0) { clearInterval(t); document.querySelector(c).click(); ok(); }
    else if (document.querySelector(p).dataset.state !== 'running') { clearInterval(t); fail(new Error(`the run ended ${document.querySelector(p).dataset.state} before its bar moved`)); }
  }, 1);
}), [panel, bar, cancel]);

/** A demo page's URL fragment from its fields: hash({ model, prompt }) -> '#model=...&prompt=...'. */
export const hash = (fields) => '#' + new URLSearchParams(fields).toString();

/** A number as the demo prints it ("+1.234", "−0.020": a minus sign, not a hyphen) -> 1.234, -0.02. */
export const shownNumber = (text) => Number(text.replace('−', '-'));
