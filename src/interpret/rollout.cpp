// Attention rollout's kernels: the fused, residual-augmented rows of one layer, and the chain's
// matrix product (see rollout.hpp). Each is a small template over the batch type V (a vector
// loop, then a tail), as the attention kernels are.
#include "interpret/rollout.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "simd.hpp"

namespace qkv {
namespace {

#ifdef QKV_NO_SIMD
using V = float;
#else
using V = simd::Batch;
#endif
constexpr int W = simd::Lanes<V>::value;

// ---- masks and sums, for float and for batches -------------------------------------------------
inline bool all_ok(float v) { return v >= 0.f && v < std::numeric_limits<float>::infinity(); }
inline float sum_lanes(float v) { return v; }
// the TypeScript path's max / min: a comparison with NaN is false, so the NaN is taken
inline float pick_max(float v, float acc) { return !(v <= acc) ? v : acc; }
inline float pick_min(float v, float acc) { return !(v >= acc) ? v : acc; }
#ifndef QKV_NO_SIMD
template <class A>
inline bool all_ok(xsimd::batch<float, A> v) {
  const xsimd::batch<float, A> inf(std::numeric_limits<float>::infinity());
  return xsimd::all((v >= xsimd::batch<float, A>(0.f)) & (v < inf));
}
template <class A>
inline float sum_lanes(xsimd::batch<float, A> v) {
  return xsimd::hadd(v);
}
template <class A>
inline xsimd::batch<float, A> pick_max(xsimd::batch<float, A> v, xsimd::batch<float, A> acc) {
  return xsimd::select(!(v <= acc), v, acc);
}
template <class A>
inline xsimd::batch<float, A> pick_min(xsimd::batch<float, A> v, xsimd::batch<float, A> acc) {
  return xsimd::select(!(v >= acc), v, acc);
}
#endif

// one head's row into the fused row: the sum (mean), max or min so far
template <HeadFusion F, class B>
inline B combine(B v, B acc) {
  if constexpr (F == HeadFusion::Mean) return acc + v;
  if constexpr (F == HeadFusion::Max) return pick_max(v, acc);
  return pick_min(v, acc);
}

// out[j] = fuse_h maps[h * stride + j], j < L; for the mean, the sum (the caller divides by H).
// Four vectors of the row at a time, each with its own accumulator (four independent chains of
// H steps), then one vector, then the tail.
template <HeadFusion F, class B>
void fuse_heads(const float* maps, int64_t H, int64_t stride, int64_t L, float* out) {
  constexpr int N = simd::Lanes<B>::value;
  int64_t j = 0;
  for (; j + 4 * N <= L; j += 4 * N) {
    const float* p = maps + j;
    B a0 = simd::load(p, B{}), a1 = simd::load(p + N, B{}), a2 = simd::load(p + 2 * N, B{}),
      a3 = simd::load(p + 3 * N, B{});
    for (int64_t h = 1; h < H; ++h) {
      p += stride;
      a0 = combine<F>(simd::load(p, B{}), a0);
      a1 = combine<F>(simd::load(p + N, B{}), a1);
      a2 = combine<F>(simd::load(p + 2 * N, B{}), a2);
      a3 = combine<F>(simd::load(p + 3 * N, B{}), a3);
    }
    simd::store(out + j, a0);
    simd::store(out + j + N, a1);
    simd::store(out + j + 2 * N, a2);
    simd::store(out + j + 3 * N, a3);
  }
  for (; j < L; ++j) {
    float a = maps[j];
    for (int64_t h = 1; h < H; ++h) a = combine<F>(maps[h * stride + j], a);
    out[j] = a;
  }
}

// the sum of p[0 .. n); false in `ok` when one of them is negative or not finite
template <class B>
float checked_sum(const float* p, int64_t n, bool& ok) {
  constexpr int N = simd::Lanes<B>::value;
  B acc = simd::splat(0.f, B{});
  bool good = true;
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const B v = simd::load(p + j, B{});
    good = good && all_ok(v);  // && keeps the vector loop branch-light: one test per batch
    acc = acc + v;
  }
  float s = sum_lanes(acc);
  if constexpr (N > 1) s += checked_sum<float>(p + j, n - j, good);
  ok = ok && good;
  return s;
}

template <class B>
void scale(float* p, int64_t n, float k) {
  constexpr int N = simd::Lanes<B>::value;
  const B kk = simd::splat(k, B{});
  int64_t j = 0;
  for (; j + N <= n; j += N) simd::store(p + j, simd::load(p + j, B{}) * kk);
  if constexpr (N > 1) scale<float>(p + j, n - j, k);
}

// ---- the product: a 2 x 4W register tile over B packed in column panels -----------------------
constexpr int64_t TILE_ROWS = 2;
constexpr int64_t PANEL = 4 * W;  // columns per panel (and per tile)

// P [panels][L][PANEL]: panel p holds columns p * PANEL .. of B, row by row, zeros past L
void pack_panels(const float* B, int64_t L, std::vector<float>& P) {
  const int64_t panels = (L + PANEL - 1) / PANEL;
  P.assign(size_t(panels * L * PANEL), 0.f);
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t c0 = p * PANEL, w = std::min(PANEL, L - c0);
    float* dst = P.data() + p * L * PANEL;
    for (int64_t k = 0; k < L; ++k) std::copy(B + k * L + c0, B + k * L + c0 + w, dst + k * PANEL);
  }
}

