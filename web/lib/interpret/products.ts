/**
 * The matrix products of attention rollout, C = A · B for [L, L] matrices, two ways:
 *
 *  - in TypeScript (float64, a 4x4 register tile), for small L or when the wasm module is not
 *    loaded;
 *  - through the wasm module's F32 matrix product (`matmulRun`, src/matmul/gemm.cpp, one
 *    thread). When A and B are lower triangular (causal attention) the product is lower
 *    triangular too, and only the blocks on or below the diagonal are computed:
 *    C_ij = sum_{k=j..i} A_ik B_kj over blocks of BLOCK rows, about a quarter of the dense
 *    product's work at L = 512.
 */
import { HeapScope, heapF32, wasmError } from '../wasm/heap.js';
import type { QkvModule } from '../wasm/module.js';

/** The one binding used here (wasm/bindings_matmul.cpp): y [M, N] = x [M, K] W [K, N] (+ bias). */
type MatmulRun = (type: string, outIn: boolean, M: number, K: number, N: number, w: number, scales: number,
  x: number, bias: number, y: number, threads: number, kernel: string) => string;

/** The module's matrix product, or null in a build without wasm/bindings_matmul.cpp. */
export function matmulOf(m: QkvModule): MatmulRun | null {
  const f = m.matmulRun;
  return typeof f === 'function' ? (f as MatmulRun).bind(m) : null;
}

/** Rows per block of the block-triangular wasm product. */
export const BLOCK = 64;

/** C = A B, all [L, L] float64 (C must not alias A or B). `lower`: A and B are lower triangular. */
export function multiplyJs(A: Float64Array, B: Float64Array, C: Float64Array, L: number, lower: boolean): void {
  const L4 = L - (L % 4);
  for (let i0 = 0; i0 < L; i0 += 4) {
    const rows = Math.min(4, L - i0);
    // for lower-triangular A and B, C[i][j] = sum_{k=j..i} A[i][k] B[k][j]; j, k <= i0 + 3
    const jEnd = lower ? Math.min(L, i0 + 4) : L;
    if (rows < 4) {
      for (let i = i0; i < L; i++) {
        for (let j = 0; j < L; j++) {
          let s = 0;
          const kEnd = lower ? i + 1 : L;
          for (let k = lower ? j : 0; k < kEnd; k++) s += A[i * L + k] * B[k * L + j];
          C[i * L + j] = s;
        }
      }
      continue;
    }
    const r0 = i0 * L, r1 = r0 + L, r2 = r1 + L, r3 = r2 + L;
    let j0 = 0;
    for (; j0 + 4 <= Math.min(jEnd, L4); j0 += 4) {
      let c00 = 0, c01 = 0, c02 = 0, c03 = 0, c10 = 0, c11 = 0, c12 = 0, c13 = 0;
      let c20 = 0, c21 = 0, c22 = 0, c23 = 0, c30 = 0, c31 = 0, c32 = 0, c33 = 0;
      const kEnd = lower ? i0 + 4 : L;
      for (let k = lower ? j0 : 0; k < kEnd; k++) {
        const a0 = A[r0 + k], a1 = A[r1 + k], a2 = A[r2 + k], a3 = A[r3 + k];
        const bk = k * L + j0;
        const b0 = B[bk], b1 = B[bk + 1], b2 = B[bk + 2], b3 = B[bk + 3];
        c00 += a0 * b0; c01 += a0 * b1; c02 += a0 * b2; c03 += a0 * b3;
        c10 += a1 * b0; c11 += a1 * b1; c12 += a1 * b2; c13 += a1 * b3;
        c20 += a2 * b0; c21 += a2 * b1; c22 += a2 * b2; c23 += a2 * b3;
        c30 += a3 * b0; c31 += a3 * b1; c32 += a3 * b2; c33 += a3 * b3;
      }
      C[r0 + j0] = c00; C[r0 + j0 + 1] = c01; C[r0 + j0 + 2] = c02; C[r0 + j0 + 3] = c03;
      C[r1 + j0] = c10; C[r1 + j0 + 1] = c11; C[r1 + j0 + 2] = c12; C[r1 + j0 + 3] = c13;
      C[r2 + j0] = c20; C[r2 + j0 + 1] = c21; C[r2 + j0 + 2] = c22; C[r2 + j0 + 3] = c23;
      C[r3 + j0] = c30; C[r3 + j0 + 1] = c31; C[r3 + j0 + 2] = c32; C[r3 + j0 + 3] = c33;
    }
    // the columns left over (L not a multiple of 4), and zeros above the diagonal
    for (let r = 0; r < 4; r++) {
      const i = i0 + r;
      for (let j = j0; j < L; j++) {
        let s = 0;
        if (!lower || j <= i) {
          const kEnd = lower ? i + 1 : L;
          for (let k = lower ? j : 0; k < kEnd; k++) s += A[i * L + k] * B[k * L + j];
        }
        C[i * L + j] = s;
      }
    }
  }
}

