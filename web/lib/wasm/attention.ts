/**
 * The wasm path of attention, for scaledDotProductAttention and KVCache.attend alike: check
 * it fits, copy into the heap, one call into wasm, copy out, free.
 */
import { fmtBytes, fmtShape } from '../errors.js';
import type { AttentionOutput, AttentionQuery } from '../problem.js';
import { HeapScope, MAX_HEAP_BYTES, wasmError } from './heap.js';
import { callThreads } from './loader.js';
import type { QkvModule, WasmAttentionArgs } from './module.js';

/** Keys and values to copy in, or a cache that holds them (KVCache.attend). */
export type KeysValues =
  | { key: Float32Array; value: Float32Array }
  | { cache: { attend(args: WasmAttentionArgs): string } };

/**
 * Bytes the call's arrays take on the wasm heap (inputs copied in, results): a call that
 * cannot fit is a RangeError naming the largest part, before anything is allocated. The
 * kernel's own scratch (O(tile) per thread, ~100 KB) is not counted; if even that fails,
 * the binding reports bad_alloc, which is a RangeError too.
 */
function checkFits(fn: string, p: AttentionQuery, kv: KeysValues): void {
  const f = 4;
  const parts: [string, number][] = [['query', p.query.length * f], ['output', p.B * p.H * p.Lq * p.Dv * f]];
  if ('key' in kv) parts.push(['key', kv.key.length * f], ['value', kv.value.length * f]);
  if (p.returnWeights) parts.push([`weights ${fmtShape([p.B, p.H, p.Lq, p.Lk])}`, p.B * p.H * p.Lq * p.Lk * f]);
  if (p.boolMask) parts.push(['attnMask', p.boolMask.data.byteLength]);
  if (p.floatMask) parts.push(['attnMask', p.floatMask.data.byteLength]);
  const total = parts.reduce((a, [, b]) => a + b, 0);
  if (total > MAX_HEAP_BYTES) {
    const [name, bytes] = parts.reduce((a, b) => (b[1] > a[1] ? b : a));
    throw new RangeError(
      `${fn}: the call needs ${fmtBytes(total)} of wasm memory (${name} alone is ${fmtBytes(bytes)}) but the wasm heap ` +
        `holds at most ${fmtBytes(MAX_HEAP_BYTES)} (query ${fmtShape([p.B, p.H, p.Lq, p.D])}, key ${fmtShape([p.B, p.Hkv, p.Lk, p.D])})`,
    );
  }
}

/**
 * Runs a validated call on the wasm module, synchronously. `reference` runs the plain-loop
 * C++ reference instead of the fast kernel (tests, benchmarks).
 * @internal
 */
export function runWasmAttention(
  fn: string, m: QkvModule, p: AttentionQuery, kv: KeysValues,
  { reference = false, threads = callThreads() }: { reference?: boolean; threads?: number } = {},
): AttentionOutput {
  checkFits(fn, p, kv);
  const heap = new HeapScope(m, fn);
  try {
    const outN = p.B * p.H * p.Lq * p.Dv;
    const wN = p.B * p.H * p.Lq * p.Lk;
    const args: WasmAttentionArgs = {
      B: p.B, H: p.H, Hkv: p.Hkv, Lq: p.Lq, Lk: p.Lk, D: p.D, Dv: p.Dv,
      query: heap.f32(p.query, 'query'),
      key: 'key' in kv ? heap.f32(kv.key, 'key') : 0,
      value: 'key' in kv ? heap.f32(kv.value, 'value') : 0,
      output: heap.alloc(outN * 4, 'output'),
      weights: p.returnWeights ? heap.alloc(wN * 4, `weights ${fmtShape([p.B, p.H, p.Lq, p.Lk])}`) : 0,
      scale: p.scale, causal: p.causal, window: p.window,
      boolMask: p.boolMask ? heap.u8(p.boolMask.data, 'attnMask') : 0,
      boolMaskDims: p.boolMask?.dims ?? [1, 1, 1, 1],
      floatMask: p.floatMask ? heap.f32(p.floatMask.data, 'attnMask') : 0,
      floatMaskDims: p.floatMask?.dims ?? [1, 1, 1, 1],
      threads, reference,
    };
    const err = 'cache' in kv ? kv.cache.attend(args) : m.attention(args);
    if (err) throw wasmError(fn, err);
    return {
      output: p.out ? heap.readInto(args.output, p.out) : heap.read(args.output, outN),
      weights: p.returnWeights ? heap.read(args.weights, wN) : undefined,
    };
  } finally {
    heap.free();
  }
}
