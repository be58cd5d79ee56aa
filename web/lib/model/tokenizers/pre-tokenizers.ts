/**
 * tokenizer.json pre-tokenizers (tokenizers' `pre_tokenizers/`): each splits a stretch of
 * normalized text into the words the model tokenizes one by one.
 */
import { bytesToUnicode, GPT2_PATTERN } from './gpt2-bpe.js';
import { type JsonObject, type Where, asArray, asBool, asChar, asObject, asString, typeOf } from './json.js';
import { charSpans, parseBehavior, parsePattern, regexSpans, splitSpans } from './split.js';

/** One piece of text; `first`: it starts the text given to encode (Metaspace's 'first' scheme). */
export interface Piece {
  text: string;
  first: boolean;
}

export type PreTokenizer = (pieces: Piece[]) => Piece[];

const SUPPORTED = ['Sequence', 'Split', 'ByteLevel', 'Metaspace', 'BertPreTokenizer', 'Digits', 'Whitespace', 'WhitespaceSplit', 'Punctuation'];

/** Applies `split` to each piece; only a first piece's first part stays first. */
function eachPiece(split: (s: string, first: boolean) => string[]): PreTokenizer {
  return (pieces) => {
    const out: Piece[] = [];
    for (const p of pieces) {
      split(p.text, p.first).forEach((text, i) => out.push({ text, first: p.first && i === 0 }));
    }
    return out;
  };
}

const isWhiteSpace = (c: string) => /^\p{White_Space}$/u.test(c);
/** BERT's punctuation: ASCII punctuation or Unicode P*. */
export const isBertPunctuation = (c: string) => /^[!-/:-@\[-`{-~\p{P}]$/u.test(c);
const isNumeric = (c: string) => /^\p{N}$/u.test(c);
const WHITESPACE_WORDS = /[\p{L}\p{M}\p{Nd}\p{Pc}]+|[^\p{L}\p{M}\p{Nd}\p{Pc}\p{White_Space}]+/gu; // tokenizers' \w+|[^\w\s]+

const utf8 = new TextEncoder();
let byteChars: string[] | null = null;

/** GPT-2's byte-to-character map applied to the UTF-8 bytes of `s`. */
export function byteLevelChars(s: string): string {
  byteChars ??= bytesToUnicode();
  let out = '';
  for (const b of utf8.encode(s)) out += byteChars[b];
  return out;
}

/** The pre-tokenizer a tokenizer.json `pre_tokenizer` describes; null for none. */
export function parsePreTokenizer(v: unknown, at: Where): PreTokenizer | null {
  if (v === null || v === undefined) return null;
  const o = asObject(v, at);
  const type = typeOf(o, at);
  switch (type) {
    case 'Sequence': {
      const list = asArray(o.pretokenizers, at.key('pretokenizers'));
      const steps = list.map((p, i) => parsePreTokenizer(p, at.key('pretokenizers').index(i))).filter((p): p is PreTokenizer => p !== null);
      return (pieces) => steps.reduce((ps, f) => f(ps), pieces);
    }
    case 'Split': {
      const re = parsePattern(o.pattern, at.key('pattern'));
      const behavior = parseBehavior(o.behavior, at.key('behavior'));
      const invert = asBool(o.invert, at.key('invert'), false);
      return eachPiece((s) => splitSpans(s, regexSpans(s, re), behavior, invert));
    }
    case 'ByteLevel':
      return byteLevel(o, at);
    case 'Metaspace':
      return metaspace(o, at);
    case 'BertPreTokenizer':
      // whitespace removed, then each punctuation character on its own
      return eachPiece((s) => splitSpans(s, charSpans(s, isWhiteSpace), 'Removed').flatMap((w) => splitSpans(w, charSpans(w, isBertPunctuation), 'Isolated')));
    case 'Digits': {
      const individual = asBool(o.individual_digits, at.key('individual_digits'), false);
      return eachPiece((s) => splitSpans(s, charSpans(s, isNumeric), individual ? 'Isolated' : 'Contiguous'));
    }
    case 'Whitespace':
      return eachPiece((s) => splitSpans(s, regexSpans(s, WHITESPACE_WORDS), 'Removed', true));
    case 'WhitespaceSplit':
      return eachPiece((s) => splitSpans(s, charSpans(s, isWhiteSpace), 'Removed'));
    case 'Punctuation': {
      const behavior = o.behavior === undefined ? 'Isolated' : parseBehavior(o.behavior, at.key('behavior'));
      return eachPiece((s) => splitSpans(s, charSpans(s, isBertPunctuation), behavior));
    }
    default:
      throw at.unsupported('pre-tokenizer', type, SUPPORTED);
  }
}

/**
 * ByteLevel: optionally a space before each piece, optionally GPT-2's regex split, then each
 * UTF-8 byte as GPT-2's printable character (so the BPE vocabulary covers every byte).
 */
function byteLevel(o: JsonObject, at: Where): PreTokenizer {
  const addPrefixSpace = asBool(o.add_prefix_space, at.key('add_prefix_space'), true);
  const useRegex = asBool(o.use_regex, at.key('use_regex'), true);
  return eachPiece((s) => {
    if (addPrefixSpace && !s.startsWith(' ')) s = ' ' + s;
    const words = useRegex ? splitSpans(s, regexSpans(s, GPT2_PATTERN), 'Isolated') : [s];
    return words.map(byteLevelChars);
  });
}

/**
 * Metaspace (SentencePiece's view of spaces): each space becomes the replacement character
 * (`▁`), one is prepended ('always', or 'first': only to the start of the text), and with
 * `split` each `▁` starts a new word.
 */
function metaspace(o: JsonObject, at: Where): PreTokenizer {
  const replacement = asChar(o.replacement, at.key('replacement'));
  let scheme: string;
  if (o.prepend_scheme !== undefined && o.prepend_scheme !== null) {
    scheme = asString(o.prepend_scheme, at.key('prepend_scheme'));
    if (!['always', 'first', 'never'].includes(scheme)) throw at.key('prepend_scheme').error(`expected "always", "first" or "never", got ${JSON.stringify(scheme)}`);
  } else scheme = 'always';
  // older files: add_prefix_space false means 'never' (and must agree with a prepend_scheme)
  if (o.add_prefix_space === false) {
    if (o.prepend_scheme !== undefined && o.prepend_scheme !== null && scheme !== 'never') {
      throw at.error(`add_prefix_space false does not match prepend_scheme ${JSON.stringify(scheme)}`);
    }
    scheme = 'never';
  } else if (o.add_prefix_space !== undefined && o.add_prefix_space !== null) asBool(o.add_prefix_space, at.key('add_prefix_space'));
  const split = asBool(o.split, at.key('split'), true);
  return eachPiece((s, first) => {
    s = s.replaceAll(' ', replacement);
    if (!s.startsWith(replacement) && (scheme === 'always' || (scheme === 'first' && first))) s = replacement + s;
    return split ? splitSpans(s, charSpans(s, (c) => c === replacement), 'MergedWithNext') : [s];
  });
}
