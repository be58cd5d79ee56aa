/**
 * The BPE model of a tokenizer.json (tokenizers' `models/bpe`): a word's characters become
 * vocabulary ids (unknown ones become `<0xNN>` byte tokens with byte_fallback, or the unknown
 * token), then the adjacent pair with the lowest merge rank is merged, leftmost first, until no
 * pair merges. A binary heap keeps this O(n log n) in the word's length: SentencePiece-style
 * tokenizers without a pre-tokenizer hand the model a whole paragraph as one word.
 */
import { type JsonObject, type Where, asArray, asBool, asIndex, asObject, asString, isIndex } from './json.js';

export interface BpeModel {
  readonly type: 'BPE';
  readonly byteFallback: boolean;
  /** token string -> id */
  readonly vocab: Map<string, number>;
  /** Token ids of one word. */
  tokenize(word: string): number[];
}

const utf8 = new TextEncoder();

/** `<0xNN>`, the name of byte NN in a byte-fallback vocabulary. */
export function byteTokenName(b: number): string {
  return `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`;
}

export function parseVocab(v: unknown, at: Where): Map<string, number> {
  const o = asObject(v, at);
  const vocab = new Map<string, number>();
  for (const [tok, id] of Object.entries(o)) {
    if (!isIndex(id)) asIndex(id, at.key(JSON.stringify(tok))); // throws, naming the token
    vocab.set(tok, id as number);
  }
  return vocab;
}

