/**
 * A sharded checkpoint (`model.safetensors.index.json` + the shards its `weight_map` names)
 * read as one safetensors file's byte stream: every shard is opened and its header read and
 * checked against the index first, the joined header (every tensor's offsets moved by the
 * shards before it) leads the stream, then each shard's data follows in order. The loader then
 * takes it as any file: into one wasm buffer, or converted as it streams (stream-load.ts); the
 * wasm reader checks the joined file as it checks any (dtypes, shapes, tiling).
 *
 * The joined header's size is a bound from the index's tensor names, at most a few hundred
 * bytes a tensor; the header is padded to it with spaces, as safetensors allows.
 */
import { describe, fmtBytes } from '../errors.js';
import type { ByteStream } from './files.js';

/** Where the shards come from: the index's text, and how to size and open a shard by name. */
export interface ShardedWeights {
  /** model.safetensors.index.json's text. */
  indexText: string;
  /** The index's location, for messages. */
  where: string;
  /** A shard's size in bytes when known without reading it (a file's size, a HEAD's Content-Length). */
  size: (name: string) => Promise<number | undefined>;
  /** Opens a shard as a stream (an Error when it is absent). */
  open: (name: string) => Promise<ByteStream>;
}

export const INDEX_FILE = 'model.safetensors.index.json';

/** The most dims a tensor may have (the wasm reader's limit). */
const MAX_RANK = 16;
/** The most header bytes a shard may have (the wasm reader's limit, the reference implementation's). */
const MAX_HEADER_BYTES = 100 << 20;

export interface ParsedIndex {
  /** tensor name -> shard file name */
  weightMap: Map<string, string>;
  /** the shard files, sorted by name (model-00001-of-0000N first) */
  shards: string[];
}

/** Parses and checks the index: a JSON object whose weight_map maps tensor names to shard file names. */
export function parseIndex(text: string, where: string): ParsedIndex {
  const fn = 'loadModel';
  let j: unknown;
  try {
    j = JSON.parse(text);
  } catch (e) {
    throw new SyntaxError(`${fn}: ${where} is not valid JSON: ${(e as Error).message}`);
  }
  if (j === null || typeof j !== 'object' || Array.isArray(j)) throw new TypeError(`${fn}: ${where} must hold a JSON object, got ${describe(j)}`);
  const wm = (j as { weight_map?: unknown }).weight_map;
  if (wm === null || typeof wm !== 'object' || Array.isArray(wm)) {
    throw new TypeError(`${fn}: ${where}: weight_map must be an object mapping tensor names to shard files, got ${describe(wm)}`);
  }
  const weightMap = new Map<string, string>();
  const shards: string[] = [];
  for (const [name, file] of Object.entries(wm as Record<string, unknown>)) {
    if (typeof file !== 'string') throw new TypeError(`${fn}: ${where}: weight_map["${name}"] must be a shard file name, got ${describe(file)}`);
    // a file beside the index: no folders, no '..' (the index is untrusted)
    if (!/^[\w][\w.-]*$/.test(file) || file.includes('..')) {
      throw new Error(`${fn}: ${where}: weight_map["${name}"] = ${JSON.stringify(file)} is not a file name beside the index`);
    }
    if (file === INDEX_FILE) throw new Error(`${fn}: ${where}: weight_map["${name}"] names the index itself`);
    weightMap.set(name, file);
    if (!shards.includes(file)) shards.push(file);
  }
  if (weightMap.size === 0) throw new Error(`${fn}: ${where}: weight_map is empty (no tensors)`);
  shards.sort();  // model-00001-of-0000N first, whatever order the map lists tensors in
  return { weightMap, shards };
}

/** A shard header's tensor entry, checked as far as the joined header needs (the wasm reader checks the rest). */
interface Entry {
  dtype: string;
  shape: number[];
  begin: number;
  end: number;
}

