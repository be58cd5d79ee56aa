/**
 * A loaded BERT-family encoder (model_type `bert`, `distilbert`, `roberta`, `xlm-roberta`):
 * with its masked-LM head, `forward` (MLM logits and every head's bidirectional attention) and
 * `fillMask` (as Hugging Face's fill-mask pipeline); with or without it, `embed` (pooled
 * sentence embeddings, ./embed.ts). Over the encoder in the wasm module (src/model/bert.hpp,
 * wasm/bindings_encoder.cpp).
 */
import { describe, fmtShape } from '../errors.js';
import { release, track, type Tracked } from '../lifetime.js';
import { Tensor } from '../tensor.js';
import { checkOptions, checkTensor, intsBelow, isNumberArray, optBool, optInt } from '../validate.js';
import { HeapScope, wasmError } from '../wasm/heap.js';
import { callThreads } from '../wasm/loader.js';
import type { EmbindHandle, QkvModule } from '../wasm/module.js';
import { readHeadOutputs, stackPlan, toWasm, type HeadMask, type HeadPatch, type Knockout, type WasmInterventions } from './interventions.js';
import { embedTexts, type EmbedOptions, type PoolingDefaults } from './embed.js';
import type { WasmLoad } from './stream-load.js';
import type { Tokenizer } from './tokenizer.js';

/** config.json model_type of the encoders. */
export type EncoderArchitecture = 'bert' | 'distilbert' | 'roberta' | 'xlm-roberta';

/** config.json of a BERT or DistilBERT checkpoint (Hugging Face keys); other keys are kept. */
export interface EncoderConfig {
  /** The architecture: 'bert', 'distilbert', 'roberta' or 'xlm-roberta'. */
  model_type: EncoderArchitecture;
  /** Vocabulary size (rows of the word embedding). */
  vocab_size: number;
  /** Learned positions (RoBERTa's first padding_idx + 1 are never used). */
  max_position_embeddings: number;
  /** BERT, RoBERTa: model width (DistilBERT: `dim`). */
  hidden_size?: number;
  /** BERT, RoBERTa: layers (DistilBERT: `n_layers`). */
  num_hidden_layers?: number;
  /** BERT, RoBERTa: heads per layer (DistilBERT: `n_heads`). */
  num_attention_heads?: number;
  /** BERT, RoBERTa: token type (segment) ids, rows of the token type embedding (DistilBERT has none). */
  type_vocab_size?: number;
  /** DistilBERT: model width. */
  dim?: number;
  /** DistilBERT: layers. */
  n_layers?: number;
  /** DistilBERT: heads per layer. */
  n_heads?: number;
  [key: string]: unknown;
}

/** Options of {@link EncoderModel.forward}. */
export interface EncoderForwardOptions {
  /** Also return every layer's attention probabilities (default false). */
  outputAttentions?: boolean;
  /**
   * Also return the residual stream, Hugging Face's `output_hidden_states` (default false):
   * numLayers + 1 Tensors [1, L, hidden], [0] the embeddings' output (after their LayerNorm),
   * [l] layer l - 1's output (the last: what the masked-LM head reads).
   */
  outputHiddenStates?: boolean;
  /** Segment of each token (0 = sentence A, 1 = B), as `tokenizer.encodePair` gives; default all 0. BERT only. */
  tokenTypeIds?: ArrayLike<number>;
  /** 1 = a real token, 0 = padding no token may attend to (its own outputs are still computed); default all 1. */
  attentionMask?: ArrayLike<number>;
  /** Multiplies each head's attention probabilities, [numHeads] or [numLayers, numHeads] (HF head_mask; docs/interventions.md). */
  headMask?: HeadMask;
  /** Attention knockout: per entry, the layer's (chosen heads') query -> key edges get score -inf. */
  knockout?: Knockout[];
  /** Also return every layer's per-head outputs [1, H, L, head_dim] (before the output projection). */
  outputHeadOutputs?: boolean;
  /** Replaces heads' output rows during the forward (activation patching). */
  patchHeadOutputs?: HeadPatch[];
}

/** What {@link EncoderModel.forward} returns. */
export interface EncoderForwardResult {
  /** `[1, L, vocab_size]`: the masked-LM head's logits at every position. */
  logits: Tensor;
  /** With outputHiddenStates: numLayers + 1 Tensors [1, L, hidden] (embeddings, then each layer's output). */
  hiddenStates?: Tensor[];
  /** One per layer, each [1, H, L, L] (softmax probabilities, bidirectional), like HF output_attentions. */
  attentions?: Tensor[];
  /** With outputHeadOutputs: one per layer, [1, H, L, head_dim], what enters the output projection. */
  headOutputs?: Tensor[];
}

