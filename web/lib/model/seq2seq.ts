/**
 * A loaded encoder-decoder (Hugging Face BART layout): `forward` (logits and the three kinds
 * of attention: encoder self, decoder causal self, decoder-to-encoder cross) and `generate`
 * (an async iterator, one token per step: the encoder and the cross-attention keys/values run
 * once per input, the decoder self-attention goes through the KV cache), over the model in
 * the wasm module (src/model/seq2seq.*, wasm/bindings_seq2seq.cpp).
 */
import { describe, fmtShape } from '../errors.js';
import { release, track, type Tracked } from '../lifetime.js';
import { Tensor } from '../tensor.js';
import { checkOptions, intsBelow, isNumberArray, optBool, optInt } from '../validate.js';
import { HeapScope, wasmError } from '../wasm/heap.js';
import { callThreads } from '../wasm/loader.js';
import type { EmbindHandle, QkvModule } from '../wasm/module.js';
import { GenerationSlot, once } from './generation.js';
import { readHeadOutputs, stackPlan, toWasm, type HeadMask, type HeadPatch, type Knockout, type StackPlan, type WasmInterventions } from './interventions.js';
import type { WasmLoad } from './stream-load.js';
import type { Tokenizer } from './tokenizer.js';

/** config.json of a BART-layout model (Hugging Face keys); other keys are kept as they are. */
export interface Seq2SeqConfig {
  /** The architecture: `'bart'`. */
  model_type: 'bart';
  /** Vocabulary size (rows of the shared token embedding). */
  vocab_size: number;
  /** Model width (the residual stream's size). */
  d_model: number;
  /** Encoder layers. */
  encoder_layers: number;
  /** Decoder layers. */
  decoder_layers: number;
  /** Heads of each encoder self-attention (head dim d_model / heads). */
  encoder_attention_heads: number;
  /** Heads of each decoder self- and cross-attention. */
  decoder_attention_heads: number;
  /** Learned positions: the longest source and the longest target sequence. */
  max_position_embeddings: number;
  /** As config.json gives it, or BART's default (eos_token_id) where it gives none. */
  decoder_start_token_id: number;
  /** As config.json gives it, or BART's default (2). */
  eos_token_id: number;
  [key: string]: unknown;
}

/** Options of {@link Seq2SeqModel.forward}. */
export interface Seq2SeqForwardOptions {
  /** The decoder's input ids (start token first). Default: [decoder_start_token_id]. */
  decoderInputIds?: ArrayLike<number>;
  /** Also return the three kinds of attention, every layer (default false). */
  outputAttentions?: boolean;
  /**
   * Also return both stacks' residual streams, Hugging Face's `output_hidden_states` (default
   * false): encoderHiddenStates and decoderHiddenStates.
   */
  outputHiddenStates?: boolean;
  /**
   * Head masks, one per attention kind, as Hugging Face names them (head_mask,
   * decoder_head_mask, cross_attn_head_mask): [numHeads] or [numLayers, numHeads], multiplying
   * each head's attention probabilities (docs/interventions.md).
   */
  headMask?: HeadMask;
  /** The decoder self-attention's head mask (Hugging Face's decoder_head_mask), as {@link Seq2SeqForwardOptions.headMask}. */
  decoderHeadMask?: HeadMask;
  /** The cross-attention's head mask (Hugging Face's cross_attn_head_mask), as {@link Seq2SeqForwardOptions.headMask}. */
  crossAttnHeadMask?: HeadMask;
  /** Attention knockout in the encoder's self-attention (docs/interventions.md). */
  knockout?: Knockout[];
  /** Attention knockout in the decoder's self-attention. */
  decoderKnockout?: Knockout[];
  /** Attention knockout in the cross-attention (a decoder query's weight on an encoder position). */
  crossAttnKnockout?: Knockout[];
  /** Also return every layer's per-head outputs of the three kinds (encoderHeadOutputs, decoderHeadOutputs, crossHeadOutputs). */
  outputHeadOutputs?: boolean;
  /** Activation patching of the encoder's head outputs (rows replaced before the output projection). */
  patchHeadOutputs?: HeadPatch[];
  /** Activation patching of the decoder self-attention's head outputs. */
  decoderPatchHeadOutputs?: HeadPatch[];
  /** Activation patching of the cross-attention's head outputs. */
  crossAttnPatchHeadOutputs?: HeadPatch[];
}

