// headProbes, headPatternScores and inductionScores on hand-made heads whose scores are known
// exactly: a previous-token head, a first-token (sink) head, a uniform causal head, an
// induction head, a self head and a half-previous/half-sink head; and, in bidirectional maps,
// a next-token head, a half-previous/half-next head and a uniform head; served by a fake model
// whose forward takes headMask (the option the engine's model.forward takes, DESIGN.md) and
// whose next-token loss is a known function of the mask. Also progress, cancel and bad options.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as qkv from 'qkv';

const { Tensor, headProbes, headPatternScores, inductionScores, nextTokenLoss } = qkv;
const NL = 2, H = 3, V = 40;
// each head's weight in the correct token's logit: removing head (l, h) lowers it by W[l][h]
const W = [[0.5, 1.0, 0.25], [2.0, 0.75, 0.125]];

/** Row i of head kind `k` over tokens `ids`. */
function row(kind, ids, i) {
  const r = new Float32Array(ids.length);
  if (kind === 'prev') r[Math.max(0, i - 1)] = 1;
  else if (kind === 'sink') r[0] = 1;
  else if (kind === 'uniform') r.fill(1 / (i + 1), 0, i + 1);
  else if (kind === 'self') r[i] = 1;
  else if (kind === 'half') { r[0] += 0.5; r[Math.max(0, i - 1)] += 0.5; }
  // bidirectional: the next token (the last row: itself), half previous / half next, uniform over all
  else if (kind === 'next') r[Math.min(ids.length - 1, i + 1)] = 1;
  else if (kind === 'around') { r[Math.max(0, i - 1)] += 0.5; r[Math.min(ids.length - 1, i + 1)] += 0.5; }
  else if (kind === 'all') r.fill(1 / ids.length);
  else if (kind === 'induction') {
    // the token after the latest earlier occurrence of ids[i]; itself when there is none
    let j = -1;
    for (let k = i - 1; k >= 0; k--) if (ids[k] === ids[i]) { j = k; break; }
    r[j >= 0 ? j + 1 : i] = 1;
  }
  return r;
}
const KINDS = [['prev', 'sink', 'uniform'], ['induction', 'self', 'half']];
// a bidirectional model's heads (layer 1 only looks back or at itself: its next-token score is a measured 0)
const BI_KINDS = [['next', 'around', 'all'], ['prev', 'self', 'sink']];

function fakeModel(kinds = KINDS) {
  const calls = [];
  return {
    calls,
    dims: { vocab: V, positions: 64 },
    tokenizer: null,
    async forward(ids, options = {}) {
      const L = ids.length;
      calls.push({ L, headMask: options.headMask ? [...options.headMask.data] : null, outputAttentions: !!options.outputAttentions, logits: options.logits });
      const mask = options.headMask ? options.headMask.data : new Float32Array(NL * H).fill(1);
      let s = 0;
      for (let l = 0; l < NL; l++) for (let h = 0; h < H; h++) s += W[l][h] * mask[l * H + h];
      const logits = new Float32Array(L * V);
      for (let p = 0; p + 1 < L; p++) logits[p * V + ids[p + 1]] = s;
      const out = { logits: new Tensor(logits, [1, L, V]) };
      if (options.outputAttentions) {
        out.attentions = kinds.map((layer) => {
          const d = new Float32Array(H * L * L);
          layer.forEach((k, h) => { for (let i = 0; i < L; i++) d.set(row(k, ids, i), (h * L + i) * L); });
          return new Tensor(d, [1, H, L, L]);
        });
      }
      return out;
    },
  };
}
const close = (a, b, tol = 1e-6) => assert.ok(Math.abs(a - b) < tol, `${a} vs ${b}`);
// loss when the correct token's logit is s and the V - 1 others 0
const lossAt = (s) => Math.log(V - 1 + Math.exp(s)) - s;

