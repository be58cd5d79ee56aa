/**
 * Attention rollout in the wasm module (src/interpret/rollout.cpp, wasm/bindings_interpret.cpp):
 * for each layer, its heads' rows are copied into the heap a chunk at a time (the chunk stays in
 * cache while the kernel fuses it: mean / max / min over heads, the checks, the residual, the
 * row normalisation, in one pass), then R_l = A'_l R_{l-1} is one call; causal layers' products
 * compute only the lower triangle. Two calls into wasm per chunk and layer, no L x L copy in
 * TypeScript but the results asked for.
 */
import { HeapScope, heapF32, wasmError } from '../wasm/heap.js';
import type { QkvModule } from '../wasm/module.js';
import type { CheckedAttentions, HeadFusion } from './fuse.js';

type FuseRows = (maps: number, H: number, rows: number, L: number, i0: number, fusion: string, residual: number,
  out: number, status: number) => string;
type Product = (a: number, b: number, c: number, L: number, lower: boolean) => string;

export interface RolloutKernels {
  fuseRows: FuseRows;
  product: Product;
}

/** The module's rollout kernels, or null in a build without them. */
export function rolloutKernelsOf(m: QkvModule): RolloutKernels | null {
  const f = m.rolloutFuseRows, p = m.rolloutProduct;
  if (typeof f !== 'function' || typeof p !== 'function') return null;
  return { fuseRows: (f as FuseRows).bind(m), product: (p as Product).bind(m) };
}

/** Bytes of one chunk of rows of every head (it should stay in L2 while it is fused). */
const CHUNK_BYTES = 256 * 1024;

/**
 * The rollout of `att` into `out` ([L, L], or [layers, L, L] with `cumulative`), float32.
 * A negative or non-finite fused weight is the RangeError the TypeScript path throws.
 */
export function rolloutWasm(m: QkvModule, k: RolloutKernels, fn: string, att: CheckedAttentions, fusion: HeadFusion,
  residual: number, cumulative: boolean, out: Float32Array): void {
  const { L } = att;
  const NL = att.layers.length;
  const LL = L * L;
  const maxH = Math.max(...att.heads);
  const chunk = Math.max(1, Math.min(L, Math.floor(CHUNK_BYTES / (4 * maxH * L))));
  const scope = new HeapScope(m, fn);
  try {
    const pMaps = scope.alloc(4 * maxH * chunk * L, `a chunk of maps [${maxH}, ${chunk}, ${L}]`);
    const pStatus = scope.alloc(16, 'the kernel status');
    const pA = scope.alloc(4 * LL, `a fused layer [${L}, ${L}]`);
    let pR = scope.alloc(4 * LL, `the rollout [${L}, ${L}]`);
    let pC = scope.alloc(4 * LL, `the next product [${L}, ${L}]`);
    // lower: every layer so far was causal (the product of lower-triangular matrices is too)
    let lower = true;
    for (let l = 0; l < NL; l++) {
      const H = att.heads[l];
      const src = att.layers[l];
      const dst = l === 0 ? pR : pA;
      let layerLower = true;
      for (let i0 = 0; i0 < L; i0 += chunk) {
        const rows = Math.min(chunk, L - i0);
        const heap = heapF32(m);
        for (let h = 0; h < H; h++) {
          const from = h * LL + i0 * L;
          heap.set(src.subarray(from, from + rows * L), (pMaps >>> 2) + h * rows * L);
        }
        const err = k.fuseRows(pMaps, H, rows, L, i0, fusion, residual, dst + 4 * i0 * L, pStatus);
        if (err) throw wasmError(fn, err);
        const status = heapF32(m).subarray(pStatus >>> 2, (pStatus >>> 2) + 3);
        if (status[1] >= 0) {
          throw new RangeError(`${fn}: attentions[${l}] (shape [${H}, ${L}, ${L}]) has a negative or non-finite weight in row ${status[1]} (fused: ${status[2]}); attention weights are probabilities`);
        }
        if (status[0] === 0) layerLower = false;
      }
      lower &&= layerLower;
      if (l > 0) {
        const err = k.product(pA, pR, pC, L, lower);
        if (err) throw wasmError(fn, err);
        [pR, pC] = [pC, pR];
      }
      if (cumulative) out.set(heapF32(m).subarray(pR >>> 2, (pR >>> 2) + LL), l * LL);
    }
    if (!cumulative) out.set(heapF32(m).subarray(pR >>> 2, (pR >>> 2) + LL));
  } finally {
    scope.free();
  }
}
