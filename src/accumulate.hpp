// C[r, :] += sum_k A[r, k] B[k, :] for a few rows: the register-blocked micro-kernel that
// the attention kernel (K Qᵀ and P V) and the dense layers (x W) are all made of. Vectorised over
// the columns of B and C; a block of R rows x NV batches keeps R*NV accumulators (9 by
// default: enough independent mul+add chains to hide latency, few enough not to spill).
#pragma once

#include <cstddef>
#include <cstdint>

#include "simd_madd.hpp"

namespace qkv::detail {

// A's elements are read one at a time (broadcast), so A may be laid out either way:
// element (r, k) is a[r * a_row + k * a_col].
struct Strides {
  int64_t row, col;
};

// c[r, 0 : NV*W] += sum_{k < K} a(r, k) * b[k * ldb + 0 : NV*W] for r < R.
// Indices are pointer-sized (32-bit in wasm32, where 64-bit index arithmetic costs extra
// instructions in the innermost loop) and advance by pointer bumps.
template <class V, int R, int NV>
inline void accumulate_block(const float* a, Strides as, const float* b, int64_t ldb, int64_t K, float* c,
                             int64_t ldc) {
  constexpr int W = simd::lanes<V>;
  const std::ptrdiff_t a_row = static_cast<std::ptrdiff_t>(as.row), a_col = static_cast<std::ptrdiff_t>(as.col);
  const std::ptrdiff_t b_step = static_cast<std::ptrdiff_t>(ldb), c_step = static_cast<std::ptrdiff_t>(ldc);
  V acc[R][NV];
  QKV_UNROLL
  for (int r = 0; r < R; ++r) {
    QKV_UNROLL
    for (int v = 0; v < NV; ++v) acc[r][v] = simd::load<V>(c + r * c_step + v * W);
  }
  for (std::ptrdiff_t k = 0, n = static_cast<std::ptrdiff_t>(K); k < n; ++k, a += a_col, b += b_step) {
    V bk[NV];
    QKV_UNROLL
    for (int v = 0; v < NV; ++v) bk[v] = simd::load<V>(b + v * W);
    QKV_UNROLL
    for (int r = 0; r < R; ++r) {
      const V ak = simd::splat<V>(a[r * a_row]);
      QKV_UNROLL
      for (int v = 0; v < NV; ++v) acc[r][v] = simd::madd(ak, bk[v], acc[r][v]);
    }
  }
  QKV_UNROLL
  for (int r = 0; r < R; ++r) {
    QKV_UNROLL
    for (int v = 0; v < NV; ++v) simd::store(c + r * c_step + v * W, acc[r][v]);
  }
}

// The same over all N columns: blocks of 3 batches, then 2, then 1, then a scalar tail.
template <int R>
inline void accumulate_rows(const float* a, Strides as, const float* b, int64_t ldb, int64_t K, int64_t N, float* c,
                            int64_t ldc) {
  using V = simd::Batch;
  constexpr int W = simd::lanes<V>;
  int64_t n = 0;
  for (; n + 3 * W <= N; n += 3 * W) accumulate_block<V, R, 3>(a, as, b + n, ldb, K, c + n, ldc);
  if (n + 2 * W <= N) {
    accumulate_block<V, R, 2>(a, as, b + n, ldb, K, c + n, ldc);
    n += 2 * W;
  }
  for (; n + W <= N; n += W) accumulate_block<V, R, 1>(a, as, b + n, ldb, K, c + n, ldc);
  for (; n < N; ++n) accumulate_block<float, R, 1>(a, as, b + n, ldb, K, c + n, ldc);
}

// C[M, N] += A[M, K] B[K, N], rows in blocks of 3 then one at a time. 3 rows x 3 batches
// = 9 accumulators + 3 loads + 1 broadcast fit 16 vector registers with room for V8's scratch
// register (4 x 3 spilled in wasm and ran ~25% slower).
inline void accumulate(const float* a, Strides as, const float* b, int64_t ldb, int64_t M, int64_t K, int64_t N,
                       float* c, int64_t ldc) {
  int64_t m = 0;
  for (; m + 3 <= M; m += 3) accumulate_rows<3>(a + m * as.row, as, b, ldb, K, N, c + m * ldc, ldc);
  for (; m < M; ++m) accumulate_rows<1>(a + m * as.row, as, b, ldb, K, N, c + m * ldc, ldc);
}

}  // namespace qkv::detail
