// web/models/tiny-kjv-induction: the tiny BPE GPT fine-tuned with repeated spans and sequences
// (tools/model/train_tiny.py --init-from --repeat-frac --random-frac --head-dropout) has an induction head, measured with
// qkv itself on the committed weights (tools/interpret/induction.mjs, the measures of
// tools/interpret/induction_ablation.mjs):
// - its induction score (headProbes) is at least 0.5, against at most 0.1 for every head of the
//   same architecture with random weights (train_tiny.py's initialisation);
// - removing it (headMask) raises the loss on the second copy of repeated random token
//   sequences by at least 0.5 nats per token, and removing any other single head raises it by less;
// - the model copies: with every head the second copy costs under 4 nats/token, 3 or more
//   below the first;
// - the held-out text costs at most 0.05 bits per byte more than with the model it started
//   from (tiny-kjv-bpe, 1.621), and qkv's figure is the one the training script recorded.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { ROOT, api } from './model-helpers.js';
import { ablationTable, firstCopyLoss, heldOutBitsPerByte, heldOutText, randomControlFiles, repeatedFirsts } from '../../tools/interpret/induction.mjs';

const qkv = await api();
const dir = path.join(ROOT, 'web', 'models', 'tiny-kjv-induction');
const config = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8'));
const BASELINE_BPB = JSON.parse(readFileSync(path.join(ROOT, 'web', 'models', 'tiny-kjv-bpe', 'config.json'), 'utf8')).qkv.heldout_bits_per_byte;
let model, control, ids, firsts, best;
before(async () => {
  model = await qkv.loadModel(dir);
  control = await qkv.loadModel(randomControlFiles(dir));
  ids = model.tokenizer.encode(heldOutText());
  // 16 sequences of 32 distinct tokens of the held-out text (seed 0), as induction_ablation.mjs
  firsts = repeatedFirsts([...new Set(ids)].sort((a, b) => a - b), 16, 32, 0);
});
after(() => { model?.dispose(); control?.dispose(); });

const name = (s) => `L${s.layer}H${s.head}`;
const window = () => [ids.slice(0, config.n_positions)];

test('one head scores at least 0.5 on the induction probe; no head of the random-weight control above 0.1', async () => {
  const r = await qkv.headProbes(model, { ids: window(), inductionTokens: firsts, ablation: false });
  best = r.scores.reduce((a, b) => (b.induction > a.induction ? b : a));
  assert.ok(best.induction >= 0.5, `best induction score ${best.induction} (${name(best)})`);
  const c = await qkv.headProbes(control, { ids: window(), inductionTokens: firsts, ablation: false });
  const worst = c.scores.reduce((a, b) => (b.induction > a.induction ? b : a));
  assert.ok(worst.induction <= 0.1, `control ${name(worst)} scores ${worst.induction}`);
  assert.equal(c.scores.length, r.scores.length);
});

let table;
test('removing the induction head raises the second-copy loss by at least 0.5 nats/token', async () => {
  assert.ok(best, 'the induction head is known (previous test)');
  table = await ablationTable(qkv, model, firsts);
  const mine = table.rows.find((r) => r.layer === best.layer && r.head === best.head);
  assert.ok(mine.delta >= 0.5, `removing ${name(best)}: ${table.base} -> ${mine.loss} nats/token`);
  // the mask matters only where it is 0: an all-ones mask gives the unmasked loss
  const { logits } = await model.forward([...firsts[0], ...firsts[0]], { headMask: [[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]] });
  const plain = (await model.forward([...firsts[0], ...firsts[0]])).logits;
  assert.deepEqual(Array.from(logits.data), Array.from(plain.data));
});

test('removing any other single head raises the second-copy loss by less', () => {
  assert.ok(table, 'the ablation table is known (previous test)');
  const mine = table.rows.find((r) => r.layer === best.layer && r.head === best.head);
  for (const r of table.rows) {
    if (r !== mine) assert.ok(r.delta < mine.delta, `removing ${name(r)} raises the loss by ${r.delta}, ${name(best)} by ${mine.delta}`);
  }
});

test('the model copies: the second copy costs under 4 nats/token, at least 3 less than the first', async () => {
  assert.ok(table, 'the ablation table is known (previous test)');
  const first = await firstCopyLoss(qkv, model, firsts);
  assert.ok(table.base < 4 && table.base <= first - 3, `first copy ${first}, second ${table.base} nats/token`);
});

test('held-out bits per byte within 0.05 of tiny-kjv-bpe, as train_tiny.py recorded it', async () => {
  const bpb = await heldOutBitsPerByte(model, ids);
  assert.ok(Math.abs(bpb - BASELINE_BPB) <= 0.05, `${bpb} bits/byte vs ${BASELINE_BPB}`);
  assert.ok(Math.abs(bpb - config.qkv.heldout_bits_per_byte) < 1e-3, `qkv ${bpb}, PyTorch ${config.qkv.heldout_bits_per_byte}`);
});
