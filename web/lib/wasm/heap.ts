/** Copies in and out of the wasm heap, and the bindings' error strings turned into Errors. */
import { fmtBytes } from '../errors.js';
import type { QkvModule } from './module.js';

/** The most linear memory the module may grow to (-sMAXIMUM_MEMORY in wasm/CMakeLists.txt). */
export const MAX_HEAP_BYTES = 2 ** 32;

/** A Float32Array over the whole current heap (rebuilt when memory has grown, on any thread). */
export function heapF32(m: QkvModule): Float32Array {
  const buffer = m.qkvMemory().buffer;
  return m.HEAPF32.buffer === buffer ? m.HEAPF32 : new Float32Array(buffer);
}

/** A Uint8Array over the whole current heap. */
export function heapU8(m: QkvModule): Uint8Array {
  const buffer = m.qkvMemory().buffer;
  return m.HEAPU8.buffer === buffer ? m.HEAPU8 : new Uint8Array(buffer);
}

/**
 * Heap allocations for one call, all freed together by {@link HeapScope.free}. Allocation
 * failure is a RangeError naming the function; what was allocated is freed first.
 */
export class HeapScope {
  readonly #m: QkvModule;
  readonly #fn: string;
  readonly #ptrs: number[] = [];

  constructor(m: QkvModule, fn: string) {
    this.#m = m;
    this.#fn = fn;
  }

  alloc(bytes: number, what: string): number {
    // (Emscripten's malloc refuses 2 GB and more in one block: heapAlloc builds blocks over 1 GB in steps)
    const ptr = bytes > MAX_HEAP_BYTES ? 0 : (bytes <= 2 ** 30 ? this.#m._malloc(Math.max(16, bytes)) : this.#m.heapAlloc(bytes)) >>> 0;
    if (ptr === 0) {
      throw new RangeError(
        `${this.#fn}: out of wasm memory allocating ${what} (${fmtBytes(bytes)}; the heap holds at most ${fmtBytes(MAX_HEAP_BYTES)})`,
      );
    }
    this.#ptrs.push(ptr);
    return ptr;
  }

  /** Allocates and copies a Float32Array in. */
  f32(data: Float32Array, what: string): number {
    const ptr = this.alloc(data.byteLength, what);
    heapF32(this.#m).set(data, ptr >>> 2);
    return ptr;
  }

  /** Allocates and copies a Uint8Array in. */
  u8(data: Uint8Array, what: string): number {
    const ptr = this.alloc(data.byteLength, what);
    heapU8(this.#m).set(data, ptr);
    return ptr;
  }

  /** Allocates and copies an Int32Array in. */
  i32(data: Int32Array, what: string): number {
    const ptr = this.alloc(data.byteLength, what);
    new Int32Array(heapU8(this.#m).buffer, ptr, data.length).set(data);
    return ptr;
  }

  /** Copies n floats out of the heap into a new Float32Array. */
  read(ptr: number, n: number): Float32Array {
    return heapF32(this.#m).slice(ptr >>> 2, (ptr >>> 2) + n);
  }

  /** Copies dst.length floats out of the heap into dst. */
  readInto(ptr: number, dst: Float32Array): Float32Array {
    dst.set(heapF32(this.#m).subarray(ptr >>> 2, (ptr >>> 2) + dst.length));
    return dst;
  }

  free(): void {
    for (const p of this.#ptrs) this.#m._free(p);
    this.#ptrs.length = 0;
  }
}

/**
 * Turns a binding's error string ("kind|message", see wasm/bindings.cpp) into an Error.
 * Memory failures are RangeErrors; the rest should have been caught by validation.
 */
export function wasmError(fn: string, err: string): Error {
  const bar = err.indexOf('|');
  const kind = bar < 0 ? 'error' : err.slice(0, bar);
  const message = bar < 0 ? err : err.slice(bar + 1);
  if (kind === 'bad_alloc') return new RangeError(`${fn}: out of wasm memory (${message})`);
  if (kind === 'length_error') return new RangeError(message.startsWith(fn) ? message : `${fn}: ${message}`);
  return new Error(message.startsWith(fn) ? message : `${fn}: ${message}`);
}
