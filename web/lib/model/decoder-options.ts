// The decoder models' public options and results (DecoderModel.forward, generate,
// memoryUsage): the types a caller writes and reads, apart from the class that runs them.
import type { Tensor } from '../tensor.js';
import type { HeadMask, HeadPatch, Knockout } from './interventions.js';
import type { ActivationPatch, SteeringVector } from './residual.js';

/** Options of {@link DecoderModel.forward}. */
export interface ForwardOptions {
  /** Also return every layer's attention probabilities (default false). */
  outputAttentions?: boolean;
  /**
   * Also return every layer's per-head query and key vectors (default false): exactly what
   * attention consumes, the queries before the 1/sqrt(head_dim) scaling, so
   * softmax(q k^T / sqrt(head_dim) + causal mask) reproduces `attentions`.
   */
  outputQueriesKeys?: boolean;
  /**
   * 'all' (default): logits for every position, [1, L, vocab]; 'last': for the last position
   * only, [1, 1, vocab] (the LM head is the largest matmul: at L = 512 with GPT-2's vocab,
   * 'all' is 103 MB of logits).
   */
  logits?: 'all' | 'last';
  /**
   * Cancels the forward pass: it then rejects with `signal.reason` (a DOMException named
   * 'AbortError' unless abort() was given another reason), at the latest one chunk after the
   * abort. With `signal`, `onProgress` or `chunkSize` the pass runs in chunks (see chunkSize).
   */
  signal?: AbortSignal;
  /**
   * Called with (tokens done, total tokens): (0, L) first, then after each chunk, ending with
   * (L, L). Implies the chunked pass.
   */
  onProgress?: (done: number, total: number) => void;
  /**
   * Tokens per chunk (default 64; an integer >= 1). The chunked
   * pass runs the tokens through the model's KV-cache session a chunk at a time and yields to
   * the event loop between chunks (so a page paints and a Cancel click lands); the model is
   * causal, so the results are those of the single call (the same kernels add in the same
   * order: tests/js/model-forward-chunked.test.js checks it bit for bit). It uses the session
   * that generate() uses: one chunked forward runs at a time per model (later ones wait), and
   * none while a generation is running on the model (an Error).
   */
  chunkSize?: number;
  /**
   * Multiplies each head's attention probabilities, [numHeads] or [numLayers, numHeads]
   * (Hugging Face head_mask: `attentions` are the scaled probabilities); 0 removes a head.
   * See docs/interventions.md for these four options (the chunked pass honours them too).
   */
  headMask?: HeadMask;
  /** Attention knockout: per entry, the layer's (chosen heads') query -> key edges get score -inf. */
  knockout?: Knockout[];
  /** Also return every layer's per-head outputs [1, n_head, L, head_dim] (before the output projection). */
  outputHeadOutputs?: boolean;
  /** Replaces heads' output rows during the forward (activation patching). */
  patchHeadOutputs?: HeadPatch[];
  /**
   * Also return `hiddenStates`: numLayers + 1 Tensors [1, L, d_model] with Hugging Face's
   * output_hidden_states semantics ([0] the embeddings, [l] block l - 1's output, the last one
   * after the final norm). See docs/residual.md for this option and the three below.
   */
  outputHiddenStates?: boolean;
  /**
   * Also return `activations`, TransformerLens hook names -> Tensors: `blocks.{l}.hook_resid_pre`,
   * `hook_attn_out`, `hook_resid_mid`, `hook_mlp_out`, `hook_resid_post` ([1, L, d_model] each) and
   * `ln_final.hook_scale` ([1, L, 1]). true: every one; a string[] picks names, '*' matching one
   * dot-separated segment ('blocks.*.hook_resid_pre'); a name that matches nothing is an Error.
   */
  outputActivations?: boolean | string[];
  /** Replaces sites' rows during the forward; later layers see the patched value. */
  patchActivations?: ActivationPatch[];
  /** Adds scale * vector to blocks.{layer}.hook_resid_pre (activation addition). */
  steer?: SteeringVector[];
}

/** Tokens per chunk of a forward pass with signal or onProgress (see {@link ForwardOptions.chunkSize}). */
export const FORWARD_CHUNK = 64;