test('headPatternScores: previous-token, sink and entropy of known heads', async () => {
  const ids = [3, 9, 4, 7, 1, 8, 2, 5];
  const L = ids.length;
  const { attentions } = await fakeModel().forward(ids, { outputAttentions: true });
  const s = headPatternScores(attentions);
  const mean = (f) => { let t = 0; for (let i = 1; i < L; i++) t += f(i); return t / (L - 1); };
  // previous-token head: 1; its sink share is row 1's (A[1][0] = 1): 1 / (L - 1); entropy 0
  close(s.previousToken[0][0], 1); close(s.sink[0][0], 1 / (L - 1)); close(s.entropy[0][0], 0);
  close(s.sink[0][1], 1); close(s.previousToken[0][1], 1 / (L - 1)); close(s.entropy[0][1], 0);
  close(s.previousToken[0][2], mean((i) => 1 / (i + 1)));
  close(s.sink[0][2], mean((i) => 1 / (i + 1)));
  close(s.entropy[0][2], mean((i) => Math.log(i + 1)));
  close(s.previousToken[1][1], 0); close(s.sink[1][1], 0); close(s.entropy[1][1], 0);
  // half previous, half first: row 1 puts both halves on token 0
  close(s.previousToken[1][2], (1 + 0.5 * (L - 2)) / (L - 1));
  close(s.sink[1][2], (1 + 0.5 * (L - 2)) / (L - 1));
  close(s.entropy[1][2], ((L - 2) * Math.log(2)) / (L - 1));
  // causal maps: no next-token score (0 by construction), not a table of zeros
  assert.equal(s.nextToken, null);
});

test('headPatternScores: the next-token score of known bidirectional heads; a measured 0 is 0, causal maps null', async () => {
  const ids = [3, 9, 4, 7, 1, 8, 2, 5];
  const L = ids.length;
  const { attentions } = await fakeModel(BI_KINDS).forward(ids, { outputAttentions: true });
  const s = headPatternScores(attentions);
  // next-token head: A[i][i+1] = 1 for i = 0..L-2 (the last row, on itself, is not counted): 1
  close(s.nextToken[0][0], 1); close(s.previousToken[0][0], 0); close(s.sink[0][0], 0); close(s.entropy[0][0], 0);
  // half previous, half next: 0.5 both ways; row 0's previous half falls on itself, row L-1's next half too
  close(s.nextToken[0][1], 0.5); close(s.previousToken[0][1], 0.5);
  close(s.sink[0][1], 0.5 / (L - 1)); close(s.entropy[0][1], Math.log(2));
  // uniform over all L keys: 1 / L each way, entropy ln L
  close(s.nextToken[0][2], 1 / L); close(s.previousToken[0][2], 1 / L); close(s.entropy[0][2], Math.log(L));
  // heads that never look ahead, in a bidirectional model: measured 0 (a number, not null)
  assert.deepEqual(s.nextToken[1], [0, 0, 0]);
  close(s.previousToken[1][0], 1);
  // one weight above the diagonal anywhere makes the maps bidirectional: every head is scored
  const causal = (await fakeModel().forward(ids, { outputAttentions: true })).attentions;
  assert.equal(headPatternScores(causal).nextToken, null);
  causal[1].data[(2 * L + 3) * L + 5] = 0.25; // layer 1, head 2, query 3 -> key 5
  const one = headPatternScores(causal);
  assert.deepEqual(one.nextToken[0], [0, 0, 0]);
  assert.deepEqual(one.nextToken[1], [0, 0, 0], 'key 5 is not query 3\'s next token');
});

test('inductionScores: 1 for the induction head, known values for the others', async () => {
  const P = 1, x = [11, 12, 13, 14, 15, 16];
  const T = x.length;
  const seq = [0, ...x, ...x];
  const { attentions } = await fakeModel().forward(seq, { outputAttentions: true });
  const s = inductionScores(attentions, T, P);
  close(s[1][0], 1);
  close(s[0][0], 0); // previous token: q - 1 = P + T + t - 1 is never P + t + 1 for T > 2
  close(s[1][1], 0);
  let u = 0;
  for (let t = 0; t < T; t++) u += 1 / (P + T + t + 1);
  close(s[0][2], u / T);
  close(s[0][1], 0); // sink: key 0 is never P + t + 1
  assert.throws(() => inductionScores(attentions, T + 1, P), /inductionScores: maps of \[13, 13\] do not come from prefix \(1 tokens\) \+ a sequence of length 7 twice/);
});

