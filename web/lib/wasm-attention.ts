/** The wasm path of attention: copy into the heap, call the binding, copy out, free. */
import { fmtBytes, fmtShape } from './errors.js';
import type { AttentionOutput, AttentionProblem } from './problem.js';
import { HeapScope, MAX_HEAP_BYTES, callThreads, loadModule, wasmError, type QkvModule, type WasmAttentionArgs } from './wasm.js';

/** Bytes a problem needs on the wasm heap beyond the inputs' copies: checks it can fit at all. */
function checkFits(fn: string, m: QkvModule, p: AttentionProblem, args: WasmAttentionArgs): void {
  const f = 4;
  const parts: [string, number][] = [
    ['query', p.query.length * f], ['key', p.key.length * f], ['value', p.value.length * f],
    ['output', p.B * p.H * p.Lq * p.Dv * f],
  ];
  if (p.returnWeights) parts.push([`weights ${fmtShape([p.B, p.H, p.Lq, p.Lk])}`, p.B * p.H * p.Lq * p.Lk * f]);
  if (p.boolMask) parts.push(['attnMask', p.boolMask.data.byteLength]);
  if (p.floatMask) parts.push(['attnMask', p.floatMask.data.byteLength]);
  const ws = m.attentionWorkspaceBytes(args);
  parts.push(['workspace', ws > 0 ? ws : 0]);
  const total = parts.reduce((a, [, b]) => a + b, 0);
  if (total > MAX_HEAP_BYTES) {
    const [name, bytes] = parts.reduce((a, b) => (b[1] > a[1] ? b : a));
    throw new RangeError(
      `${fn}: the call needs ${fmtBytes(total)} of wasm memory (${name} alone is ${fmtBytes(bytes)}) but the wasm heap ` +
        `holds at most ${fmtBytes(MAX_HEAP_BYTES)} (query ${fmtShape([p.B, p.H, p.Lq, p.D])}, key ${fmtShape([p.B, p.Hkv, p.Lk, p.D])})`,
    );
  }
}

export function wasmArgs(p: AttentionProblem, threads: number): WasmAttentionArgs {
  return {
    B: p.B, H: p.H, Hkv: p.Hkv, Lq: p.Lq, Lk: p.Lk, D: p.D, Dv: p.Dv,
    query: 0, key: 0, value: 0, output: 0, weights: 0,
    scale: p.scaleGiven ? p.scale : NaN,
    causal: p.causal, window: p.window,
    boolMask: 0, boolMaskDims: p.boolMask?.dims ?? ([1, 1, 1, 1] as [number, number, number, number]),
    floatMask: 0, floatMaskDims: p.floatMask?.dims ?? ([1, 1, 1, 1] as [number, number, number, number]),
    threads, reference: false,
  };
}

/**
 * Runs a validated problem on the wasm module (synchronously). `reference` runs the
 * plain-loop C++ reference instead of the fast kernel (tests, benchmarks).
 * @internal
 */
export function runWasmAttention(
  fn: string, m: QkvModule, p: AttentionProblem, { reference = false, threads = callThreads() } = {},
): AttentionOutput {
  const args = wasmArgs(p, threads);
  args.reference = reference;
  checkFits(fn, m, p, args);
  const heap = new HeapScope(m, fn);
  try {
    args.query = heap.f32(p.query, 'query');
    args.key = heap.f32(p.key, 'key');
    args.value = heap.f32(p.value, 'value');
    const outN = p.B * p.H * p.Lq * p.Dv;
    const wN = p.B * p.H * p.Lq * p.Lk;
    args.output = heap.alloc(outN * 4, 'output');
    if (p.returnWeights) args.weights = heap.alloc(wN * 4, `weights ${fmtShape([p.B, p.H, p.Lq, p.Lk])}`);
    if (p.boolMask) args.boolMask = heap.u8(p.boolMask.data, 'attnMask');
    if (p.floatMask) args.floatMask = heap.f32(p.floatMask.data, 'attnMask');
    const err = m.attention(args);
    if (err) throw wasmError(fn, err);
    return {
      output: heap.read(args.output, outN),
      weights: p.returnWeights ? heap.read(args.weights, wN) : undefined,
    };
  } finally {
    heap.free();
  }
}

/** @internal Loads the module and runs on wasm (the backend dispatcher's wasm path). */
export async function wasmAttention(fn: string, p: AttentionProblem): Promise<AttentionOutput> {
  const m = await loadModule();
  return runWasmAttention(fn, m, p);
}