/** Where a model's bytes are (all in the wasm module's memory). */
export interface ModelMemoryUsage {
  /** The wasm module's whole linear memory (this model, anything else loaded, free space). */
  wasmHeap: number;
  /** The matrices and embedding tables as held, in `dtype` (they live in `file` or `converted`). */
  weights: number;
  /** The matmuls' weight type: 'F32', 'F16', 'BF16', 'Q8' (the 'int8' option), 'Q4' ('int4') or 'mixed'. */
  dtype: string;
  /** The safetensors file's buffer, kept when the weights are read from it in place; else 0. */
  file: number;
  /** The buffer the weights were converted into ('f32', 'f16', 'int8', 'int4' on another dtype); else 0. */
  converted: number;
  /** 1-D parameters (biases, layer norms) widened to float32 (the rest are read in place). */
  vectors: number;
  /** The KV caches of generate() (0 until a generation; then sized for its prompt + maxNewTokens, at least 64 positions). */
  kvCache: number;
  /** forward()'s buffers, grown to the longest call so far. */
  scratch: number;
}

/** One layer's per-head queries and keys (see {@link ForwardOptions.outputQueriesKeys}). */
export interface QueriesKeys {
  /** [1, n_head, L, head_dim], before the 1/sqrt(head_dim) scaling (Llama family: after the rotary embedding). */
  queries: Tensor;
  /**
   * [1, n_head, L, head_dim]; with grouped-query attention [1, num_key_value_heads, L, head_dim]:
   * each key head once, query head h reading key head floor(h / (n_head / num_key_value_heads)).
   */
  keys: Tensor;
}

/** What {@link DecoderModel.forward} returns. */
export interface ForwardResult {
  /** `[1, L, vocab_size]` (with logits: 'last', `[1, 1, vocab_size]`): unnormalised next-token scores at each position. */
  logits: Tensor;
  /** One per layer, each [1, n_head, L, L] (softmax probabilities, causal), like HF output_attentions. */
  attentions?: Tensor[];
  /** With outputQueriesKeys: one entry per layer, each { queries, keys } of shape [1, n_head, L, head_dim]. */
  queriesKeys?: QueriesKeys[];
  /** With outputHeadOutputs: one per layer, [1, n_head, L, head_dim], what enters the output projection. */
  headOutputs?: Tensor[];
  /** With outputHiddenStates: numLayers + 1 Tensors [1, L, d_model] (Hugging Face's semantics). */
  hiddenStates?: Tensor[];
  /** With outputActivations: hook name -> Tensor ([1, L, d_model]; ln_final.hook_scale [1, L, 1]). */
  activations?: Record<string, Tensor>;
}

/** Options of {@link DecoderModel.generate}. */
export interface GenerateOptions {
  /** Tokens to generate (default 64). prompt + maxNewTokens must fit in the context (n_positions, max_position_embeddings). */
  maxNewTokens?: number;
  /** Softmax temperature (default 1); 0 = greedy (argmax). */
  temperature?: number;
  /** Sample among the k most likely tokens only (default 0 = all). */
  topK?: number;
  /** Seed of the sampler (an integer in [0, 2^53)); the same seed gives the same tokens. Default: random. */
  seed?: number;
  /** Give each step the attention rows that produced its token (default false). */
  outputAttentions?: boolean;
  /** A head mask for every step (prompt included), as {@link ForwardOptions.headMask}. */
  headMask?: HeadMask;
  /** Steering vectors added at every position, prompt and generated (no `positions`). */
  steer?: SteeringVector[];
}

/** One generated token. */
export interface GenerationStep {
  /** The token id. */
  token: number;
  /**
   * The text this token completes: UTF-8 is decoded as a stream, so a character split over
   * several tokens appears with the token that completes it ('' before).
   */
  text: string;
  /** 0 for the first generated token. */
  index: number;
  /** The position the token will occupy (prompt length + index). */
  position: number;
  /**
   * With outputAttentions: one Tensor per layer, [n_head, position], the attention of the
   * query that predicted this token (the last prompt token for the first step, then each
   * generated token in turn) over every position up to and including itself.
   */
  attentions?: Tensor[];
}
