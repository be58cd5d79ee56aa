/**
 * GGUF files (llama.cpp's format) as loadModel's sources: which sources are GGUF (a path or URL
 * ending in .gguf, a Blob / File, `{ gguf }`, a Hub id with `options.file`), and the header read
 * from the stream's first bytes by the wasm reader (src/model/gguf.hpp: every offset, size,
 * count and string length checked), which gives the config.json the models read and the
 * metadata the tokenizer is rebuilt from (tokenizers/gguf-tokenizer.ts). The weights then stream
 * through the same decoder loads as a safetensors file's (load.ts, stream-load.ts).
 */
import { describe } from '../errors.js';
import { heapU8, wasmError } from '../wasm/heap.js';
import type { QkvModule } from '../wasm/module.js';
import { blobChunks, openFile, readAll, type ByteStream } from './files.js';
import { openHubFile } from './hub/index.js';
import type { LoadProgress } from './load.js';
import { Pull } from './shards.js';
import type { GgufMetadata } from './tokenizers/gguf-tokenizer.js';

/** A GGUF file's bytes as a loadModel source. */
export interface GgufFile {
  /** The whole file: its bytes, or a Blob / File holding them. */
  gguf: ArrayBuffer | Uint8Array | Blob;
}

/** What loadModel needs of a GGUF file: its stream, and the options it was opened with. */
interface GgufOpen {
  revision?: string;
  file?: string;
  signal?: AbortSignal;
  onProgress?: (p: LoadProgress) => void;
}

/** The first header read: 1 MiB, doubled until the header fits (a vocabulary of 256k pieces takes ~6 MB). */
const FIRST_HEAD_BYTES = 1 << 20;

const endsWithGguf = (s: string) => /\.gguf$/i.test(s.replace(/[?#].*$/, ''));

/**
 * The source as a GGUF file's stream, or null when it is not one (a checkpoint folder, Hub id
 * or files object: loadModel's other paths). `hubId`: the source is a Hub id.
 */
export async function ggufStream(source: unknown, hubId: boolean, o: GgufOpen): Promise<ByteStream | null> {
  const fn = 'loadModel';
  if (hubId) {
    if (o.file === undefined) return null;
    return openHubFile(source as string, o.file, { revision: o.revision, signal: o.signal, onProgress: o.onProgress });
  }
  if (o.file !== undefined) throw new TypeError(`${fn}: options.file is only for a Hub id ('owner/name'), and source is ${describe(source)}`);
  if ((typeof source === 'string' || source instanceof URL) && endsWithGguf(typeof source === 'string' ? source : source.pathname)) {
    return openFile(source, o.signal);
  }
  if (typeof Blob !== 'undefined' && source instanceof Blob) return blobStream(source, (source as { name?: string }).name ?? 'the Blob');
  if (source !== null && typeof source === 'object' && 'gguf' in source) {
    const keys = Object.keys(source);
    if (keys.length !== 1) throw new TypeError(`${fn}: a { gguf } source takes no other keys, got ${keys.map((k) => `'${k}'`).join(', ')}`);
    const b = (source as GgufFile).gguf;
    if (b instanceof ArrayBuffer) return bytes(new Uint8Array(b));
    if (b instanceof Uint8Array) return bytes(b);
    if (typeof Blob !== 'undefined' && b instanceof Blob) return blobStream(b, 'source.gguf');
    throw new TypeError(`${fn}: source.gguf must be an ArrayBuffer, a Uint8Array or a Blob (the .gguf file's bytes), got ${describe(b)}`);
  }
  return null;
}

function bytes(u: Uint8Array): ByteStream {
  return { total: u.byteLength, chunks: (async function* () { yield u; })(), where: 'source.gguf' };
}

function blobStream(b: Blob, where: string): ByteStream {
  return { total: b.size, chunks: blobChunks(b), where };
}

/** The wasm reader's answer for a header. */
interface GgufHeader {
  config: Record<string, unknown>;
  metadata: GgufMetadata;
}

/** A read GGUF header: the config and metadata, the bytes taken (`head`) and the rest (`pull`). */
export interface GgufHead extends GgufHeader {
  configText: string;
  head: Uint8Array;
  pull: Pull;
  total: number;
}

/**
 * Reads the header of the GGUF stream `s`: its first MiB, then twice as much, until the wasm
 * reader has all of it. A stream of unknown size is read whole first. Damage is an Error
 * naming the file and what is wrong.
 */
export async function readGgufHead(m: QkvModule, s: ByteStream, signal: AbortSignal | undefined): Promise<GgufHead> {
  const fn = 'loadModel';
  if (s.total === undefined) {
    const all = await readAll(s);
    s = { total: all.byteLength, chunks: (async function* () { yield all; })(), where: s.where };
  }
  const total = s.total!;
  const pull = new Pull(s);
  const header = (m as unknown as { ggufHeader?: (p: number, n: number, size: number) => string }).ggufHeader;
  if (!header) throw new Error(`${fn}: this build of the wasm module lacks the GGUF bindings (wasm/bindings_gguf.cpp)`);
  try {
    let head = await pull.take(Math.min(total, FIRST_HEAD_BYTES));
    for (;;) {
      signal?.throwIfAborted();
      const p = m._malloc(Math.max(1, head.byteLength)) >>> 0;
      if (!p) throw new RangeError(`${fn}: out of wasm memory for ${s.where}'s header (${head.byteLength} bytes)`);
      let answer: string;
      try {
        heapU8(m).set(head, p);
        answer = header(p, head.byteLength, total);
      } finally {
        m._free(p);
      }
      if (answer === 'more' && head.byteLength < total) {
        const more = await pull.take(Math.min(total - head.byteLength, head.byteLength));
        const joined = new Uint8Array(head.byteLength + more.byteLength);
        joined.set(head);
        joined.set(more, head.byteLength);
        if (more.byteLength === 0) throw new Error(`${fn}: ${s.where}: the file ends inside its GGUF header (${head.byteLength} of ${total} bytes arrived)`);
        head = joined;
        continue;
      }
      if (!answer.startsWith('{')) {
        const e = wasmError(fn, answer === 'more' ? 'the GGUF header is truncated' : answer);
        e.message = e.message.replace(/^loadModel: /, `loadModel: ${s.where}: `);
        throw e;
      }
      const parsed = JSON.parse(answer) as GgufHeader;
      return { ...parsed, configText: JSON.stringify(parsed.config), head, pull, total };
    }
  } catch (e) {
    await pull.close();
    throw e;
  }
}
