// C[r, :] += sum_k A[r, k] B[k, :] for a few rows: the register-blocked micro-kernel that
// the attention kernel (K Qᵀ and P V) and the dense layers (x W) are all made of. Vectorised over
// the columns of B and C; a block of R rows x NV batches keeps R*NV accumulators (12 by
// default: enough independent mul+add chains to hide latency, few enough not to spill).
#pragma once

#include <cstdint>

#include "simd.hpp"

namespace qkv::detail {

// A's elements are read one at a time (broadcast), so A may be laid out either way:
// element (r, k) is a[r * a_row + k * a_col].
struct Strides {
  int64_t row, col;
};

// c[r, 0 : NV*W] += sum_{k < K} a(r, k) * b[k * ldb + 0 : NV*W] for r < R.
template <class V, int R, int NV>
inline void accumulate_block(const float* a, Strides as, const float* b, int64_t ldb, int64_t K, float* c,
                             int64_t ldc) {
  constexpr int W = simd::lanes<V>;
  V acc[R][NV];
  QKV_UNROLL
  for (int r = 0; r < R; ++r)
    QKV_UNROLL
    for (int v = 0; v < NV; ++v) acc[r][v] = simd::load<V>(c + r * ldc + v * W);
  for (int64_t k = 0; k < K; ++k) {
    V bk[NV];
    QKV_UNROLL
    for (int v = 0; v < NV; ++v) bk[v] = simd::load<V>(b + k * ldb + v * W);
    QKV_UNROLL
    for (int r = 0; r < R; ++r) {
      const V ak = simd::splat<V>(a[r * as.row + k * as.col]);
      QKV_UNROLL
      for (int v = 0; v < NV; ++v) acc[r][v] += ak * bk[v];
    }
  }
  QKV_UNROLL
  for (int r = 0; r < R; ++r)
    QKV_UNROLL
    for (int v = 0; v < NV; ++v) simd::store(c + r * ldc + v * W, acc[r][v]);
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

// C[M, N] += A[M, K] B[K, N], rows in blocks of 4 then one at a time.
inline void accumulate(const float* a, Strides as, const float* b, int64_t ldb, int64_t M, int64_t K, int64_t N,
                       float* c, int64_t ldc) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) accumulate_rows<4>(a + m * as.row, as, b, ldb, K, N, c + m * ldc, ldc);
  for (; m < M; ++m) accumulate_rows<1>(a + m * as.row, as, b, ldb, K, N, c + m * ldc, ldc);
}

}  // namespace qkv::detail
