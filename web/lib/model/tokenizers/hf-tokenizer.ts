/**
 * {@link HfTokenizer}: a Hugging Face `tokenizer.json` (+ `tokenizer_config.json`), run as the
 * tokenizers library runs it:
 *
 *   text -> added tokens found (raw text) -> normalizer -> added tokens found (normalized text)
 *        -> pre-tokenizer -> model (BPE or WordPiece), word by word -> post-processor (specials)
 *
 * Byte-level BPE (Llama 3, Qwen2/3, SmolLM, RoBERTa), SentencePiece-style BPE with byte fallback
 * (Llama 2, TinyLlama, Mistral), WordPiece (BERT) and Unigram (XLM-RoBERTa, T5) are all this one pipeline with different
 * parts. A part qkv does not implement is an Error naming its type.
 */
import { AddedTokenMatcher, parseAddedTokens, type AddedToken } from './added-tokens.js';
import { parseBpeModel, type BpeModel } from './bpe-model.js';
import { parseDecoder, type Decoder } from './decoders.js';
import { type Json, type JsonObject, Where, asBool, asObject, typeOf } from './json.js';
import { parseUnigramModel, type UnigramModel } from './unigram-model.js';
import { parseNormalizer, type Normalizer } from './normalizers.js';
import { concatenate, parsePostProcessor, templateProcessor, type PostProcessor } from './post-processors.js';
import { parsePreTokenizer, type PreTokenizer } from './pre-tokenizers.js';
import { ChatTemplates, chatTemplateSource, noChatTemplate, specialTokenStrings, type ChatTemplateOptions } from './chat-template.js';
import { bosEosTemplates, specialTokenIds } from './tokenizer-config.js';
import {
  bytesText, checkDecodeOptions, checkEncodeOptions, checkText, cleanUpTokenization,
  type DecodeOptions, type EncodedPair, type EncodeOptions, type SpecialTokenIds, type Tokenizer, type TokenizerKind,
} from './types.js';
import { parseWordPieceModel, type WordPieceModel } from './wordpiece-model.js';

const MODELS = ['BPE', 'WordPiece', 'Unigram'];

/** Whether a component (or one inside its Sequence) has `type`. */
function hasType(v: Json | undefined, type: string): boolean {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  if (v.type === type) return true;
  for (const key of ['normalizers', 'pretokenizers', 'decoders', 'processors']) {
    const list = v[key];
    if (Array.isArray(list) && list.some((x) => hasType(x, type))) return true;
  }
  return false;
}

/** Which kind of tokenizer a tokenizer.json holds; others are an Error. */
function kindOf(json: JsonObject, model: BpeModel | WordPieceModel | UnigramModel, at: Where): TokenizerKind {
  if (model.type === 'WordPiece') return 'wordpiece';
  if (model.type === 'Unigram') return 'unigram';
  if (hasType(json.pre_tokenizer, 'ByteLevel')) return 'byte-level-bpe';
  const spaceMarks = hasType(json.pre_tokenizer, 'Metaspace') || JSON.stringify(json.normalizer ?? null).includes('\u2581');
  if (model.byteFallback || spaceMarks) return 'sentencepiece-bpe';
  throw at.error(
    'a BPE model without a ByteLevel pre-tokenizer (byte-level BPE) or byte_fallback / ▁ spaces (SentencePiece BPE) is not supported',
  );
}

/** What {@link HfTokenizer}'s constructor reads: a tokenizer.json and what goes with it. */
export interface HfTokenizerFiles {
  /** tokenizer.json, parsed. */
  tokenizer: unknown;
  /** tokenizer_config.json, parsed (optional). */
  config?: unknown;
  /** chat_template.jinja's text (optional; wins over the config's chat_template). */
  chatTemplate?: string;
  /** File names for error messages. */
  names?: {
    /** tokenizer.json's name (default `'tokenizer.json'`). */
    tokenizer?: string;
    /** tokenizer_config.json's name (default `'tokenizer_config.json'`). */
    config?: string;
    /** chat_template.jinja's name (default `'chat_template.jinja'`). */
    chatTemplate?: string;
  };
  /** decode's clean-up when the config does not say (transformers' class default). */
  cleanUpDefault?: boolean;
}

/**
 * A Hugging Face `tokenizer.json` (+ `tokenizer_config.json`), run as the tokenizers library runs
 * it: byte-level BPE, SentencePiece-style BPE with byte fallback, WordPiece or Unigram. Usually
 * made by {@link tokenizerFromFiles} or {@link loadModel}; made with `new`, a chat template needs
 * `await loadChatTemplateEngine()` before {@link HfTokenizer.applyChatTemplate}.
 */
