/**
 * headProbes: what each head of a loaded model does, measured. Scores read off its maps
 * (head-scores.ts: previous-token, next-token, sink, entropy on a text; induction on random
 * tokens repeated twice) and each head's ablation effect: the change in the mean next-token
 * loss on the text when the head's attention probabilities are multiplied by 0 (`headMask`,
 * Hugging Face head_mask semantics), one forward pass per head.
 *
 * The next-token score is null for a causal model (a decoder): its maps give the next token
 * 0 by construction, so a 0 there would say nothing about the head (head-scores.ts).
 *
 * A map says which values a head mixed; the ablation says what the model loses without them.
 * The two can disagree (a head with a sharp previous-token map whose removal costs nothing),
 * which is the point of measuring both.
 *
 * A masked-LM encoder's logits are not next-token predictions; its ablation effect is the
 * change in the masked-token loss instead (./masked-loss.ts): the text masked BERT-style from
 * the seed (15 % of its ordinary tokens, at least one, replaced by [MASK]) and the loss of the
 * original tokens there, with the head removed minus with it. Asked with `ablation: true`.
 */
import { describe, fmtShape } from '../errors.js';
import { Tensor } from '../tensor.js';
import { checkOptions, isNumberArray, optBool, optInt } from '../validate.js';
import { nextTask, optFunction, optSignal } from '../model/cancel.js';
import { headPatternScores, inductionScores, type HeadTable } from './head-scores.js';
import { maskedLossSum, maskText } from './masked-loss.js';

/** What headProbes needs of a model: forward with outputAttentions, logits and headMask. */
export interface ProbeModel {
  /**
   * One forward pass over `ids` (one sequence): `logits` [1, L, vocab] (or [1, 1, vocab] with
   * `logits: 'last'`) and, with `outputAttentions`, one [1, H, L, L] map per layer; `headMask`
   * [layers, heads] multiplies each head's attention probabilities (1 keeps, 0 removes).
   */
  forward(ids: ArrayLike<number>, options?: ProbeForwardOptions): Promise<ProbeForwardResult>;
  /** Turns `options.text` into ids; an encoder's tokenizer also names its special tokens (the mask token, and those never masked). */
  tokenizer?: ProbeTokenizer | null;
  /**
   * Decoders have it (DecoderModel.dims): the vocabulary and the context. With dims, the
   * forwards that only need maps ask for the last position's logits only (logits: 'last').
   */
  dims?: ProbeDims;
  /** The model's config.json; its vocabulary and context sizes are read from it when `dims` is absent. */
  config?: object;
  /** Present on masked-LM encoders: their logits predict masked tokens (the ablation loss is the masked-token loss). */
  fillMask?: unknown;
}

/** The options {@link ProbeModel.forward} is given. */
export interface ProbeForwardOptions {
  /** Return each layer's attention probabilities. */
  outputAttentions?: boolean;
  /** `[layers, heads]`: each head's attention probabilities times this (1 keeps the head, 0 removes it). */
  headMask?: Tensor;
  /** 'all' (default): logits at every position; 'last': at the last only. */
  logits?: 'all' | 'last';
}

/** What {@link ProbeModel.forward} returns. */
export interface ProbeForwardResult {
  /** [1, L, vocab] (or [1, 1, vocab] with `logits: 'last'`): unnormalised next-token (or masked-token) scores. */
  logits: Tensor;
  /** One [1, H, L, L] attention map per layer, with `outputAttentions`. */
  attentions?: Tensor[];
}

/** What {@link headProbes} needs of a tokenizer: encode, and the special-token ids of an encoder. */
export interface ProbeTokenizer {
  /** The token ids of `text`. */
  encode(text: string): number[];
  /** Special-token ids by role (null or absent: the tokenizer has none). */
  specialTokens?: Partial<Record<'bos' | 'eos' | 'unk' | 'pad' | 'cls' | 'sep' | 'mask', number | null>>;
}

/** A decoder's sizes, as {@link headProbes} reads them. */
export interface ProbeDims {
  /** Vocabulary size: random induction tokens are drawn below it. */
  vocab: number;
  /** Context length (positions): the longest sequence a forward takes. */
  positions: number;
}

/** Where a headProbes run is: `done` of `total` forward passes. */
export interface ProbeProgress {
  /** Forward passes done. */
  done: number;
  /** Forward passes in all. */
  total: number;
  /** What the passes measure: the scores on the text, the induction sequences, or the head ablations. */
  stage: 'text' | 'induction' | 'ablation';
}