/** Options of {@link EncoderModel.fillMask}. */
export interface FillMaskOptions {
  /** How many predictions (default 5), as the pipeline's top_k. */
  topK?: number;
  /** As forward's: the predictions with heads removed (docs/interventions.md). */
  headMask?: HeadMask;
  /** As forward's: the predictions with query -> key edges blocked (positions of the encoded text, [CLS] = 0). */
  knockout?: Knockout[];
}

/** One prediction for the [MASK], as Hugging Face's fill-mask pipeline (`token` is the string here). */
export interface FillMaskPrediction {
  /** The predicted token's vocabulary string (`light`, `##ness`). */
  token: string;
  /** The predicted token's id. */
  tokenId: number;
  /** Softmax probability at the masked position. */
  score: number;
  /** The input with the prediction in place of [MASK], decoded without special tokens. */
  sequence: string;
}

/** The EncoderModel binding (wasm/bindings_encoder.cpp). */
export interface WasmEncoder extends EmbindHandle {
  /** -> logits [B, L, V], attentions [layers, B, H, L, L] or 0, hidden states [layers + 1, B, L, E] or 0. */
  forward(ids: number, B: number, L: number, types: number, mask: number, logits: number, attentions: number, hiddenStates: number): string;
  /** forward with head interventions (B = 1). */
  forwardWith(ids: number, B: number, L: number, types: number, mask: number, logits: number, attentions: number, hiddenStates: number, iv: WasmInterventions): string;
  /** x [N, E] -> logits [N, V] through the masked-LM head. */
  mlmHead(x: number, N: number, logits: number): string;
  /** ids [B, L], types, mask -> the last layer's hidden states [B, L, E] (no head). */
  hidden(ids: number, B: number, L: number, types: number, mask: number, hidden: number): string;
  hasMaskedLmHead(): boolean;
  setThreads(threads: number): void;
  architecture(): string;
}
export interface EncoderModule {
  EncoderModel: { create(config: string, bytes: number, size: number, int8: boolean): WasmEncoder | null };
  /** The same load from a file that streams in (stream-load.ts). */
  EncoderModelLoad: { begin(config: string, head: number, headSize: number, fileSize: number, int8: boolean): WasmLoad<WasmEncoder> | null };
  encoderLastError(): string;
}

export function encoderModule(m: QkvModule): EncoderModule {
  const mm = m as unknown as Partial<EncoderModule>;
  if (!mm.EncoderModel) {
    throw new Error('loadModel: this build of the wasm module lacks the encoder bindings (wasm/bindings_encoder.cpp)');
  }
  return mm as EncoderModule;
}

/** A BERT-family encoder. Holds wasm memory: call {@link EncoderModel.dispose} when done. */
export class EncoderModel {
  /** config.json's model_type: 'bert', 'distilbert', 'roberta' or 'xlm-roberta'. */
  readonly architecture: EncoderArchitecture;
  /**
   * Whether the checkpoint has its masked-LM head (cls.predictions.* / lm_head.*): false for a
   * sentence-transformers BertModel, which `embed` runs and `forward` / `fillMask` refuse.
   */
  readonly hasMaskedLmHead: boolean;
  /** Pooling and normalization `embed` uses by default (sentence-transformers' files, else mean, no normalization). */
  readonly embeddingDefaults: PoolingDefaults;
  /** config.json as loaded (frozen). */
  readonly config: EncoderConfig;
  /** The model's WordPiece tokenizer. */
  readonly tokenizer: Tokenizer;
  /** Layers (num_hidden_layers, DistilBERT's n_layers). */
  readonly layers: number;
  /** Heads per layer (num_attention_heads, DistilBERT's n_heads). */
  readonly heads: number;
  /** Model width, the size of each hidden state and of an embedding (hidden_size, DistilBERT's dim). */
  readonly hidden: number;
  /** The most tokens a sequence may have (RoBERTa: max_position_embeddings - padding_idx - 1). */
  readonly maxPositions: number;
  readonly #m: QkvModule;
  readonly #tracked: Tracked<WasmEncoder>;

