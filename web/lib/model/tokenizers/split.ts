/**
 * Splitting a string as Hugging Face tokenizers does (`NormalizedString::split`): a pattern
 * (a regex, a literal string or a per-character test) finds the delimiters; the behaviour says
 * what becomes of them. Empty pieces are dropped, as `PreTokenizedString::split` drops them.
 */
import { type JsonObject, type Where, asString } from './json.js';

export type SplitBehavior = 'Removed' | 'Isolated' | 'MergedWithPrevious' | 'MergedWithNext' | 'Contiguous';
export const SPLIT_BEHAVIORS: readonly SplitBehavior[] = ['Removed', 'Isolated', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous'];

/** A span of the string: [start, end) in UTF-16 units, and whether it is a delimiter. */
type Span = [start: number, end: number, isMatch: boolean];

/** Spans of a regex's matches (the 'g' flag set) and the text between them. */
export function regexSpans(s: string, re: RegExp): Span[] {
  const spans: Span[] = [];
  let prev = 0;
  for (const m of s.matchAll(re)) {
    const start = m.index!;
    const end = start + m[0].length;
    if (start === end) continue; // an empty match delimits nothing
    if (prev < start) spans.push([prev, start, false]);
    spans.push([start, end, true]);
    prev = end;
  }
  if (prev < s.length) spans.push([prev, s.length, false]);
  return spans;
}

/** Spans where every character that passes `test` is its own delimiter. */
export function charSpans(s: string, test: (c: string) => boolean): Span[] {
  const spans: Span[] = [];
  let prev = 0;
  let i = 0;
  for (const c of s) {
    const end = i + c.length;
    if (test(c)) {
      if (prev < i) spans.push([prev, i, false]);
      spans.push([i, end, true]);
      prev = end;
    }
    i = end;
  }
  if (prev < s.length) spans.push([prev, s.length, false]);
  return spans;
}

/** The pieces of `s` that `spans` and `behavior` give (tokenizers' SplitDelimiterBehavior). */
export function splitSpans(s: string, spans: Span[], behavior: SplitBehavior, invert = false): string[] {
  const marked: Span[] = invert ? spans.map(([a, b, m]) => [a, b, !m]) : spans;
  const out: Array<[number, number]> = [];
  switch (behavior) {
    case 'Removed':
      for (const [a, b, m] of marked) if (!m) out.push([a, b]);
      break;
    case 'Isolated':
      for (const [a, b] of marked) out.push([a, b]);
      break;
    case 'MergedWithPrevious': {
      let prevMatch = false;
      for (const [a, b, m] of marked) {
        if (m && !prevMatch && out.length > 0) out[out.length - 1][1] = b;
        else out.push([a, b]);
        prevMatch = m;
      }
      break;
    }
    case 'MergedWithNext': {
      let prevMatch = false;
      const rev: Array<[number, number]> = [];
      for (let i = marked.length - 1; i >= 0; i--) {
        const [a, b, m] = marked[i];
        if (m && !prevMatch && rev.length > 0) rev[rev.length - 1][0] = a;
        else rev.push([a, b]);
        prevMatch = m;
      }
      out.push(...rev.reverse());
      break;
    }
    case 'Contiguous': {
      let prevMatch = false;
      for (const [a, b, m] of marked) {
        if (m === prevMatch && out.length > 0) out[out.length - 1][1] = b;
        else out.push([a, b]);
        prevMatch = m;
      }
      break;
    }
  }
  return out.filter(([a, b]) => b > a).map(([a, b]) => s.slice(a, b));
}

export function parseBehavior(v: unknown, at: Where): SplitBehavior {
  const b = asString(v, at);
  if (!(SPLIT_BEHAVIORS as readonly string[]).includes(b)) {
    throw at.error(`split behavior ${JSON.stringify(b)} is not one of ${SPLIT_BEHAVIORS.join(', ')}`);
  }
  return b as SplitBehavior;
}

export function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}

/**
 * A tokenizer.json pattern, `{ "String": "..." }` or `{ "Regex": "..." }`, as a global RegExp.
 * Regexes are written for Oniguruma (what tokenizers uses): see {@link onigToJs}.
 */
