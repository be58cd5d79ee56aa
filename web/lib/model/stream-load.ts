/**
 * A model loaded while model.safetensors (or a sharded checkpoint, joined: shards.ts) streams
 * in: an encoder or the encoder-decoder always, a decoder (GPT-2, the Llama family) for a load
 * that converts its weights ('f16', 'int8', 'int4', or a file whose tensors are unaligned):
 * the header is read first and every tensor checked against the config, then the file's
 * bytes go through one small wasm buffer, chunk by chunk, and each tensor is converted as it
 * completes (src/model/decoder_stream.hpp). The wasm heap holds the converted weights and a
 * few MB of scratch, never the whole file: GPT-2 small's 475 MB F32 file loads as 'int4' in
 * ~80 MB of heap (bench/model/load_peak.mjs), and a file larger than the heap's 4 GB can load
 * as 'int4' or 'int8' if what it becomes fits. A load that reads the file in place (an F32
 * file as 'auto' or 'f32') needs it whole: the caller streams it into one buffer as before.
 */
import { heapU8, wasmError } from '../wasm/heap.js';
import type { EmbindHandle, QkvModule } from '../wasm/module.js';
import type { ByteStream } from './files.js';
import type { WasmDecoder } from './decoder.js';
import { Pull } from './shards.js';

/** A load that streams: GPT2ModelLoad / LlamaModelLoad (wasm/decoder_bindings.hpp), EncoderModelLoad (bindings_encoder.cpp). */
export interface WasmLoad<H> extends EmbindHandle {
  streams(): boolean;
  feed(bytes: number, n: number): string;
  finish(): H | null;
}
export type WasmDecoderLoad = WasmLoad<WasmDecoder>;
export interface DecoderLoadClass {
  begin(config: string, head: number, headSize: number, fileSize: number, weights: string): WasmDecoderLoad | null;
}

/** The most bytes copied into the heap per feed. */
const FEED_BYTES = 1 << 20;
/** The most header bytes a file may have (the wasm reader's limit). */
const MAX_HEADER_BYTES = 100 << 20;

/** What the caller reads whole when the load does not stream: the bytes already taken, then the rest. */
export interface WholeFile {
  head: Uint8Array;
  rest: AsyncIterable<Uint8Array>;
  close: () => Promise<void>;
}

/**
 * Streams `s` (its size known) into a model: `begin(head, headSize, fileSize)` starts the load
 * (null: its message is lastError()); the handle, or the stream's head and rest when the load
 * reads the file in place. `progress(loaded)` after each chunk; `signal` checked before each.
 * Everything the load holds is freed on an error or an abort.
 */
export async function streamLoad<H>(
  m: QkvModule, begin: (head: number, headSize: number, fileSize: number) => WasmLoad<H> | null, lastError: () => string,
  s: ByteStream & { total: number }, signal: AbortSignal | undefined, progress: (loaded: number) => void,
): Promise<H | WholeFile> {
  const pull = new Pull(s);
  let head: Uint8Array;
  try {
    // the head: the 8-byte length and, where it fits the file, the JSON header (else the wasm
    // reader names the bad length)
    head = await pull.take(8);
    let ended = head.byteLength < 8;
    if (!ended) {
      const n = Number(new DataView(head.buffer, head.byteOffset, 8).getBigUint64(0, true));
      if (Number.isSafeInteger(n) && n <= s.total - 8 && n <= MAX_HEADER_BYTES) {
        const header = await pull.take(n);
        ended = header.byteLength < n;
        const joined = new Uint8Array(8 + header.byteLength);
        joined.set(head);
        joined.set(header, 8);
        head = joined;
      }
    }
    signal?.throwIfAborted();
    // the stream ended inside the header (fewer bytes than announced): the whole-file path's
    // reader names it as it names any truncated file
    if (ended) return { head, rest: pull.rest(), close: () => pull.close() };
  } catch (e) {
    await pull.close();
    throw e;
  }
  return streamFromHead(m, begin, lastError, pull, head, s.total, signal, progress);
}

/**
 * {@link streamLoad} once the head has been read from `pull` (a GGUF file's header, which says
 * nothing of its length up front: gguf.ts reads it): `head` is the file's first bytes, holding
 * its whole header.
 */
export async function streamFromHead<H>(
  m: QkvModule, begin: (head: number, headSize: number, fileSize: number) => WasmLoad<H> | null, lastError: () => string,
  pull: Pull, head: Uint8Array, total: number, signal: AbortSignal | undefined, progress: (loaded: number) => void,
): Promise<H | WholeFile> {
  const fn = 'loadModel';
  let load: WasmLoad<H> | null = null;
  let buffer = 0;
  try {
    buffer = m._malloc(Math.max(FEED_BYTES, head.byteLength)) >>> 0;
    if (!buffer) throw new RangeError(`${fn}: out of wasm memory for the header (${head.byteLength} bytes)`);
    heapU8(m).set(head, buffer);
    load = begin(buffer, head.byteLength, total);
    if (!load) throw wasmError(fn, lastError());
    if (!load.streams()) {
      load.delete();
      load = null;
      m._free(buffer);
      buffer = 0;
      return { head, rest: pull.rest(), close: () => pull.close() };
    }
    let loaded = 0;
    const feed = (chunk: Uint8Array) => {
      for (let at = 0; at < chunk.byteLength; at += FEED_BYTES) {
        const part = chunk.subarray(at, Math.min(chunk.byteLength, at + FEED_BYTES));
        heapU8(m).set(part, buffer);
        const err = load!.feed(buffer, part.byteLength);
        if (err) throw wasmError(fn, err);
        loaded += part.byteLength;
      }
      progress(loaded);
    };
    feed(head);
    for await (const chunk of pull.rest()) {
      signal?.throwIfAborted();
      feed(chunk);
    }
    signal?.throwIfAborted();
    m._free(buffer);
    buffer = 0;
    const handle = load.finish();
    if (!handle) throw wasmError(fn, lastError());
    return handle;
  } catch (e) {
    await pull.close();
    throw e;
  } finally {
    if (buffer) m._free(buffer);
    if (load) load.delete();
  }
}
