/**
 * Added tokens (tokenizer.json `added_tokens`: `<|begin_of_text|>`, `<s>`, `[MASK]`, ...), found
 * in the text before the model sees it, as tokenizers' AddedVocabulary does: leftmost-longest
 * matches; `single_word` tokens only between non-word characters; `lstrip`/`rstrip` take the
 * whitespace beside them; tokens with `normalized: false` are found in the raw text, the others
 * in the normalized text.
 */
import { type Where, asArray, asBool, asIndex, asObject, asString } from './json.js';
import { escapeRegExp } from './split.js';

export interface AddedToken {
  id: number;
  content: string;
  singleWord: boolean;
  lstrip: boolean;
  rstrip: boolean;
  normalized: boolean;
  special: boolean;
}

/** A stretch of text: either an added token (id) or text for the normalizer and model. */
export interface Segment {
  text: string;
  id: number | null;
  /** Starts at the beginning of the text given to encode. */
  first: boolean;
}

export function parseAddedTokens(v: unknown, at: Where): AddedToken[] {
  if (v === undefined || v === null) return [];
  return asArray(v, at).map((t, i) => {
    const w = at.index(i);
    const o = asObject(t, w);
    const content = asString(o.content, w.key('content'));
    if (content === '') throw w.key('content').error('an added token cannot be empty');
    const special = asBool(o.special, w.key('special'), false);
    return {
      id: asIndex(o.id, w.key('id')),
      content,
      singleWord: asBool(o.single_word, w.key('single_word'), false),
      lstrip: asBool(o.lstrip, w.key('lstrip'), false),
      rstrip: asBool(o.rstrip, w.key('rstrip'), false),
      normalized: asBool(o.normalized, w.key('normalized'), !special),
      special,
    };
  });
}

const WORD_CHAR = /[\p{L}\p{M}\p{Nd}\p{Pc}]/u; // regex crate's \w
const TRAILING_WS = /\p{White_Space}*$/u;
const LEADING_WS = /^\p{White_Space}*/u;

/** Finds one group of added tokens (the raw-text ones or the normalized-text ones) in a text. */
export class AddedTokenMatcher {
  readonly #re: RegExp | null;
  readonly #byContent: Map<string, AddedToken>;

  constructor(tokens: AddedToken[]) {
    this.#byContent = new Map(tokens.map((t) => [t.content, t]));
    // longest first: a regex alternation takes the first alternative that matches, so at each
    // position this finds the longest token (aho-corasick's LeftmostLongest)
    const contents = [...this.#byContent.keys()].sort((a, b) => b.length - a.length);
    this.#re = contents.length ? new RegExp(contents.map(escapeRegExp).join('|'), 'gu') : null;
  }

  /** Splits `text` into added tokens and the text between them (empty stretches dropped). */
  split(text: string, first: boolean): Segment[] {
    if (this.#re === null || text === '') return text === '' ? [] : [{ text, id: null, first }];
    const out: Segment[] = [];
    let offset = 0; // end of the last token taken
    for (const m of text.matchAll(this.#re)) {
      const tok = this.#byContent.get(m[0])!;
      let start = m.index!;
      let stop = start + m[0].length;
      if (tok.singleWord) {
        const before = start === 0 || !WORD_CHAR.test(lastChar(text.slice(0, start)));
        const after = stop === text.length || !WORD_CHAR.test(String.fromCodePoint(text.codePointAt(stop)!));
        if (!before || !after) continue;
      }
      if (start < offset) continue; // inside whitespace an earlier rstrip took
      if (tok.lstrip) start = Math.max(offset, TRAILING_WS.exec(text.slice(0, start))!.index);
      if (tok.rstrip) stop += LEADING_WS.exec(text.slice(stop))![0].length;
      if (offset < start) out.push({ text: text.slice(offset, start), id: null, first: first && offset === 0 });
      out.push({ text: text.slice(start, stop), id: tok.id, first: first && start === 0 });
      offset = stop;
    }
    if (offset < text.length) out.push({ text: text.slice(offset), id: null, first: first && offset === 0 });
    return out;
  }
}

function lastChar(s: string): string {
  const cp = s.codePointAt(s.length - 1)!;
  return cp >= 0xdc00 && cp <= 0xdfff && s.length >= 2 ? s.slice(-2) : s.slice(-1);
}
