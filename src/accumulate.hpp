// C[r, :] (+)= sum_k A[r, k] B[k, :] for a few rows: the register-blocked micro-kernel that
// the attention kernel (K Qᵀ and P V) and the dense layers (x W) are all made of. Vectorised over
// the columns of B and C; a block of R rows x NV batches keeps R*NV accumulators in registers
// (enough independent mul+add chains to keep the vector units busy, few enough not to spill:
// V8 allocates 15 of x64's 16 vector registers).
//
// A's elements are read one at a time (broadcast), so A may be laid out either way: element
// (r, k) is a[r * row + k * col]. A stride is either a run-time value or a compile-time one
// (Fixed<N>), which becomes a constant offset of the load instructions.
// The k loop is not unrolled here: V8 unrolls it, and a source-level unroll let LLVM hoist
// the loads of several steps together, which V8 then spilled (a third slower).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "simd.hpp"  // and simd_madd.hpp

namespace qkv::detail {

template <std::ptrdiff_t N>
using Fixed = std::integral_constant<std::ptrdiff_t, N>;

// Run-time strides of A (the dense layers' entry point).
struct Strides {
  int64_t row, col;
};

// c[r, 0 : NV*W] = start + sum_{k < K} a(r, k) * b[k * ldb + 0 : NV*W] for r < R, where start is
// c's own row (accumulate) or, given init, init[0 : NV*W] for every row. Indices are
// pointer-sized (32-bit in wasm32, where 64-bit index arithmetic costs extra instructions in
// the innermost loop) and advance by pointer bumps.
template <class V, int R, int NV, class Row, class Col, class Ldb>
inline void accumulate_block(const float* a, Row row, Col col, const float* b, Ldb ldb, std::ptrdiff_t K, float* c,
                             std::ptrdiff_t ldc, const float* init) {
  constexpr int W = simd::lanes<V>;
  V acc[R][NV];
  QKV_UNROLL
  for (int r = 0; r < R; ++r) {
    QKV_UNROLL
    for (int v = 0; v < NV; ++v) acc[r][v] = simd::load<V>(init ? init + v * W : c + r * ldc + v * W);
  }
  // A's rows: a pointer each (with a compile-time row stride they are constant offsets of one)
  const float* ar[R];
  QKV_UNROLL
  for (int r = 0; r < R; ++r) ar[r] = a + r * row;
  for (const float* const b_end = b + K * ldb; b != b_end; b += ldb) {
    V bk[NV];
    QKV_UNROLL
    for (int v = 0; v < NV; ++v) bk[v] = simd::load<V>(b + v * W);
    QKV_UNROLL
    for (int r = 0; r < R; ++r) {
      const V ak = simd::splat<V>(*ar[r]);
      ar[r] += col;
      QKV_UNROLL
      for (int v = 0; v < NV; ++v) acc[r][v] = simd::madd(ak, bk[v], acc[r][v]);
    }
  }
  QKV_UNROLL
  for (int r = 0; r < R; ++r) {
    QKV_UNROLL
    for (int v = 0; v < NV; ++v) simd::store(c + r * ldc + v * W, acc[r][v]);
  }
}

// The same over all N columns: blocks of NV batches, then of 1, then a scalar tail.
template <int R, int NV, class Row, class Col, class Ldb>
inline void accumulate_rows(const float* a, Row row, Col col, const float* b, Ldb ldb, std::ptrdiff_t K,
                            std::ptrdiff_t N, float* c, std::ptrdiff_t ldc, const float* init) {
  using V = simd::Batch;
  constexpr int W = simd::lanes<V>;
  std::ptrdiff_t n = 0;
  for (; n + NV * W <= N; n += NV * W)
    accumulate_block<V, R, NV>(a, row, col, b + n, ldb, K, c + n, ldc, init ? init + n : nullptr);
  for (; n + W <= N; n += W)
    accumulate_block<V, R, 1>(a, row, col, b + n, ldb, K, c + n, ldc, init ? init + n : nullptr);
  for (; n < N; ++n) accumulate_block<float, R, 1>(a, row, col, b + n, ldb, K, c + n, ldc, init ? init + n : nullptr);
}

// C[M, N] += A[M, K] B[K, N] (or, given init, C = init + A B with init[0 : N] added to every
// row) in blocks of R rows x NV batches, then rows one at a time.
// The attention kernel's tiles (64 x 64) are whole blocks of the default 2 x 4 (8 chains:
// 8 accumulators + 4 loads of B + 2 broadcasts of A fit V8's registers with no spill).
template <int R = 2, int NV = 4, class Row, class Col, class Ldb>
inline void accumulate(const float* a, Row row, Col col, const float* b, Ldb ldb, std::ptrdiff_t M, std::ptrdiff_t K,
                       std::ptrdiff_t N, float* c, std::ptrdiff_t ldc, const float* init = nullptr) {
  std::ptrdiff_t m = 0;
  for (; m + R <= M; m += R) accumulate_rows<R, NV>(a + m * row, row, col, b, ldb, K, N, c + m * ldc, ldc, init);
  for (; m < M; ++m) accumulate_rows<1, NV>(a + m * row, row, col, b, ldb, K, N, c + m * ldc, ldc, init);
}

// The dense layers' entry point: C[M, N] += A[M, K] B[K, N] with run-time strides.
inline void accumulate(const float* a, Strides as, const float* b, int64_t ldb, int64_t M, int64_t K, int64_t N,
                       float* c, int64_t ldc) {
  using P = std::ptrdiff_t;
  accumulate(a, static_cast<P>(as.row), static_cast<P>(as.col), b, static_cast<P>(ldb), static_cast<P>(M),
             static_cast<P>(K), static_cast<P>(N), c, static_cast<P>(ldc));
}

}  // namespace qkv::detail