/** What {@link Seq2SeqModel.forward} returns. */
export interface Seq2SeqForwardResult {
  /** `[1, Lt, vocab_size]`: the decoder's next-token logits at every decoder position. */
  logits: Tensor;
  /**
   * With outputHiddenStates: encoder_layers + 1 Tensors [1, Ls, d_model], [0] the embeddings after
   * layernorm_embedding, [l] encoder layer l - 1's output (the last: what the cross-attention
   * reads; BART's encoder has no final norm).
   */
  encoderHiddenStates?: Tensor[];
  /**
   * With outputHiddenStates: decoder_layers + 1 Tensors [1, Lt, d_model], [0] the embeddings after
   * layernorm_embedding, [l] decoder layer l - 1's output (the last: what the LM head reads).
   */
  decoderHiddenStates?: Tensor[];
  /** One per encoder layer, [1, H, Ls, Ls] (bidirectional). */
  encoderAttentions?: Tensor[];
  /** One per decoder layer, [1, H, Lt, Lt] (causal). */
  decoderAttentions?: Tensor[];
  /** One per decoder layer, [1, H, Lt, Ls]: decoder queries over the encoder's positions. */
  crossAttentions?: Tensor[];
  /** With outputHeadOutputs: per encoder layer [1, H, Ls, head_dim], what enters the output projection. */
  encoderHeadOutputs?: Tensor[];
  /** With outputHeadOutputs: per decoder layer [1, H, Lt, head_dim], the self-attention's head outputs. */
  decoderHeadOutputs?: Tensor[];
  /** With outputHeadOutputs: per decoder layer [1, H, Lt, head_dim], the cross-attention's head outputs. */
  crossHeadOutputs?: Tensor[];
}

/** Options of {@link Seq2SeqModel.generate}. */
export interface Seq2SeqGenerateOptions {
  /** Tokens to generate at most (default: max_position_embeddings); generation stops after eos_token_id. */
  maxNewTokens?: number;
  /** Softmax temperature (default 0 = greedy). */
  temperature?: number;
  /** Sample among the k most likely tokens only (default 0 = all). */
  topK?: number;
  /** Seed of the sampler (an integer in [0, 2^53)). Default: random. */
  seed?: number;
  /** Give each step the attentions (default false). */
  outputAttentions?: boolean;
  /** Head masks of the three attention kinds, for the whole generation (as {@link Seq2SeqForwardOptions.headMask}). */
  headMask?: HeadMask;
  /** The decoder self-attention's head mask, for the whole generation. */
  decoderHeadMask?: HeadMask;
  /** The cross-attention's head mask, for the whole generation. */
  crossAttnHeadMask?: HeadMask;
}

/** One generated token. */
export interface Seq2SeqStep {
  /** The generated token's id. */
  token: number;
  /** The text this token adds (WordPiece: " one", "##s" glued on); '' for special tokens such as eos. */
  text: string;
  /** 0 for the first generated token. */
  index: number;
  /** True for eos_token_id (the last step). */
  done: boolean;
  /** With outputAttentions: the input's encoder self-attention, one [1, H, Ls, Ls] per layer (the same on every step). */
  encoderAttentions?: Tensor[];
  /**
   * With outputAttentions: one [H, index + 1] per decoder layer, the causal self-attention of
   * the decoder query that predicted this token (the start token for index 0) over the decoder
   * positions so far.
   */
  decoderAttentions?: Tensor[];
  /** With outputAttentions: one [H, Ls] per decoder layer, the same query over the encoder's positions. */
  crossAttentions?: Tensor[];
}