function checkEntry(v: unknown, tn: string, dataSize: number): Entry {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error(`${tn}: entry must be an object with dtype, shape, data_offsets`);
  const { dtype, shape, data_offsets: offsets } = v as Record<string, unknown>;
  for (const k of Object.keys(v)) if (!['dtype', 'shape', 'data_offsets'].includes(k)) throw new Error(`${tn}: unknown key "${k}"`);
  if (typeof dtype !== 'string' || dtype.length > 16) throw new Error(`${tn}: dtype must be a dtype name, got ${describe(dtype)}`);
  const int = (x: unknown) => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
  if (!Array.isArray(shape) || shape.length > MAX_RANK || !shape.every(int)) {
    throw new Error(`${tn}: shape must be an array of at most ${MAX_RANK} integers >= 0, got ${describe(shape)}`);
  }
  if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(int)) {
    throw new Error(`${tn}: data_offsets must be [begin, end], integers >= 0, got ${describe(offsets)}`);
  }
  const [begin, end] = offsets as number[];
  if (end < begin || end > dataSize) {
    throw new Error(`${tn}: data_offsets [${begin}, ${end}] out of range: the shard's data region holds ${dataSize} bytes`);
  }
  return { dtype, shape: shape as number[], begin, end };
}

/** Bytes reserved for the joined header: an upper bound on its JSON for these tensor names. */
export function headerBound(names: Iterable<string>): number {
  // per tensor: "name":{"dtype":"<16>","shape":[16 dims of 16 digits],"data_offsets":[<16>,<16>]},
  let n = 2;
  for (const name of names) n += JSON.stringify(name).length + 64 + MAX_RANK * 17 + 2 * 17;
  return Math.ceil(n / 8) * 8;
}