  /** @internal use {@link loadModel} */
  constructor(m: QkvModule, handle: WasmEncoder, config: EncoderConfig, tokenizer: Tokenizer, defaults: PoolingDefaults) {
    this.#m = m;
    this.#tracked = track(this, handle);
    this.config = config;
    this.tokenizer = tokenizer;
    this.architecture = config.model_type;
    this.hasMaskedLmHead = handle.hasMaskedLmHead();
    this.embeddingDefaults = defaults;
    const bert = config.model_type !== 'distilbert';
    this.layers = Number(bert ? config.num_hidden_layers : config.n_layers);
    this.heads = Number(bert ? config.num_attention_heads : config.n_heads);
    this.hidden = Number(bert ? config.hidden_size : config.dim);
    const roberta = this.architecture === 'roberta' || this.architecture === 'xlm-roberta';
    this.maxPositions = Number(config.max_position_embeddings) - (roberta ? this.padTokenId + 1 : 0);
  }

  /** The id padding uses: RoBERTa's padding_idx (config pad_token_id, default 1; it sets pad positions), else the tokenizer's pad or 0. */
  get padTokenId(): number {
    const roberta = this.architecture === 'roberta' || this.architecture === 'xlm-roberta';
    if (roberta) return Number(this.config.pad_token_id ?? 1);
    return this.tokenizer.specialTokens.pad ?? 0;
  }

