// The logit lens's options and result, shared by the decoders' lens (lens.ts) and the masked-LM
// encoders' (lens-encoder.ts).

/** One token the lens ranks at a layer and position. */
export interface LensToken {
  /** The token id. */
  id: number;
  /** The token as the model's tokenizer decodes it alone ('' without a tokenizer). */
  token: string;
  /** Its probability under the lens at that layer and position. */
  p: number;
}

/** The lens at one layer and one position. */
export interface LensCell {
  /** The topK most probable tokens, most probable first. */
  top: LensToken[];
  /** The target token's probability (with a target). */
  targetP?: number;
  /** The target token's rank, 0 for the most probable (with a target). */
  targetRank?: number;
  /** KL(final || this layer) in nats: how far this layer's distribution is from the model's own. */
  kl: number;
}

/** Options of logitLens. */
export interface LogitLensOptions {
  /** Tokens listed per cell (default 5; an integer >= 1). */
  topK?: number;
  /**
   * The token whose probability and rank each cell reports: one id for every position, or one
   * id per position. Omitted: no targetP / targetRank.
   */
  target?: number | ArrayLike<number>;
  /** Cancels the lens: it then rejects with `signal.reason`. */
  signal?: AbortSignal;
  /** Called with (steps done, total steps). */
  onProgress?: (done: number, total: number) => void;
}

/** What logitLens returns: layers[l][t] for l = 0..numLayers and t = 0..positions - 1. */
export interface LogitLensResult {
  /** The model's layers; `layers` has numLayers + 1 rows (the last: the model's own output). */
  numLayers: number;
  /** Positions in the sequence (columns of `layers`). */
  positions: number;
  /** layers[l][t]: the lens read at the input of block l (l < numLayers) or at the output (l = numLayers). */
  layers: LensCell[][];
}