/** Options of {@link headProbes}. */
export interface HeadProbeOptions {
  /**
   * Token ids of the text the previous-token, next-token, sink and entropy scores and the
   * ablation loss are measured on; or several texts (an array of id arrays): the scores are
   * then averaged over the texts and the loss over all their predicted tokens.
   */
  ids?: ArrayLike<number> | ArrayLike<number>[];
  /** The text as a string (tokenized with model.tokenizer), or several; instead of ids. */
  text?: string | string[];
  /** Length T of the random sequence the induction probe repeats (default 32, or what fits the context). */
  inductionLength?: number;
  /** How many random sequences the induction score averages over (default 2). */
  inductionSequences?: number;
  /** The sequences' first copies, instead of random ones (each of inductionLength tokens, or any length >= 1). */
  inductionTokens?: ArrayLike<number>[];
  /** Tokens before each induction sequence (a BOS token, say); default none. */
  prefix?: ArrayLike<number>;
  /** Random tokens are drawn from [tokenRange[0], tokenRange[1]) (default the whole vocabulary), without repeats within a sequence. */
  tokenRange?: [number, number];
  /** Seed of the random sequences (an integer; default 0): the same seed gives the same probe. */
  seed?: number;
  /**
   * Measure each head's ablation effect (default true for decoders, false for masked-LM
   * encoders). Decoders: the next-token loss on the text, or without one on the first
   * induction sequence. Encoders: the masked-token loss on that text masked BERT-style from
   * `seed` (15 % of its ordinary tokens, at least one, replaced by the mask token). One forward
   * per head, with progress and cancel.
   */
  ablation?: boolean;
  /** Called after each forward pass. */
  onProgress?: (p: ProbeProgress) => void;
  /** Cancels between forward passes: headProbes then rejects with signal.reason. */
  signal?: AbortSignal;
}

/** One head's scores. */
export interface HeadScore {
  /** The layer, 0-based. */
  layer: number;
  /** The head within the layer, 0-based. */
  head: number;
  /** Mean weight on the token just before (see {@link HeadPatternScores.previousToken}); in [0, 1]. */
  previousToken: number;
  /** Mean weight on the token just after; null for a causal model: 0 by construction there, not measured. */
  nextToken: number | null;
  /** Mean weight of the repeated sequence's tokens on the token that followed their first occurrence; in [0, 1]. */
  induction: number;
  /** Mean weight on the first token; in [0, 1]. */
  sink: number;
  /** Mean attention entropy in nats; in [0, ln L]. */
  entropy: number;
  /** Loss with the head removed minus the loss with it (nats per token; an encoder's per masked token); null without ablation. */
  ablation: number | null;
}

/** What {@link headProbes} measured: each score as a [layer][head] table, and the same per head. */
export interface HeadProbeResult {
  /** Number of layers. */
  layers: number;
  /** Heads per layer (the largest, when layers differ). */
  heads: number;
  /** Each score as [layer][head]. */
  previousToken: HeadTable;
  /** null for a causal model (its maps' weight on the next token is 0 by construction) */
  nextToken: HeadTable | null;
  /** Induction scores (mean weight on the token after the first occurrence), [layer][head]. */
  induction: HeadTable;
  /** First-token shares, [layer][head]. */
  sink: HeadTable;
  /** Attention entropies in nats, [layer][head]. */
  entropy: HeadTable;
  /** Ablation effects (loss without the head minus with it, nats per token), [layer][head]; null when ablation was off. */
  ablation: HeadTable | null;
  /** The same, one entry per head, layer by layer. */
  scores: HeadScore[];
  /** Mean next-token loss (an encoder's: masked-token loss) in nats per predicted token of the ablation's texts with every head (headMask all 1), or null. */
  baseLoss: number | null;
  /** The texts (token ids) the previous-token, next-token, sink and entropy scores were measured on. */
  ids: number[][];
  /** The texts the ablation loss was measured on ([] without ablation); an encoder's as masked. */
  ablationIds: number[][];
  /** An encoder's scored tokens per ablation text, [position, original id] pairs ([] for decoders). */
  ablationTargets: [number, number][][];
  /** The induction sequences' first copies. */
  inductionTokens: number[][];
}

const KNOWN = ['ids', 'text', 'inductionLength', 'inductionSequences', 'inductionTokens', 'prefix', 'tokenRange', 'seed',
  'ablation', 'onProgress', 'signal'];