/** The Seq2SeqModel binding (wasm/bindings_seq2seq.cpp). */
export interface WasmSeq2Seq extends EmbindHandle {
  forward(src: number, Ls: number, tgt: number, Lt: number, logits: number, enc: number, dec: number, cross: number,
    encHidden: number, decHidden: number, ivEnc: WasmInterventions, ivDec: WasmInterventions, ivCross: WasmInterventions): string;
  begin(src: number, Ls: number, enc: number, ivEnc: WasmInterventions): string;
  step(id: number, logits: number, self: number, cross: number, ivDec: WasmInterventions, ivCross: WasmInterventions): string;
  position(): number;
  setThreads(threads: number): void;
  decoderStartTokenId(): number;
  eosTokenId(): number;
}
interface WasmSampler extends EmbindHandle {
  sample(logits: number, n: number, temperature: number, topK: number): number;
}
export interface Seq2SeqModule {
  Seq2SeqModel: { create(config: string, bytes: number, size: number): WasmSeq2Seq | null };
  /** The same load from a file that streams in (stream-load.ts). */
  Seq2SeqModelLoad: { begin(config: string, head: number, headSize: number, fileSize: number): WasmLoad<WasmSeq2Seq> | null };
  Sampler: { create(seed: number): WasmSampler };
  seq2seqLastError(): string;
  modelLastError(): string;
}

export function seq2seqModule(m: QkvModule): Seq2SeqModule {
  const mm = m as unknown as Partial<Seq2SeqModule>;
  if (!mm.Seq2SeqModel || !mm.Sampler) {
    throw new Error('loadModel: this build of the wasm module lacks the encoder-decoder bindings (wasm/bindings_seq2seq.cpp)');
  }
  return mm as Seq2SeqModule;
}

/** Per-layer Tensors [1, H, Lq, Lk] from a [NL, H, Lq, Lk] buffer. */
function perLayer(all: Float32Array, NL: number, H: number, Lq: number, Lk: number, batchDim: boolean): Tensor[] {
  const per = H * Lq * Lk;
  const out: Tensor[] = [];
  for (let l = 0; l < NL; l++) {
    out.push(new Tensor(all.slice(l * per, (l + 1) * per), batchDim ? [1, H, Lq, Lk] : Lq === 1 ? [H, Lk] : [H, Lq, Lk]));
  }
  return out;
}

/** n Tensors [1, L, E] from a [n, L, E] buffer of hidden states. */
function perState(all: Float32Array, n: number, L: number, E: number): Tensor[] {
  return Array.from({ length: n }, (_, l) => new Tensor(all.slice(l * L * E, (l + 1) * L * E), [1, L, E]));
}

/** The three attention stacks' option names, as Hugging Face's head masks. */
const STACKS = {
  encoder: { headMask: 'headMask', knockout: 'knockout', patch: 'patchHeadOutputs' },
  decoder: { headMask: 'decoderHeadMask', knockout: 'decoderKnockout', patch: 'decoderPatchHeadOutputs' },
  cross: { headMask: 'crossAttnHeadMask', knockout: 'crossAttnKnockout', patch: 'crossAttnPatchHeadOutputs' },
} as const;
const INTERVENTION_OPTIONS = Object.values(STACKS).flatMap((n) => [n.headMask, n.knockout, n.patch]);

/** A loaded encoder-decoder. Holds wasm memory: call {@link Seq2SeqModel.dispose} when done. */
export class Seq2SeqModel {
  /** config.json as loaded (frozen). */
  readonly config: Seq2SeqConfig;
  /** The model's tokenizer (encoder input and decoder output share one vocabulary). */
  readonly tokenizer: Tokenizer;
  readonly #m: QkvModule;
  readonly #mm: Seq2SeqModule;
  readonly #tracked: Tracked<WasmSeq2Seq>;
  /** The generation holding the decoder's KV cache, if any (a newer one supersedes it). */
  readonly #generation = new GenerationSlot();

  /** @internal use {@link loadModel} */
  constructor(m: QkvModule, handle: WasmSeq2Seq, config: Seq2SeqConfig, tokenizer: Tokenizer) {
    this.#m = m;
    this.#mm = seq2seqModule(m);
    this.#tracked = track(this, handle);
    this.config = config;
    this.tokenizer = tokenizer;
  }

