// What each head of a tiny KJV GPT does for in-context copying: the loss on the second half of
// repeated random token sequences with every head, and with each single head removed
// (headMask 0), beside each head's induction score (headProbes) and the same for the
// architecture with random weights (train_tiny.py's initialisation) as a control. Also the
// held-out bits per byte (as tools/model/eval_heldout.py). Prints Markdown; writes JSON.
//
//   node tools/interpret/induction_ablation.mjs [--model web/models/tiny-kjv-induction]
//       [--sequences 16] [--length 32] [--seed 0] [--json tools/interpret/induction_ablation.json]
//
// Sequences: --sequences sequences of --length distinct tokens drawn (--seed) from the tokens of
// the held-out text (the fixture tests/data/model/tiny-kjv-bpe/heldout.txt.gz), each repeated
// twice. See tools/interpret/induction.mjs for the measures.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { ROOT, ablationTable, firstCopyLoss, heldOutBitsPerByte, heldOutText, randomControlFiles, repeatedFirsts } from './induction.mjs';

const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const dir = path.resolve(ROOT, arg('--model', 'web/models/tiny-kjv-induction'));
const SEQUENCES = Number(arg('--sequences', 16));
const LENGTH = Number(arg('--length', 32));
const SEED = Number(arg('--seed', 0));
const JSON_OUT = arg('--json', path.join(ROOT, 'tools', 'interpret', 'induction_ablation.json'));
const qkv = await import(pathToFileURL(path.join(ROOT, 'dist', 'index.js')).href);
qkv.env.variant = 'simd';

const trained = await qkv.loadModel(dir);
const control = await qkv.loadModel(randomControlFiles(dir));
const ids = trained.tokenizer.encode(heldOutText());
const present = [...new Set(ids)].sort((a, b) => a - b);
const firsts = repeatedFirsts(present, SEQUENCES, LENGTH, SEED);
// previous-token scores: 4 windows of n_positions tokens spread over the held-out text
const P = trained.config.n_positions;
const windows = [0, 1, 2, 3].map((k) => ids.slice(Math.floor((k * (ids.length - P)) / 3), Math.floor((k * (ids.length - P)) / 3) + P));

const result = { model: path.relative(ROOT, dir), sequences: SEQUENCES, length: LENGTH, seed: SEED, distinct_tokens: present.length };
for (const [which, model] of [['trained', trained], ['random', control]]) {
  const t0 = performance.now();
  const probes = await qkv.headProbes(model, { inductionTokens: firsts, ids: windows, ablation: false });
  const table = await ablationTable(qkv, model, firsts);
  result[which] = {
    first_copy_loss: await firstCopyLoss(qkv, model, firsts),
    second_copy_loss: table.base,
    heads: table.rows.map((r, k) => ({ ...r, induction: probes.scores[k].induction, previous_token: probes.scores[k].previousToken })),
  };
  process.stderr.write(`${which}: ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
}
result.trained.heldout_bits_per_byte = await heldOutBitsPerByte(trained, ids);
trained.dispose();
control.dispose();
if (JSON_OUT !== 'none') writeFileSync(JSON_OUT, JSON.stringify(result, null, 1) + '\n');

const f = (x, d = 3) => x.toFixed(d);
const t = result.trained;
const best = t.heads.reduce((a, b) => (b.induction > a.induction ? b : a));
const others = t.heads.filter((h) => h !== best);
const nextDelta = Math.max(...others.map((h) => h.delta));
console.log(`**${result.model}**: ${SEQUENCES} sequences of ${LENGTH} distinct tokens (of the ${present.length} in the held-out text, seed ${SEED}), each repeated; loss (nats/token) on the first copy → the second copy with every head: trained ${f(t.first_copy_loss)} → ${f(t.second_copy_loss)}, random ${f(result.random.first_copy_loss)} → ${f(result.random.second_copy_loss)}. Held-out text: ${f(t.heldout_bits_per_byte, 4)} bits/byte.\n`);
console.log(`Strongest induction head L${best.layer}H${best.head}: score ${f(best.induction)} (random weights: at most ${f(Math.max(...result.random.heads.map((h) => h.induction)))}); removing it raises the second-copy loss by ${f(best.delta)} nats/token, any other single head by at most ${f(nextDelta)}.\n`);
console.log('| head | induction | prev-token | second-copy loss without it | Δloss | | induction | Δloss |');
console.log('|---|---:|---:|---:|---:|---|---:|---:|');
console.log('| | **trained** | | | | | **random weights** | |');
t.heads.forEach((h, k) => {
  const c = result.random.heads[k];
  console.log(`| L${h.layer}H${h.head} | ${f(h.induction)} | ${f(h.previous_token)} | ${f(h.loss)} | ${h.delta >= 0 ? '+' : ''}${f(h.delta)} | | ${f(c.induction)} | ${c.delta >= 0 ? '+' : ''}${f(c.delta)} |`);
});