/** Seeded uniform [0, 1): mulberry32. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** T distinct tokens from [lo, hi) (partial Fisher-Yates over a sparse permutation). */
function distinctTokens(rand: () => number, T: number, lo: number, hi: number): number[] {
  const swapped = new Map<number, number>();
  const n = hi - lo;
  const out: number[] = [];
  for (let k = 0; k < T; k++) {
    const j = k + Math.floor(rand() * (n - k));
    const vj = swapped.get(j) ?? j;
    swapped.set(j, swapped.get(k) ?? k);
    out.push(lo + vj);
  }
  return out;
}

/** Mean next-token cross-entropy (nats) of logits [1, L, V] on ids (positions 0..L-2 predict 1..L-1). */
export function nextTokenLoss(logits: Tensor, ids: ArrayLike<number>): number {
  const [, L, V] = logits.shape;
  const x = logits.data as Float32Array;
  let total = 0;
  for (let p = 0; p + 1 < L; p++) {
    const o = p * V;
    let m = -Infinity;
    for (let v = 0; v < V; v++) if (x[o + v] > m) m = x[o + v];
    let s = 0;
    for (let v = 0; v < V; v++) s += Math.exp(x[o + v] - m);
    total += m + Math.log(s) - x[o + ids[p + 1]];
  }
  return total / (L - 1);
}

function ids(fn: string, name: string, x: unknown): number[] {
  if (!isNumberArray(x) || !Array.from(x).every((v) => Number.isInteger(v) && v >= 0)) {
    throw new TypeError(`${fn}: ${name} must be an array of token ids (integers >= 0), got ${describe(x)}`);
  }
  return Array.from(x);
}

/**
 * Probes every head of `model`: the scores read off its attention maps on a text
 * (previous-token, next-token, sink, entropy: {@link HeadPatternScores}) and on random tokens
 * repeated twice (induction), and each head's ablation effect, the change in the loss when its
 * attention probabilities are multiplied by 0.
 * Forward passes: one per induction sequence, one on the text, and with ablation one with
 * every head (headMask all 1) and one per head (144 for a 12 x 12 model); onProgress after
 * each, signal checked between them.
 *
 * @example
 * const r = await headProbes(model, { text: 'In the beginning God created the heaven and the earth.' });
 * const best = r.scores.reduce((a, b) => (b.induction > a.induction ? b : a));
 */
