/**
 * {@link BpeTokenizer}: GPT-2's byte-level BPE from `vocab.json` + `merges.txt`, the algorithm
 * of openai/gpt-2 `encoder.py`: the regex pre-tokenizer, bytes_to_unicode, then greedy merging
 * of the lowest-ranked pair. GPT-2 adds no special tokens.
 *
 * `addPrefixSpace` (tokenizer_config.json's `add_prefix_space`) is GPT2TokenizerFast's, i.e.
 * the ByteLevel pre-tokenizer's of huggingface/tokenizers: a text that does not start with a
 * space (and is not empty) gets one before it, so its first word is split as it is mid-line
 * (" In", not "I" "n", where the training text never had a word at the start of a line).
 * decode keeps that space, as the ByteLevel decoder does.
 */
import { noChatTemplate } from './chat-template.js';
import { isIndex } from './json.js';
import {
  bytesText, checkDecodeOptions, cleanUpTokenization, checkEncodeOptions, checkIds, checkText, NO_SPECIAL_TOKENS,
  type DecodeOptions, type EncodedPair, type EncodeOptions, type SpecialTokenIds, type Tokenizer,
} from './types.js';

const utf8 = new TextEncoder();

/**
 * GPT-2's reversible map from the 256 byte values to printable Unicode characters
 * (openai/gpt-2 encoder.py `bytes_to_unicode`): printable Latin-1 bytes map to themselves,
 * the rest to U+0100 onwards, in byte order.
 */
export function bytesToUnicode(): string[] {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const map: string[] = new Array(256);
  for (const b of bs) map[b] = String.fromCodePoint(b);
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (map[b] === undefined) map[b] = String.fromCodePoint(256 + n++);
  }
  return map;
}

/**
 * GPT-2's pre-tokenizer. Python's `regex` `\s` is Unicode White_Space (it matches U+0085 and
 * not U+FEFF, unlike JavaScript's `\s`), so the pattern spells it `\p{White_Space}`.
 */
export const GPT2_PATTERN =
  /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+/gu;

/** Options of {@link BpeTokenizer}, from tokenizer_config.json. */
export interface BpeOptions {
  /** `add_prefix_space`: a space before a text that does not start with one (default false). */
  addPrefixSpace?: boolean;
}

/** GPT-2's byte-level BPE tokenizer over `vocab.json` (token -> id) and `merges.txt`. */
export class BpeTokenizer implements Tokenizer {
  /** `'bpe'`: GPT-2's byte-level BPE from vocab.json + merges.txt. */
  readonly kind = 'bpe' as const;
  readonly vocabSize: number;
  /** tokenizer_config.json's `add_prefix_space`: a space goes before a text that does not start with one, so its first word is split as it is mid-line (GPT2TokenizerFast). */
  readonly addPrefixSpace: boolean;
  /** GPT-2's `<|endoftext|>` (BOS, EOS and UNK in HF's GPT2Tokenizer) when vocab.json has it. */
  readonly specialTokens: SpecialTokenIds;
  readonly #encoder: Map<string, number>;
  readonly #decoder: string[];
  readonly #ranks: Map<string, number>;
  readonly #byteEncoder: string[];
  readonly #byteDecoder: Map<string, number>;
  readonly #cache = new Map<string, number[]>();

