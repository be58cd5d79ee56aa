/**
 * The tokenizers (one file each under tokenizers/): byte-level (the tiny model), GPT-2's BPE
 * (vocab.json + merges.txt), and Hugging Face tokenizer.json / vocab.txt (byte-level BPE,
 * SentencePiece BPE, WordPiece); {@link tokenizerFromFiles} picks one from a model's files.
 */
export { ByteTokenizer } from './tokenizers/bytes.js';
export { BpeTokenizer, bytesToUnicode, GPT2_PATTERN, type BpeOptions } from './tokenizers/gpt2-bpe.js';
export { HfTokenizer, type HfTokenizerFiles } from './tokenizers/hf-tokenizer.js';
export { bertTokenizerJson, parseVocabTxt } from './tokenizers/vocab-txt.js';
export {
  readTokenizerFiles, tokenizerFromFiles, tokenizerSearchOrder, TOKENIZER_FILE_NAMES, type TokenizerFiles,
  type TokenizerFromFilesOptions,
} from './tokenizers/from-files.js';
export { loadChatTemplateEngine, type ChatMessage, type ChatTemplateOptions } from './tokenizers/chat-template.js';
export type {
  DecodeOptions, EncodedPair, EncodeOptions, SpecialTokenIds, Tokenizer, TokenizerKind,
} from './tokenizers/types.js';
