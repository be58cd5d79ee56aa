/**
 * Sentence embeddings from an encoder's last hidden states, as sentence-transformers computes
 * them: texts tokenized with their special tokens, padded into batches with an attention mask,
 * pooled over each text's own tokens (padding never counts), optionally L2-normalized.
 *
 * The defaults come from a sentence-transformers folder: `modules.json` (the modules in order:
 * Transformer, Pooling, and Normalize when the embeddings are unit length) and the Pooling
 * module's `config.json` (`1_Pooling/config.json`: `pooling_mode_mean_tokens`, ..._cls_token,
 * ..._max_tokens). Without those files: mean pooling, no normalization.
 */
import { describe } from '../errors.js';
import { Tensor } from '../tensor.js';
import { checkOptions, optBool, optInt } from '../validate.js';
import { nextTask, optFunction, optSignal } from './cancel.js';
import type { Tokenizer } from './tokenizer.js';

/** How `embed` pools a text's token vectors into one: their mean, the first ([CLS]) token's, or each dimension's max. */
export type Pooling = 'mean' | 'cls' | 'max';
export const POOLINGS: readonly Pooling[] = ['mean', 'cls', 'max'];

/** Options of {@link EncoderModel.embed}; pooling and normalize default to {@link EncoderModel.embeddingDefaults}. */
export interface EmbedOptions {
  /** 'mean' of the token vectors, the first ('cls') token's, or the 'max' of each dimension. */
  pooling?: Pooling;
  /** Scale each embedding to unit L2 length (sentence-transformers' Normalize module). */
  normalize?: boolean;
  /**
   * The most texts per forward pass (default 32). Texts go in by length, longest first, and a pass
   * holds at most 256 padded token rows (or one text): each batch is padded to its
   * longest text.
   */
  batchSize?: number;
  /** Called after each batch with the texts done so far and the total. */
  onProgress?: (p: { done: number; total: number }) => void;
  /** Aborts between batches (the promise rejects with the signal's reason). */
  signal?: AbortSignal;
}

/** What `embed` does when options leave it open, and where that was read. */
export interface PoolingDefaults {
  /** null: the files ask for a pooling qkv does not run (then `options.pooling` is required). */
  pooling: Pooling | null;
  /** Whether embeddings are scaled to unit L2 length (the files list a Normalize module). */
  normalize: boolean;
  /** 'sentence-transformers' (modules.json / pooling config read) or 'default' (none found). */
  from: 'sentence-transformers' | 'default';
  /** Why `pooling` is null, or a module qkv does not run (a Dense layer): embed then refuses the defaults. */
  unsupported?: string;
}

/** The sentence-transformers files of a folder, as text; each optional. */
export interface SentenceTransformerFiles {
  /** modules.json */
  modules?: string;
  /** the Pooling module's config.json (usually 1_Pooling/config.json) */
  pooling?: string;
  /** the Pooling module's path, for messages */
  poolingPath?: string;
}

/**
 * The most token rows (texts x padded length) one forward pass of embed holds. The GEMM packs
 * all of a pass's rows of x for each block of weight rows and sweeps them once per panel of
 * output columns; past a few hundred rows that block leaves the caches. Measured on the MiniLM
 * shape (bench/encoder/minilm.mjs, 1 thread, CPU time, load ~23): 32 texts of 256 tokens in one
 * pass (8192 rows) 325 ms a text, in passes of 2048 / 512 / 256 rows 245 / 242 / 245 ms; of 64
 * tokens 66 ms at 2048 rows, 60 at 512, 54 at 128. Sorting by length keeps the padding small.
 */
export const EMBED_ROWS = 256;

export const DEFAULT_POOLING: PoolingDefaults = Object.freeze({ pooling: 'mean', normalize: false, from: 'default' });

interface StModule {
  type: string;
  path: string;
}

function parseJsonFile(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new SyntaxError(`loadModel: ${where} is not valid JSON: ${(e as Error).message}`);
  }
}