// rows i0 .. i0 + r - 1 (r <= 2) of C, columns of one panel: sum over k in [k0, k1) of A[i][k] P[k][.]
void tile(const float* A, const float* panel, int64_t L, int64_t i0, int64_t r, int64_t k0, int64_t k1,
          float* out /* [2][PANEL] */) {
  V c00 = simd::splat(0.f, V{}), c01 = c00, c02 = c00, c03 = c00;
  V c10 = c00, c11 = c00, c12 = c00, c13 = c00;
  const float* a0 = A + i0 * L;
  const float* a1 = r > 1 ? a0 + L : a0;  // a single row computes its own row twice
  for (int64_t k = k0; k < k1; ++k) {
    const float* p = panel + k * PANEL;
    const V b0 = simd::load(p, V{}), b1 = simd::load(p + W, V{}), b2 = simd::load(p + 2 * W, V{}),
            b3 = simd::load(p + 3 * W, V{});
    const V x0 = simd::splat(a0[k], V{}), x1 = simd::splat(a1[k], V{});
    c00 = simd::madd(x0, b0, c00);
    c01 = simd::madd(x0, b1, c01);
    c02 = simd::madd(x0, b2, c02);
    c03 = simd::madd(x0, b3, c03);
    c10 = simd::madd(x1, b0, c10);
    c11 = simd::madd(x1, b1, c11);
    c12 = simd::madd(x1, b2, c12);
    c13 = simd::madd(x1, b3, c13);
  }
  simd::store(out, c00);
  simd::store(out + W, c01);
  simd::store(out + 2 * W, c02);
  simd::store(out + 3 * W, c03);
  simd::store(out + PANEL, c10);
  simd::store(out + PANEL + W, c11);
  simd::store(out + PANEL + 2 * W, c12);
  simd::store(out + PANEL + 3 * W, c13);
}

}  // namespace

FusedRows rollout_fuse_rows(const float* maps, int64_t H, int64_t rows, int64_t L, int64_t i0, HeadFusion fusion,
                            float residual, float* out) {
  if (H < 1 || L < 1 || rows < 0 || i0 < 0 || i0 + rows > L || !(residual >= 0.f && residual <= 1.f)) {
    throw std::invalid_argument(
        "rollout_fuse_rows: need H >= 1, L >= 1, 0 <= i0 <= i0 + rows <= L and residual in "
        "[0, 1], got H " +
        std::to_string(H) + ", L " + std::to_string(L) + ", rows " + std::to_string(rows) + " from " +
        std::to_string(i0));
  }
  FusedRows res;
  const float keep = 1.f - residual;
  const int64_t stride = rows * L;
  for (int64_t q = 0; q < rows; ++q) {
    const int64_t i = i0 + q;
    float* row = out + q * L;
    // fused row, then its checks and its sums on and below / above the diagonal
    if (fusion == HeadFusion::Mean) fuse_heads<HeadFusion::Mean, V>(maps + q * L, H, stride, L, row);
    if (fusion == HeadFusion::Max) fuse_heads<HeadFusion::Max, V>(maps + q * L, H, stride, L, row);
    if (fusion == HeadFusion::Min) fuse_heads<HeadFusion::Min, V>(maps + q * L, H, stride, L, row);
    const float fused_scale = fusion == HeadFusion::Mean ? 1.f / float(H) : 1.f;
    bool ok = true;
    const float below = fused_scale * checked_sum<V>(row, i + 1, ok);
    const float above = fused_scale * checked_sum<V>(row + i + 1, L - i - 1, ok);
    if (!ok) {
      int64_t j = 0;
      while (all_ok(row[j])) ++j;
      res.bad_row = i;
      res.bad_value = row[j] * fused_scale;
      return res;
    }
    // A'_l[i] = (keep * fused + residual * e_i) / (keep * sum + residual); above the diagonal
    // a causal row is 0 and stays 0
    const float sum = keep * (below + above) + residual;
    const float inv = sum > 0.f ? 1.f / sum : 1.f;
    scale<V>(row, L, fused_scale * keep * inv);
    row[i] += residual * inv;
    if (above != 0.f) res.lower = false;
  }
  return res;
}

void rollout_product(const float* A, const float* B, float* C, int64_t L, bool lower) {
  if (L < 1) throw std::invalid_argument("rollout_product: need L >= 1, got " + std::to_string(L));
  std::vector<float> P;
  pack_panels(B, L, P);
  float out[TILE_ROWS * PANEL];
  for (int64_t i0 = 0; i0 < L; i0 += TILE_ROWS) {
    const int64_t r = std::min(TILE_ROWS, L - i0);
    const int64_t last = i0 + r - 1;
    // lower: C[i][j] = sum_{k=j..i} A[i][k] B[k][j], so panels up to the last row's diagonal
    const int64_t c_end = lower ? last + 1 : L;
    for (int64_t c0 = 0; c0 < c_end; c0 += PANEL) {
      const int64_t k0 = lower ? c0 : 0, k1 = lower ? last + 1 : L;
      tile(A, P.data() + (c0 / PANEL) * L * PANEL, L, i0, r, k0, k1, out);
      const int64_t w = std::min(PANEL, L - c0);
      for (int64_t q = 0; q < r; ++q) std::copy(out + q * PANEL, out + q * PANEL + w, C + (i0 + q) * L + c0);
    }
    // above the diagonal of a lower product, past the panels written: 0
    const int64_t written = std::min(L, (c_end + PANEL - 1) / PANEL * PANEL);
    for (int64_t q = 0; q < r; ++q) std::fill(C + (i0 + q) * L + written, C + (i0 + q + 1) * L, 0.f);
  }
}

}  // namespace qkv