export function parsePattern(v: unknown, at: Where): RegExp {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw at.error('expected a pattern object { "String": ... } or { "Regex": ... }');
  const o = v as JsonObject;
  if (typeof o.String === 'string') return new RegExp(escapeRegExp(o.String), 'gu');
  if (typeof o.Regex === 'string') return onigToJs(o.Regex, at.key('Regex'));
  throw at.error(`expected a pattern object { "String": ... } or { "Regex": ... }, got keys ${Object.keys(o).join(', ') || 'none'}`);
}

// Oniguruma's Unicode classes, spelled as JavaScript property escapes.
const WS = '\\p{White_Space}'; // Onig \s: U+0009-000D, U+0085, Zs, Zl, Zp (JS \s differs on U+0085 and U+FEFF)
const WORD = '\\p{L}\\p{M}\\p{Nd}\\p{Pc}'; // Onig \w
const SYNTAX = new Set([...'^$\\.*+?()[]{}|/']);

/**
 * Translates an Oniguruma regex (the dialect tokenizer.json patterns are written in) to a
 * JavaScript RegExp with the 'u' flag: `\s`, `\d`, `\w` keep their Unicode meaning, `(?i:...)`
 * becomes explicit case alternatives, `\p{Han}` becomes `\p{Script=Han}`, needless escapes
 * (`\#`) are dropped. What JavaScript cannot express (possessive quantifiers, atomic groups,
 * nested classes) is an Error naming the construct.
 */
