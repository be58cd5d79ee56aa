/**
 * tokenizer.json decoders (tokenizers' `decoders/`): token strings -> text.
 *
 * Two uses: {@link Decoder.decode} is HF's `decode` (the whole chain, including steps that only
 * apply at the start of the text); {@link Decoder.tokenBytes} is one token's bytes in the middle
 * of a text, for streaming and viewers.
 */
import { bytesToUnicode } from './gpt2-bpe.js';
import { type JsonObject, type Where, asArray, asBool, asChar, asIndex, asObject, asString, typeOf } from './json.js';
import { parsePattern } from './split.js';
import { cleanUpTokenization } from './types.js';

const SUPPORTED = ['Sequence', 'ByteLevel', 'ByteFallback', 'Fuse', 'Strip', 'Replace', 'Metaspace', 'WordPiece', 'BPEDecoder'];

/** One decoder step. */
interface Step {
  /** tokenizers' decode_chain: token strings -> token strings. */
  chain(tokens: string[]): string[];
  /** One token in the middle of a text: a string, or bytes once a byte-level step has run. */
  piece(p: string | Uint8Array): string | Uint8Array;
}

const utf8 = new TextEncoder();
const lossy = new TextDecoder('utf-8');
const strict = new TextDecoder('utf-8', { fatal: true });

let charBytes: Map<string, number> | null = null;
/** A byte-level token's bytes; a token with a character outside GPT-2's byte map: its UTF-8 (as tokenizers). */
function byteLevelBytes(token: string): Uint8Array {
  charBytes ??= new Map(bytesToUnicode().map((c, b) => [c, b]));
  const out: number[] = [];
  for (const c of token) {
    const b = charBytes.get(c);
    if (b === undefined) return utf8.encode(token);
    out.push(b);
  }
  return Uint8Array.from(out);
}

const BYTE_TOKEN = /^<0x([0-9A-Fa-f]{2})>$/;

/** `<0xNN>` -> NN, else null. */
function byteOf(token: string): number | null {
  const m = token.length === 6 ? BYTE_TOKEN.exec(token) : null;
  return m ? parseInt(m[1], 16) : null;
}

const textOnly = (f: (s: string) => string) => (p: string | Uint8Array) => (typeof p === 'string' ? f(p) : p);
const keep = (p: string | Uint8Array) => p;

function parseStep(v: unknown, at: Where): Step[] {
  const o: JsonObject = asObject(v, at);
  const type = typeOf(o, at);
  switch (type) {
    case 'Sequence':
      return asArray(o.decoders, at.key('decoders')).flatMap((d, i) => parseStep(d, at.key('decoders').index(i)));
    case 'ByteLevel':
      return [{
        chain: (tokens) => {
          const parts = tokens.map(byteLevelBytes);
          const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
          let k = 0;
          for (const p of parts) { all.set(p, k); k += p.length; }
          return [lossy.decode(all)];
        },
        piece: (p) => (typeof p === 'string' ? byteLevelBytes(p) : p),
      }];
    case 'ByteFallback':
      return [{
        chain: (tokens) => {
          // runs of <0xNN> become their text; bytes that are not UTF-8 become one U+FFFD each
          const out: string[] = [];
          let bytes: number[] = [];
          const flush = () => {
            if (!bytes.length) return;
            try {
              out.push(strict.decode(Uint8Array.from(bytes)));
            } catch {
              for (let i = 0; i < bytes.length; i++) out.push('\ufffd');
            }
            bytes = [];
          };
          for (const t of tokens) {
            const b = byteOf(t);
            if (b !== null) bytes.push(b);
            else { flush(); out.push(t); }
          }
          flush();
          return out;
        },
        piece: (p) => {
          const b = typeof p === 'string' ? byteOf(p) : null;
          return b === null ? p : Uint8Array.of(b);
        },
      }];
    case 'Fuse':
      return [{ chain: (tokens) => [tokens.join('')], piece: keep }];
    case 'Strip': {
      const content = asChar(o.content, at.key('content'));
      const start = asIndex(o.start, at.key('start'), 0);
      const stop = asIndex(o.stop, at.key('stop'), 0);
      return [{
        chain: (tokens) => tokens.map((t) => {
          const chars = Array.from(t);
          let a = 0;
          while (a < start && a < chars.length && chars[a] === content) a++;
          let b = chars.length;
          while (chars.length - b < stop && b > a && chars[b - 1] === content) b--;
          return chars.slice(a, b).join('');
        }),
        piece: keep, // strips the start (or end) of the whole text only
      }];
    }
    case 'Replace': {
      const re = parsePattern(o.pattern, at.key('pattern'));
      const content = asString(o.content, at.key('content'));
      const f = (s: string) => s.replace(re, () => content);
      return [{ chain: (tokens) => tokens.map(f), piece: textOnly(f) }];
    }
    case 'Metaspace': {
      const replacement = asChar(o.replacement, at.key('replacement'));
      const scheme = o.prepend_scheme === undefined || o.prepend_scheme === null
        ? (o.add_prefix_space === false ? 'never' : 'always')
        : asString(o.prepend_scheme, at.key('prepend_scheme'));
      // the first token loses its replacement characters unless nothing was prepended (tokenizers' metaspace.rs)
      const dropFirst = scheme !== 'never';
      return [{
        chain: (tokens) => tokens.map((t, i) => t.replaceAll(replacement, i === 0 && dropFirst ? '' : ' ')),
        piece: textOnly((s) => s.replaceAll(replacement, ' ')),
      }];
    }
    case 'WordPiece': {
      const prefix = o.prefix === undefined ? '##' : asString(o.prefix, at.key('prefix'));
      const cleanup = asBool(o.cleanup, at.key('cleanup'), true);
      const mid = (t: string) => (t.startsWith(prefix) ? t.slice(prefix.length) : ' ' + t);
      return [{
        chain: (tokens) => tokens.map((t, i) => {
          const s = i === 0 ? t : mid(t);
          return cleanup ? cleanUpTokenization(s) : s;
        }),
        piece: textOnly(mid),
      }];
    }
    case 'BPEDecoder': {
      const suffix = o.suffix === undefined ? '</w>' : asString(o.suffix, at.key('suffix'));
      return [{
        chain: (tokens) => tokens.map((t, i) => t.replaceAll(suffix, i === tokens.length - 1 ? '' : ' ')),
        piece: textOnly((s) => s.replaceAll(suffix, ' ')),
      }];
    }
    default:
      throw at.unsupported('decoder', type, SUPPORTED);
  }
}

export interface Decoder {
  /** Token strings -> text, as tokenizers' `decode` (no decoder: joined with spaces). */
  decode(tokens: string[]): string;
  /** One token's bytes in the middle of a text. */
  tokenBytes(token: string): Uint8Array;
}

/** The decoder a tokenizer.json `decoder` describes. */
export function parseDecoder(v: unknown, at: Where): Decoder {
  const steps = v === null || v === undefined ? null : parseStep(v, at);
  return {
    decode(tokens) {
      if (steps === null) return tokens.join(' ');
      return steps.reduce((ts, s) => s.chain(ts), tokens).join('');
    },
    tokenBytes(token) {
      if (steps === null) return utf8.encode(' ' + token);
      const p = steps.reduce<string | Uint8Array>((x, s) => s.piece(x), token);
      return typeof p === 'string' ? utf8.encode(p) : p;
    },
  };
}
