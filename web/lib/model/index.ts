/** The model API: loadModel, the GPT-2 model, its tokenizers. Re-exported by web/lib/index.ts. */
export {
  loadModel, GPT2Model,
  type GPT2Config, type ModelFiles, type ModelSource, type ForwardOptions, type ForwardResult, type QueriesKeys,
  type GenerateOptions, type GenerationStep,
} from './model.js';
export { ByteTokenizer, BpeTokenizer, bytesToUnicode, GPT2_PATTERN, type Tokenizer } from './tokenizer.js';
