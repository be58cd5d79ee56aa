// The head-probe table of tools/model/README.md: every head of the tiny GPTs
// (web/models/tiny-kjv, tiny-kjv-bpe, tiny-kjv-induction) through headProbes (web/lib/interpret/),
// beside the same architecture with random weights (train_tiny.py's initialisation, before any
// step) as a control.
//
//   node tools/interpret/probe_table.mjs [--windows 16] [--sequences 8] [--length 32] [--json out.json]
//       [--models tiny-kjv,tiny-kjv-bpe,tiny-kjv-induction]
//
// Text scores (previous-token, sink, entropy) and the ablation loss: --windows windows of
// n_positions tokens spread evenly over the held-out text (the last 5 % of the KJV bytes, as
// train_tiny.split_text: needs `bible`, apt-get install bible-kjv). Induction: --sequences
// sequences of --length distinct tokens drawn (seed 0) from the tokens that occur in the
// held-out text, each repeated twice. Ablation: the change in mean next-token loss (nats per
// token) over the windows with the head's probabilities multiplied by 0 (headMask); when this
// build's model.forward has no headMask the column says so. Also the loss on each repeated
// sequence's first and second copy (in-context copying, by whatever heads). Prints Markdown.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { randomControlFiles, repeatedFirsts } from './induction.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const WINDOWS = Number(arg('--windows', 16));
const SEQUENCES = Number(arg('--sequences', 8));
const LENGTH = Number(arg('--length', 32));
const JSON_OUT = arg('--json', null);
const MODELS = arg('--models', 'tiny-kjv,tiny-kjv-bpe,tiny-kjv-induction').split(',');
const qkv = await import(pathToFileURL(path.join(ROOT, 'dist', 'index.js')).href);
qkv.env.variant = 'simd';

/** train_tiny.kjv_text() and split_text(): the held-out text. */
function heldOut() {
  const raw = execFileSync('bible', ['-l100000', 'Gen1:1-Rev22:21'], { maxBuffer: 64 << 20 }).toString('utf8');
  const verses = raw.split('\n').filter((l) => /^\s+\d+ /.test(l)).length;
  if (verses !== 31102) throw new Error(`probe_table: expected 31102 verses from bible, got ${verses}`);
  const text = raw.split('\n').map((l) => l.trim()).filter((l) => l).join('\n') + '\n';
  const nVal = Math.floor(Buffer.byteLength(text) / 20);
  return text.slice(text.length - nVal);
}

async function hasHeadMask(model) {
  const { layers, heads } = model.dims;
  try {
    await model.forward([1, 2], { headMask: new qkv.Tensor(new Float32Array(layers * heads).fill(1), [layers, heads]) });
    return true;
  } catch (e) {
    if (/unknown option 'headMask'/.test(e.message)) return false;
    throw e;
  }
}

const text = heldOut();
const results = [];
for (const name of MODELS) {
  const dir = path.join(ROOT, 'web', 'models', name);
  const trained = await qkv.loadModel(dir);
  const config = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8'));
  const control = await qkv.loadModel(randomControlFiles(dir));
  const ids = trained.tokenizer.encode(text);
  const P = config.n_positions;
  const windows = Array.from({ length: WINDOWS }, (_, k) => {
    const s = Math.floor((k * (ids.length - P)) / Math.max(1, WINDOWS - 1));
    return ids.slice(s, s + P);
  });
  // induction tokens: distinct tokens drawn from those in the held-out text
  const present = [...new Set(ids)].sort((a, b) => a - b);
  const firsts = repeatedFirsts(present, SEQUENCES, LENGTH, 0);
  const ablation = await hasHeadMask(trained);
  const row = { model: name, tokens_in_heldout: ids.length, windows: WINDOWS, window_tokens: P, induction_sequences: SEQUENCES,
    induction_length: LENGTH, distinct_tokens: present.length, ablation };
  for (const [which, model] of [['trained', trained], ['random', control]]) {
    const t0 = performance.now();
    const r = await qkv.headProbes(model, { ids: windows, inductionTokens: firsts, ablation });
    // in-context copying, whatever head does it: the loss on the second copy vs the first
    const copy = [0, 0];
    for (const x of firsts) {
      const seq = [...x, ...x];
      const { logits } = await model.forward(seq);
      const T = x.length;
      copy[0] += qkv.nextTokenLoss(new qkv.Tensor(logits.data.slice(0, T * logits.shape[2]), [1, T, logits.shape[2]]), seq.slice(0, T)) / firsts.length;
      copy[1] += qkv.nextTokenLoss(new qkv.Tensor(logits.data.slice(T * logits.shape[2]), [1, T, logits.shape[2]]), seq.slice(T)) / firsts.length;
    }
    row[which] = { baseLoss: r.baseLoss, firstCopyLoss: copy[0], secondCopyLoss: copy[1], scores: r.scores };
    process.stderr.write(`${name} ${which}: ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  }
  results.push(row);
  trained.dispose();
  control.dispose();
}
if (JSON_OUT) writeFileSync(JSON_OUT, JSON.stringify(results, null, 1) + '\n');

const f = (x, d = 3) => (x === null ? '—' : x.toFixed(d));
for (const r of results) {
  const bpt = r.trained.baseLoss === null ? '' : `; held-out loss with every head: trained ${f(r.trained.baseLoss)}, random ${f(r.random.baseLoss)} nats/token`;
  console.log(`\n**${r.model}** (${r.windows} held-out windows of ${r.window_tokens} tokens; induction: ${r.induction_sequences} × ${r.induction_length} distinct tokens of the ${r.distinct_tokens} in the held-out text, repeated${bpt})\n`);
  console.log(`Loss on the repeated sequences (nats/token), first copy → second copy: trained ${f(r.trained.firstCopyLoss)} → ${f(r.trained.secondCopyLoss)}, random ${f(r.random.firstCopyLoss)} → ${f(r.random.secondCopyLoss)}.\n`);
  console.log('| head | induction | prev-token | sink | entropy | ablation Δloss | | induction | prev-token | sink | entropy | ablation Δloss |');
  console.log('|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|');
  console.log('| | **trained** | | | | | | **random weights** | | | | |');
  r.trained.scores.forEach((s, k) => {
    const c = r.random.scores[k];
    console.log(`| L${s.layer}H${s.head} | ${f(s.induction)} | ${f(s.previousToken)} | ${f(s.sink)} | ${f(s.entropy, 2)} | ${f(s.ablation, 4)} | | ${f(c.induction)} | ${f(c.previousToken)} | ${f(c.sink)} | ${f(c.entropy, 2)} | ${f(c.ablation, 4)} |`);
  });
}
