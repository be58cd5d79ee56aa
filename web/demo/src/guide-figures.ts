// The guided example's experiment and figures: the classic test of an induction head (Olsson et
// al. 2022) on a repeated random sequence of words, every figure computed live with qkv through
// the page's DemoModel (its residual tools and its forward with headMask). The panel that prints
// them and shows each step's view is guide-panel.ts.
//
// The prompt is A + A without its last token, A = COPY_LENGTH distinct ordinary words (a space
// and three or more lowercase letters) drawn with a fixed seed: at every position of the second
// copy the correct next token is the word that followed the same word in the first copy, and at
// the last position it is A's last word. The corrupted prompt (patching) is B + the same second
// copy, B other words of the same length: nothing before the second copy says what comes next.
import type { DemoModel, Tokenizer } from './api';
import type { ResidualProgress } from './api-residual';
import { rng } from './math';

/** The model the guide runs on (web/models/, trained to have an induction head). */
export const GUIDE_MODEL = 'tiny-kjv-induction';
/** Words in one copy. */
export const COPY_LENGTH = 14;
/** The draw's seed. */
export const GUIDE_SEED = 7;

/** The prompt the guide types and its corrupted twin. */
export interface GuideSequence {
  /** the first copy's ids (A) */
  first: number[];
  /** the prompt's ids: A then A without its last token */
  ids: number[];
  /** the prompt as typed (re-encodes to `ids`) */
  text: string;
  /** B then the same second copy (same length as ids) */
  corrupted: number[];
  /** the corrupted prompt as typed (re-encodes to `corrupted`) */
  corruptedText: string;
  /** the positions of the second copy, each predicting a repeated word: A.length .. ids.length - 1 */
  positions: number[];
  /** targets[t]: the correct next token at position t (ids[t + 1]; at the last position A's last word) */
  targets: number[];
}

/** The text of `ids` that encodes back to them (without the leading space the tokenizer adds, where it adds one), or null. */
function roundTrip(tok: Tokenizer, ids: number[]): string | null {
  const text = tok.decode(ids);
  const same = (s: string) => { const e = tok.encode(s); return e.length === ids.length && e.every((x, i) => x === ids[i]); };
  return [text.replace(/^ /, ''), text].find(same) ?? null;
}

/** The guide's prompt and corrupted prompt for a tokenizer: redrawn until both texts re-encode to their ids. */
export function drawSequence(tok: Tokenizer, vocab: number, length = COPY_LENGTH, seed = GUIDE_SEED): GuideSequence {
  const words: number[] = [];
  for (let id = 0; id < vocab; id++) if (/^ [a-z]{3,}$/.test(tok.tokenText(id))) words.push(id);
  if (words.length < 2 * length) throw new Error(`drawSequence: the vocabulary has ${words.length} ordinary words, fewer than 2 × ${length}`);
  const draw = rng(seed);
  const pick = (avoid: Set<number>) => {
    const pool = words.filter((w) => !avoid.has(w));
    return Array.from({ length }, () => pool.splice(Math.floor(draw() * pool.length), 1)[0]);
  };
  for (let attempt = 0; attempt < 100; attempt++) {
    const first = pick(new Set());
    const second = first.slice(0, -1);
    const ids = [...first, ...second];
    const corrupted = [...pick(new Set(first)), ...second];
    const text = roundTrip(tok, ids), corruptedText = roundTrip(tok, corrupted);
    if (text === null || corruptedText === null) continue;
    const positions = Array.from({ length: length - 1 }, (_v, k) => length + k);
    const targets = ids.slice(1).concat(first[length - 1]);
    return { first, ids, text, corrupted, corruptedText, positions, targets };
  }
  throw new Error('drawSequence: no draw of 100 re-encodes to its own ids');
}

/** A head, as the views name it. */
export interface HeadRef { layer: number; head: number }
/** 'L2H0' */
export const headName = (h: HeadRef): string => `L${h.layer}H${h.head}`;

/** Step 1: the lens on the second copy, one row per read-out (0: the embeddings, l: after layer l - 1). */
export interface LensFigures {
  rows: { meanP: number; top1: number }[];
  /** the row with the largest rise of meanP over the row before (>= 1): that row's layer is rise - 1 */
  rise: number;
}
/** Step 2: direct logit attribution at the last position to the correct token. */
export interface AttributionFigures {
  position: number;
  token: number;
  /** the forward's logit of `token` at `position` */
  total: number;
  /** every head's part, largest first */
  heads: (HeadRef & { value: number })[];
}
/** Step 3: the heads sweep of activation patching, clean = the prompt, corrupted = its twin. */
export interface PatchingFigures {
  answer: [number, number];
  cleanMetric: number;
  corruptedMetric: number;
  /** values[l * heads + h] */
  values: Float32Array;
  hottest: HeadRef & { value: number };
}
/** Step 4: the second copy without the hottest head, and without each other single head. */
export interface RemovalFigures {
  head: HeadRef;
  lossWith: number;
  lossWithout: number;
  /** the correct token's probability at the last position */
  pWith: number;
  pWithout: number;
  /** each head's rise of the loss when it alone is removed, largest first */
  rises: (HeadRef & { delta: number })[];
}
export interface GuideFigures { lens: LensFigures; attribution: AttributionFigures; patching: PatchingFigures; removal: RemovalFigures }

