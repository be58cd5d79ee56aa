/**
 * qkv — attention for the web. Scaled dot-product attention, multi-head attention and a KV
 * cache over a WebAssembly SIMD (optionally threaded) core, with WebGPU for long sequences.
 *
 * @example
 * import { Tensor, scaledDotProductAttention } from 'qkv';
 * const q = new Tensor(new Float32Array(1 * 8 * 128 * 64), [1, 8, 128, 64]);
 * const { output } = await scaledDotProductAttention(q, q, q, { isCausal: true });
 *
 * @packageDocumentation
 */
import { env, type Env, type Variant } from './env.js';
import { liveCount, releaseAll } from './lifetime.js';
import { getModule, loadModule, releaseModule } from './wasm/loader.js';

export { Tensor, type DType, type TensorData } from './tensor.js';
export {
  scaledDotProductAttention, scaledDotProductAttentionSync,
  type AttentionOptions, type AttentionResult,
} from './attention.js';
export { lastBackend, type Backend } from './backend.js';
export { webgpuAvailable, WebGPUUnavailableError, WebGPUDeviceLostError, WebGPULimitError } from './webgpu/index.js';
export {
  loadModel, GPT2Model, ByteTokenizer, BpeTokenizer, bytesToUnicode, GPT2_PATTERN,
  LlamaModel, DecoderModel, type LlamaConfig, type LlamaRopeScaling, type Architecture, type ModelDims,
  type GPT2Config, type GgufFile, type ModelFiles, type ModelSource, type ForwardOptions, type ForwardResult, type QueriesKeys,
  type GenerateOptions, type GenerationStep, type Tokenizer, type LoadOptions, type LoadProgress, type WeightsOption,
  type ModelMemoryUsage,
  Seq2SeqModel, type Seq2SeqConfig, type Seq2SeqForwardOptions, type Seq2SeqForwardResult, type Seq2SeqGenerateOptions,
  type Seq2SeqStep,
  HfTokenizer, type HfTokenizerFiles, tokenizerFromFiles, loadChatTemplateEngine,
  type Model, EncoderModel, type EncoderConfig, type EncoderForwardOptions, type EncoderForwardResult,
  type FillMaskOptions, type FillMaskPrediction, type HeadMask, type HeadPatch, type Knockout, type ActivationPatch, type SteeringVector,
  type EncoderArchitecture, type EmbedOptions, type Pooling, type PoolingDefaults,
  type TokenizerKind, type TokenizerFiles, type TokenizerFromFilesOptions, type EncodeOptions, type DecodeOptions, type EncodedPair, type SpecialTokenIds,
  type ChatMessage, type ChatTemplateOptions, hubCacheDir, clearHubCache, type BpeOptions,
} from './model/index.js';
export { MultiHeadAttention, type MultiHeadAttentionOptions, type MultiHeadAttentionWeights,
  type MultiHeadAttentionForwardOptions, type Weight } from './mha.js';
export { KVCache, type KVCacheOptions, type KVCacheAttendOptions } from './kvcache.js';
export {
  attentionRollout, attentionRolloutSync, attentionFlow, attentionFlowSync, FLOW_MAX_LENGTH, type HeadFusion, type RolloutOptions,
  type FlowOptions, type FlowAsyncOptions,
  headProbes, headPatternScores, inductionScores, isCausalMap, nextTokenLoss, type HeadProbeOptions, type HeadProbeResult, type HeadScore,
  type ProbeModel, type ProbeProgress, type ProbeForwardOptions, type ProbeForwardResult, type ProbeTokenizer, type ProbeDims,
  type HeadPatternScores, type HeadTable,
  logitLens, type LensCell, type LensToken, type LogitLensOptions, type LogitLensResult,
  logitAttribution, type LogitAttributionOptions, type LogitAttributionResult, type AttributionPart,
  activationPatching, type ActivationPatchingOptions, type ActivationPatchingResult, type PatchingOver,
  steeringVector, type SteeringVectorOptions,
} from './interpret/index.js';
export { env, WEBGPU_THRESHOLD, type Env, type RanOn, type Variant } from './env.js';

/** What {@link init} loaded. */
export interface InitResult {
  /** The wasm build that loaded (`env.loadedVariant`): never `'auto'`. */
  variant: Variant;
  /** Threads a call uses (`env.threads`): 1 unless a threads build loaded. */
  threads: number;
}

/** Options of {@link init}: each sets the {@link env} field of the same name before loading. */
export interface InitOptions {
  /** Which wasm build to load (`env.variant`); default `'auto'`. */
  variant?: Env['variant'];
  /** Threads per call for a threads build, an integer in [1, 64] (`env.numThreads`); default min(4, hardwareConcurrency). */
  numThreads?: number;
  /** Where the wasm files are (`env.wasmPaths`): a URL/path prefix, or a map from file name (`'qkv-simd.wasm'`) to URL; default next to the package's JS. */
  wasmPaths?: Env['wasmPaths'];
}

/**
 * Loads the wasm module now (otherwise the first async call does). Needed before the
 * synchronous functions (`scaledDotProductAttentionSync`, `new KVCache`, `forwardSync`).
 * Options set the matching `env` fields first.
 */
export async function init(options?: InitOptions): Promise<InitResult> {
  if (options?.variant !== undefined) env.variant = options.variant;
  if (options?.numThreads !== undefined) env.numThreads = options.numThreads;
  if (options?.wasmPaths !== undefined) env.wasmPaths = options.wasmPaths;
  await loadModule();
  return { variant: env.loadedVariant!, threads: env.threads };
}

/** Wasm memory now: linear memory size, bytes malloc has handed out, live objects. */
export interface MemoryUsage {
  /** Size of the module's linear memory (it grows, never shrinks). */
  heapBytes: number;
  /** Bytes allocated and not freed (malloc's count). */
  inUseBytes: number;
  /** KVCache / MultiHeadAttention objects holding wasm memory. */
  liveObjects: number;
}

/** Wasm memory use, or null before the module is loaded. */
export function memoryUsage(): MemoryUsage | null {
  const m = getModule();
  if (!m) return null;
  return { heapBytes: m.heapBytes(), inUseBytes: m.heapInUse(), liveObjects: liveCount() };
}

/**
 * Frees everything qkv holds: every KVCache and MultiHeadAttention still alive (they become
 * disposed), and the wasm module with its worker threads. The next call loads afresh (with
 * the `env` settings then current).
 */
export function dispose(): void {
  releaseAll();
  releaseModule();
}