/** tokenizer.json `model` of type BPE. */
export function parseBpeModel(o: JsonObject, at: Where): BpeModel {
  if (o.dropout !== null && o.dropout !== undefined && o.dropout !== 0) {
    throw at.key('dropout').error(`BPE dropout ${JSON.stringify(o.dropout)} is random at encoding time; only null or 0 is supported`);
  }
  const vocab = parseVocab(o.vocab, at.key('vocab'));
  const opt = (k: string) => (o[k] === null || o[k] === undefined ? null : asString(o[k], at.key(k)));
  const unkToken = opt('unk_token');
  const prefix = opt('continuing_subword_prefix');
  const suffix = opt('end_of_word_suffix');
  const fuseUnk = asBool(o.fuse_unk, at.key('fuse_unk'), false);
  const byteFallback = asBool(o.byte_fallback, at.key('byte_fallback'), false);
  const ignoreMerges = asBool(o.ignore_merges, at.key('ignore_merges'), false);
  let unkId: number | null = null;
  if (unkToken !== null) {
    unkId = vocab.get(unkToken) ?? null;
    if (unkId === null) throw at.key('unk_token').error(`${JSON.stringify(unkToken)} is not in model.vocab`);
  }

  // merges: "a b" strings (older files) or [a, b] pairs
  const mAt = at.key('merges');
  const list = asArray(o.merges, mAt);
  // pair (idA, idB) -> rank * 2^22 + merged id: one map lookup per candidate pair
  const pairKey = (a: number, b: number) => a * 0x80000000 + b;
  const ID_BITS = 0x400000;
  const merges = new Map<number, number>();
  const idOf = (tok: string, where: () => Where, what = 'merge token') => {
    const id = vocab.get(tok);
    if (id === undefined) throw where().error(`${what} ${JSON.stringify(tok)} is not in model.vocab`);
    return id;
  };
  list.forEach((m, rank) => {
    const where = () => mAt.index(rank); // built only for an error message
    let a: string;
    let b: string;
    if (typeof m === 'string') {
      const space = m.indexOf(' ');
      if (space <= 0 || space === m.length - 1 || m.indexOf(' ', space + 1) >= 0) {
        throw where().error(`expected "a b" (two tokens and one space), got ${JSON.stringify(m)}`);
      }
      a = m.slice(0, space);
      b = m.slice(space + 1);
    } else if (Array.isArray(m) && m.length === 2 && typeof m[0] === 'string' && typeof m[1] === 'string') {
      [a, b] = m as [string, string];
    } else {
      throw where().error(`expected "a b" or a pair ["a", "b"], got ${JSON.stringify(m)?.slice(0, 60)}`);
    }
    if (prefix !== null && !b.startsWith(prefix)) throw where().error(`${JSON.stringify(b)} lacks the continuing_subword_prefix ${JSON.stringify(prefix)}`);
    const key = pairKey(idOf(a, where), idOf(b, where));
    const id = idOf(a + (prefix === null ? b : b.slice(prefix.length)), where, 'the merged token');
    if (id >= ID_BITS) throw where().error(`the merged token's id ${id} is beyond the ${ID_BITS} ids qkv's BPE handles`);
    merges.set(key, rank * ID_BITS + id); // a repeated pair keeps its last rank, as tokenizers' HashMap does
  });

  const cache = new Map<string, number[]>();

  /** The word's characters as symbol ids, before any merge (tokenizers' merge_word). */
  function symbols(word: string): number[] {
    const ids: number[] = [];
    const chars = Array.from(word);
    let unk = false; // the last symbol is an unknown token that fuse_unk may extend
    chars.forEach((ch, i) => {
      let s = ch;
      if (i > 0 && prefix !== null) s = prefix + s;
      if (i === chars.length - 1 && suffix !== null) s += suffix;
      const id = vocab.get(s);
      if (id !== undefined) {
        ids.push(id);
        unk = false;
        return;
      }
      if (byteFallback) {
        const bytes = Array.from(utf8.encode(s), (b) => vocab.get(byteTokenName(b)));
        if (bytes.every((b) => b !== undefined)) {
          ids.push(...(bytes as number[]));
          unk = false;
          return;
        }
      }
      // no unk_token: tokenizers drops the character
      if (unkId === null) return;
      if (!(unk && fuseUnk)) ids.push(unkId);
      unk = true;
    });
    return ids;
  }

  /** Merges by rank (tokenizers' Word::merge_all): heap of (rank, position), stale entries skipped. */
  function merge(ids: number[]): number[] {
    const n = ids.length;
    if (n < 2) return ids;
    const sym = Int32Array.from(ids);
    const next = new Int32Array(n);
    const prev = new Int32Array(n);
    const alive = new Uint8Array(n).fill(1);
    for (let i = 0; i < n; i++) {
      next[i] = i + 1 < n ? i + 1 : -1;
      prev[i] = i - 1;
    }
    const heap = new MergeHeap();
    const push = (pos: number) => {
      const m = next[pos] < 0 ? undefined : merges.get(pairKey(sym[pos], sym[next[pos]]));
      if (m !== undefined) heap.push(m, pos);
    };
    for (let i = 0; i < n - 1; i++) push(i);
    while (heap.size > 0) {
      const [m, pos] = heap.pop(); // m: rank and merged id, so the heap orders by rank
      if (!alive[pos] || next[pos] < 0) continue;
      const right = next[pos];
      if (merges.get(pairKey(sym[pos], sym[right])) !== m) continue; // the pair at pos changed since this entry was pushed
      sym[pos] = m % ID_BITS;
      alive[right] = 0;
      next[pos] = next[right];
      if (next[pos] >= 0) prev[next[pos]] = pos;
      if (prev[pos] >= 0) push(prev[pos]);
      push(pos);
    }
    const out: number[] = [];
    for (let i = 0; i >= 0; i = next[i]) out.push(sym[i]);
    return out;
  }

  return {
    type: 'BPE',
    byteFallback,
    vocab,
    tokenize(word: string): number[] {
      if (word.length === 0) return [];
      if (ignoreMerges) {
        const id = vocab.get(word);
        if (id !== undefined) return [id];
      }
      const hit = cache.get(word);
      if (hit) return hit;
      const ids = merge(symbols(word));
      if (word.length < 256 && cache.size < 10000) cache.set(word, ids);
      return ids;
    },
  };
}

/** A binary min-heap of (rank, position), ordered by rank, then position (leftmost first). */
class MergeHeap {
  #rank: number[] = [];
  #pos: number[] = [];
  get size(): number {
    return this.#rank.length;
  }
  #less(i: number, j: number): boolean {
    const r = this.#rank;
    return r[i] < r[j] || (r[i] === r[j] && this.#pos[i] < this.#pos[j]);
  }
  #swap(i: number, j: number): void {
    const r = this.#rank;
    const p = this.#pos;
    [r[i], r[j]] = [r[j], r[i]];
    [p[i], p[j]] = [p[j], p[i]];
  }
  push(rank: number, pos: number): void {
    this.#rank.push(rank);
    this.#pos.push(pos);
    for (let i = this.#rank.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (!this.#less(i, parent)) break;
      this.#swap(i, parent);
      i = parent;
    }
  }
  pop(): [number, number] {
    const top: [number, number] = [this.#rank[0], this.#pos[0]];
    const last = this.#rank.length - 1;
    this.#swap(0, last);
    this.#rank.pop();
    this.#pos.pop();
    const n = this.#rank.length;
    for (let i = 0; ; ) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < n && this.#less(l, m)) m = l;
      if (r < n && this.#less(r, m)) m = r;
      if (m === i) break;
      this.#swap(i, m);
      i = m;
    }
    return top;
  }
}
