#!/usr/bin/env node
// Runs bench/webgpu/index.html in headless Chromium and writes bench/results/webgpu-<adapter>.json.
//   node bench/webgpu/run.mjs                   SwiftShader (this repository's test setup)
//   node bench/webgpu/run.mjs --gpu             the machine's real GPU (Vulkan); see README.md
//   options: --Ls=128,256,...  --budget=S (per-series time budget)  --matmul=512,1024,...
//            --out=path.json   --serve (only serve the repository with COOP/COEP and wait)
//   env: QKV_CHROMIUM (browser binary, default /usr/bin/chromium), QKV_DIST (default /dist)
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { serve, ROOT, CHROMIUM_ARGS } from '../../tests/browser/harness.js';
import { formatTable } from './bench-core.js';

const arg = (name, dflt) => {
  const a = process.argv.find((x) => x === `--${name}` || x.startsWith(`--${name}=`));
  if (!a) return dflt;
  return a.includes('=') ? a.slice(a.indexOf('=') + 1) : true;
};

const server = await serve({ root: ROOT, isolated: true });
if (arg('serve', false)) {
  console.log(`serving ${ROOT} at ${server.url} (COOP/COEP); open ${server.url}/bench/webgpu/index.html`);
  await new Promise(() => {});
}

const realGpu = arg('gpu', false);
// Real GPU: hardware Vulkan (Linux), no SwiftShader; --ignore-gpu-blocklist for headless servers.
const GPU_ARGS = [
  '--headless=new', '--no-sandbox', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--enable-unsafe-webgpu', '--ignore-gpu-blocklist',
  '--enable-features=Vulkan', '--use-angle=vulkan', '--enable-webgpu-developer-features',
];
const browser = await chromium.launch({
  executablePath: process.env.QKV_CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: realGpu ? GPU_ARGS : [...CHROMIUM_ARGS, '--enable-webgpu-developer-features'],
});
try {
  const page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'log') console.log(m.text()); else if (m.type() === 'error') console.error(m.text()); });
  page.on('pageerror', (e) => console.error(`pageerror: ${e.message}`));
  const q = new URLSearchParams();
  q.set('dist', process.env.QKV_DIST ?? '/dist');
  for (const k of ['Ls', 'budget', 'matmul']) { const v = arg(k, null); if (v) q.set(k, v); }
  await page.goto(`${server.url}/bench/webgpu/index.html?${q}`);
  await page.waitForFunction(() => window.benchResult, null, { timeout: 0, polling: 1000 });
  const result = await page.evaluate(() => window.benchResult);
  if (result.error) throw new Error(result.error);
  result.runner = realGpu ? 'chromium --gpu' : 'chromium swiftshader';
  const tag = (result.webgpu?.adapter?.architecture || result.webgpu?.adapter?.vendor || 'none').replace(/[^a-z0-9-]+/gi, '-').toLowerCase();
  const out = arg('out', null) || join(ROOT, 'bench/results', `webgpu-${tag}.json`);
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  writeFileSync(out, JSON.stringify(result, null, 2) + '\n');
  console.log(`\n${formatTable(result)}\n\nwrote ${out}`);
} finally {
  await browser.close();
  await server.close();
}