/** log-softmax of logits[o .. o + V) at `v`, float64 */
function logProb(x: Float32Array, o: number, V: number, v: number): number {
  let m = -Infinity;
  for (let i = 0; i < V; i++) m = Math.max(m, x[o + i]);
  let z = 0;
  for (let i = 0; i < V; i++) z += Math.exp(x[o + i] - m);
  return x[o + v] - m - Math.log(z);
}

/** The mean loss (nats/token) of the second copy, and the correct token's probability at the last position, from logits [T * V]. */
export function copyLoss(logits: Float32Array, seq: GuideSequence, V: number): { loss: number; pLast: number } {
  let sum = 0;
  for (const t of seq.positions) sum -= logProb(logits, t * V, V, seq.targets[t]);
  const last = seq.ids.length - 1;
  return { loss: sum / seq.positions.length, pLast: Math.exp(logProb(logits, last * V, V, seq.targets[last])) };
}

/** The index of the largest of `xs`. */
const argmax = (xs: ArrayLike<number>): number => { let k = 0; for (let i = 1; i < xs.length; i++) if (xs[i] > xs[k]) k = i; return k; };

/** Progress of the walk: units done of the total, and what runs now. */
export type GuideProgress = (done: number, total: number, what: string) => void;

/**
 * The four steps' figures on `m` (the guide's model, with `seq`'s prompt): 2 + L + 1 + L·H qkv
 * calls, reported through `onProgress`; `signal` cancels between calls and inside the lens and
 * the sweep.
 */
export async function guideFigures(m: DemoModel, seq: GuideSequence, signal: AbortSignal, onProgress: GuideProgress): Promise<GuideFigures> {
  const { layers: L, heads: H, vocab: V } = m.dims, ids = seq.ids, last = ids.length - 1;
  const total = 2 + L + 1 + L * H;
  let done = 0;
  const step = (what: string) => { onProgress(done, total, what); signal.throwIfAborted(); };
  const run: ResidualProgress = { signal };

  // 1. the lens: each read-out's probability of the correct next token on the second copy
  step('the lens');
  const lensOut = await m.residual.lens(ids, { topK: 1, target: seq.targets, signal });
  const rows = lensOut.layers.map((row) => {
    let p = 0, top1 = 0;
    for (const t of seq.positions) { p += row[t].targetP ?? 0; if (row[t].targetRank === 0) top1++; }
    return { meanP: p / seq.positions.length, top1 };
  });
  const rise = 1 + argmax(rows.slice(1).map((r, l) => r.meanP - rows[l].meanP));
  done++;

  // 2. the attribution at the last position to the correct token: each head's direct part
  step('the attribution');
  const attr = await m.residual.attribution(ids, { position: last, tokens: [seq.targets[last]] });
  const heads = attr.parts.flatMap((p) => {
    const x = /^L(\d+)H(\d+)$/.exec(p.name);
    return x ? [{ layer: +x[1], head: +x[2], value: p.value }] : [];
  }).sort((a, b) => b.value - a.value);
  done++;

  // 3. patching: correct = the repeated word, wrong = the corrupted run's top token (its second if that is the correct one)
  step('the patching sweep');
  const cor = (await m.run(seq.corrupted, false, run)).logits;
  const order = Array.from(cor.keys()).sort((a, b) => cor[b] - cor[a]);
  const answer: [number, number] = [seq.targets[last], order[0] === seq.targets[last] ? order[1] : order[0]];
  const base = done;
  const sweep = await m.residual.patching({
    clean: ids, corrupted: seq.corrupted, answer, over: 'heads', signal,
    onProgress: (d, n) => onProgress(base + (L * d) / n, total, 'the patching sweep'),
  });
  const hot = argmax(sweep.values);
  done += L;

  // 4. the second copy's loss with every head, and with each single head removed
  step('removing heads');
  const withAll = copyLoss((await m.intervene(ids, {}, run)).logits, seq, V);
  done++;
  const rises: (HeadRef & { delta: number; loss: number; pLast: number })[] = [];
  for (let l = 0; l < L; l++) {
    for (let h = 0; h < H; h++) {
      step('removing heads');
      const headMask = Array.from({ length: L }, (_v, i) => Array.from({ length: H }, (_w, j) => (i === l && j === h ? 0 : 1)));
      const out = copyLoss((await m.intervene(ids, { headMask }, run)).logits, seq, V);
      rises.push({ layer: l, head: h, delta: out.loss - withAll.loss, loss: out.loss, pLast: out.pLast });
      done++;
    }
  }
  const hottest = { layer: Math.floor(hot / H), head: hot % H, value: sweep.values[hot] };
  const removed = rises[hot];
  onProgress(total, total, 'done');
  return {
    lens: { rows, rise },
    attribution: { position: last, token: seq.targets[last], total: attr.total, heads },
    patching: { answer, cleanMetric: sweep.cleanMetric, corruptedMetric: sweep.corruptedMetric, values: sweep.values, hottest },
    removal: {
      head: { layer: hottest.layer, head: hottest.head }, lossWith: withAll.loss, lossWithout: removed.loss,
      pWith: withAll.pLast, pWithout: removed.pLast,
      rises: rises.map(({ layer, head, delta }) => ({ layer, head, delta })).sort((a, b) => b.delta - a.delta),
    },
  };
}
