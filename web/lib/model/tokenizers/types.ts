/**
 * What every tokenizer offers (`model.tokenizer`), and the checks they share.
 *
 * Kinds:
 *  - `'bytes'`: one token per UTF-8 byte (vocab 256), the tiny model's.
 *  - `'bpe'`: GPT-2's byte-level BPE from `vocab.json` + `merges.txt`.
 *  - `'byte-level-bpe'`: a `tokenizer.json` BPE over GPT-2's byte alphabet with its own
 *    pre-tokenizer regex and added tokens (Llama 3, Qwen2/3, SmolLM).
 *  - `'sentencepiece-bpe'`: a `tokenizer.json` BPE over `▁`-marked text with `<0xNN>` byte
 *    fallback (Llama 2, TinyLlama, Mistral).
 *  - `'wordpiece'`: BERT's WordPiece, from `vocab.txt` or a `tokenizer.json`.
 *  - `'unigram'`: SentencePiece's Unigram model from a `tokenizer.json` (XLM-RoBERTa, T5).
 */

import type { ChatTemplateOptions } from './chat-template.js';

/**
 * Which algorithm a tokenizer runs: `'bytes'` (one token per UTF-8 byte), `'bpe'` (GPT-2's from
 * vocab.json + merges.txt), `'byte-level-bpe'` (a tokenizer.json BPE over GPT-2's byte alphabet:
 * Llama 3, Qwen2/3), `'sentencepiece-bpe'` (a tokenizer.json BPE over ▁-marked text with byte
 * fallback: Llama 2, Mistral), `'wordpiece'` (BERT) or `'unigram'` (SentencePiece Unigram:
 * XLM-RoBERTa).
 */
export type TokenizerKind = 'bytes' | 'bpe' | 'byte-level-bpe' | 'sentencepiece-bpe' | 'wordpiece' | 'unigram';

/** Options of {@link Tokenizer.encode} and {@link Tokenizer.encodePair}. */
export interface EncodeOptions {
  /**
   * Add the model's special tokens (BOS/EOS, [CLS]/[SEP]) as Hugging Face's tokenizer does
   * for this model. Default true.
   */
  addSpecialTokens?: boolean;
}

/** Options of {@link Tokenizer.decode}. */
export interface DecodeOptions {
  /** Leave out special tokens (`<s>`, `[CLS]`, `<|begin_of_text|>`, ...). Default false. */
  skipSpecialTokens?: boolean;
  /**
   * transformers' clean_up_tokenization: no space before `.`, `,`, `!`, `?` and English
   * contractions (`don ' t` -> `don't`). Default: tokenizer_config.json's
   * `clean_up_tokenization_spaces` (BERT's vocab.txt: true), else false.
   */
  cleanUpTokenizationSpaces?: boolean;
}

/** A sentence pair, encoded: `[CLS] A [SEP] B [SEP]` for BERT, with the segment of each token. */
export interface EncodedPair {
  /** The token ids of both texts with the model's special tokens. */
  ids: number[];
  /** 0 for the first sentence's tokens (and the specials before it), 1 for the second's. */
  tokenTypeIds: number[];
}

/** Ids of the special tokens the tokenizer's files name; null where they name none. */
export interface SpecialTokenIds {
  /** Beginning of sequence (`<s>`, `<|begin_of_text|>`, `<bos>`). */
  bos: number | null;
  /** End of sequence (`</s>`, `<|endoftext|>`): generation stops after it. */
  eos: number | null;
  /** Unknown token (`<unk>`, `[UNK]`): stands for text outside the vocabulary. */
  unk: number | null;
  /** Padding (`<pad>`, `[PAD]`). */
  pad: number | null;
  /** Classification token (`[CLS]`, RoBERTa's `<s>`), first in an encoder's input. */
  cls: number | null;
  /** Separator (`[SEP]`, RoBERTa's `</s>`), after each sentence in an encoder's input. */
  sep: number | null;
  /** Mask token (`[MASK]`, `<mask>`) that fillMask predicts. */
  mask: number | null;
}