export async function headProbes(model: ProbeModel, options: HeadProbeOptions = {}): Promise<HeadProbeResult> {
  const fn = 'headProbes';
  if (!model || typeof (model as ProbeModel).forward !== 'function') {
    throw new TypeError(`${fn}: model must be a loaded model (with forward), got ${describe(model)}`);
  }
  const opts = checkOptions(fn, options, KNOWN);
  const signal = optSignal(fn, opts);
  const onProgress = optFunction<(p: ProbeProgress) => void>(fn, opts, 'onProgress');
  const encoder = typeof model.fillMask === 'function';
  const ablation = optBool(fn, opts, 'ablation', !encoder);
  const specials = model.tokenizer?.specialTokens ?? {};
  const maskId = specials.mask ?? null;
  if (ablation && encoder && maskId === null) {
    throw new Error(`${fn}: options.ablation on a masked-LM encoder masks the text, and this model's tokenizer has no mask token`);
  }
  if (opts.ids !== undefined && opts.text !== undefined) throw new TypeError(`${fn}: give options.ids or options.text, not both`);
  let texts: number[][] | null = null;
  if (opts.text !== undefined) {
    const list = Array.isArray(opts.text) ? opts.text : [opts.text];
    if (list.length === 0 || !list.every((x) => typeof x === 'string')) {
      throw new TypeError(`${fn}: options.text must be a string or a non-empty array of strings, got ${describe(opts.text)}`);
    }
    if (!model.tokenizer) throw new TypeError(`${fn}: options.text needs a tokenizer and this model has none: pass options.ids`);
    texts = list.map((x) => model.tokenizer!.encode(x as string));
  } else if (opts.ids !== undefined) {
    const several = Array.isArray(opts.ids) && opts.ids.length > 0 && typeof opts.ids[0] !== 'number';
    texts = several ? (opts.ids as unknown[]).map((x, k) => ids(fn, `options.ids[${k}]`, x)) : [ids(fn, 'options.ids', opts.ids)];
  }
  for (const t of texts ?? []) {
    if (t.length < 2) throw new RangeError(`${fn}: a text has ${t.length} token(s); the scores need at least 2`);
  }
  const prefix = opts.prefix === undefined ? [] : ids(fn, 'options.prefix', opts.prefix);
  const seed = optInt(fn, opts, 'seed', 0, 0, Number.MAX_SAFE_INTEGER);
  const cfg = (model.config ?? {}) as Record<string, unknown>;
  const vocab = model.dims?.vocab ?? (typeof cfg.vocab_size === 'number' ? cfg.vocab_size : undefined);
  const context = model.dims?.positions ?? (typeof cfg.max_position_embeddings === 'number' ? cfg.max_position_embeddings : Infinity);

  let firsts: number[][];
  if (opts.inductionTokens !== undefined) {
    const t = opts.inductionTokens;
    if (!Array.isArray(t) || t.length === 0) throw new TypeError(`${fn}: options.inductionTokens must be a non-empty array of token-id arrays, got ${describe(t)}`);
    firsts = t.map((x, k) => ids(fn, `options.inductionTokens[${k}]`, x));
    if (firsts.some((x) => x.length < 1)) throw new RangeError(`${fn}: every sequence of options.inductionTokens needs at least 1 token`);
  } else {
    const room = Math.floor((context - prefix.length) / 2);
    const T = optInt(fn, opts, 'inductionLength', Math.min(32, room), 1, Math.max(1, room),
      ` (prefix + 2 * inductionLength must fit the context of ${context})`);
    const S = optInt(fn, opts, 'inductionSequences', 2, 1, 1024);
    let lo = 0, hi = vocab;
    if (opts.tokenRange !== undefined) {
      const r = opts.tokenRange;
      if (!Array.isArray(r) || r.length !== 2 || !r.every((v) => Number.isInteger(v) && v >= 0) || r[0] >= r[1]) {
        throw new RangeError(`${fn}: options.tokenRange must be [lo, hi) with integers 0 <= lo < hi, got ${describe(r)}`);
      }
      [lo, hi] = r as [number, number];
    }
    if (hi === undefined) throw new Error(`${fn}: the model's vocabulary size is unknown (no dims.vocab, no config.vocab_size): pass options.tokenRange or options.inductionTokens`);
    if (vocab !== undefined && hi > vocab) throw new RangeError(`${fn}: options.tokenRange [${lo}, ${hi}) goes past the vocabulary (${vocab} tokens)`);
    if (hi - lo < T) throw new RangeError(`${fn}: ${hi - lo} tokens to draw from, fewer than inductionLength = ${T} (tokens do not repeat within a sequence)`);
    const rand = random(seed);
    firsts = Array.from({ length: S }, () => distinctTokens(rand, T, lo, hi));
  }
  for (const x of firsts) {
    if (prefix.length + 2 * x.length > context) {
      throw new RangeError(`${fn}: prefix (${prefix.length}) + 2 * ${x.length} induction tokens exceed the model's context (${context})`);
    }
  }
  const seqs = firsts.map((x) => [...prefix, ...x, ...x]);
  // an encoder's texts masked BERT-style (their own stream from the seed); the scored tokens
  let ablationIds = ablation ? texts ?? [seqs[0]] : [];
  let ablationTargets: [number, number][][] = [];
  if (ablation && encoder) {
    const rand = random(seed ^ 0x9e3779b9), never = new Set(Object.values(specials).filter((v): v is number => typeof v === 'number'));
    const masked = ablationIds.map((t, k) => {
      const m = maskText(t, maskId!, never, rand);
      if (!m) throw new RangeError(`${fn}: ablation text ${k} has only special tokens; nothing to mask`);
      return m;
    });
    ablationIds = masked.map((m) => m.ids);
    ablationTargets = masked.map((m) => m.targets);
  }

  let done = 0;
  let total = (texts ? texts.length : 0) + seqs.length;
  const step = async (stage: ProbeProgress['stage'], forwards = 1) => {
    done += forwards;
    onProgress?.({ done, total, stage });
    await nextTask(); // a page paints, a Cancel click lands
    signal?.throwIfAborted();
  };
  signal?.throwIfAborted();
  // maps only: the LM head (the largest matmul) for the last position alone, where forward has the option
  const mapsOnly = model.dims ? { outputAttentions: true, logits: 'last' as const } : { outputAttentions: true };

  // induction: each sequence's maps, averaged
  let induction: HeadTable | null = null;
  let lastSeq: Awaited<ReturnType<ProbeModel['forward']>> | null = null;
  for (const [k, seq] of seqs.entries()) {
    const r = await model.forward(seq, mapsOnly);
    if (!r.attentions) throw new Error(`${fn}: model.forward returned no attentions for outputAttentions: true`);
    const s = inductionScores(r.attentions, firsts[k].length, prefix.length);
    induction = induction ? induction.map((row, l) => row.map((v, h) => v + s[l][h])) : s;
    if (k === 0) lastSeq = r;
    await step('induction');
  }
  induction = induction!.map((row) => row.map((v) => v / seqs.length));

  // the texts' maps (or, without a text, the first induction sequence's), scores averaged
  let pattern = headPatternScores(lastSeq!.attentions!);
  const layers = lastSeq!.attentions!.length;
  const headsPer = lastSeq!.attentions!.map((a) => a.shape[a.shape.length - 3]);
  if (texts) {
    const sum = { previousToken: [] as HeadTable, nextToken: [] as HeadTable, sink: [] as HeadTable, entropy: [] as HeadTable };
    let lookAhead = false;
    for (const t of texts) {
      const r = await model.forward(t, mapsOnly);
      if (!r.attentions) throw new Error(`${fn}: model.forward returned no attentions for outputAttentions: true`);
      const p = headPatternScores(r.attentions);
      // next-token: null only when every text's maps are causal (a causal text's weights there are 0)
      lookAhead ||= p.nextToken !== null;
      const q = { ...p, nextToken: p.nextToken ?? p.previousToken.map((row) => row.map(() => 0)) };
      for (const k of ['previousToken', 'nextToken', 'sink', 'entropy'] as const) {
        sum[k] = sum[k].length ? sum[k].map((row, l) => row.map((v, h) => v + q[k][l][h] / texts!.length)) : q[k].map((row) => row.map((v) => v / texts!.length));
      }
      await step('text');
    }
    pattern = { ...sum, nextToken: lookAhead ? sum.nextToken : null };
  }
  const textIds = texts ?? [seqs[0]];
  // mean loss over every predicted (a decoder's) or masked (an encoder's) token of every ablation text
  const predicted = encoder ? ablationTargets.reduce((a, t) => a + t.length, 0) : ablationIds.reduce((a, t) => a + t.length - 1, 0);
  const lossWith = async (mask: Float32Array) => {
    let nats = 0;
    for (const [k, t] of ablationIds.entries()) {
      const r = await model.forward(t, { headMask: new Tensor(mask, [layers, H]) });
      if (r.logits.shape[1] !== t.length) {
        throw new Error(`${fn}: model.forward returned logits ${fmtShape(r.logits.shape)} for ${t.length} tokens (need every position's)`);
      }
      nats += encoder ? maskedLossSum(r.logits, ablationTargets[k]) : nextTokenLoss(r.logits, t) * (t.length - 1);
    }
    return nats / predicted;
  };
  const H = Math.max(...headsPer);

  let ablationTable: HeadTable | null = null;
  let baseLoss: number | null = null;
  if (ablation) {
    // the baseline through the same path as the ablations: every head kept (mask all 1)
    total += ablationIds.length * (1 + headsPer.reduce((a, b) => a + b, 0));
    baseLoss = await lossWith(new Float32Array(layers * H).fill(1));
    await step('ablation', ablationIds.length);
    ablationTable = [];
    for (let l = 0; l < layers; l++) {
      const row: number[] = [];
      for (let h = 0; h < headsPer[l]; h++) {
        const mask = new Float32Array(layers * H).fill(1);
        mask[l * H + h] = 0;
        row.push((await lossWith(mask)) - baseLoss);
        await step('ablation', ablationIds.length);
      }
      ablationTable.push(row);
    }
  }

  const scores: HeadScore[] = [];
  for (let l = 0; l < layers; l++) {
    for (let h = 0; h < headsPer[l]; h++) {
      scores.push({
        layer: l, head: h,
        previousToken: pattern.previousToken[l][h], nextToken: pattern.nextToken ? pattern.nextToken[l][h] : null, induction: induction[l][h], sink: pattern.sink[l][h],
        entropy: pattern.entropy[l][h], ablation: ablationTable ? ablationTable[l][h] : null,
      });
    }
  }
  return {
    layers, heads: H, previousToken: pattern.previousToken, nextToken: pattern.nextToken, induction, sink: pattern.sink, entropy: pattern.entropy,
    ablation: ablationTable, scores, baseLoss, ids: textIds, ablationIds, ablationTargets, inductionTokens: firsts,
  };
}