/** modules.json -> its modules; a damaged file is an Error naming it. */
export function parseModules(text: string, where: string): StModule[] {
  const v = parseJsonFile(text, where);
  if (!Array.isArray(v)) throw new TypeError(`loadModel: ${where} must hold an array of modules, got ${describe(v)}`);
  return v.map((m, i) => {
    if (m === null || typeof m !== 'object' || typeof (m as StModule).type !== 'string') {
      throw new TypeError(`loadModel: ${where}[${i}] must be an object with a string "type", got ${describe(m)}`);
    }
    const path = (m as { path?: unknown }).path;
    return { type: (m as StModule).type, path: typeof path === 'string' ? path : '' };
  });
}

/** The Pooling module's folder named by modules.json, or null when it lists none. */
export function poolingPath(modules: StModule[]): string | null {
  const p = modules.find((m) => m.type === 'sentence_transformers.models.Pooling');
  return p ? p.path : null;
}

const MODES: Record<string, Pooling | null> = {
  pooling_mode_mean_tokens: 'mean',
  pooling_mode_cls_token: 'cls',
  pooling_mode_max_tokens: 'max',
  pooling_mode_mean_sqrt_len_tokens: null,
  pooling_mode_weightedmean_tokens: null,
  pooling_mode_lasttoken: null,
};

/** The defaults sentence-transformers' files ask for (see the file comment). */
export function sentenceTransformerDefaults(files: SentenceTransformerFiles, where: string): PoolingDefaults {
  if (files.modules === undefined && files.pooling === undefined) return DEFAULT_POOLING;
  const modules = files.modules === undefined ? [] : parseModules(files.modules, `${where}/modules.json`);
  const normalize = modules.some((m) => m.type === 'sentence_transformers.models.Normalize');
  const others = modules.filter((m) => !['Transformer', 'Pooling', 'Normalize'].some((t) => m.type === `sentence_transformers.models.${t}`));
  let pooling: Pooling | null = 'mean';
  let unsupported: string | undefined;
  if (files.pooling !== undefined) {
    const pw = `${where}/${files.poolingPath ?? '1_Pooling'}/config.json`;
    const c = parseJsonFile(files.pooling, pw);
    if (c === null || typeof c !== 'object' || Array.isArray(c)) throw new TypeError(`loadModel: ${pw} must hold a JSON object, got ${describe(c)}`);
    const o = c as Record<string, unknown>;
    const on = Object.keys(MODES).filter((k) => o[k] === true);
    if (typeof o.pooling_mode === 'string' && on.length === 0) {
      // newer files: "pooling_mode": "mean" | "cls" | "max" | ...
      const m = o.pooling_mode;
      pooling = m === 'mean' || m === 'cls' || m === 'max' ? m : null;
      if (pooling === null) unsupported = `${pw} asks for pooling_mode "${m}" (qkv pools mean, cls or max)`;
    } else if (on.length !== 1 || MODES[on[0]] === null) {
      pooling = null;
      unsupported = on.length === 0
        ? `${pw} turns on no pooling mode`
        : `${pw} asks for ${on.join(' + ')} (qkv pools one of pooling_mode_mean_tokens, pooling_mode_cls_token, pooling_mode_max_tokens)`;
    } else pooling = MODES[on[0]];
  }
  if (others.length > 0) {
    unsupported = `${where}/modules.json lists ${others.map((m) => m.type).join(', ')}, which qkv does not run`;
  }
  const d: PoolingDefaults = { pooling, normalize, from: 'sentence-transformers' };
  if (unsupported) d.unsupported = unsupported;
  return Object.freeze(d);
}

/** What embedTexts needs of the model. */
export interface Embedder {
  readonly tokenizer: Tokenizer;
  readonly maxPositions: number;
  readonly hidden: number;
  readonly padTokenId: number;
  readonly embeddingDefaults: PoolingDefaults;
}

/** ids [B, L], mask [B, L] -> hidden states [B, L, E]. */
export type HiddenStates = (ids: Int32Array, B: number, L: number, mask: Uint8Array) => Float32Array;

