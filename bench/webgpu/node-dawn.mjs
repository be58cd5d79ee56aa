#!/usr/bin/env node
// The WebGPU benchmark under Node with Dawn (npm package `webgpu`), for a machine with a real
// GPU and no network: the same bench-core.js as the browser page, WASM measured in Node.
//   node bench/webgpu/node-dawn.mjs [--Ls=128,...] [--budget=S] [--matmul=512,...] [--out=path.json]
// Needs dist/ (npm run build) and node_modules/webgpu (npm install --no-save webgpu, while online;
// then carry node_modules/webgpu with the checkout). Writes bench/results/webgpu-node-<adapter>.json.
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { runBenchmark, formatTable } from './bench-core.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const arg = (name, dflt) => {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a ? a.slice(a.indexOf('=') + 1) : dflt;
};

let dawn;
try {
  dawn = await import('webgpu');
} catch (e) {
  console.error(`node-dawn: the npm package 'webgpu' (Dawn for Node) is not installed: ${e.message}\n` +
    `  install it once while online: npm install --no-save webgpu  (then carry node_modules/webgpu along)`);
  process.exit(2);
}
Object.assign(globalThis, dawn.globals);
const flags = (process.env.QKV_DAWN_FLAGS ?? 'enable-dawn-features=allow_unsafe_apis,disable_timestamp_query_conversion').split(' ').filter(Boolean);
Object.defineProperty(globalThis, 'navigator', { value: { gpu: dawn.create(flags) }, configurable: true, writable: true });

const qkv = await import(join(ROOT, 'dist/index.js'));
const gpu = await import(join(ROOT, 'dist/webgpu/index.js'));
const result = await runBenchmark({
  qkv, gpu,
  matmulWgsl: readFileSync(join(ROOT, 'bench/webgpu/matmul.wgsl'), 'utf8'),
  Ls: arg('Ls', '128,256,512,1024,2048,4096,8192,16384').split(',').map(Number),
  budgetS: Number(arg('budget', 30)),
  matmulSizes: arg('matmul', '512,1024,2048,4096').split(',').map(Number),
  log: (s) => console.log(s),
});
result.runner = 'node + dawn (npm webgpu)';
const tag = (result.webgpu?.adapter?.architecture || result.webgpu?.adapter?.vendor || 'none').replace(/[^a-z0-9-]+/gi, '-').toLowerCase();
const out = arg('out', join(ROOT, 'bench/results', `webgpu-node-${tag}.json`));
mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
writeFileSync(out, JSON.stringify(result, null, 2) + '\n');
console.log(`\n${formatTable(result)}\n\nwrote ${out}`);
process.exit(0);
