/**
 * The `Precompiled` normalizer: SentencePiece's normalization rules (nmt_nfkc and the like) as
 * the model file carries them, a `precompiled_charsmap` (base64 in tokenizer.json):
 *
 *   u32 LE trie size in bytes | the trie: a darts-clone double array of u32 units
 *                             | the replacements: NUL-terminated UTF-8 strings
 *
 * The trie maps UTF-8 byte strings to an offset into the replacements. Applied as tokenizers
 * does (normalizers/precompiled.rs with the spm_precompiled crate): text is cut into grapheme
 * clusters; a cluster shorter than 6 bytes whose bytes start with a rule is replaced whole by
 * that rule's replacement (the shortest matching rule: the first common-prefix result);
 * otherwise each character is looked up alone, and kept when no rule starts it.
 * (transformers.js and @lenml/tokenizers approximate this with NFKC and a few replacements.)
 * Every offset read from the file is checked: a damaged charsmap is an Error, never a wrong read.
 */
import { type Where } from './json.js';

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

// darts-clone unit fields
const hasLeaf = (u: number) => ((u >>> 8) & 1) === 1;
const value = (u: number) => u & 0x7fffffff;
const label = (u: number) => u & 0x800000ff;
const offset = (u: number) => (u >>> 10) << ((u & (1 << 9)) >>> 6);

function base64Bytes(s: string, at: Where): Uint8Array {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 === 1) throw at.error('is not base64');
  const g = globalThis as { atob?: (s: string) => string; Buffer?: { from(s: string, enc: string): Uint8Array } };
  if (g.Buffer) return new Uint8Array(g.Buffer.from(s, 'base64'));
  const bin = g.atob!(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export class PrecompiledCharsmap {
  readonly #units: Uint32Array;
  readonly #pool: Uint8Array;
  readonly #cache = new Map<string, string | null>();
  readonly #segmenter: { segment(s: string): Iterable<{ segment: string }> } | null;

  /** From the charsmap's bytes; a size that does not fit the data is an Error naming `at`. */
  constructor(bytes: Uint8Array, at: Where) {
    if (bytes.length < 4) throw at.error(`holds ${bytes.length} bytes, fewer than the 4 of its trie size`);
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const trieBytes = dv.getUint32(0, true);
    if (trieBytes % 4 !== 0 || trieBytes === 0 || 4 + trieBytes > bytes.length) {
      throw at.error(`trie size ${trieBytes} bytes does not fit the ${bytes.length - 4} bytes after it (a non-zero multiple of 4)`);
    }
    this.#units = new Uint32Array(trieBytes / 4);
    for (let i = 0; i < this.#units.length; i++) this.#units[i] = dv.getUint32(4 + 4 * i, true);
    this.#pool = bytes.slice(4 + trieBytes);
    try {
      utf8Decoder.decode(this.#pool);
    } catch {
      throw at.error('replacement strings are not UTF-8');
    }
    const Seg = (Intl as unknown as { Segmenter?: new (l?: string, o?: object) => { segment(s: string): Iterable<{ segment: string }> } }).Segmenter;
    this.#segmenter = Seg ? new Seg(undefined, { granularity: 'grapheme' }) : null;
  }

  static fromBase64(s: string, at: Where): PrecompiledCharsmap {
    return new PrecompiledCharsmap(base64Bytes(s, at), at);
  }

  /** The replacement offset of the shortest rule that starts `key`, or -1 (darts' common prefix search, first result). */
  #firstPrefix(key: Uint8Array): number {
    const u = this.#units;
    let node = 0;
    if (u.length === 0) return -1;
    node ^= offset(u[0]);
    for (const c of key) {
      if (c === 0) return -1;
      node ^= c;
      if (node >= u.length) return -1;
      const unit = u[node];
      if (label(unit) !== c) return -1;
      node ^= offset(unit);
      if (node >= u.length) return -1;
      if (hasLeaf(unit)) return value(u[node]);
    }
    return -1;
  }

  /** The replacement for `chunk` (a cluster or one character), or null when no rule starts it. */
  transform(chunk: string): string | null {
    const hit = this.#cache.get(chunk);
    if (hit !== undefined) return hit;
    const at = this.#firstPrefix(utf8.encode(chunk));
    let out: string | null = null;
    if (at >= 0 && at < this.#pool.length) {
      let end = at;
      while (end < this.#pool.length && this.#pool[end] !== 0) end++;
      try {
        out = utf8Decoder.decode(this.#pool.subarray(at, end));
      } catch {
        out = null; // a rule pointing into the middle of a character: ignored, as tokenizers' get() fails
      }
    }
    if (this.#cache.size < 65536) this.#cache.set(chunk, out);
    return out;
  }

  #graphemes(s: string): Iterable<string> {
    if (!this.#segmenter) return Array.from(s); // no Intl.Segmenter: character by character
    return Array.from(this.#segmenter.segment(s), (x) => x.segment);
  }

  normalize(s: string): string {
    let out = '';
    for (const g of this.#graphemes(s)) {
      if (utf8.encode(g).length < 6) {
        const r = this.transform(g);
        if (r !== null) { out += r; continue; }
      }
      for (const c of g) out += this.transform(c) ?? c;
    }
    return out;
  }
}