test('headProbes: every score and the ablation effect (loss with the head masked minus without)', async () => {
  const m = fakeModel();
  const text = [3, 9, 4, 7, 1, 8, 2, 5];
  const progress = [];
  const r = await headProbes(m, { ids: text, inductionLength: 10, inductionSequences: 3, prefix: [0], tokenRange: [1, V], onProgress: (p) => progress.push(p) });
  assert.equal(r.layers, NL);
  assert.equal(r.heads, H);
  assert.equal(r.inductionTokens.length, 3);
  for (const x of r.inductionTokens) {
    assert.equal(x.length, 10);
    assert.equal(new Set(x).size, 10, 'no token repeats within a sequence');
    assert.ok(x.every((t) => t >= 1 && t < V));
  }
  close(r.induction[1][0], 1);
  close(r.previousToken[0][0], 1);
  close(r.sink[0][1], 1);
  // a causal model: no next-token score, in the table or per head
  assert.equal(r.nextToken, null);
  assert.ok(r.scores.every((x) => x.nextToken === null));
  assert.deepEqual(r.ids, [text]);
  assert.deepEqual(r.ablationIds, [text]);
  const S = W.flat().reduce((a, b) => a + b, 0);
  close(r.baseLoss, lossAt(S), 1e-5);
  for (let l = 0; l < NL; l++) for (let h = 0; h < H; h++) close(r.ablation[l][h], lossAt(S - W[l][h]) - lossAt(S), 1e-5);
  // the flat list agrees with the tables
  assert.equal(r.scores.length, NL * H);
  const s5 = r.scores[5];
  assert.deepEqual([s5.layer, s5.head, s5.ablation, s5.induction], [1, 2, r.ablation[1][2], r.induction[1][2]]);
  // forwards: 3 induction + 1 text (with attentions), 1 baseline (mask all 1) + 6 ablations (one 0 each)
  assert.equal(m.calls.length, 3 + 1 + 1 + NL * H);
  assert.deepEqual(m.calls.slice(4).map((c) => c.headMask.filter((v) => v === 0).length), [0, 1, 1, 1, 1, 1, 1]);
  assert.ok(m.calls.slice(4).every((c) => !c.outputAttentions && c.logits === undefined), 'ablation forwards ask for no maps, every position\'s logits');
  assert.ok(m.calls.slice(0, 4).every((c) => c.outputAttentions && c.logits === 'last'), 'map forwards ask for the last logits only');
  assert.deepEqual(progress.map((p) => p.done), Array.from({ length: 11 }, (_, k) => k + 1));
  assert.equal(progress.at(-1).total, 11);
  assert.deepEqual(progress.map((p) => p.stage), ['induction', 'induction', 'induction', 'text', ...Array(7).fill('ablation')]);
  // the same seed gives the same probe, another seed another
  const again = await headProbes(fakeModel(), { ids: text, inductionLength: 10, inductionSequences: 3, prefix: [0], tokenRange: [1, V], ablation: false });
  assert.deepEqual(again.inductionTokens, r.inductionTokens);
  assert.equal(again.ablation, null);
  const other = await headProbes(fakeModel(), { ids: text, inductionLength: 10, seed: 5, ablation: false });
  assert.notDeepEqual(other.inductionTokens[0], r.inductionTokens[0]);
});

// a masked-LM encoder: ids 0, 1, 2 are [CLS], [SEP], [MASK]; at a [MASK] the logit of the token
// `truth` holds there is s (the mask-weighted sum of W), at every other position 0 (loss ln V);
// its maps are BI_KINDS' (bidirectional)
const CLS = 0, SEP = 1, MASK = 2;
function fakeEncoder(truth) {
  const base = fakeModel(BI_KINDS);
  return {
    ...base,
    dims: undefined,
    config: { vocab_size: V, max_position_embeddings: 64 },
    tokenizer: { encode: () => truth.slice(), specialTokens: { cls: CLS, sep: SEP, mask: MASK, pad: null, bos: null, eos: null, unk: null } },
    fillMask() {},
    async forward(ids, options = {}) {
      const out = await base.forward(ids, options);
      const mask = options.headMask ? options.headMask.data : new Float32Array(NL * H).fill(1);
      let s = 0;
      for (let l = 0; l < NL; l++) for (let h = 0; h < H; h++) s += W[l][h] * mask[l * H + h];
      const logits = new Float32Array(ids.length * V);
      ids.forEach((id, p) => { if (id === MASK) logits[p * V + truth[p]] = s; });
      out.logits = new Tensor(logits, [1, ids.length, V]);
      return out;
    },
  };
}

