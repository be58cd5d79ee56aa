/**
 * A loaded Llama-family model (model_type llama, mistral, qwen2: src/model/llama.hpp over
 * wasm/bindings_llama.cpp): the shared decoder API. Grouped-query attention keeps one key per
 * kv head (forward's keys are [1, num_key_value_heads, L, head_dim]); queries and keys come
 * after the rotary embedding.
 */
import type { QkvModule } from '../wasm/module.js';
import { DecoderModel, type Architecture, type ModelDims, type WasmDecoder } from './decoder.js';
import type { Tokenizer } from './tokenizer.js';

/** config.json of a Llama-family model (Hugging Face keys); other keys are kept as they are. */
export interface LlamaConfig {
  model_type: 'llama' | 'mistral' | 'qwen2';
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads?: number;
  head_dim?: number;
  vocab_size: number;
  max_position_embeddings: number;
  rms_norm_eps?: number;
  rope_theta: number;
  rope_scaling?: { rope_type?: string; type?: string; [key: string]: unknown } | null;
  tie_word_embeddings?: boolean;
  sliding_window?: number | null;
  use_sliding_window?: boolean;
  max_window_layers?: number;
  [key: string]: unknown;
}

export const LLAMA_FAMILY: readonly string[] = ['llama', 'mistral', 'qwen2'];

/** A loaded Llama-family model. Holds wasm memory: call {@link DecoderModel.dispose} when done. */
export class LlamaModel extends DecoderModel<LlamaConfig> {
  /** @internal use {@link loadModel} (the config has been checked by the wasm loader) */
  constructor(m: QkvModule, handle: WasmDecoder, config: LlamaConfig, tokenizer: Tokenizer | null) {
    const heads = config.num_attention_heads;
    const dims: ModelDims = {
      layers: config.num_hidden_layers, heads, kvHeads: config.num_key_value_heads ?? heads,
      headDim: config.head_dim ?? config.hidden_size / heads, vocab: config.vocab_size,
      positions: config.max_position_embeddings, positionsKey: 'max_position_embeddings',
      windows: Object.freeze(windowsOf(config)),
    };
    super(m, handle, config, tokenizer, dims, config.model_type as Architecture);
  }

  /**
   * The sliding window of each layer (0 = full causal attention), as transformers decides it:
   * Mistral's sliding_window on every layer (absent: 4096, null: none); Qwen2's on layers
   * >= max_window_layers when use_sliding_window; none for Llama. (Also `dims.windows`.)
   */
  get slidingWindows(): number[] {
    return [...this.dims.windows];
  }
}

/** The sliding window of each layer, as {@link LlamaModel.slidingWindows} describes. */
function windowsOf(c: LlamaConfig): number[] {
  const n = c.num_hidden_layers;
  if (c.model_type === 'mistral') {
    const w = c.sliding_window === undefined ? 4096 : c.sliding_window ?? 0;
    return new Array<number>(n).fill(w);
  }
  if (c.model_type === 'qwen2' && c.use_sliding_window) {
    const w = c.sliding_window ?? 4096;
    const first = c.max_window_layers ?? 28;
    return Array.from({ length: n }, (_, l) => (l >= first ? w : 0));
  }
  return new Array<number>(n).fill(0);
}
