// Peak RSS of loading one F32 checkpoint with each `weights` option, each in a process of its
// own (resourceUsage().maxRSS after loadModel and one forward of 8 tokens), in one run: the target
// is that 'f16', 'int8' and 'int4' peak no higher than 'f32' ('auto' on an F32 file). An
// encoder folder too (make_bert_base.mjs: `--dir build/bert-base --weights auto,int8`; encoders
// report no memoryUsage, so only the RSS).
//
//   node bench/model/load_peak.mjs [--dir build/gpt2-small/f32] [--weights auto,f16,int8,int4] [--out bench/results/load-peak-node.json]
//
// QKV_DIST=<a dist/ folder> measures another build (an older one, for a before / after).
// Prints a table; writes the JSON.
import { spawnSync } from 'node:child_process';
import { statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const DIR = path.resolve(ROOT, arg('--dir', 'build/gpt2-small/f32'));
const OUT = path.resolve(ROOT, arg('--out', 'bench/results/load-peak-node.json'));
const WEIGHTS = arg('--weights', 'auto,f16,int8,int4').split(',');

if (args[0] === '--child') {
  const weights = args[1];
  const qkv = await import(path.join(process.env.QKV_DIST ? path.resolve(process.env.QKV_DIST) : path.join(ROOT, 'dist'), 'index.js'));
  qkv.env.variant = 'simd'; // 1 thread, the plain SIMD build
  const t0 = performance.now();
  const model = await qkv.loadModel(DIR, { weights });
  const loadMs = performance.now() - t0;
  const afterLoad = process.resourceUsage().maxRSS / 1024;
  // a decoder: the last position's logits; an encoder (no memoryUsage): one forward
  if (model.memoryUsage) await model.forward(new Int32Array([1, 2, 3, 4, 5, 6, 7, 8]), { logits: 'last' });
  else await model.forward([101, 2, 3, 4, 5, 6, 7, 102]);
  const mem = model.memoryUsage?.();
  process.stdout.write(JSON.stringify({ weights, dtype: mem?.dtype ?? null, loadMs, weightsMB: mem ? mem.weights / 2 ** 20 : null,
    wasmHeapMB: mem ? mem.wasmHeap / 2 ** 20 : null, peakRssAfterLoadMB: afterLoad, peakRssMB: process.resourceUsage().maxRSS / 1024 }));
  model.dispose();
} else {
  const rows = [];
  for (const weights of WEIGHTS) {
    const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', weights, '--dir', DIR], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`child ${weights}: ${r.stderr}`);
    rows.push(JSON.parse(r.stdout));
  }
  const out = { benchmark: 'load-peak', date: new Date().toISOString(), dir: DIR,
    fileMB: statSync(path.join(DIR, 'model.safetensors')).size / 2 ** 20,
    machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, load_average: os.loadavg(), node: process.version }, rows };
  writeFileSync(OUT, JSON.stringify(out, null, 2) + '\n');
  console.log(`${DIR} (${out.fileMB.toFixed(0)} MiB file), Node ${process.version}, load ${os.loadavg()[0].toFixed(1)}`);
  console.log('| weights | held | weights MiB | wasm heap MiB | peak RSS after load MiB | peak RSS MiB | load s |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const mb = (x) => (x === null ? '-' : x.toFixed(0));
    console.log(`| ${r.weights} | ${r.dtype ?? '-'} | ${mb(r.weightsMB)} | ${mb(r.wasmHeapMB)} | ${mb(r.peakRssAfterLoadMB)} | ${mb(r.peakRssMB)} | ${(r.loadMs / 1000).toFixed(2)} |`);
  }
  console.log(`wrote ${path.relative(ROOT, OUT)}`);
}