export function onigToJs(src: string, at: Where): RegExp {
  let out = '';
  let inClass = false;
  const groups: boolean[] = []; // per open group: was case-insensitivity on before it
  let ci = false;
  let lastWasQuantifier = false;
  const fail = (what: string) => at.error(`the regex ${JSON.stringify(src)} uses ${what}, which JavaScript regexes cannot express`);
  for (let i = 0; i < src.length; ) {
    const c = src[i];
    let quantifier = false;
    if (c === '\\') {
      const e = src[i + 1];
      if (e === undefined) throw at.error(`the regex ${JSON.stringify(src)} ends with a lone backslash`);
      i += 2;
      if (e === 's') out += WS;
      else if (e === 'S') out += WS.replace('p', 'P');
      else if (e === 'd') out += '\\p{Nd}';
      else if (e === 'D') out += '\\P{Nd}';
      else if (e === 'w') out += inClass ? WORD : `[${WORD}]`;
      else if (e === 'W') {
        if (inClass) throw fail('\\W inside a character class');
        out += `[^${WORD}]`;
      } else if (e === 'p' || e === 'P') {
        const m = /^\{(\^?)([A-Za-z_=]+)\}/.exec(src.slice(i));
        if (!m) throw at.error(`the regex ${JSON.stringify(src)} has a malformed \\${e}{...}`);
        i += m[0].length;
        const negated = (e === 'P') !== (m[1] === '^');
        out += propertyEscape(m[2], negated, at, src);
      } else if (e === 'x' && src[i] === '{') {
        const close = src.indexOf('}', i);
        if (close < 0) throw at.error(`the regex ${JSON.stringify(src)} has a malformed \\x{...}`);
        out += `\\u{${src.slice(i + 1, close)}}`;
        i = close + 1;
      } else if (e === 'A') out += '^';
      else if (e === 'z') out += '$';
      else if (e === 'Z') out += '(?=\\n?$)';
      else if (e === 'h') out += inClass ? '0-9a-fA-F' : '[0-9a-fA-F]';
      else if (/[rntfvbB0-9xuc]/.test(e)) out += '\\' + e;
      else if (/[A-Za-z]/.test(e)) throw fail(`the escape \\${e}`);
      else out += SYNTAX.has(e) || (inClass && e === '-') ? '\\' + e : e; // \# -> #, \. stays
    } else if (inClass) {
      i++;
      if (c === ']') inClass = false;
      else if (c === '[') throw fail('a nested character class');
      else if (c === '&' && src[i] === '&') throw fail('a class intersection (&&)');
      out += ci ? caseVariants(c, true) : c;
    } else if (c === '[') {
      inClass = true;
      out += c;
      i++;
      if (src[i] === '^') { out += '^'; i++; }
      if (src[i] === ']') { out += '\\]'; i++; } // a leading ] is a literal in Oniguruma
    } else if (c === '(') {
      if (src[i + 1] === '?') {
        const rest = src.slice(i + 2);
        const flags = /^([imx]*)(?:-([imx]*))?([:)])/.exec(rest);
        if (rest[0] === ':' || rest[0] === '=' || rest[0] === '!' || rest.startsWith('<=') || rest.startsWith('<!')) {
          const n = rest[0] === '<' ? 3 : 2;
          out += src.slice(i, i + 1 + n);
          i += 1 + n;
          groups.push(ci);
        } else if (rest[0] === '<' || rest[0] === 'P') {
          const m = /^P?<([A-Za-z_][A-Za-z0-9_]*)>/.exec(rest);
          if (!m) throw fail('this group syntax');
          out += `(?<${m[1]}>`;
          i += 2 + m[0].length;
          groups.push(ci);
        } else if (flags && (flags[1] || flags[2])) {
          if (/[mx]/.test((flags[1] ?? '') + (flags[2] ?? ''))) throw fail(`the inline flags (?${flags[1]}${flags[2] ? '-' + flags[2] : ''})`);
          const on: boolean = flags[1].includes('i') ? true : flags[2]?.includes('i') ? false : ci;
          i += 2 + flags[0].length;
          if (flags[3] === ':') {
            groups.push(ci);
            out += '(?:';
          }
          ci = on; // (?i) runs to the end of the enclosing group; (?i:...) to its own end
        } else if (rest[0] === '>') throw fail('an atomic group (?>...)');
        else throw fail(`the group (?${rest[0] ?? ''}`);
      } else {
        out += '(';
        i++;
        groups.push(ci);
      }
    } else if (c === ')') {
      if (groups.length === 0) throw at.error(`the regex ${JSON.stringify(src)} has an unmatched ')'`);
      ci = groups.pop()!;
      out += ')';
      i++;
      lastWasQuantifier = false;
      continue;
    } else if (c === '*' || c === '+' || c === '?' || c === '{') {
      if (c === '+' && lastWasQuantifier) throw fail('a possessive quantifier');
      if (c === '?' && lastWasQuantifier) { out += c; i++; lastWasQuantifier = false; continue; } // lazy
      if (c === '{') {
        const m = /^\{\d*(,\d*)?\}/.exec(src.slice(i));
        if (!m) { out += '\\{'; i++; lastWasQuantifier = false; continue; }
        out += m[0];
        i += m[0].length;
      } else {
        out += c;
        i++;
      }
      quantifier = true;
    } else {
      out += ci ? caseVariants(c, false) : c;
      i++;
    }
    lastWasQuantifier = quantifier;
  }
  if (inClass) throw at.error(`the regex ${JSON.stringify(src)} has an unclosed '['`);
  if (groups.length) throw at.error(`the regex ${JSON.stringify(src)} has an unclosed '('`);
  try {
    return new RegExp(out, 'gu');
  } catch (e) {
    throw at.error(`the regex ${JSON.stringify(src)} (as JavaScript ${JSON.stringify(out)}) does not compile: ${(e as Error).message}`);
  }
}

/** A letter under (?i): both cases (`[sS]`, or `sS` inside a class). */
function caseVariants(c: string, inClass: boolean): string {
  const lo = c.toLowerCase();
  const up = c.toUpperCase();
  if (lo === up || lo.length !== 1 || up.length !== 1) return c;
  return inClass ? lo + up : `[${lo}${up}]`;
}

/** `\p{Name}` for a general category or binary property; scripts (`Han`) as `Script=Han`. */
function propertyEscape(name: string, negated: boolean, at: Where, src: string): string {
  const p = negated ? 'P' : 'p';
  for (const candidate of [name, `Script=${name}`]) {
    try {
      new RegExp(`\\p{${candidate}}`, 'u');
      return `\\${p}{${candidate}}`;
    } catch {
      // try the next spelling
    }
  }
  throw at.error(`the regex ${JSON.stringify(src)} uses the Unicode property \\p{${name}}, which JavaScript does not know`);
}
