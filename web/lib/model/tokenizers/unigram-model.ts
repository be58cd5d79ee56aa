/**
 * The Unigram model (SentencePiece's unigram language model; tokenizers' `models/unigram`), as
 * XLM-RoBERTa, T5, ALBERT and many multilingual embedders use it: each word is split into the
 * pieces whose summed log-probabilities (the vocabulary's scores) are highest (Viterbi).
 *
 * As tokenizers does it (unigram/model.rs, encode_optimized): a character that starts no
 * one-character piece is an unknown node scored min_score - 10; among equal scores the path
 * whose last piece starts earliest wins; consecutive unknown characters are one [UNK]
 * (fuse_unk, always on for Unigram), or with byte_fallback their UTF-8 bytes as `<0xNN>`.
 */
import { byteTokenName } from './bpe-model.js';
import { type JsonObject, type Where, asArray, asBool, asIndex, asString } from './json.js';

export interface UnigramModel {
  readonly type: 'Unigram';
  readonly byteFallback: boolean;
  /** token string -> id */
  readonly vocab: Map<string, number>;
  /** Token ids of one word. */
  tokenize(word: string): number[];
}

/** tokenizers' K_UNK_PENALTY: an unknown character scores this much below the lowest piece. */
const UNK_PENALTY = 10;

const utf8 = new TextEncoder();

export function makeUnigram(pieces: [string, number][], unkId: number | null, byteFallback: boolean, at: Where): UnigramModel {
  const vocab = new Map<string, number>();
  const scores = new Float64Array(pieces.length);
  let minScore = Infinity;
  let maxLen = 0;
  pieces.forEach(([p, s], id) => {
    if (!vocab.has(p)) vocab.set(p, id); // the first of a repeated piece, as tokenizers' token_to_ids
    scores[id] = s;
    minScore = Math.min(minScore, s);
    maxLen = Math.max(maxLen, p.length);
  });
  const unkScore = minScore - UNK_PENALTY;
  if (unkId !== null && unkId >= pieces.length) throw at.key('unk_id').error(`${unkId} is not an index into model.vocab (${pieces.length} pieces)`);
  const byteIds = byteFallback ? Array.from({ length: 256 }, (_, b) => vocab.get(byteTokenName(b))) : [];

  /** The best split of `s` (UTF-16 offsets): the pieces' strings and whether each is unknown. */
  function split(s: string): { text: string; unk: boolean }[] {
    const n = s.length;
    const best = new Float64Array(n + 1);
    const from = new Int32Array(n + 1).fill(-1); // where the best path's last piece starts
    const id = new Int32Array(n + 1);
    from[0] = 0;
    for (let start = 0; start < n; ) {
      const cp = s.codePointAt(start)!;
      const charLen = cp > 0xffff ? 2 : 1;
      if (from[start] < 0) { start += charLen; continue; } // unreachable (cannot happen: every char has a node)
      const base = best[start];
      let single = false;
      for (let len = 1; len <= maxLen && start + len <= n; len++) {
        const v = vocab.get(s.slice(start, start + len));
        if (v === undefined) continue;
        const end = start + len;
        const score = base + scores[v];
        if (from[end] < 0 || score > best[end]) { best[end] = score; from[end] = start; id[end] = v; }
        if (len === charLen) single = true;
      }
      if (!single) {
        const end = start + charLen;
        const score = base + unkScore;
        if (from[end] < 0 || score > best[end]) { best[end] = score; from[end] = start; id[end] = -1; }
      }
      start += charLen;
    }
    const out: { text: string; unk: boolean }[] = [];
    for (let end = n; end > 0; end = from[end]) out.push({ text: s.slice(from[end], end), unk: id[end] === -1 || id[end] === unkId });
    return out.reverse();
  }

  return {
    type: 'Unigram',
    byteFallback,
    vocab,
    tokenize(word: string): number[] {
      if (word.length === 0) return [];
      const ids: number[] = [];
      let unk = '';
      const flush = () => {
        if (unk === '') return;
        const bytes = byteFallback ? Array.from(utf8.encode(unk), (b) => byteIds[b]) : [];
        if (byteFallback && bytes.every((b) => b !== undefined)) ids.push(...(bytes as number[]));
        else {
          if (unkId === null) throw new Error(`tokenizer.encode: ${JSON.stringify(unk)} has no piece in the Unigram vocabulary and the model has no unk_id`);
          ids.push(unkId);
        }
        unk = '';
      };
      for (const p of split(word)) {
        if (p.unk) { unk += p.text; continue; }
        flush();
        ids.push(vocab.get(p.text)!);
      }
      flush();
      return ids;
    },
  };
}

/** tokenizer.json `model` of type Unigram: vocab [[piece, score], ...], unk_id, byte_fallback. */
export function parseUnigramModel(o: JsonObject, at: Where): UnigramModel {
  const vAt = at.key('vocab');
  const pieces = asArray(o.vocab, vAt).map((e, i): [string, number] => {
    const a = asArray(e, vAt.index(i));
    if (a.length !== 2 || typeof a[1] !== 'number' || !Number.isFinite(a[1])) throw vAt.index(i).error('expected [piece, score] with a finite score');
    return [asString(a[0], vAt.index(i).index(0)), a[1]];
  });
  if (pieces.length === 0) throw vAt.error('is empty');
  const unkId = o.unk_id === null || o.unk_id === undefined ? null : asIndex(o.unk_id, at.key('unk_id'));
  return makeUnigram(pieces, unkId, asBool(o.byte_fallback, at.key('byte_fallback'), false), at);
}
