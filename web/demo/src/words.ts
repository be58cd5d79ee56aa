// Word view: merges a model's tokens (bytes, BPE pieces) into words so the maps can be read by
// words whatever the tokenizer.
//
// What a word is: one piece of GPT-2's pre-tokenizer regex over the decoded text: a run of
// letters, a run of digits or a run of other symbols, each with at most one space before it
// (" beginning", " 3", ","), a contraction ("'s"), or a run of whitespace ("\n"). A token
// belongs to the word that holds its first byte. GPT-2 BPE encodes each piece on its own, so for
// an encoded prompt a BPE model's words are exactly its pieces; for a byte-level model a word is
// the run of bytes that spell it; generated tokens are grouped by the text they spell.
//
// The rule for the weights (WORD_RULE): the weight from query word a to key word b is the sum
// over b's tokens (a word receives what its tokens receive) of the mean over a's tokens (a word
// asks what its tokens ask, on average). Each word row therefore still sums to 1: every token row
// sums to 1 over all keys, so summing over key groups keeps 1 and the mean of 1s is 1.
import type { AttnData } from './contract';

export const WORD_RULE =
  'Words: a word is a run of letters, digits or punctuation with at most one space before it, or a run of whitespace ' +
  '(the pieces of GPT-2\'s pre-tokenizer); the weight from word A to word B is the sum over B\'s tokens of the mean over A\'s tokens, so each row still sums to 1.';

/** GPT-2's pre-tokenizer, as web/lib/model/tokenizer.ts GPT2_PATTERN (a test checks they agree). */
export const WORD_PATTERN =
  /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+/gu;

export interface Words {
  /** word index of each token (0, 0, 1, 2, 2, …: non-decreasing, steps of 1) */
  wordOf: number[];
  /** first token of each word, then the number of tokens: word w = tokens start[w] .. start[w+1]-1 */
  start: number[];
  /** each word's text (its tokens' bytes decoded together) */
  text: string[];
}

const fatal = new TextDecoder('utf-8', { fatal: true });
const lenient = new TextDecoder('utf-8');

/** Decodes UTF-8 and remembers, for each UTF-16 code unit, the offset of its character's first byte. */
function decodeWithOffsets(bytes: Uint8Array): { text: string; unitByte: number[] } {
  let text = '';
  const unitByte: number[] = [];
  for (let i = 0; i < bytes.length;) {
    const b = bytes[i];
    const n = b < 0x80 ? 1 : b >= 0xc2 && b < 0xe0 ? 2 : b >= 0xe0 && b < 0xf0 ? 3 : b >= 0xf0 && b < 0xf5 ? 4 : 0;
    let ch = '\ufffd', used = 1; // an invalid byte stands alone as U+FFFD
    if (n > 0 && i + n <= bytes.length) {
      try { ch = fatal.decode(bytes.subarray(i, i + n)); used = n; } catch { /* invalid sequence */ }
    }
    for (let u = 0; u < ch.length; u++) unitByte.push(i);
    text += ch;
    i += used;
  }
  return { text, unitByte };
}

/** Groups tokens, given as their UTF-8 bytes, into words (see the top of this file). */
export function groupWords(tokenBytes: Uint8Array[]): Words {
  const L = tokenBytes.length;
  const offset: number[] = [0]; // offset[t] = first byte of token t; offset[L] = total
  for (const b of tokenBytes) offset.push(offset[offset.length - 1] + b.length);
  const all = new Uint8Array(offset[L]);
  tokenBytes.forEach((b, t) => all.set(b, offset[t]));
  // byte offset where each pre-tokenizer piece starts
  const { text, unitByte } = decodeWithOffsets(all);
  const pieceStart = Array.from(text.matchAll(WORD_PATTERN), (m) => unitByte[m.index!]);
  // token t -> the last piece starting at or before its first byte; a new word when that changes
  const wordOf: number[] = [], start: number[] = [];
  let piece = -1, lastPiece = -2;
  for (let t = 0; t < L; t++) {
    while (piece + 1 < pieceStart.length && pieceStart[piece + 1] <= offset[t]) piece++;
    if (piece !== lastPiece) { start.push(t); lastPiece = piece; }
    wordOf.push(start.length - 1);
  }
  start.push(L);
  const words = start.slice(0, -1).map((s, w) => lenient.decode(all.subarray(offset[s], offset[start[w + 1]])));
  return { wordOf, start, text: words };
}

/**
 * One head's token rows [L][<=L] -> word rows [W][W]: out[a][b] = mean over query tokens i of
 * word a of the sum over key tokens j of word b of rows[i][j]. Entries a row lacks count as 0.
 */
export function mergeRows(rows: Float32Array[], words: Words): Float32Array[] {
  const W = words.text.length;
  return Array.from({ length: W }, (_v, a) => {
    const out = new Float32Array(W);
    const i0 = words.start[a], i1 = words.start[a + 1];
    for (let i = i0; i < i1; i++) {
      const r = rows[i];
      for (let j = 0; j < r.length && j < words.wordOf.length; j++) out[words.wordOf[j]] += r[j];
    }
    for (let b = 0; b < W; b++) out[b] /= i1 - i0;
    return out;
  });
}

/**
 * The same attention read by words: tokens = word texts, attn merged by mergeRows, a word is
 * in the prompt when its first token is, ids = each word's last token (the one whose
 * prediction follows the word). Queries/keys are per token and are left out.
 */
export function wordData(d: AttnData, words: Words): AttnData {
  if (words.wordOf.length !== d.tokens.length) {
    throw new RangeError(`wordData: ${words.wordOf.length} tokens were grouped, the data has ${d.tokens.length}`);
  }
  const W = words.text.length;
  return {
    tokens: words.text.slice(),
    ids: Array.from({ length: W }, (_v, w) => d.ids[words.start[w + 1] - 1]),
    promptLength: d.promptLength > 0 ? words.wordOf[Math.min(d.promptLength, d.tokens.length) - 1] + 1 : 0,
    nLayer: d.nLayer, nHead: d.nHead, headDim: d.headDim, scale: d.scale, kvHeads: d.kvHeads, rotary: d.rotary,
    // windows count token positions, not words: left out (the merged rows carry the window's effect)
    attn: d.attn.map((layer) => layer.map((rows) => mergeRows(rows, words))),
  };
}
