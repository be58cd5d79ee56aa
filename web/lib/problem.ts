/**
 * The one validated description of an attention call: what attention.ts and kvcache.ts
 * produce and what every backend (wasm/attention.ts, webgpu/runner.ts) takes.
 */

/** A mask in the kernels' form: row-major data with 4 dims, each the full size or 1. */
export interface MaskArg<T> {
  data: T;
  dims: [number, number, number, number];
}

/**
 * An attention call without its keys and values: sizes (all >= 1), the queries, masks
 * already broadcast-checked against [B, H, Lq, Lk], and the options with defaults resolved.
 * A KV cache supplies the keys and values itself.
 */
export interface AttentionQuery {
  B: number; H: number; Hkv: number; Lq: number; Lk: number; D: number; Dv: number;
  /** [B, H, Lq, D] */
  query: Float32Array;
  boolMask?: MaskArg<Uint8Array>;
  floatMask?: MaskArg<Float32Array>;
  causal: boolean;
  /** 0 = no window. */
  window: number;
  /** The scale to use: the caller's, or 1 / sqrt(D) (decided here once, for every backend). */
  scale: number;
  returnWeights: boolean;
  /** The caller's array for the output [B, H, Lq, Dv] (a backend may write into it directly). */
  out?: Float32Array;
  /** Shapes of the results (the query's rank). */
  outputShape: number[];
  weightsShape: number[];
}

/** A whole attention call: the queries' description plus the keys and values. */
export interface AttentionProblem extends AttentionQuery {
  /** [B, Hkv, Lk, D] */
  key: Float32Array;
  /** [B, Hkv, Lk, Dv] */
  value: Float32Array;
}

/** What a backend returns. */
export interface AttentionOutput {
  /** [B, H, Lq, Dv] */
  output: Float32Array;
  /** [B, H, Lq, Lk] with returnWeights */
  weights?: Float32Array;
}