  /** The Error for a use of the MLM head on a checkpoint without one. */
  #noHead(fn: string): Error {
    return new Error(`${fn}: this ${this.architecture} checkpoint has no masked-LM head (no ${this.architecture.includes('roberta') ? 'lm_head.*' : 'cls.predictions.*'} tensors: a sentence-embedding model); use model.embed(texts)`);
  }

  /** True after {@link EncoderModel.dispose} (or the top-level dispose()). */
  get disposed(): boolean {
    return this.#tracked.released;
  }

  #handle(fn: string): WasmEncoder {
    if (this.#tracked.released) throw new Error(`${fn}: the model has been disposed`);
    const h = this.#tracked.handle;
    h.setThreads(callThreads());
    return h;
  }

  /** An array of L integers in [0, limit), copied; `what` names it in errors. */
  #ints(fn: string, what: string, a: unknown, L: number | null, limit: number): Int32Array {
    if (!isNumberArray(a)) {
      throw new TypeError(`${fn}: ${what} must be an array of integers, got ${describe(a)}`);
    }
    const v = a;
    if (L === null) {
      if (v.length === 0) throw new RangeError(`${fn}: ${what} is empty (need at least 1 token)`);
      if (v.length > this.maxPositions) {
        throw new RangeError(`${fn}: ${what} has ${v.length} tokens, more than max_position_embeddings = ${this.maxPositions}`);
      }
    } else if (v.length !== L) {
      throw new RangeError(`${fn}: ${what} has ${v.length} entries, ids has ${L}`);
    }
    return intsBelow(fn, what, v, limit, 'an integer');
  }

  /**
   * Runs one sequence through the encoder (every token sees every other: no causal mask):
   * MLM logits [1, L, vocab]; with outputAttentions, one [1, H, L, L] Tensor per layer.
   * `attentionMask` hides padding keys (the rows of padded queries are still computed, as HF).
   */
  async forward(ids: ArrayLike<number>, options: EncoderForwardOptions = {}): Promise<EncoderForwardResult> {
    return this.#forward('model.forward', ids, options);
  }

  /** forward, its errors naming `fn` (fillMask's interventions are forward's). */
  async #forward(fn: string, ids: ArrayLike<number>, options: EncoderForwardOptions): Promise<EncoderForwardResult> {
    const opts = checkOptions(fn, options, ['outputAttentions', 'outputHiddenStates', 'tokenTypeIds', 'attentionMask', 'headMask', 'knockout', 'outputHeadOutputs', 'patchHeadOutputs']);
    const want = optBool(fn, opts, 'outputAttentions', false);
    const wantHS = optBool(fn, opts, 'outputHiddenStates', false);
    if (!this.hasMaskedLmHead) throw this.#noHead(fn);
    const wantHO = optBool(fn, opts, 'outputHeadOutputs', false);
    const h = this.#handle(fn);
    const V = this.config.vocab_size;
    const x = this.#ids(fn, ids);
    const L = x.length;
    let types: Int32Array | null = null;
    if (opts.tokenTypeIds !== undefined) {
      const T = this.architecture === 'distilbert' ? 1 : Number(this.config.type_vocab_size ?? (this.architecture === 'bert' ? 2 : 1));
      types = this.#ints(fn, 'options.tokenTypeIds', opts.tokenTypeIds, L, T);
    }
    let mask: Uint8Array | null = null;
    if (opts.attentionMask !== undefined) {
      const m = this.#ints(fn, 'options.attentionMask', opts.attentionMask, L, 2);
      if (!m.includes(1)) throw new RangeError(`${fn}: options.attentionMask hides every token (need at least one 1)`);
      mask = new Uint8Array(m);
    }
    const NL = this.layers;
    const H = this.heads;
    const hidden = this.hidden;
    const names = { headMask: 'headMask', knockout: 'knockout', patch: 'patchHeadOutputs' };
    const plan = stackPlan(fn, opts, names, wantHO, { layers: NL, heads: H, valueDim: hidden / H }, L, L);
    const scope = new HeapScope(this.#m, fn);
    try {
      const iv = toWasm(scope, plan);
      const pIds = scope.i32(x, `ids [${L}]`);
      const pTypes = types ? scope.i32(types, `tokenTypeIds [${L}]`) : 0;
      const pMask = mask ? scope.u8(mask, `attentionMask [${L}]`) : 0;
      const pLogits = scope.alloc(4 * L * V, `logits ${fmtShape([1, L, V])}`);
      const pAtt = want ? scope.alloc(4 * NL * H * L * L, `attentions ${fmtShape([NL, 1, H, L, L])}`) : 0;
      const pHS = wantHS ? scope.alloc(4 * (NL + 1) * L * hidden, `hidden states ${fmtShape([NL + 1, 1, L, hidden])}`) : 0;
      const err = plan ? h.forwardWith(pIds, 1, L, pTypes, pMask, pLogits, pAtt, pHS, iv.arg) : h.forward(pIds, 1, L, pTypes, pMask, pLogits, pAtt, pHS);
      if (err) throw wasmError(fn, err);
      const result: EncoderForwardResult = { logits: new Tensor(scope.read(pLogits, L * V), [1, L, V]) };
      if (wantHS) {
        const per = L * hidden;
        result.hiddenStates = [];
        for (let l = 0; l <= NL; l++) result.hiddenStates.push(new Tensor(scope.read(pHS + 4 * l * per, per), [1, L, hidden]));
      }
      if (plan && iv.outputs) result.headOutputs = readHeadOutputs(scope, iv.outputs, plan);
      if (want) {
        const per = H * L * L;
        result.attentions = [];
        for (let l = 0; l < NL; l++) result.attentions.push(new Tensor(scope.read(pAtt + 4 * l * per, per), [1, H, L, L]));
      }
      return result;
    } finally {
      scope.free();
    }
  }

  /**
   * The masked-LM head (the one `forward` and `fillMask` end with: dense, GELU, LayerNorm, the
   * decoder tied to the word embeddings, its bias) on hidden states [..., hidden] -> logits
   * [..., vocab_size], all rows in one wasm call. On the last of forward's `hiddenStates` it gives
   * forward's logits bit for bit; on an earlier one, the masked-LM logit lens
   * (interpret/lens-encoder.ts).
   */
  async maskedLmHead(hiddenStates: Tensor): Promise<Tensor> {
    const fn = 'model.maskedLmHead';
    const x = checkTensor(fn, 'hiddenStates', hiddenStates, 'float32');
    if (!this.hasMaskedLmHead) throw this.#noHead(fn);
    const E = this.hidden;
    const V = this.config.vocab_size;
    const shape = x.shape;
    if (shape.length < 1 || shape[shape.length - 1] !== E || x.data.length === 0) {
      throw new RangeError(`${fn}: hiddenStates has shape ${fmtShape(shape)}; need [..., ${E}] (hidden size ${E}) with at least one row`);
    }
    const N = x.data.length / E;
    const h = this.#handle(fn);
    const scope = new HeapScope(this.#m, fn);
    try {
      const pX = scope.f32(x.data as Float32Array, `hiddenStates ${fmtShape(shape)}`);
      const pLogits = scope.alloc(4 * N * V, `logits ${fmtShape([...shape.slice(0, -1), V])}`);
      const err = h.mlmHead(pX, N, pLogits);
      if (err) throw wasmError(fn, err);
      return new Tensor(scope.read(pLogits, N * V), [...shape.slice(0, -1), V]);
    } finally {
      scope.free();
    }
  }

  #ids(fn: string, ids: unknown): Int32Array {
    return this.#ints(fn, 'ids', ids, null, this.config.vocab_size);
  }

  /**
   * Predicts the token at the one `[MASK]` in `text` (the tokenizer's mask token), as Hugging
   * Face's fill-mask pipeline: the topK most probable tokens (softmax over the vocabulary at
   * that position), best first, each with the sequence it completes. `headMask` and
   * `knockout` go to {@link forward}: the predictions of the model with heads removed.
   */
  async fillMask(text: string, options: FillMaskOptions = {}): Promise<FillMaskPrediction[]> {
    const fn = 'model.fillMask';
    if (typeof text !== 'string') throw new TypeError(`${fn}: text must be a string, got ${describe(text)}`);
    const opts = checkOptions(fn, options, ['topK', 'headMask', 'knockout']);
    const V = this.config.vocab_size;
    const topK = optInt(fn, opts, 'topK', 5, 1, V);
    if (!this.hasMaskedLmHead) throw this.#noHead(fn);
    const maskId = this.tokenizer.specialTokens.mask;
    if (maskId === null) throw new Error(`${fn}: the tokenizer has no mask token`);
    const ids = this.tokenizer.encode(text);
    const at: number[] = [];
    ids.forEach((id, i) => {
      if (id === maskId) at.push(i);
    });
    const maskText = this.tokenizer.token(maskId);
    if (at.length !== 1) {
      throw new RangeError(`${fn}: text must hold exactly one ${maskText}, found ${at.length} in ${describe(text)}`);
    }
    // the interventions as given (forward checks them)
    const iv: EncoderForwardOptions = {};
    if (opts.headMask !== undefined) iv.headMask = opts.headMask as HeadMask;
    if (opts.knockout !== undefined) iv.knockout = opts.knockout as Knockout[];
    const { logits } = await this.#forward(fn, ids, iv);
    const row = (logits.data as Float32Array).subarray(at[0] * V, (at[0] + 1) * V);
    // softmax in double, max-shifted
    let mx = -Infinity;
    for (let v = 0; v < V; v++) mx = Math.max(mx, row[v]);
    let sum = 0;
    for (let v = 0; v < V; v++) sum += Math.exp(row[v] - mx);
    const order = Array.from({ length: V }, (_, v) => v).sort((a, b) => row[b] - row[a] || a - b);
    return order.slice(0, topK).map((tokenId) => {
      const filled = ids.slice();
      filled[at[0]] = tokenId;
      return {
        token: this.tokenizer.token(tokenId),
        tokenId,
        score: Math.exp(row[tokenId] - mx) / sum,
        sequence: this.tokenizer.decode(filled, { skipSpecialTokens: true }),
      };
    });
  }

  /**
   * Sentence embeddings: each text tokenized (with its special tokens), run through the encoder
   * in padded batches (the attention mask hides the padding), its last hidden states pooled
   * ('mean' over its tokens, the 'cls' token's, or the 'max' of each dimension) and, with
   * `normalize`, scaled to unit length. -> Tensor [n, hidden]. Defaults: {@link embeddingDefaults}.
   */
  async embed(texts: string | readonly string[], options: EmbedOptions = {}): Promise<Tensor> {
    const fn = 'model.embed';
    this.#handle(fn);
    return embedTexts(fn, this, texts, options, (ids, B, L, mask) => this.#hiddenStates(fn, ids, B, L, mask));
  }

  /** ids [B, L] (padded), mask [B, L] -> the last layer's hidden states [B, L, E], copied out. */
  #hiddenStates(fn: string, ids: Int32Array, B: number, L: number, mask: Uint8Array): Float32Array {
    const h = this.#handle(fn);
    const E = this.hidden;
    const scope = new HeapScope(this.#m, fn);
    try {
      const pIds = scope.i32(ids, `ids [${B}, ${L}]`);
      const pMask = scope.u8(mask, `attentionMask [${B}, ${L}]`);
      const pHidden = scope.alloc(4 * B * L * E, `hidden ${fmtShape([B, L, E])}`);
      const err = h.hidden(pIds, B, L, 0, pMask, pHidden);
      if (err) throw wasmError(fn, err);
      return scope.read(pHidden, B * L * E);
    } finally {
      scope.free();
    }
  }

  /** Frees the model's wasm memory (idempotent); using it afterwards is an Error. */
  dispose(): void {
    release(this.#tracked);
  }

  /** A one-line summary, e.g. `EncoderModel(bert, 12 layers, 12 heads, vocab 30522)` (`, no MLM head` without one, `, disposed` once disposed). */
  toString(): string {
    return `EncoderModel(${this.architecture}, ${this.layers} layers, ${this.heads} heads, vocab ${this.config.vocab_size}${this.hasMaskedLmHead ? '' : ', no MLM head'}${this.disposed ? ', disposed' : ''})`;
  }
}