test('headProbes on a masked-LM encoder: ablation = the change in the masked-token loss, the text masked BERT-style from the seed', async () => {
  // 40 ordinary tokens between [CLS] and [SEP], one of them [MASK] already (not scored: no answer)
  const text = [CLS, ...Array.from({ length: 40 }, (_, i) => 3 + (i % 30)), SEP];
  text[7] = MASK;
  const e = fakeEncoder(text);
  assert.equal((await headProbes(e, { ids: text, inductionTokens: [[5, 6]] })).ablation, null, 'encoders: ablation only when asked');
  const r = await headProbes(e, { ids: text, inductionTokens: [[5, 6]], ablation: true });
  // bidirectional maps: the next-token score is measured on the text (a 0 is a measured 0)
  close(r.nextToken[0][0], 1); close(r.nextToken[0][1], 0.5); close(r.nextToken[0][2], 1 / text.length);
  assert.deepEqual(r.nextToken[1], [0, 0, 0]);
  assert.deepEqual(r.scores.map((x) => x.nextToken), r.nextToken.flat());
  const [masked] = r.ablationIds, [targets] = r.ablationTargets;
  // the scored positions are masked, hold the original ids, and are ordinary tokens; nothing else changed
  assert.ok(targets.length >= 1 && targets.length < 20, `${targets.length} of 39 chosen (15 % expected)`);
  for (const [p, id] of targets) { assert.equal(masked[p], MASK); assert.equal(id, text[p]); assert.ok(id > MASK); }
  const chosen = new Set(targets.map(([p]) => p));
  masked.forEach((id, p) => { if (!chosen.has(p)) assert.equal(id, text[p]); });
  assert.ok(!chosen.has(7) && !chosen.has(0) && !chosen.has(text.length - 1), 'specials and the text\'s own [MASK] are never scored');
  // every scored token costs lossAt(s): the base, and each head's change
  const S = W.flat().reduce((a, b) => a + b, 0);
  close(r.baseLoss, lossAt(S), 1e-5);
  for (let l = 0; l < NL; l++) for (let h = 0; h < H; h++) close(r.ablation[l][h], lossAt(S - W[l][h]) - lossAt(S), 1e-5);
  // the same seed masks the same tokens, another seed others
  const again = await headProbes(fakeEncoder(text), { ids: text, inductionTokens: [[5, 6]], ablation: true });
  assert.deepEqual(again.ablationTargets, r.ablationTargets);
  const other = await headProbes(fakeEncoder(text), { ids: text, inductionTokens: [[5, 6]], ablation: true, seed: 3 });
  assert.notDeepEqual(other.ablationTargets, r.ablationTargets);
  // a short text with no token drawn still scores one
  const short = [CLS, 9, SEP];
  const one = await headProbes(fakeEncoder(short), { ids: short, inductionTokens: [[5]], ablation: true });
  assert.deepEqual(one.ablationTargets, [[[1, 9]]]);
  assert.deepEqual(one.ablationIds, [[CLS, MASK, SEP]]);
});

test('headProbes without a text measures the pattern scores and the ablation on the first induction sequence', async () => {
  const r = await headProbes(fakeModel(), { inductionTokens: [[5, 6, 7, 8]] });
  assert.deepEqual(r.ids, [[5, 6, 7, 8, 5, 6, 7, 8]]);
  assert.deepEqual(r.ablationIds, r.ids);
  close(r.induction[1][0], 1);
});