/** What `model.tokenizer` offers. */
export interface Tokenizer {
  /** Which algorithm it runs. */
  readonly kind: TokenizerKind;
  /** Number of token ids (the largest id + 1). */
  readonly vocabSize: number;
  /** Special token ids (BOS/EOS for generation, [MASK] for fill-mask, ...). */
  readonly specialTokens: SpecialTokenIds;
  /** Text -> token ids, with the model's special tokens unless `addSpecialTokens: false`. */
  encode(text: string, options?: EncodeOptions): number[];
  /** Two texts -> one sequence, as HF's `tokenizer(a, b)`: ids and token type ids. */
  encodePair(a: string, b: string, options?: EncodeOptions): EncodedPair;
  /**
   * Token ids -> text, as HF's `tokenizer.decode` (its decoder; invalid UTF-8 becomes U+FFFD).
   * Ids that are not integers >= 0 are a RangeError; an id with no token (beyond the vocabulary,
   * as the padding rows of Qwen's embedding) is left out by tokenizer.json tokenizers, as HF
   * does, and a RangeError for GPT-2's and the byte tokenizer.
   */
  decode(ids: ArrayLike<number>, options?: DecodeOptions): string;
  /**
   * Token ids -> the UTF-8 bytes they stand for in the middle of a text: each token's bytes,
   * concatenated, so `decodeBytes(a ++ b)` is `decodeBytes(a) ++ decodeBytes(b)` (what a
   * streaming decoder needs). Steps that only apply at the start of a text (SentencePiece's
   * leading-space strip, WordPiece's no space before the first word) are not applied.
   */
  decodeBytes(ids: ArrayLike<number>): Uint8Array;
  /** The vocabulary's string for a token id (`Ġthe`, `▁the`, `##ing`, `<0x0A>`, `[CLS]`). */
  token(id: number): string;
  /**
   * The text one token stands for in the middle of a text (for viewers): its bytes as UTF-8, or,
   * when they are not whole UTF-8 characters, ASCII bytes as they are and others as `\xNN`.
   */
  tokenText(id: number): string;
  /**
   * A conversation as the model's chat template writes it (tokenizer_config.json's
   * `chat_template` or chat_template.jinja, rendered as transformers does): the text to encode
   * (with `addSpecialTokens: false`: the template writes the special tokens itself). A
   * tokenizer whose files hold no template: an Error.
   */
  applyChatTemplate(messages: { role: string; content?: unknown; [key: string]: unknown }[], options?: ChatTemplateOptions): string;
}

export function checkText(fn: string, text: unknown): asserts text is string {
  if (typeof text !== 'string') throw new TypeError(`${fn}: text must be a string, got ${text === null ? 'null' : typeof text}`);
}

/** Every id an integer in [0, vocabSize). */
export function checkIds(fn: string, ids: ArrayLike<number>, vocabSize: number): void {
  if (ids == null || typeof ids.length !== 'number') {
    throw new TypeError(`${fn}: ids must be an array of token ids, got ${String(ids)}`);
  }
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
      throw new RangeError(`${fn}: ids[${i}] = ${id} is not a token id in [0, ${vocabSize})`);
    }
  }
}

export function checkEncodeOptions(fn: string, options: EncodeOptions | undefined): boolean {
  if (options === undefined) return true;
  if (options === null || typeof options !== 'object') throw new TypeError(`${fn}: options must be an object, got ${String(options)}`);
  const add = options.addSpecialTokens;
  if (add !== undefined && typeof add !== 'boolean') throw new TypeError(`${fn}: options.addSpecialTokens must be a boolean, got ${String(add)}`);
  return add ?? true;
}

/** The options, checked: skip special tokens, and clean up spaces (undefined: the tokenizer's default). */
export function checkDecodeOptions(fn: string, options: DecodeOptions | undefined): { skip: boolean; cleanUp: boolean | undefined } {
  if (options === undefined) return { skip: false, cleanUp: undefined };
  if (options === null || typeof options !== 'object') throw new TypeError(`${fn}: options must be an object, got ${String(options)}`);
  const { skipSpecialTokens: skip, cleanUpTokenizationSpaces: cleanUp } = options;
  if (skip !== undefined && typeof skip !== 'boolean') throw new TypeError(`${fn}: options.skipSpecialTokens must be a boolean, got ${String(skip)}`);
  if (cleanUp !== undefined && typeof cleanUp !== 'boolean') {
    throw new TypeError(`${fn}: options.cleanUpTokenizationSpaces must be a boolean, got ${String(cleanUp)}`);
  }
  return { skip: skip ?? false, cleanUp };
}

/** transformers' clean_up_tokenization (and the WordPiece decoder's `cleanup`). */
export function cleanUpTokenization(s: string): string {
  return s
    .replaceAll(' .', '.').replaceAll(' ?', '?').replaceAll(' !', '!').replaceAll(' ,', ',')
    .replaceAll(" ' ", "'").replaceAll(" n't", "n't").replaceAll(" 'm", "'m").replaceAll(' do not', " don't")
    .replaceAll(" 's", "'s").replaceAll(" 've", "'ve").replaceAll(" 're", "'re");
}

export const NO_SPECIAL_TOKENS: SpecialTokenIds = Object.freeze({ bos: null, eos: null, unk: null, pad: null, cls: null, sep: null, mask: null });

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Bytes as text for a viewer: UTF-8 when they are whole characters, else ASCII as is and `\xNN`. */
export function bytesText(bytes: Uint8Array): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return Array.from(bytes, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`)).join('');
  }
}
