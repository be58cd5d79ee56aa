// The encoders page's tiny BERT as the explorer's tools see a model (test-head.ts' TestModel,
// effect-scatter.ts' FinderModel): its shape, a forward with qkv's interventions (headMask,
// knockout) returning every position's MLM logits and the maps, and qkv's headProbes with the
// masked-LM ablation effect (ablation: true; docs/interpret.md).
import { qkv } from './api';
import type { FinderModel } from './effect-scatter';
import type { TestModel } from './test-head';

/** [1, H, L, L] Tensors per layer -> attn[layer][head][query] rows. */
export function rowsOf(ts: qkv.Tensor[]): Float32Array[][][] {
  return ts.map((t) => {
    const [, H, L, Lk] = t.shape;
    const d = t.data as Float32Array;
    return Array.from({ length: H }, (_h, h) => Array.from({ length: L }, (_q, q) => d.slice((h * L + q) * Lk, (h * L + q + 1) * Lk)));
  });
}

export function toolsModel(m: qkv.EncoderModel): TestModel & FinderModel {
  const layers = m.layers, heads = m.heads;
  const dims = {
    layers, heads, kvHeads: heads, headDim: m.hidden / heads, positions: m.maxPositions,
    vocab: m.config.vocab_size, windows: Array.from({ length: layers }, () => 0),
  };
  return {
    dims,
    // one pass (the encoder runs a sentence at once: no chunks, so Cancel lands before or after it)
    async intervene(ids, iv, progress = {}) {
      progress.signal?.throwIfAborted();
      const out = await m.forward(ids, { outputAttentions: true, ...iv });
      progress.onProgress?.(ids.length, ids.length);
      return { logits: Float32Array.from(out.logits.data as Float32Array), attn: rowsOf(out.attentions!) };
    },
    probe: (options) => qkv.headProbes(m, { ...options, ablation: true }),
  };
}
