/** The model API: loadModel, the GPT-2 and Llama-family models, the encoders, the encoder-decoder, their tokenizers. Re-exported by web/lib/index.ts. */
export { loadModel, type LoadOptions, type LoadProgress, type Model, type WeightsOption } from './load.js';
export {
  EncoderModel,
  type EncoderConfig, type EncoderForwardOptions, type EncoderForwardResult, type FillMaskOptions, type FillMaskPrediction,
  type EncoderArchitecture,
} from './encoder.js';
export { type EmbedOptions, type Pooling, type PoolingDefaults } from './embed.js';
export {
  DecoderModel,
  type Architecture, type ModelDims,
  type ForwardOptions, type ForwardResult, type ModelMemoryUsage, type QueriesKeys, type GenerateOptions, type GenerationStep,
} from './decoder.js';
export { GPT2Model } from './gpt2.js';
export { LlamaModel, type LlamaConfig, type LlamaRopeScaling } from './llama.js';
export {
  Seq2SeqModel,
  type Seq2SeqConfig, type Seq2SeqForwardOptions, type Seq2SeqForwardResult, type Seq2SeqGenerateOptions, type Seq2SeqStep,
} from './seq2seq.js';
export type { GPT2Config, ModelFiles, ModelSource } from './files.js';
export type { GgufFile } from './gguf.js';
export type { HeadMask, HeadPatch, Knockout } from './interventions.js';
export type { ActivationPatch, SteeringVector } from './residual.js';
export {
  ByteTokenizer, BpeTokenizer, HfTokenizer, type HfTokenizerFiles, bytesToUnicode, GPT2_PATTERN, tokenizerFromFiles, loadChatTemplateEngine,
  type Tokenizer, type TokenizerKind, type TokenizerFiles, type TokenizerFromFilesOptions, type EncodeOptions, type DecodeOptions,
  type EncodedPair, type SpecialTokenIds, type ChatMessage, type ChatTemplateOptions, type BpeOptions,
} from './tokenizer.js';
export { clearHubCache, hubCacheDir } from './hub/index.js';
