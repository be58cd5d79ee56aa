/**
 * tokenizer.json normalizers (tokenizers' `normalizers/`): each is a function string -> string,
 * run on each stretch of text between added tokens before pre-tokenization.
 */
import { type JsonObject, type Where, asArray, asBool, asObject, asString, typeOf } from './json.js';
import { PrecompiledCharsmap } from './precompiled.js';
import { parsePattern } from './split.js';

export type Normalizer = (s: string) => string;

const SUPPORTED = ['Sequence', 'NFC', 'NFD', 'NFKC', 'NFKD', 'Lowercase', 'Strip', 'StripAccents', 'Replace', 'Prepend', 'BertNormalizer', 'Precompiled'];

const WHITE_SPACE = /\p{White_Space}/u; // Rust's char::is_whitespace
const LEADING_WS = /^\p{White_Space}+/u;
const TRAILING_WS = /\p{White_Space}+$/u;

/** The normalizer a tokenizer.json `normalizer` describes; null for none. */
export function parseNormalizer(v: unknown, at: Where): Normalizer | null {
  if (v === null || v === undefined) return null;
  const o = asObject(v, at);
  const type = typeOf(o, at);
  switch (type) {
    case 'Sequence': {
      const parts = asArray(o.normalizers, at.key('normalizers')).map((n, i) => parseNormalizer(n, at.key('normalizers').index(i)));
      const steps = parts.filter((p): p is Normalizer => p !== null);
      return (s) => steps.reduce((t, f) => f(t), s);
    }
    case 'NFC':
    case 'NFD':
    case 'NFKC':
    case 'NFKD':
      return (s) => s.normalize(type);
    case 'Lowercase':
      return (s) => s.toLowerCase();
    case 'Strip': {
      const left = asBool(o.strip_left, at.key('strip_left'), true);
      const right = asBool(o.strip_right, at.key('strip_right'), true);
      return (s) => {
        if (left) s = s.replace(LEADING_WS, '');
        if (right) s = s.replace(TRAILING_WS, '');
        return s;
      };
    }
    case 'StripAccents':
      return stripMarks;
    case 'Replace': {
      const re = parsePattern(o.pattern, at.key('pattern'));
      const content = asString(o.content, at.key('content'));
      return (s) => s.replace(re, () => content);
    }
    case 'Prepend': {
      const prefix = asString(o.prepend, at.key('prepend'));
      return (s) => (s.length > 0 ? prefix + s : s); // tokenizers prepends to non-empty text only
    }
    case 'BertNormalizer':
      return bertNormalizer(o, at);
    case 'Precompiled': {
      // SentencePiece's rules (precompiled.ts); an empty charsmap (some converted files) changes nothing
      const b64 = o.precompiled_charsmap === null || o.precompiled_charsmap === undefined ? '' : asString(o.precompiled_charsmap, at.key('precompiled_charsmap'));
      if (b64 === '') return (s) => s;
      const map = PrecompiledCharsmap.fromBase64(b64, at.key('precompiled_charsmap'));
      return (s) => map.normalize(s);
    }
    default:
      throw at.unsupported('normalizer', type, SUPPORTED);
  }
}

/** StripAccents: drops combining marks (General_Category M), after no decomposition. */
function stripMarks(s: string): string {
  return s.replace(/\p{M}/gu, '');
}

/**
 * A CJK Unified Ideograph (BERT's `_is_chinese_char`: the CJK blocks, not Hangul or kana).
 * The ranges are those of tokenizers' bert.rs.
 */
export function isChineseChar(cp: number): boolean {
  return (
    (cp >= 0x4e00 && cp <= 0x9fff) ||
    (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x20000 && cp <= 0x2a6df) ||
    (cp >= 0x2a700 && cp <= 0x2b73f) ||
    (cp >= 0x2b740 && cp <= 0x2b81f) ||
    (cp >= 0x2b920 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0x2f800 && cp <= 0x2fa1f)
  );
}

const OTHER = /^\p{C}$/u; // Cc, Cf, Cs, Co, Cn: BERT's "control" characters

export interface BertNormalizerOptions {
  cleanText: boolean;
  handleChineseChars: boolean;
  /** null: strip accents when lower-casing (BERT's default). */
  stripAccents: boolean | null;
  lowercase: boolean;
}

/**
 * BERT's text normalisation (tokenizers' BertNormalizer = BERT's BasicTokenizer before the
 * splitting): drop NUL, U+FFFD and control characters and turn whitespace into spaces; put
 * spaces around CJK ideographs; strip accents (NFD, then drop Mn); lower-case.
 */
export function makeBertNormalizer(opt: BertNormalizerOptions): Normalizer {
  const strip = opt.stripAccents ?? opt.lowercase;
  return (s) => {
    if (opt.cleanText) {
      let t = '';
      for (const c of s) {
        if (c === '\t' || c === '\n' || c === '\r') t += ' ';
        else if (c === '\0' || c === '\ufffd' || OTHER.test(c)) continue;
        else t += WHITE_SPACE.test(c) ? ' ' : c;
      }
      s = t;
    }
    if (opt.handleChineseChars) {
      let t = '';
      for (const c of s) t += isChineseChar(c.codePointAt(0)!) ? ` ${c} ` : c;
      s = t;
    }
    if (strip) s = s.normalize('NFD').replace(/\p{Mn}/gu, '');
    if (opt.lowercase) s = s.toLowerCase();
    return s;
  };
}

function bertNormalizer(o: JsonObject, at: Where): Normalizer {
  const sa = o.strip_accents;
  return makeBertNormalizer({
    cleanText: asBool(o.clean_text, at.key('clean_text'), true),
    handleChineseChars: asBool(o.handle_chinese_chars, at.key('handle_chinese_chars'), true),
    stripAccents: sa === null || sa === undefined ? null : asBool(sa, at.key('strip_accents')),
    lowercase: asBool(o.lowercase, at.key('lowercase'), true),
  });
}