  /**
   * @param vocab  the parsed vocab.json: `{ token: id }`
   * @param merges merges.txt's text: an optional `#version` line, then one `a b` pair per line
   * @param options tokenizer_config.json's options (`add_prefix_space`)
   */
  constructor(vocab: Record<string, number>, merges: string, options: BpeOptions = {}) {
    if (vocab === null || typeof vocab !== 'object' || Array.isArray(vocab)) {
      throw new TypeError('BpeTokenizer: vocab must be the object of vocab.json ({ token: id })');
    }
    if (typeof merges !== 'string') throw new TypeError('BpeTokenizer: merges must be the text of merges.txt');
    if (options === null || typeof options !== 'object') throw new TypeError(`BpeTokenizer: options must be an object, got ${String(options)}`);
    if (options.addPrefixSpace !== undefined && typeof options.addPrefixSpace !== 'boolean') {
      throw new TypeError(`BpeTokenizer: options.addPrefixSpace must be true or false, got ${JSON.stringify(options.addPrefixSpace)}`);
    }
    this.addPrefixSpace = options.addPrefixSpace ?? false;
    this.#encoder = new Map();
    let maxId = -1;
    for (const [tok, id] of Object.entries(vocab)) {
      if (!isIndex(id)) {
        throw new RangeError(`BpeTokenizer: vocab.json maps ${JSON.stringify(tok)} to ${JSON.stringify(id) ?? String(id)}, not a token id (an integer in [0, 2^31))`);
      }
      this.#encoder.set(tok, id);
      maxId = Math.max(maxId, id);
    }
    this.vocabSize = maxId + 1;
    this.#decoder = new Array(this.vocabSize);
    for (const [tok, id] of this.#encoder) {
      if (this.#decoder[id] !== undefined) {
        throw new RangeError(`BpeTokenizer: vocab.json gives id ${id} to both ${JSON.stringify(this.#decoder[id])} and ${JSON.stringify(tok)}`);
      }
      this.#decoder[id] = tok;
    }
    this.#byteEncoder = bytesToUnicode();
    this.#byteDecoder = new Map(this.#byteEncoder.map((c, b) => [c, b]));
    for (const c of this.#byteEncoder) {
      if (!this.#encoder.has(c)) {
        throw new RangeError(`BpeTokenizer: vocab.json lacks the byte token ${JSON.stringify(c)}`);
      }
    }
    this.#ranks = new Map();
    const lines = merges.split('\n');
    let rank = 0;
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i].replace(/\r$/, '');
      if (i === 0 && line.startsWith('#version')) continue;
      if (line === '') continue;
      const parts = line.split(' ');
      if (parts.length !== 2 || parts[0] === '' || parts[1] === '') {
        throw new SyntaxError(`BpeTokenizer: merges.txt line ${i + 1} is not "a b": ${JSON.stringify(line)}`);
      }
      const key = parts[0] + ' ' + parts[1];
      this.#ranks.set(key, rank); // a repeated pair keeps its last rank, as encoder.py
      rank++;
    }
    const eot = this.#encoder.get('<|endoftext|>') ?? null;
    this.specialTokens = Object.freeze({ ...NO_SPECIAL_TOKENS, bos: eot, eos: eot, unk: eot });
  }

  /** The BPE of one pre-token (already mapped through bytes_to_unicode) -> token ids. */
  #bpe(token: string): number[] {
    const cached = this.#cache.get(token);
    if (cached) return cached;
    let word = Array.from(token);
    while (word.length > 1) {
      // the adjacent pair with the lowest merge rank
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i < word.length - 1; i++) {
        const r = this.#ranks.get(word[i] + ' ' + word[i + 1]);
        if (r !== undefined && r < bestRank) {
          bestRank = r;
          best = i;
        }
      }
      if (best < 0) break;
      const first = word[best];
      const second = word[best + 1];
      // merge every occurrence of (first, second), left to right
      const merged: string[] = [];
      for (let i = 0; i < word.length; ) {
        if (i < word.length - 1 && word[i] === first && word[i + 1] === second) {
          merged.push(first + second);
          i += 2;
        } else {
          merged.push(word[i]);
          i += 1;
        }
      }
      word = merged;
    }
    const ids = word.map((piece) => {
      const id = this.#encoder.get(piece);
      if (id === undefined) throw new RangeError(`tokenizer.encode: BPE produced ${JSON.stringify(piece)}, which vocab.json lacks`);
      return id;
    });
    if (this.#cache.size < 50000) this.#cache.set(token, ids);
    return ids;
  }

  /** The text the regex splits: with addPrefixSpace, ' ' + text unless it is empty or starts with ' ' (tokenizers' ByteLevel). */
  #prefixed(text: string): string {
    return this.addPrefixSpace && text.length > 0 && !text.startsWith(' ') ? ' ' + text : text;
  }

  /** GPT-2 adds no special tokens, and `<|endoftext|>` written in the text is text (as encoder.py). */
  encode(text: string, options?: EncodeOptions): number[] {
    checkText('tokenizer.encode', text);
    checkEncodeOptions('tokenizer.encode', options);
    const ids: number[] = [];
    for (const m of this.#prefixed(text).matchAll(GPT2_PATTERN)) {
      let mapped = '';
      for (const b of utf8.encode(m[0])) mapped += this.#byteEncoder[b];
      for (const id of this.#bpe(mapped)) ids.push(id);
    }
    return ids;
  }

  encodePair(a: string, b: string, options?: EncodeOptions): EncodedPair {
    const ia = this.encode(a, options);
    const ib = this.encode(b, options);
    return { ids: [...ia, ...ib], tokenTypeIds: [...ia.map(() => 0), ...ib.map(() => 1)] };
  }

  /** The pre-tokens GPT-2's regex splits `text` into (for tests and viewers), after the prefix space when addPrefixSpace. */
  pieces(text: string): string[] {
    checkText('tokenizer.pieces', text);
    return Array.from(this.#prefixed(text).matchAll(GPT2_PATTERN), (m) => m[0]);
  }

  /** The vocab.json string of a token id. */
  token(id: number): string {
    checkIds('tokenizer.token', [id], this.vocabSize);
    return this.#decoder[id] ?? '';
  }

  decodeBytes(ids: ArrayLike<number>): Uint8Array {
    checkIds('tokenizer.decode', ids, this.vocabSize);
    const out: number[] = [];
    for (let i = 0; i < ids.length; i++) {
      const tok = this.#decoder[ids[i]];
      if (tok === undefined) throw new RangeError(`tokenizer.decode: ids[${i}] = ${ids[i]} is not in vocab.json`);
      for (const ch of tok) {
        const b = this.#byteDecoder.get(ch);
        if (b === undefined) {
          throw new RangeError(`tokenizer.decode: token ${ids[i]} (${JSON.stringify(tok)}) holds ${JSON.stringify(ch)}, not a byte character`);
        }
        out.push(b);
      }
    }
    return Uint8Array.from(out);
  }

  decode(ids: ArrayLike<number>, options?: DecodeOptions): string {
    const { skip, cleanUp } = checkDecodeOptions('tokenizer.decode', options);
    checkIds('tokenizer.decode', ids, this.vocabSize);
    const eot = this.specialTokens.eos;
    const kept = skip && eot !== null ? Array.from(ids).filter((id) => id !== eot) : ids;
    const text = new TextDecoder('utf-8').decode(this.decodeBytes(kept));
    return cleanUp ? cleanUpTokenization(text) : text; // off unless asked: encoder.py does not clean up
  }

  tokenText(id: number): string {
    checkIds('tokenizer.tokenText', [id], this.vocabSize);
    return bytesText(this.decodeBytes([id]));
  }

  applyChatTemplate(): string {
    throw noChatTemplate("GPT-2's vocab.json and merges.txt hold none");
  }
}