  /** Whether {@link Seq2SeqModel.dispose} has run (the model's wasm memory is freed; calls then throw). */
  get disposed(): boolean {
    return this.#tracked.released;
  }

  #handle(fn: string): WasmSeq2Seq {
    if (this.#tracked.released) throw new Error(`${fn}: the model has been disposed`);
    const h = this.#tracked.handle;
    h.setThreads(callThreads());
    return h;
  }

  #ids(fn: string, ids: unknown, what: string): Int32Array {
    const V = this.config.vocab_size;
    const P = this.config.max_position_embeddings;
    if (!isNumberArray(ids)) {
      throw new TypeError(`${fn}: ${what} must be an array of token ids, got ${describe(ids)}`);
    }
    const a = ids;
    if (a.length === 0) throw new RangeError(`${fn}: ${what} is empty (need at least 1 token)`);
    if (a.length > P) {
      throw new RangeError(`${fn}: ${what} has ${a.length} tokens, more than max_position_embeddings = ${P}`);
    }
    return intsBelow(fn, what, a, V, 'a token id');
  }

  /** The encoder's input: text through the tokenizer (with its special tokens), or ids as given. */
  #input(fn: string, input: unknown): Int32Array {
    if (typeof input === 'string') return this.#ids(fn, this.tokenizer.encode(input), 'input (tokenized)');
    return this.#ids(fn, input, 'input');
  }

  /**
   * The whole model without caches: the encoder over `input` (text or ids), the decoder over
   * `decoderInputIds`: logits [1, Lt, vocab]; with outputAttentions, encoderAttentions
   * ([1, H, Ls, Ls] per encoder layer), decoderAttentions ([1, H, Lt, Lt]) and
   * crossAttentions ([1, H, Lt, Ls]) per decoder layer, as Hugging Face names them.
   */
  async forward(input: string | ArrayLike<number>, options: Seq2SeqForwardOptions = {}): Promise<Seq2SeqForwardResult> {
    const fn = 'model.forward';
    const opts = checkOptions(fn, options, ['decoderInputIds', 'outputAttentions', 'outputHiddenStates', 'outputHeadOutputs', ...INTERVENTION_OPTIONS]);
    const want = optBool(fn, opts, 'outputAttentions', false);
    const wantHS = optBool(fn, opts, 'outputHiddenStates', false);
    const wantHO = optBool(fn, opts, 'outputHeadOutputs', false);
    const h = this.#handle(fn);
    const src = this.#input(fn, input);
    const tgt = this.#ids(fn, opts.decoderInputIds ?? [this.config.decoder_start_token_id], 'options.decoderInputIds');
    const Ls = src.length, Lt = tgt.length;
    const c = this.config;
    const V = c.vocab_size, NE = c.encoder_layers, HE = c.encoder_attention_heads, ND = c.decoder_layers, HD = c.decoder_attention_heads;
    const enc = { layers: NE, heads: HE, valueDim: c.d_model / HE };
    const dec = { layers: ND, heads: HD, valueDim: c.d_model / HD };
    const plans: [StackPlan | null, StackPlan | null, StackPlan | null] = [
      stackPlan(fn, opts, STACKS.encoder, wantHO, enc, Ls, Ls),
      stackPlan(fn, opts, STACKS.decoder, wantHO, dec, Lt, Lt),
      stackPlan(fn, opts, STACKS.cross, wantHO, dec, Lt, Ls),
    ];
    const scope = new HeapScope(this.#m, fn);
    try {
      const ivs = plans.map((p) => toWasm(scope, p));
      const pSrc = scope.i32(src, `input [${Ls}]`);
      const pTgt = scope.i32(tgt, `decoderInputIds [${Lt}]`);
      const pLogits = scope.alloc(4 * Lt * V, `logits ${fmtShape([1, Lt, V])}`);
      const pEnc = want ? scope.alloc(4 * NE * HE * Ls * Ls, `encoder attentions ${fmtShape([NE, 1, HE, Ls, Ls])}`) : 0;
      const pDec = want ? scope.alloc(4 * ND * HD * Lt * Lt, `decoder attentions ${fmtShape([ND, 1, HD, Lt, Lt])}`) : 0;
      const pCross = want ? scope.alloc(4 * ND * HD * Lt * Ls, `cross attentions ${fmtShape([ND, 1, HD, Lt, Ls])}`) : 0;
      const E = c.d_model;
      const pEncHS = wantHS ? scope.alloc(4 * (NE + 1) * Ls * E, `encoder hidden states ${fmtShape([NE + 1, 1, Ls, E])}`) : 0;
      const pDecHS = wantHS ? scope.alloc(4 * (ND + 1) * Lt * E, `decoder hidden states ${fmtShape([ND + 1, 1, Lt, E])}`) : 0;
      const err = h.forward(pSrc, Ls, pTgt, Lt, pLogits, pEnc, pDec, pCross, pEncHS, pDecHS, ivs[0].arg, ivs[1].arg, ivs[2].arg);
      if (err) throw wasmError(fn, err);
      const result: Seq2SeqForwardResult = { logits: new Tensor(scope.read(pLogits, Lt * V), [1, Lt, V]) };
      if (wantHS) {
        result.encoderHiddenStates = perState(scope.read(pEncHS, (NE + 1) * Ls * E), NE + 1, Ls, E);
        result.decoderHiddenStates = perState(scope.read(pDecHS, (ND + 1) * Lt * E), ND + 1, Lt, E);
      }
      const outs = plans.map((p, i) => (p && ivs[i].outputs ? readHeadOutputs(scope, ivs[i].outputs, p) : undefined));
      if (wantHO) [result.encoderHeadOutputs, result.decoderHeadOutputs, result.crossHeadOutputs] = outs;
      if (want) {
        result.encoderAttentions = perLayer(scope.read(pEnc, NE * HE * Ls * Ls), NE, HE, Ls, Ls, true);
        result.decoderAttentions = perLayer(scope.read(pDec, ND * HD * Lt * Lt), ND, HD, Lt, Lt, true);
        result.crossAttentions = perLayer(scope.read(pCross, ND * HD * Lt * Ls), ND, HD, Lt, Ls, true);
      }
      return result;
    } finally {
      scope.free();
    }
  }

  /**
   * Generates the output for `input` (text, tokenized with model.tokenizer, or ids): the
   * encoder runs once and every decoder layer's cross-attention keys/values are computed once
   * from its output; each step then runs one decoder token through the self-attention KV cache
   * and attends to those cached cross K/V. Starts at decoder_start_token_id and stops after
   * eos_token_id (yielded, done: true) or maxNewTokens. One generation per model at a time: a newer
   * generate() supersedes one suspended at a step (its buffers freed; its next next() returns done).
   */
  async *generate(input: string | ArrayLike<number>, options: Seq2SeqGenerateOptions = {}): AsyncGenerator<Seq2SeqStep, void, undefined> {
    const fn = 'model.generate';
    const c = this.config;
    const opts = checkOptions(fn, options, ['maxNewTokens', 'temperature', 'topK', 'seed', 'outputAttentions', 'headMask', 'decoderHeadMask', 'crossAttnHeadMask']);
    const maxNew = optInt(fn, opts, 'maxNewTokens', c.max_position_embeddings, 1, c.max_position_embeddings);
    const temperature = opts.temperature === undefined ? 0 : opts.temperature;
    if (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature < 0) {
      throw new RangeError(`${fn}: options.temperature must be a finite number >= 0 (0 = greedy), got ${describe(opts.temperature)}`);
    }
    const topK = optInt(fn, opts, 'topK', 0, 0, c.vocab_size);
    const seed = optInt(fn, opts, 'seed', Math.floor(Math.random() * 2 ** 32), 0, Number.MAX_SAFE_INTEGER);
    const want = optBool(fn, opts, 'outputAttentions', false);
    const src = this.#input(fn, input);
    const masks = [STACKS.encoder, STACKS.decoder, STACKS.cross].map((names, i) => {
      const heads = i === 0 ? c.encoder_attention_heads : c.decoder_attention_heads;
      const shape = { layers: i === 0 ? c.encoder_layers : c.decoder_layers, heads, valueDim: c.d_model / heads };
      return stackPlan(fn, opts, { headMask: names.headMask }, false, shape, 1, 1);
    });
    const h = this.#handle(fn);
    const Ls = src.length;
    const V = c.vocab_size, NE = c.encoder_layers, HE = c.encoder_attention_heads, ND = c.decoder_layers, HD = c.decoder_attention_heads;
    const sampler = this.#mm.Sampler.create(seed);
    const scope = new HeapScope(this.#m, fn);
    const freeBuffers = once(() => {
      scope.free();
      sampler.delete();
    });
    const ticket = this.#generation.begin(freeBuffers);  // supersedes (and frees) the one before
    const decoder = new TextDecoder('utf-8');
    const specials = new Set(Object.values(this.tokenizer.specialTokens).filter((v): v is number => v !== null));
    try {
      const pSrc = scope.i32(src, `input [${Ls}]`);
      const pLogits = scope.alloc(4 * V, `logits [${V}]`);
      const pEnc = want ? scope.alloc(4 * NE * HE * Ls * Ls, `encoder attentions ${fmtShape([NE, HE, Ls, Ls])}`) : 0;
      const pSelf = want ? scope.alloc(4 * ND * HD * maxNew, `decoder attentions ${fmtShape([ND, HD, maxNew])}`) : 0;
      const pCross = want ? scope.alloc(4 * ND * HD * Ls, `cross attentions ${fmtShape([ND, HD, Ls])}`) : 0;
      const [ivEnc, ivDec, ivCross] = masks.map((p) => toWasm(scope, p).arg); // head masks alone
      // encoder + cross K/V, once for this input
      let err = h.begin(pSrc, Ls, pEnc, ivEnc);
      if (err) throw wasmError(fn, err);
      const encoderAttentions = want ? perLayer(scope.read(pEnc, NE * HE * Ls * Ls), NE, HE, Ls, Ls, true) : undefined;
      let token = c.decoder_start_token_id;
      for (let k = 0; k < maxNew; k++) {
        if (this.#tracked.released) throw new Error(`${fn}: the model was disposed during generation`);
        // the decoder token at position k (the start token, then the last generated) -> next-token logits
        err = this.#handle(fn).step(token, pLogits, pSelf, pCross, ivDec, ivCross);
        if (err) throw wasmError(fn, err);
        token = sampler.sample(pLogits, V, temperature, topK);
        if (token < 0) throw wasmError(fn, this.#mm.modelLastError());
        const done = token === c.eos_token_id;
        const last = done || k === maxNew - 1;
        const text = specials.has(token) ? '' : decoder.decode(this.tokenizer.decodeBytes([token]), { stream: !last });
        const step: Seq2SeqStep = { token, text, index: k, done };
        if (want) {
          step.encoderAttentions = encoderAttentions;
          step.decoderAttentions = perLayer(scope.read(pSelf, ND * HD * (k + 1)), ND, HD, 1, k + 1, false);
          step.crossAttentions = perLayer(scope.read(pCross, ND * HD * Ls), ND, HD, 1, Ls, false);
        }
        yield step;
        if (done || !this.#generation.holds(ticket)) break;  // done, or superseded (buffers freed)
      }
    } finally {
      this.#generation.end(ticket);
      freeBuffers();
    }
  }

  /** Frees the model's wasm memory (idempotent); using it afterwards is an Error. */
  dispose(): void {
    release(this.#tracked);
  }

  /** A one-line summary, e.g. `Seq2SeqModel(bart, 2+2 layers, d_model 64, vocab 60)` (`, disposed` once disposed). */
  toString(): string {
    const c = this.config;
    return `Seq2SeqModel(bart, ${c.encoder_layers}+${c.decoder_layers} layers, d_model ${c.d_model}, vocab ${c.vocab_size}${this.disposed ? ', disposed' : ''})`;
  }
}