/** The bytes of a stream, pulled as asked for: the header first, then the rest chunk by chunk. */
export class Pull {
  #it: AsyncIterator<Uint8Array>;
  #left: Uint8Array = new Uint8Array(0);
  constructor(s: ByteStream) {
    this.#it = s.chunks[Symbol.asyncIterator]();
  }
  /** Exactly n bytes (copied), or fewer at the end of the stream. */
  async take(n: number): Promise<Uint8Array> {
    const out = new Uint8Array(n);
    let at = 0;
    while (at < n) {
      if (this.#left.byteLength === 0) {
        const r = await this.#it.next();
        if (r.done) return out.subarray(0, at);
        this.#left = r.value;
      }
      const k = Math.min(n - at, this.#left.byteLength);
      out.set(this.#left.subarray(0, k), at);
      this.#left = this.#left.subarray(k);
      at += k;
    }
    return out;
  }
  /** The remaining chunks (the first may be the rest of one already begun). */
  async *rest(): AsyncGenerator<Uint8Array> {
    if (this.#left.byteLength) {
      const c = this.#left;
      this.#left = new Uint8Array(0);
      yield c;
    }
    for (;;) {
      const r = await this.#it.next();
      if (r.done) return;
      yield r.value;
    }
  }
  async close(): Promise<void> {
    await this.#it.return?.();
  }
}

/** joinShards' stream; close() closes the shards (for a stream given up before it was read). */
export type JoinedShards = ByteStream & { total: number; close(): Promise<void> };

/**
 * A sharded checkpoint as one safetensors file's bytes, in order: every shard is opened and its
 * header read and checked against the index first (so the joined header, with each tensor's
 * offsets moved by the shards before it, leads the stream), then each shard's data follows.
 * `total` is the joined file's size; the stream closes every shard when it ends, fails or is
 * returned early. `progress(loaded, total, file)`: bytes of all shards read so far, of the sum
 * of their sizes (file: the shard being read).
 */
export async function joinShards(
  w: ShardedWeights, signal: AbortSignal | undefined,
  progress: (loaded: number, total: number, file: string) => void,
): Promise<JoinedShards> {
  const fn = 'loadModel';
  const { weightMap, shards } = parseIndex(w.indexText, w.where);
  const shardWhere = (name: string) => `${name} (a shard ${w.where} names)`;
  // sizes first: the joined file's size is known before any data
  const sizes: number[] = [];
  for (const name of shards) {
    signal?.throwIfAborted();
    let size: number | undefined;
    try {
      size = await w.size(name);
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      throw new Error(`${fn}: ${w.where} maps tensors to ${name}, which cannot be read: ${(e as Error).message}`);
    }
    if (size === undefined) throw new Error(`${fn}: ${shardWhere(name)}: its size is not known before reading (no Content-Length)`);
    sizes.push(size);
  }
  const total = sizes.reduce((a, b) => a + b, 0);
  const reserved = headerBound(weightMap.keys());
  const joined: Record<string, Entry> = {};
  const seenIn = new Map<string, string>();
  const opened: { name: string; pull: Pull; size: number; dataSize: number; where: string }[] = [];
  const closeAll = async () => {
    for (const o of opened.splice(0)) await o.pull.close();
  };
  let dataAt = 0;  // the joined file's data offset of the next shard
  let loaded = 0;
  try {
    for (let i = 0; i < shards.length; i++) {
      const name = shards[i];
      const size = sizes[i];
      let s: ByteStream;
      try {
        s = await w.open(name);
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        throw new Error(`${fn}: ${w.where} maps tensors to ${name}, which cannot be read: ${(e as Error).message}`);
      }
      const where = `${fn}: ${shardWhere(name)}`;
      const pull = new Pull(s);
      opened.push({ name, pull, size, dataSize: 0, where });
      const h = await readShardHeader(pull, size, where);
      opened[opened.length - 1].dataSize = h.dataSize;
      loaded += size - h.dataSize;
      progress(loaded, total, name);
      for (const [t, v] of Object.entries(h.header)) {
        if (t === '__metadata__') continue;
        const before = seenIn.get(t);
        if (before !== undefined) throw new Error(`${where}: holds tensor "${t}", which ${before} holds too`);
        seenIn.set(t, name);
        const mapped = weightMap.get(t);
        if (mapped === undefined) throw new Error(`${where}: holds tensor "${t}", which the index's weight_map does not map`);
        if (mapped !== name) throw new Error(`${where}: holds tensor "${t}", which the index's weight_map puts in ${mapped}`);
        const e = checkEntry(v, `${where}: tensor "${t}"`, h.dataSize);
        joined[t] = { ...e, begin: e.begin + dataAt, end: e.end + dataAt };
      }
      dataAt += h.dataSize;
    }
    for (const [t, file] of weightMap) {
      if (!(t in joined)) throw new Error(`${fn}: ${w.where}: weight_map puts tensor "${t}" in ${file}, whose header lacks it`);
    }
  } catch (e) {
    await closeAll();
    throw e;
  }
  const headerText = JSON.stringify(Object.fromEntries(Object.entries(joined).map(([t, e]) => [t, { dtype: e.dtype, shape: e.shape, data_offsets: [e.begin, e.end] }])));
  const header = new TextEncoder().encode(headerText);
  if (header.byteLength > reserved) {
    await closeAll();
    throw new Error(`${fn}: internal: the joined header (${fmtBytes(header.byteLength)}) exceeds its bound`);
  }
  const head = new Uint8Array(8 + reserved).fill(0x20);  // spaces: JSON whitespace, as safetensors pads
  new DataView(head.buffer).setBigUint64(0, BigInt(reserved), true);
  head.set(header, 8);
  async function* chunks(): AsyncGenerator<Uint8Array> {
    try {
      yield head;
      for (const o of opened) {
        let got = 0;
        for await (const chunk of o.pull.rest()) {
          signal?.throwIfAborted();
          if (got + chunk.byteLength > o.dataSize) throw new Error(`${o.where}: holds more than the ${o.size} bytes announced`);
          got += chunk.byteLength;
          loaded += chunk.byteLength;
          progress(loaded, total, o.name);
          yield chunk;
        }
        signal?.throwIfAborted();
        if (got < o.dataSize) throw new Error(`${o.where}: truncated: ${o.size - o.dataSize + got} of its ${o.size} bytes arrived`);
      }
    } finally {
      await closeAll();
    }
  }
  return { total: 8 + reserved + dataAt, chunks: chunks(), where: w.where, close: closeAll };
}

/** A shard's 8-byte length and JSON header, checked against its size; returns the header and the data's size. */
async function readShardHeader(pull: Pull, size: number, where: string): Promise<{ header: Record<string, unknown>; dataSize: number }> {
  const lenBytes = await pull.take(8);
  if (lenBytes.byteLength < 8) throw new Error(`${where}: ${size} bytes, too short for the 8-byte header length`);
  const n = Number(new DataView(lenBytes.buffer).getBigUint64(0, true));
  if (!Number.isSafeInteger(n) || n > size - 8 || n > MAX_HEADER_BYTES || n < 2) {
    throw new Error(`${where}: header length ${n} does not fit the file (${size} bytes; at most ${MAX_HEADER_BYTES})`);
  }
  const headerBytes = await pull.take(n);
  if (headerBytes.byteLength < n) throw new Error(`${where}: the file ends inside its ${n}-byte header`);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8').decode(headerBytes));
  } catch (e) {
    throw new Error(`${where}: header is not valid JSON (${(e as Error).message})`);
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header)) throw new Error(`${where}: header is not a JSON object`);
  return { header: header as Record<string, unknown>, dataSize: size - 8 - n };
}