/** Pools one text's rows of `h` (its first `n` tokens) into out[E]. */
export function pool(h: Float32Array, at: number, n: number, E: number, pooling: Pooling, out: Float32Array): void {
  if (pooling === 'cls') {
    out.set(h.subarray(at, at + E));
    return;
  }
  const acc = new Float64Array(E).fill(pooling === 'max' ? -Infinity : 0);
  for (let i = 0; i < n; i++) {
    const row = h.subarray(at + i * E, at + (i + 1) * E);
    if (pooling === 'max') for (let e = 0; e < E; e++) acc[e] = Math.max(acc[e], row[e]);
    else for (let e = 0; e < E; e++) acc[e] += row[e];
  }
  for (let e = 0; e < E; e++) out[e] = pooling === 'max' ? acc[e] : acc[e] / n;
}

/** out / max(|out|, 1e-12), as torch.nn.functional.normalize. */
export function l2Normalize(v: Float32Array): void {
  let ss = 0;
  for (let e = 0; e < v.length; e++) ss += v[e] * v[e];
  const d = Math.max(Math.sqrt(ss), 1e-12);
  for (let e = 0; e < v.length; e++) v[e] /= d;
}

export async function embedTexts(
  fn: string, model: Embedder, texts: unknown, options: EmbedOptions, run: HiddenStates,
): Promise<Tensor> {
  const opts = checkOptions(fn, options, ['pooling', 'normalize', 'batchSize', 'onProgress', 'signal']);
  const list = typeof texts === 'string' ? [texts] : texts;
  if (!Array.isArray(list) || list.length === 0 || !list.every((t) => typeof t === 'string')) {
    throw new TypeError(`${fn}: texts must be a string or a non-empty array of strings, got ${describe(texts)}`);
  }
  const d = model.embeddingDefaults;
  let pooling: Pooling;
  if (opts.pooling !== undefined) {
    if (!POOLINGS.includes(opts.pooling as Pooling)) {
      throw new TypeError(`${fn}: options.pooling must be ${POOLINGS.map((p) => `'${p}'`).join(', ')}, got ${describe(opts.pooling)}`);
    }
    pooling = opts.pooling as Pooling;
  } else if (d.pooling === null || d.unsupported) {
    throw new Error(`${fn}: the model's default pooling cannot be run (${d.unsupported}); pass options.pooling`);
  } else pooling = d.pooling;
  const normalize = optBool(fn, opts, 'normalize', d.normalize);
  const batchSize = optInt(fn, opts, 'batchSize', 32, 1, 4096);
  const onProgress = optFunction<(p: { done: number; total: number }) => void>(fn, opts, 'onProgress');
  const signal = optSignal(fn, opts);
  signal?.throwIfAborted();

  const encoded = list.map((t, i) => {
    const ids = model.tokenizer.encode(t);
    if (ids.length === 0) throw new RangeError(`${fn}: texts[${i}] has no tokens`);
    if (ids.length > model.maxPositions) {
      throw new RangeError(`${fn}: texts[${i}] has ${ids.length} tokens, more than the model's ${model.maxPositions}`);
    }
    return ids;
  });
  const n = list.length;
  const E = model.hidden;
  const out = new Float32Array(n * E);
  // longest first (ties in input order), so that a batch's texts have similar lengths
  const order = encoded.map((_x, i) => i).sort((a, b) => encoded[b].length - encoded[a].length || a - b);
  for (let b0 = 0; b0 < n;) {
    const L = encoded[order[b0]].length;  // the batch's longest: its first
    const B = Math.min(batchSize, n - b0, Math.max(1, Math.floor(EMBED_ROWS / L)));
    const batch = order.slice(b0, b0 + B);
    const ids = new Int32Array(B * L).fill(model.padTokenId);
    const mask = new Uint8Array(B * L);
    batch.forEach((t, b) => {
      ids.set(encoded[t], b * L);
      mask.fill(1, b * L, b * L + encoded[t].length);
    });
    const h = run(ids, B, L, mask);
    batch.forEach((t, b) => {
      const v = out.subarray(t * E, (t + 1) * E);
      pool(h, b * L * E, encoded[t].length, E, pooling, v);
      if (normalize) l2Normalize(v);
    });
    b0 += B;
    onProgress?.({ done: b0, total: n });
    if (b0 < n) {
      await nextTask();
      signal?.throwIfAborted();
    }
  }
  return new Tensor(out, [n, E]);
}
