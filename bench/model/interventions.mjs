// What head interventions cost (docs/interventions.md): model.forward on a GPT-2-small-shaped
// checkpoint with random weights (12 layers x 12 heads, n_embd 768, vocab 50257, N(0, 0.02),
// built in memory), plain and with each option, in one process, 1 thread, `simd` build:
//   plain                  no option (this build)
//   plain (before)         no option, the package in --before (default: none; e.g. a copy of
//                          the main checkout's dist/ without interventions): the plain path's
//                          speed is unchanged
//   headMask               [12, 12], one head of every layer 0
//   knockout               every layer, every head: 3 edges of the last query blocked
//   knockout (heads)       every layer, heads 0 and 5: the same edges (one mask per head)
//   outputHeadOutputs      every layer's [1, 12, L, 64] out
//   patchHeadOutputs       one head of every layer replaced at every position
//   all                    the five at once
// Timed by the process's CPU time (the machine is shared: CPU time is what the code costs),
// calls interleaved round-robin, each option's figure the median of --reps rounds; the ratio
// is to the plain forward of the same round.
//
//   node bench/model/interventions.mjs [--tokens 64,256] [--reps 7] [--layers 12] [--logits all|last]
//                                      [--before /tmp/main-dist] [--out bench/results/model-interventions-node.json]
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { checkpoint as smallCheckpoint, normal } from './gpt2_small_memory.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const LENGTHS = arg('--tokens', '64,256').split(',').map(Number);
const REPS = Number(arg('--reps', 7));
const NL = Number(arg('--layers', 12));
const LOGITS = arg('--logits', 'all');
const BEFORE = arg('--before', null);
const OUT = path.resolve(ROOT, arg('--out', 'bench/results/model-interventions-node.json'));
const DIST = process.env.QKV_DIST ? path.resolve(process.env.QKV_DIST) : path.join(ROOT, 'dist');
const E = 768, H = 12, V = 50257, D = E / H;

// ---- the options ----------------------------------------------------------------------------

function options(Lq) {
  const headMask = Array.from({ length: NL }, (_, l) => Array.from({ length: H }, (_, h) => (h === l % H ? 0 : 1)));
  const edges = [[Lq - 1, 0], [Lq - 1, 1], [Lq - 1, 2]];
  const knockout = Array.from({ length: NL }, (_, l) => ({ layer: l, block: edges }));
  const knockoutHeads = Array.from({ length: NL }, (_, l) => ({ layer: l, heads: [0, 5], block: edges }));
  const values = normal(Lq * D, 99, 0.5);
  const patchHeadOutputs = Array.from({ length: NL }, (_, l) => ({ layer: l, head: (l + 3) % H, values }));
  return [
    ['headMask', { headMask }],
    ['knockout', { knockout }],
    ['knockout (heads)', { knockout: knockoutHeads }],
    ['outputHeadOutputs', { outputHeadOutputs: true }],
    ['patchHeadOutputs', { patchHeadOutputs }],
    ['all', { headMask, knockout: knockoutHeads, outputHeadOutputs: true, patchHeadOutputs }],
  ];
}

const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };

async function load(dist, files) {
  const qkv = await import(pathToFileURL(path.join(dist, 'index.js')).href);
  qkv.env.variant = 'simd';
  const model = await qkv.loadModel(files, { weights: 'f32' });
  return { qkv, model };
}

async function main() {
  const t0 = performance.now();
  const files = smallCheckpoint(NL);
  console.log(`checkpoint: ${NL} layers x ${H} heads, n_embd ${E}, vocab ${V}: ${(files.weights.byteLength / 2 ** 20).toFixed(0)} MiB, built in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const now = await load(DIST, files);
  const before = BEFORE ? await load(path.resolve(BEFORE), files) : null;
  files.weights = null;
  const rows = [];
  for (const L of LENGTHS) {
    const ids = Array.from({ length: L }, (_, i) => (i * 7919 + 13) % V);
    const runs = [['plain', now.model, {}]];
    if (before) runs.push(['plain (before)', before.model, {}]);
    for (const [name, o] of options(L)) runs.push([name, now.model, o]);
    const times = Object.fromEntries(runs.map(([n]) => [n, []]));
    const ratios = Object.fromEntries(runs.map(([n]) => [n, []]));
    // warm-up: one call each (scratch buffers grow, code is compiled)
    for (const [, model, o] of runs) await model.forward(ids, { logits: LOGITS, ...o });
    for (let r = 0; r < REPS; r++) {
      const round = {};
      for (const [name, model, o] of runs) {
        const c0 = cpu();
        await model.forward(ids, { logits: LOGITS, ...o });
        round[name] = cpu() - c0;
        times[name].push(round[name]);
      }
      for (const [name] of runs) ratios[name].push(round[name] / round.plain);
    }
    const these = runs.map(([name]) => ({ tokens: L, option: name, ms: 1000 * median(times[name]), ratio: median(ratios[name]), min_ms: 1000 * Math.min(...times[name]) }));
    rows.push(...these);
    console.log(`\nmodel.forward, ${L} tokens, logits '${LOGITS}', 1 thread, simd, CPU time, median of ${REPS} rounds`);
    console.log('option               ms (median)   ms (best)   x plain (median of per-round ratios)');
    for (const r of these) console.log(`${r.option.padEnd(20)} ${r.ms.toFixed(1).padStart(11)} ${r.min_ms.toFixed(1).padStart(11)}   ${r.ratio.toFixed(3)}`);
  }
  const result = {
    what: 'model.forward with head interventions vs plain (bench/model/interventions.mjs)',
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, node: process.version, loadavg: os.loadavg() },
    model: { shape: 'GPT-2 small (random weights)', layers: NL, heads: H, n_embd: E, vocab: V },
    tokens: LENGTHS, logits: LOGITS, threads: 1, variant: 'simd', clock: 'process CPU time', reps: REPS,
    before: BEFORE, rows,
  };
  writeFileSync(OUT, JSON.stringify(result, null, 1) + '\n');
  console.log(`\nwrote ${path.relative(ROOT, OUT)}`);
  now.model.dispose();
  before?.model.dispose();
}

await main();