/**
 * Runs rollout's chain of products in the wasm heap: `next(l, dst)` writes layer l's matrix
 * (float32, [L, L]) into dst; R_0 = M_0, R_l = M_l R_{l-1}; `emit(l, R_l)` sees each product
 * (a view of the heap, valid until the next call). `lower`: every M_l is lower triangular.
 */
export function chainWasm(m: QkvModule, mm: MatmulRun, fn: string, L: number, layers: number, lower: boolean,
  next: (l: number, dst: Float32Array) => void, emit: (l: number, R: Float32Array) => void): void {
  const LL = L * L;
  const scope = new HeapScope(m, fn);
  try {
    const pA = scope.alloc(4 * LL, `a fused layer [${L}, ${L}]`);
    const pR = scope.alloc(4 * LL, `the rollout [${L}, ${L}]`);
    const pC = scope.alloc(4 * LL, `the next product [${L}, ${L}]`);
    const pX = lower ? scope.alloc(4 * LL, 'a packed block row') : 0;
    const pP = lower ? scope.alloc(4 * LL, 'the packed column panels') : 0;
    const pY = lower ? scope.alloc(4 * BLOCK * BLOCK, 'a block product') : 0;
    const view = (p: number) => heapF32(m).subarray(p >>> 2, (p >>> 2) + LL);
    next(0, view(pR));
    emit(0, view(pR));
    for (let l = 1; l < layers; l++) {
      next(l, view(pA));
      if (!lower) {
        const err = mm('F32', false, L, L, L, pR, 0, pA, 0, pC, 1, 'gemm');
        if (err) throw wasmError(fn, err);
      } else {
        blockLower(m, mm, fn, L, pA, pR, pC, pX, pP, pY);
      }
      heapF32(m).copyWithin(pR >>> 2, pC >>> 2, (pC >>> 2) + LL); // views again: the heap may have grown
      emit(l, view(pR));
    }
  } finally {
    scope.free();
  }
}

/** C = A R for lower-triangular A and R, block by block (blocks on or below the diagonal). */
function blockLower(m: QkvModule, mm: MatmulRun, fn: string, L: number, pA: number, pR: number, pC: number, pX: number, pP: number, pY: number): void {
  const b = BLOCK;
  const nb = Math.ceil(L / b);
  const a = pA >>> 2, r = pR >>> 2, c = pC >>> 2, y = pY >>> 2;
  // the views are taken again after every wasm call (the heap may grow during one)
  let H = heapF32(m);
  H.fill(0, c, c + L * L);
  // column panels of R: panel j holds rows j*b .. L-1 of columns j*b .. j*b+w-1, contiguous
  const panel: number[] = [];
  let off = pP >>> 2;
  for (let j = 0; j < nb; j++) {
    const c0 = j * b, w = Math.min(b, L - c0);
    panel.push(off);
    for (let row = c0; row < L; row++) {
      H.copyWithin(off, r + row * L + c0, r + row * L + c0 + w);
      off += w;
    }
  }
  for (let i = 0; i < nb; i++) {
    const r0 = i * b, h = Math.min(b, L - r0), rEnd = r0 + h;
    for (let j = 0; j <= i; j++) {
      const c0 = j * b, w = Math.min(b, L - c0);
      // C[r0.., c0..] = A[r0..rEnd, c0..rEnd] R[c0..rEnd, c0..c0+w]: K = rEnd - c0
      const K = rEnd - c0;
      let xo = pX >>> 2;
      for (let row = r0; row < rEnd; row++) {
        H.copyWithin(xo, a + row * L + c0, a + row * L + rEnd);
        xo += K;
      }
      const err = mm('F32', false, h, K, w, panel[j] * 4, 0, pX, 0, pY, 1, 'gemm');
      if (err) throw wasmError(fn, err);
      H = heapF32(m);
      for (let q = 0; q < h; q++) H.copyWithin(c + (r0 + q) * L + c0, y + q * w, y + q * w + w);
    }
  }
}

/**
 * The mean over heads of one layer's maps, in the wasm heap: copied in, then y [1, L*L] =
 * (1/H, ..., 1/H) [1, H] x maps [H, L*L] by the module's matrix-vector product (it streams the
 * maps at memory speed; a JS loop over them is the slowest part of rollout). Into `dst`.
 */
export function meanHeadsWasm(m: QkvModule, mm: MatmulRun, fn: string, maps: Float32Array, H: number, LL: number,
  buffers: { pMaps: number; pW: number; pY: number }, dst: Float32Array): void {
  let heap = heapF32(m);
  heap.set(maps, buffers.pMaps >>> 2);
  heap.fill(1 / H, buffers.pW >>> 2, (buffers.pW >>> 2) + H);
  const err = mm('F32', false, 1, H, LL, buffers.pMaps, 0, buffers.pW, 0, buffers.pY, 1, 'gemv');
  if (err) throw wasmError(fn, err);
  heap = heapF32(m);
  dst.set(heap.subarray(buffers.pY >>> 2, (buffers.pY >>> 2) + LL));
}
