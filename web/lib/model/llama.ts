/**
 * A loaded Llama-family model (model_type llama, mistral, qwen2, qwen3, gemma3_text, gemma3:
 * src/model/llama.hpp over wasm/bindings_llama.cpp): the shared decoder API. Grouped-query
 * attention keeps one key per kv head (forward's keys are [1, num_key_value_heads, L,
 * head_dim]); queries and keys come after the rotary embedding (Qwen3, Gemma 3: and after
 * their q/k RMSNorm).
 */
import type { QkvModule } from '../wasm/module.js';
import { DecoderModel, type Architecture, type ModelDims, type WasmDecoder } from './decoder.js';
import type { Tokenizer } from './tokenizer.js';

/** config.json of a Llama-family model (Hugging Face keys); other keys are kept as they are. */
export interface LlamaConfig {
  /** The architecture (gemma3: a multimodal config whose `text_config` is read). */
  model_type: 'llama' | 'mistral' | 'qwen2' | 'qwen3' | 'gemma3_text' | 'gemma3';
  /** Model width (the residual stream's size). */
  hidden_size: number;
  /** The gated MLP's hidden size. */
  intermediate_size: number;
  /** Decoder layers. */
  num_hidden_layers: number;
  /** Query heads per layer. */
  num_attention_heads: number;
  /** Key/value heads per layer (grouped-query attention; default num_attention_heads). */
  num_key_value_heads?: number;
  /** Dimensions per head (default hidden_size / num_attention_heads). */
  head_dim?: number;
  /** Vocabulary size (rows of the token embedding and of the LM head). */
  vocab_size: number;
  /** The context length the model accepts. */
  max_position_embeddings: number;
  /** The RMS norms' epsilon (default 1e-6). */
  rms_norm_eps?: number;
  /** The rotary embedding's base (required: Llama 2 uses 10000, Llama 3 500000, Qwen2 1000000). */
  rope_theta: number;
  /** Rotary scaling: absent or null, or `{ rope_type: 'default' | 'linear' | 'llama3', ... }` (older files: `type`). */
  rope_scaling?: LlamaRopeScaling | null;
  /** The LM head shares the token embedding's matrix (default false; no lm_head.weight then). */
  tie_word_embeddings?: boolean;
  /** Mistral: every layer's sliding window (default 4096; null = full attention). Qwen2/3: the window of the sliding layers, with use_sliding_window. */
  sliding_window?: number | null;
  /** Qwen2/3: turn sliding-window attention on (default false). */
  use_sliding_window?: boolean;
  /** Qwen2/3 with use_sliding_window: layers from this index on slide (default 28; Qwen3: unless layer_types says). */
  max_window_layers?: number;
  /** qwen3, gemma3_text: "sliding_attention" | "full_attention" per layer. */
  layer_types?: string[];
  /** gemma3_text: every n-th layer (1-based) global when layer_types is absent (default 6). */
  sliding_window_pattern?: number;
  /** gemma3: the text model's config (Gemma3TextConfig's defaults for what it leaves out). */
  text_config?: Partial<LlamaConfig>;
  [key: string]: unknown;
}

/** config.json's `rope_scaling` of a Llama-family model; its other keys (factor, ...) as the type needs them. */
export interface LlamaRopeScaling {
  /** `'default'` (none), `'linear'` (positions divided by `factor`) or `'llama3'` (Llama 3.1's frequency bands). */
  rope_type?: string;
  /** The same, as older config files name it. */
  type?: string;
  [key: string]: unknown;
}

export const LLAMA_FAMILY: readonly string[] = ['llama', 'mistral', 'qwen2', 'qwen3', 'gemma3_text', 'gemma3'];

/** Gemma3TextConfig's defaults (transformers), for the keys a Gemma 3 config.json leaves out. */
const GEMMA3_TEXT_DEFAULTS = {
  hidden_size: 2304, intermediate_size: 9216, num_hidden_layers: 26, num_attention_heads: 8, num_key_value_heads: 4,
  head_dim: 256, vocab_size: 262208, max_position_embeddings: 131072, sliding_window: 4096, query_pre_attn_scalar: 256,
};

/**
 * The text model's config with the sizes resolved: a gemma3 config's text_config, and for
 * Gemma 3 the keys it leaves out at Gemma3TextConfig's defaults (src/model/gemma3_config.cpp
 * reads the same); other configs as they are.
 */
export function textConfigOf(c: LlamaConfig): LlamaConfig {
  if (c.model_type === 'gemma3') {
    return { ...GEMMA3_TEXT_DEFAULTS, ...(c.text_config ?? {}), model_type: 'gemma3_text' } as LlamaConfig;
  }
  if (c.model_type === 'gemma3_text') return { ...GEMMA3_TEXT_DEFAULTS, ...c } as LlamaConfig;
  return c;
}

/** A loaded Llama-family model. Holds wasm memory: call {@link DecoderModel.dispose} when done. */
export class LlamaModel extends DecoderModel<LlamaConfig> {
  /** @internal use {@link loadModel} (the config has been checked by the wasm loader) */
  constructor(m: QkvModule, handle: WasmDecoder, config: LlamaConfig, tokenizer: Tokenizer | null) {
    const c = textConfigOf(config);
    const heads = c.num_attention_heads;
    const dims: ModelDims = {
      layers: c.num_hidden_layers, heads, kvHeads: c.num_key_value_heads ?? heads,
      headDim: c.head_dim ?? c.hidden_size / heads, d: c.hidden_size, vocab: c.vocab_size,
      positions: c.max_position_embeddings, positionsKey: 'max_position_embeddings',
      windows: Object.freeze(windowsOf(c)),
    };
    super(m, handle, config, tokenizer, dims, config.model_type as Architecture);
  }

  /**
   * The sliding window of each layer (0 = full causal attention), as transformers decides it:
   * Mistral's sliding_window on every layer (absent: 4096, null: none); Qwen2's on layers
   * >= max_window_layers when use_sliding_window; Qwen3's so too, or on the layers layer_types
   * calls "sliding_attention"; Gemma 3's on its local layers (layer_types, else all but every
   * sliding_window_pattern-th); none for Llama. (Also `dims.windows`.) Gemma 3's local layers
   * also rotate with their own base (rope_local_base_freq).
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
  const sliding = (l: number) => c.layer_types?.[l] === 'sliding_attention';
  if ((c.model_type === 'qwen2' || c.model_type === 'qwen3') && c.use_sliding_window) {
    const w = c.sliding_window ?? 4096;
    const first = c.max_window_layers ?? 28;
    const types = c.model_type === 'qwen3' && Array.isArray(c.layer_types);
    return Array.from({ length: n }, (_, l) => ((types ? sliding(l) : l >= first) ? w : 0));
  }
  if (c.model_type === 'gemma3_text') {
    const w = c.sliding_window ?? 4096;
    const pattern = c.sliding_window_pattern ?? 6;
    const types = Array.isArray(c.layer_types);
    return Array.from({ length: n }, (_, l) => ((types ? sliding(l) : (l + 1) % pattern !== 0) ? w : 0));
  }
  return new Array<number>(n).fill(0);
}
