/**
 * The matrix product of attention rollout in TypeScript, C = A · B for [L, L] matrices (float64,
 * a 4x4 register tile), for small L or when the wasm module is not loaded (the wasm path is
 * rollout-wasm.ts). When A and B are lower triangular (causal attention) the product is lower
 * triangular too, and only that part is computed: C_ij = sum_{k=j..i} A_ik B_kj.
 */
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
