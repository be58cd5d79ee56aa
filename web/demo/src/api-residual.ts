// The residual-stream measures as the model page's views see them (lens, attribution, patching,
// steering): qkv's logitLens, logitAttribution, activationPatching and steeringVector on the
// loaded DecoderModel, and generate with the `steer` option. With api.ts, the places the demo
// meets the library: a thin map, the views hold the convenience.
import * as qkv from 'qkv';
import type { DecoderModel } from 'qkv';

/** Progress and cancellation, as qkv's options of the same names take them. */
export interface ResidualProgress { signal?: AbortSignal; onProgress?: (done: number, total: number) => void }

/** The loaded decoder's residual-stream measures (docs/residual.md). */
export interface ResidualTools {
  /** qkv's logitLens over ids: layers[l][t] for l = 0..layers (the last row is the model's own output). */
  lens(ids: number[], options?: qkv.LogitLensOptions): Promise<qkv.LogitLensResult>;
  /** qkv's logitAttribution at `position` for `tokens` ([id] or [idA, idB]). */
  attribution(ids: number[], options: qkv.LogitAttributionOptions): Promise<qkv.LogitAttributionResult>;
  /** qkv's activationPatching sweep. */
  patching(options: qkv.ActivationPatchingOptions): Promise<qkv.ActivationPatchingResult>;
  /** qkv's steeringVector: mean resid_pre[layer] of A minus that of B, `Float32Array(d_model)`. */
  steeringVector(idsA: number[], idsB: number[], layer: number): Promise<Float32Array>;
  /**
   * Generates maxNewTokens after ids (no attention rows), with `steer` added at every step when
   * given; the same seed gives the same text without it as the page's Generate.
   */
  generate(ids: number[], o: { maxNewTokens: number; temperature: number; topK: number; seed: number; steer?: qkv.SteeringVector[] },
    progress?: ResidualProgress): Promise<number[]>;
  /** The next-token logits at every position, `Float32Array(T * vocab)`. */
  logits(ids: number[], progress?: ResidualProgress): Promise<Float32Array>;
  /**
   * A word typed in a view's token field as token ids, without the special tokens a prompt gets
   * (a Llama tokenizer's BOS); null for a checkpoint without a tokenizer.
   */
  encodeWord(text: string): number[] | null;
}

/** The residual-stream measures of one loaded decoder. */
export function residualTools(m: DecoderModel): ResidualTools {
  return {
    lens: (ids, options) => qkv.logitLens(m, ids, options),
    attribution: (ids, options) => qkv.logitAttribution(m, ids, options),
    patching: (options) => qkv.activationPatching(m, options),
    steeringVector: (a, b, layer) => qkv.steeringVector(m, a, b, { layer }),
    async generate(ids, o, progress = {}) {
      const out: number[] = [];
      let yielded = performance.now();
      for await (const step of m.generate(ids, o)) {
        out.push(step.token);
        progress.onProgress?.(out.length, o.maxNewTokens);
        // a task between steps about every 15 ms: the bar repaints and a Cancel click gets through
        if (performance.now() - yielded > 15) {
          await new Promise((ok) => setTimeout(ok, 0));
          yielded = performance.now();
        }
        progress.signal?.throwIfAborted();
      }
      return out;
    },
    async logits(ids, progress = {}) {
      const out = await m.forward(ids, { logits: 'all', ...progress });
      const l = Float32Array.from(out.logits.data as Float32Array);
      out.logits.dispose?.();
      return l;
    },
    encodeWord: (text) => (m.tokenizer ? m.tokenizer.encode(text, { addSpecialTokens: false }) : null),
  };
}
