// headProbes on a GPT-2-small-shaped model (12 layers x 12 heads, random weights:
// bench/model/make_gpt2_small.mjs) in Node, one thread:
//  - every probe but the ablation (its defaults: 2 induction sequences of 2 x 32 tokens, and a
//    64-token text; forwards with outputAttentions and last-position logits, then the scores);
//  - the ablation sweep on a 64-token text (1 baseline + 144 forwards, each with headMask and
//    the loss over every position), timed from headProbes' progress calls, against 145 plain
//    forwards of the same ids (logits 'all') run before and after it.
// When this build's model.forward has no headMask, the sweep runs through a model whose forward
// drops the option (the same forwards, no head removed): that measures what headProbes adds
// (loss, progress, yields), not the engine's masked forward (its cost is the engine's,
// item 4). Timed on the process's CPU time (wall beside it): the machine is shared.
//
//   node bench/model/make_gpt2_small.mjs          # once: build/gpt2-small/
//   node bench/js/interpret-probes.mjs [--dir build/gpt2-small/f32] [--quick]
//
// Prints a table; writes bench/results/interpret-probes-node.json.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const DIR = path.resolve(ROOT, arg('--dir', 'build/gpt2-small/f32'));
const quick = args.includes('--quick');
if (!existsSync(path.join(DIR, 'model.safetensors'))) {
  console.error(`interpret-probes: no ${DIR}/model.safetensors; run node bench/model/make_gpt2_small.mjs first`);
  process.exit(1);
}
const qkv = await import(pathToFileURL(path.join(ROOT, 'dist', 'index.js')).href);
await qkv.init({ variant: 'simd', numThreads: 1 });
const model = await qkv.loadModel(DIR);
const { layers: NL, heads: H } = model.dims;

function clock() {
  const c0 = process.cpuUsage(), w0 = performance.now();
  return () => {
    const c = process.cpuUsage(c0);
    return { cpu_s: +((c.user + c.system) / 1e6).toFixed(3), wall_s: +((performance.now() - w0) / 1000).toFixed(3) };
  };
}
let s = 7;
const text = Array.from({ length: 64 }, () => (s = (s * 1103515245 + 12345) % 2147483648) % 50000);

let headMask = true;
try {
  await model.forward([1, 2], { headMask: new qkv.Tensor(new Float32Array(NL * H).fill(1), [NL, H]) });
} catch (e) {
  if (!/unknown option 'headMask'/.test(e.message)) throw e;
  headMask = false;
}
const target = headMask ? model : {
  dims: model.dims, tokenizer: model.tokenizer, config: model.config,
  forward: (ids, { headMask: _dropped, ...o } = {}) => model.forward(ids, o),
};
await model.forward(text); // warm-up

const rows = [];
let done = clock();
const probes = await qkv.headProbes(model, { ids: text, inductionLength: 32, ablation: false });
rows.push({ what: 'probes without ablation (2 x 64-token induction + 64-token text, maps, last logits)', forwards: 3, ...done() });

const N = quick ? 12 : NL * H;
const plainRun = async () => {
  const d = clock();
  for (let k = 0; k <= N; k++) await model.forward(text);
  return d();
};
// plain forwards before and after the sweep (the machine's load drifts): the sweep is compared with their mean
const plain = [await plainRun()];
let progressCalls = 0;
let sw = null;
if (!quick) {
  // the ablation phase alone: from the progress call that ends the text's forward to the end
  let start = null;
  await qkv.headProbes(target, {
    ids: text, inductionTokens: [[1, 2, 3]], ablation: true,
    onProgress: (p) => { progressCalls++; if (p.stage === 'text') start = clock(); },
  });
  sw = start();
  plain.push(await plainRun());
}
const mean = (k) => +(plain.reduce((a, p) => a + p[k], 0) / plain.length).toFixed(3);
plain.forEach((p, k) => rows.push({ what: `${N + 1} plain forwards, 64 tokens (${k ? 'after' : 'before'} the sweep)`, forwards: N + 1, ...p }));
if (sw) {
  rows.push({ what: `ablation sweep: 1 + ${NL * H} forwards${headMask ? ' with headMask' : ' (headMask dropped: this build has none)'}, each with its loss over 64 x 50257 logits`, forwards: NL * H + 1, ...sw });
}
const out = {
  benchmark: 'interpret-probes',
  date: new Date().toISOString(),
  machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, load_average: os.loadavg().map((x) => +x.toFixed(2)), node: process.version },
  model: `${path.relative(ROOT, DIR)}: ${model.toString()}`,
  wasm_variant: qkv.env.loadedVariant,
  threads: 1,
  head_mask_in_forward: headMask,
  method: 'one run each; process CPU time (wall beside it); the sweep ratio: its CPU time over the mean of the plain runs before and after it',
  results: rows,
  sweep_over_plain_cpu: sw ? +(sw.cpu_s / mean('cpu_s')).toFixed(3) : null,
  progress_calls: progressCalls,
  top_induction: probes.scores.reduce((a, b) => (b.induction > a.induction ? b : a)),
};
mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
writeFileSync(path.join(ROOT, 'bench', 'results', 'interpret-probes-node.json'), JSON.stringify(out, null, 2) + '\n');
console.log('what'.padEnd(110), 'CPU s', '  wall s');
for (const r of rows) console.log(r.what.padEnd(110), String(r.cpu_s).padStart(6), String(r.wall_s).padStart(8));
if (sw) console.log(`sweep / plain forwards (CPU): ${out.sweep_over_plain_cpu}`);
console.log(`load average ${out.machine.load_average.join(' ')}; wrote bench/results/interpret-probes-node.json`);
model.dispose();