export class HfTokenizer implements Tokenizer {
  /** 'byte-level-bpe', 'sentencepiece-bpe', 'wordpiece' or 'unigram', from the file's model and pre-tokenizer. */
  readonly kind: TokenizerKind;
  readonly vocabSize: number;
  readonly specialTokens: SpecialTokenIds;
  readonly #normalizer: Normalizer | null;
  readonly #preTokenizer: PreTokenizer | null;
  readonly #model: BpeModel | WordPieceModel | UnigramModel;
  readonly #postProcessor: PostProcessor;
  readonly #decoder: Decoder;
  readonly #rawTokens: AddedTokenMatcher;
  readonly #normalizedTokens: AddedTokenMatcher;
  /** id -> token string (added tokens over the model's vocabulary); holes are ids with no token */
  readonly #tokens: (string | undefined)[];
  readonly #special: Set<number>;
  readonly #bytes = new Map<number, Uint8Array>();
  readonly #cleanUp: boolean;
  readonly #chat: ChatTemplates | null;

  constructor(files: HfTokenizerFiles) {
    const at = new Where(files.names?.tokenizer ?? 'tokenizer.json');
    const json = asObject(files.tokenizer, at);
    const cAt = new Where(files.names?.config ?? 'tokenizer_config.json');
    const config = files.config === undefined || files.config === null ? null : asObject(files.config, cAt);

    // the model
    const mAt = at.key('model');
    const m = asObject(json.model, mAt);
    const type = m.type === undefined ? (m.merges !== undefined ? 'BPE' : m.continuing_subword_prefix !== undefined ? 'WordPiece' : '') : typeOf(m, mAt);
    if (type === '') throw mAt.error('has no type, and neither merges (BPE) nor continuing_subword_prefix (WordPiece) to tell it');
    if (type === 'BPE') this.#model = parseBpeModel(m, mAt);
    else if (type === 'WordPiece') this.#model = parseWordPieceModel(m, mAt);
    else if (type === 'Unigram') this.#model = parseUnigramModel(m, mAt);
    else throw mAt.unsupported('model', type, MODELS);

    this.#normalizer = parseNormalizer(json.normalizer, at.key('normalizer'));
    this.#preTokenizer = parsePreTokenizer(json.pre_tokenizer, at.key('pre_tokenizer'));
    this.#decoder = parseDecoder(json.decoder, at.key('decoder'));
    this.kind = kindOf(json, this.#model, at); // after the parts: an unsupported part is named first

    // the vocabulary: the model's, then the added tokens (which win for their ids)
    const added: AddedToken[] = parseAddedTokens(json.added_tokens, at.key('added_tokens'));
    this.#tokens = [];
    for (const [tok, id] of this.#model.vocab) this.#tokens[id] = tok;
    for (const t of added) this.#tokens[t.id] = t.content;
    this.vocabSize = this.#tokens.length;
    this.#special = new Set(added.filter((t) => t.special).map((t) => t.id));
    this.#rawTokens = new AddedTokenMatcher(added.filter((t) => !t.normalized));
    this.#normalizedTokens = new AddedTokenMatcher(added.filter((t) => t.normalized));
    const addedIds = new Map(added.map((t) => [t.content, t.id]));
    const idOf = (tok: string) => addedIds.get(tok) ?? this.#model.vocab.get(tok);

    // special tokens: the config's add_bos_token / add_eos_token override the file's template
    const templates = bosEosTemplates(config, cAt, idOf);
    const processor = parsePostProcessor(json.post_processor, at.key('post_processor'));
    this.#postProcessor = templates ? templateProcessor(templates.single, templates.pair) : processor;
    const specialNames = new Set(added.filter((t) => t.special).map((t) => t.content));
    if (this.#model.type === 'WordPiece') ['[UNK]', '[CLS]', '[SEP]', '[PAD]', '[MASK]'].forEach((t) => this.#model.vocab.has(t) && specialNames.add(t));
    this.specialTokens = specialTokenIds(config, cAt, idOf, (t) => specialNames.has(t));
    this.#cleanUp = asBool(config?.clean_up_tokenization_spaces, cAt.key('clean_up_tokenization_spaces'), files.cleanUpDefault ?? false);
    const chat = chatTemplateSource(config, files.chatTemplate, { config: cAt.file, jinja: files.names?.chatTemplate ?? 'chat_template.jinja' });
    this.#chat = chat ? new ChatTemplates(chat, specialTokenStrings(config, cAt.file)) : null;
  }

  /** Whether the files hold a chat template ({@link applyChatTemplate} renders it). */
  get hasChatTemplate(): boolean {
    return this.#chat !== null;
  }

  applyChatTemplate(messages: { role: string; content?: unknown; [key: string]: unknown }[], options?: ChatTemplateOptions): string {
    if (!this.#chat) throw noChatTemplate('neither tokenizer_config.json\'s chat_template nor chat_template.jinja');
    return this.#chat.render(messages, options);
  }

  /** One text -> token ids, without special tokens. */
  #encodeText(text: string): number[] {
    const ids: number[] = [];
    for (const seg of this.#rawTokens.split(text, true)) {
      if (seg.id !== null) { ids.push(seg.id); continue; }
      const normalized = this.#normalizer ? this.#normalizer(seg.text) : seg.text;
      for (const sub of this.#normalizedTokens.split(normalized, seg.first)) {
        if (sub.id !== null) { ids.push(sub.id); continue; }
        const pieces = this.#preTokenizer ? this.#preTokenizer([{ text: sub.text, first: sub.first }]) : [{ text: sub.text, first: sub.first }];
        for (const p of pieces) for (const id of this.#model.tokenize(p.text)) ids.push(id);
      }
    }
    return ids;
  }

  encode(text: string, options?: EncodeOptions): number[] {
    checkText('tokenizer.encode', text);
    const add = checkEncodeOptions('tokenizer.encode', options);
    const ids = this.#encodeText(text);
    return this.#postProcessor === concatenate ? ids : this.#postProcessor(ids, null, add).ids;
  }

  encodePair(a: string, b: string, options?: EncodeOptions): EncodedPair {
    checkText('tokenizer.encodePair', a);
    checkText('tokenizer.encodePair', b);
    const add = checkEncodeOptions('tokenizer.encodePair', options);
    return this.#postProcessor(this.#encodeText(a), this.#encodeText(b), add);
  }

  /** Ids must be integers >= 0; ids with no token (beyond the vocabulary) are left out, as HF's decode does. */
  #tokensOf(fn: string, ids: ArrayLike<number>, skipSpecial: boolean): string[] {
    if (ids == null || typeof ids.length !== 'number') throw new TypeError(`${fn}: ids must be an array of token ids, got ${String(ids)}`);
    const out: string[] = [];
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (!Number.isInteger(id) || id < 0) throw new RangeError(`${fn}: ids[${i}] = ${id} is not a token id (an integer >= 0)`);
      const tok = this.#tokens[id];
      if (tok === undefined || (skipSpecial && this.#special.has(id))) continue;
      out.push(tok);
    }
    return out;
  }

  decode(ids: ArrayLike<number>, options?: DecodeOptions): string {
    const { skip, cleanUp } = checkDecodeOptions('tokenizer.decode', options);
    const text = this.#decoder.decode(this.#tokensOf('tokenizer.decode', ids, skip));
    return cleanUp ?? this.#cleanUp ? cleanUpTokenization(text) : text;
  }

  #tokenBytes(id: number): Uint8Array {
    let b = this.#bytes.get(id);
    if (!b) {
      const tok = this.#tokens[id];
      b = tok === undefined ? new Uint8Array(0) : this.#decoder.tokenBytes(tok);
      if (this.#bytes.size < 100000) this.#bytes.set(id, b);
    }
    return b;
  }

  decodeBytes(ids: ArrayLike<number>): Uint8Array {
    this.#tokensOf('tokenizer.decodeBytes', ids, false); // checks the ids
    const parts = Array.from(ids, (id) => this.#tokenBytes(id));
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let k = 0;
    for (const p of parts) { out.set(p, k); k += p.length; }
    return out;
  }

  /** The token's string; '' for an id with no token. */
  token(id: number): string {
    this.#tokensOf('tokenizer.token', [id], false);
    return this.#tokens[id] ?? '';
  }

  tokenText(id: number): string {
    this.#tokensOf('tokenizer.tokenText', [id], false);
    return bytesText(this.#tokenBytes(id));
  }

  /** Whether `id` is a special added token (`<s>`, `[CLS]`, ...). */
  isSpecial(id: number): boolean {
    return this.#special.has(id);
  }
}
