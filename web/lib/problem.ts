/** The validated form of an attention call that every backend receives. */

/** A mask in the kernels' form: row-major data with 4 dims, each the full size or 1. */
export interface MaskArg<T> {
  data: T;
  dims: [number, number, number, number];
}

/**
 * One validated attention problem: what every backend receives. Sizes are >= 1;
 * masks are already broadcast-checked against [B, H, Lq, Lk].
 */
export interface AttentionProblem {
  B: number; H: number; Hkv: number; Lq: number; Lk: number; D: number; Dv: number;
  query: Float32Array; key: Float32Array; value: Float32Array;
  boolMask?: MaskArg<Uint8Array>;
  floatMask?: MaskArg<Float32Array>;
  causal: boolean;
  /** 0 = no window. */
  window: number;
  /** The scale to use (default resolved to 1 / sqrt(D)). */
  scale: number;
  /** Whether the caller gave the scale (the wasm path lets C++ resolve the default). */
  scaleGiven: boolean;
  returnWeights: boolean;
  /** Shapes of the results (the query's rank). */
  outputShape: number[];
  weightsShape: number[];
}

/** What a backend returns. */
export interface AttentionOutput {
  output: Float32Array;
  weights?: Float32Array;
}

