#!/usr/bin/env node
// What the relaxed-SIMD int8 dot product would give the 4-bit matrix-vector product, measured
// where it runs correctly (Chromium; Node 20 returns twice the dot and drops the accumulator,
// docs/kernels.md "The relaxed int8 dot"). Not a library kernel: a probe for the 4-bit decode.
//
// relaxed_dot_q4.cpp holds three kernels over one set of 16 columns: Q8 as the library reads it
// (int8 widened in the load, x as int16 k-pairs, i32x4.dot_i16x8_s), Q4 as the library reads it
// (nibbles masked into int16 lanes, the same dot), and Q4 through
// i32x4.relaxed_dot_i8x16_i7x16_add_s (nibbles to bytes, x as int8 in runs of 4 k, 16
// multiply-adds and the accumulate in one instruction). LLVM 14 cannot emit that instruction, so
// the C++ calls __builtin_wasm_fma_f64x2 (pre-standard 0xfd 0xcf, unused otherwise) and this
// script rewrites each one after the link (the same length: nothing else moves).
//
//   node bench/matmul/relaxed_dot_q4.mjs [out.json]   (default bench/results/relaxed-dot-q4-chromium.json)
//
// Prints a table (Gweights/s and GB/s of weights, in cache and from memory, the read bandwidth
// of the same page) and writes the JSON. Needs emcc (NODE_PATH=/usr/share/nodejs) and Chromium.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { rewriteDot } from '../../tools/wasm/relax-fma.mjs';
import { launch, serve } from '../../tests/browser/harness.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../..');
const OUT_DIR = path.join(ROOT, 'build/relaxed-dot-q4');
const JSON_OUT = path.resolve(ROOT, process.argv[2] ?? 'bench/results/relaxed-dot-q4-chromium.json');

mkdirSync(OUT_DIR, { recursive: true });
// compiled at -O3, linked at -O1 (no Binaryen pass over the code), as the library is (wasm/CMakeLists.txt)
const emEnv = { ...process.env, NODE_PATH: process.env.NODE_PATH ?? '/usr/share/nodejs' };
const object = path.join(OUT_DIR, 'relaxed_dot_q4.o');
execFileSync('em++', ['-O3', '-std=c++17', '-msimd128', '-mrelaxed-simd', '-c', path.join(HERE, 'relaxed_dot_q4.cpp'), '-o', object],
  { stdio: 'inherit', env: emEnv });
execFileSync('em++', [process.env.QKV_PROBE_LINK_OPT ?? '-O1', '-sENVIRONMENT=web', '-sMODULARIZE=1', '-sEXPORT_NAME=createProbe',
  '-sEXPORTED_FUNCTIONS=_run', '--no-entry', '-sINITIAL_MEMORY=512MB', '-sALLOW_MEMORY_GROWTH=1', '-sMAXIMUM_MEMORY=2GB',
  object, '-o', path.join(OUT_DIR, 'probe.js')], { stdio: 'inherit', env: emEnv });

// the stand-in's sub-opcode re-encoded in place, at instruction boundaries only
const wasmFile = path.join(OUT_DIR, 'probe.wasm');
const bytes = new Uint8Array(readFileSync(wasmFile));
const sites = rewriteDot(bytes);
if (sites === 0) throw new Error('relaxed_dot_q4: no stand-in found: the kernel was not compiled as expected');
writeFileSync(wasmFile, bytes);
writeFileSync(path.join(OUT_DIR, 'index.html'), '<!doctype html><script src="probe.js"></script>\n');

const server = await serve({ root: OUT_DIR, isolated: false });
const browser = await launch();
const lines = [];
const version = browser.version();
try {
  const page = await browser.newPage();
  page.on('console', (m) => lines.push(m.text()));
  await page.goto(`${server.url}/index.html`);
  await page.evaluate(async () => {
    const M = await globalThis.createProbe({ print: (t) => console.log(t) });
    M._run();
  });
} finally {
  await browser.close();
  await server.close();
}
const results = lines.filter((l) => l.startsWith('RESULT ')).map((l) => JSON.parse(l.slice(7)));
const limits = results.find((r) => r.read_bandwidth_gbs);
const rows = results.filter((r) => r.kernel);
if (!limits || rows.length !== 9) throw new Error(`relaxed_dot_q4: the page printed ${lines.length} lines:\n${lines.join('\n')}`);
console.log(`Q4 matrix-vector kernels, Chromium ${version}, 1 thread; read bandwidth ${limits.read_bandwidth_gbs.toFixed(2)} GB/s (this page)`);
console.log('| shape | kernel | Gweights/s | GB/s of weights | of the bandwidth | max error / max abs y: exact x, own x |');
console.log('|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.shape} | ${r.kernel} | ${r.gweights_per_s.toFixed(2)} | ${r.gb_per_s.toFixed(2)} | ` +
    `${(r.gb_per_s / limits.read_bandwidth_gbs).toFixed(2)} | ${r.max_error_over_max_y.toExponential(1)}, ${r.max_error_vs_own_x_over_max_y.toExponential(1)} |`);
}
mkdirSync(path.dirname(JSON_OUT), { recursive: true });
writeFileSync(JSON_OUT, JSON.stringify({
  benchmark: 'relaxed-dot-q4', date: new Date().toISOString(), browser: `Chromium ${version}`,
  machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, load_average: os.loadavg() },
  rewritten_sites: sites, limits, results: rows,
}, null, 2) + '\n');
console.log(`wrote ${path.relative(ROOT, JSON_OUT)}`);