test('headProbes over several texts: scores averaged over them, the loss over all their tokens', async () => {
  const m = fakeModel();
  const a = [3, 9, 4, 7], b = [1, 8, 2, 5, 6, 10, 11];
  const progress = [];
  const r = await headProbes(m, { ids: [a, b], inductionTokens: [[20, 21, 22]], onProgress: (p) => progress.push(p) });
  assert.deepEqual(r.ids, [a, b]);
  close(r.sink[0][0], (1 / (a.length - 1) + 1 / (b.length - 1)) / 2);
  close(r.previousToken[0][0], 1);
  const S = W.flat().reduce((x, y) => x + y, 0);
  close(r.baseLoss, lossAt(S), 1e-5);
  close(r.ablation[1][0], lossAt(S - W[1][0]) - lossAt(S), 1e-5);
  // 1 induction + 2 texts + 2 x (1 baseline + 6 heads)
  assert.equal(m.calls.length, 1 + 2 + 2 * 7);
  assert.equal(progress.at(-1).done, m.calls.length);
  assert.equal(progress.at(-1).total, m.calls.length);
  assert.equal(r.nextToken, null, 'causal maps in every text');
  // bidirectional maps: the next-token score averaged over the texts too
  const bi = await headProbes(fakeModel(BI_KINDS), { ids: [a, b], inductionTokens: [[20, 21, 22]], ablation: false });
  close(bi.nextToken[0][0], 1);
  close(bi.nextToken[0][2], (1 / a.length + 1 / b.length) / 2);
  assert.deepEqual(bi.nextToken[1], [0, 0, 0]);
});

test('headProbes: cancel between forward passes, with no forward after the abort', async () => {
  const m = fakeModel();
  const ac = new AbortController();
  let seen = 0;
  await assert.rejects(
    headProbes(m, { ids: [1, 2, 3, 4], inductionLength: 4, signal: ac.signal, onProgress: (p) => { seen = p.done; if (p.done === 6) ac.abort(); } }),
    (e) => e.name === 'AbortError',
  );
  assert.equal(seen, 6);
  assert.equal(m.calls.length, 6);
  const pre = new AbortController();
  pre.abort();
  await assert.rejects(headProbes(fakeModel(), { signal: pre.signal }), (e) => e.name === 'AbortError');
});

test('headProbes: bad options are errors naming the function and the option', async () => {
  const m = fakeModel();
  await assert.rejects(headProbes({}), /headProbes: model must be a loaded model \(with forward\)/);
  await assert.rejects(headProbes(m, { idz: [1] }), /headProbes: unknown option 'idz'/);
  await assert.rejects(headProbes(m, { ids: [1] }), /headProbes: a text has 1 token\(s\); the scores need at least 2/);
  await assert.rejects(headProbes(m, { ids: [[1, 2], [3.5, 1]] }), /headProbes: options.ids\[1\] must be an array of token ids/);
  await assert.rejects(headProbes(m, { ids: [1, 2], text: 'x' }), /headProbes: give options.ids or options.text, not both/);
  await assert.rejects(headProbes(m, { text: 'x' }), /headProbes: options.text needs a tokenizer and this model has none/);
  await assert.rejects(headProbes(m, { inductionLength: 33 }), /headProbes: options.inductionLength must be an integer in \[1, 32\] \(prefix \+ 2 \* inductionLength must fit the context of 64\), got 33/);
  await assert.rejects(headProbes(m, { tokenRange: [0, V + 1] }), /headProbes: options.tokenRange \[0, 41\) goes past the vocabulary \(40 tokens\)/);
  await assert.rejects(headProbes(m, { tokenRange: [0, 8], inductionLength: 9 }), /headProbes: 8 tokens to draw from, fewer than inductionLength = 9/);
  await assert.rejects(headProbes(m, { inductionTokens: [[1.5]] }), /headProbes: options.inductionTokens\[0\] must be an array of token ids/);
  await assert.rejects(headProbes({ ...m, forward: m.forward, fillMask() {} }, { ablation: true }), /headProbes: options.ablation on a masked-LM encoder masks the text, and this model's tokenizer has no mask token/);
  const e = fakeEncoder([CLS, MASK, SEP]);
  await assert.rejects(headProbes(e, { ids: [CLS, MASK, SEP], inductionTokens: [[5]], ablation: true }), /headProbes: ablation text 0 has only special tokens; nothing to mask/);
});

test('nextTokenLoss: mean cross-entropy of positions 0..L-2 predicting 1..L-1', () => {
  // V = 2: logits [0, ln 3] -> p(1) = 3/4; [ln 3, 0] -> p(0) = 3/4
  const lg = new Tensor(new Float32Array([0, Math.log(3), Math.log(3), 0, 9, 9]), [1, 3, 2]);
  close(nextTokenLoss(lg, [0, 1, 0]), -Math.log(0.75));
  close(nextTokenLoss(lg, [0, 0, 1]), -(Math.log(0.25) + Math.log(0.25)) / 2);
});
