// Matrix-vector products for 16-bit weights (F16, BF16) in the InOut [K, N] and Panels layouts
// (gemv.cpp has the overview, the F32 kernels, OutIn for every float type and the dispatch).
// Columns go in groups of 8: each 16-byte load of a row gives a group's even columns in one
// vector and its odd ones in another (halves.hpp), and the sums stay in that order ([even 4]
// [odd 4] per group) until the end. F16 widens with a factor 2^-112 split between x (x * 2^56)
// and the sums (2^-56, bias included), undone exactly at the end; BF16 widens exactly. Each
// column adds its products in k order after its bias, as the matrix product (gemm.cpp) does.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "matmul/gemv_parts.hpp"
#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"
#include "simd.hpp"

namespace qkv::detail {
namespace {

#ifndef QKV_NO_SIMD
using halves::F4;
using halves::I4;
#endif

// ------------------------------------------------------------------ F16 / BF16, InOut [K, N]

#ifndef QKV_NO_SIMD
// acc[groups of 8] += rows r < R of a 16-bit W (from w, N apart) times xs[r], in row order;
// acc holds each group as [even 4][odd 4] (halves.hpp)
template <bool kF16, int R>
void half_rows(const uint16_t* w, int64_t N, const float* xs, float* acc, float* end) {
  F4 v[R];
  const uint16_t* p[R];
  QKV_UNROLL
  for (int r = 0; r < R; ++r) v[r] = F4(xs[r]), p[r] = w + r * N;
  for (; acc < end; acc += 8) {
    F4 even = F4::load_unaligned(acc), odd = F4::load_unaligned(acc + 4);
    QKV_UNROLL
    for (int r = 0; r < R; ++r) {
      const I4 u = halves::load_pairs(p[r]);
      even = simd::madd(v[r], halves::wide_even<kF16>(u), even);
      odd = simd::madd(v[r], halves::wide_odd<kF16>(u), odd);
      p[r] += 8;
    }
    even.store_unaligned(acc);
    odd.store_unaligned(acc + 4);
  }
}
#endif

// The 16-bit kernels' sums for the columns [n0, n1) in groups of 8, each [even 4][odd 4]
// (halves.hpp), the last group possibly short: acc[n0 ..] set to bias * scale (0 past n1 and
// without bias), and put back in natural order into y[n0 : n1], divided by scale
inline void groups_from_bias(float* acc, const float* bias, float scale, int64_t n0, int64_t n1) {
  const auto at = [&](int64_t n) { return bias && n < n1 ? bias[n] * scale : 0.0f; };
  for (int64_t n = n0; n < n1; n += 8) {
    for (int64_t i = 0; i < 4; ++i) acc[n + i] = at(n + 2 * i), acc[n + 4 + i] = at(n + 2 * i + 1);
  }
}
inline void groups_to_y(const float* acc, float scale, int64_t n0, int64_t n1, float* y) {
  for (int64_t n = n0; n < n1; n += 8) {
    for (int64_t i = 0; i < 4; ++i) {
      if (n + 2 * i < n1) y[n + 2 * i] = acc[n + i] / scale;
      if (n + 2 * i + 1 < n1) y[n + 2 * i + 1] = acc[n + 4 + i] / scale;
    }
  }
}

// y[n0:n1] = bias + sum_k x[k] W[k, n0:n1], W 16-bit. Columns in groups of 8: each 16-byte load
// of a row gives the group's even columns in one vector and its odd ones in another
// (halves.hpp); acc keeps them in that order ([even 4][odd 4] per group) until the end.
// x_scaled: x * 2^56 for F16, x for BF16.
template <WeightType T>
void gemv_half_inout(const WeightMatrix& w, const float* x, const float* x_scaled, const float* bias, float* y,
                     int64_t n0, int64_t n1) {
  constexpr bool kF16 = T == WeightType::F16;
  const int64_t K = w.K, N = w.N;
  const uint16_t* W = static_cast<const uint16_t*>(w.data);
  thread_local std::vector<float> acc_buffer;
  acc_buffer.resize(size_t(n1 - n0));
  float* acc = acc_buffer.data() - n0;  // acc[n] for n in [n0, n1)
  const auto widen = [](uint16_t h) { return kF16 ? halves::f16_to_f32(h) : halves::bf16_to_f32(h); };
  int64_t grouped = n0;  // columns [n0, grouped) are in groups of 8, [grouped, n1) in natural order
  // F16 groups carry a factor 2^-56 (the widening's), bias included, undone exactly at the end
  const float scale = kF16 ? 1.0f / halves::kF16Half : 1.0f;
#ifndef QKV_NO_SIMD
  grouped = n0 + (n1 - n0) / 8 * 8;
  const float* xs = x_scaled;
#else
  (void)x_scaled;
#endif
  groups_from_bias(acc, bias, scale, n0, grouped);
  for (int64_t n = grouped; n < n1; ++n) acc[n] = bias ? bias[n] : 0.0f;
#ifndef QKV_NO_SIMD
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) half_rows<kF16, 16>(W + k * N + n0, N, xs + k, acc + n0, acc + grouped);
  for (; k + 8 <= K; k += 8) half_rows<kF16, 8>(W + k * N + n0, N, xs + k, acc + n0, acc + grouped);
  for (; k < K; ++k) half_rows<kF16, 1>(W + k * N + n0, N, xs + k, acc + n0, acc + grouped);
#endif
  for (int64_t n = grouped; n < n1; ++n) {
    for (int64_t k = 0; k < K; ++k) acc[n] += x[k] * widen(W[k * N + n]);
  }
  groups_to_y(acc, scale, n0, grouped, y);  // back to natural order (F16: undo the 2^-56)
  for (int64_t n = grouped; n < n1; ++n) y[n] = acc[n];
}

// ------------------------------------------------------------------ F16 / BF16, Panels

#ifndef QKV_NO_SIMD
// acc[s][0 : 8H] += sum_k xs[k] W[k, ...] for S runs of 8H 16-bit columns, run s from p[s], its
// rows `width` elements apart: each 16-byte load gives 8 columns' even ones in one vector and
// their odd ones in another, and acc keeps them so ([even 4][odd 4] per 8 columns, halves.hpp);
// S sequential streams, S * 2H sums in registers, each column's products added in k order
template <bool kF16, int S, int H>
void half_panel_runs(const uint16_t* const* p, int64_t width, int64_t K, const float* xs, float* const* acc) {
  F4 a[S][2 * H];
  const uint16_t* q[S];
  QKV_UNROLL
  for (int s = 0; s < S; ++s) {
    q[s] = p[s];
    QKV_UNROLL
    for (int v = 0; v < 2 * H; ++v) a[s][v] = F4::load_unaligned(acc[s] + 4 * v);
  }
  for (const float* end = xs + K; xs < end; ++xs) {
    const F4 xk(*xs);
    QKV_UNROLL
    for (int s = 0; s < S; ++s) {
      QKV_UNROLL
      for (int h = 0; h < H; ++h) {
        const I4 u = halves::load_pairs(q[s] + 8 * h);
        a[s][2 * h] = simd::madd(xk, halves::wide_even<kF16>(u), a[s][2 * h]);
        a[s][2 * h + 1] = simd::madd(xk, halves::wide_odd<kF16>(u), a[s][2 * h + 1]);
      }
      q[s] += width;
    }
  }
  QKV_UNROLL
  for (int s = 0; s < S; ++s) {
    QKV_UNROLL
    for (int v = 0; v < 2 * H; ++v) a[s][v].store_unaligned(acc[s] + 4 * v);
  }
}
#endif

// y[n0:n1] = bias + sum_k x[k] W[k, n0:n1], W 16-bit in Panels, n0 on an 8-column boundary: the
// whole panels as walk_whole_panels goes, the sums in groups of 8 columns as gemv_half_inout
// keeps them ([even 4][odd 4], F16 with its 2^-56, x_scaled = x * 2^56; BF16 x itself), put back
// in order at the end. The last panel's N % 16 columns go 8 at a time, a last group of fewer
// through a zero-padded copy of each row: every column sees the multiply-adds of the matrix
// product's tiles (gemm.cpp), scaled by powers of 2.
template <WeightType T>
void gemv_half_panels(const WeightMatrix& w, const float* x, const float* x_scaled, const float* bias, float* y,
                      int64_t n0, int64_t n1) {
  constexpr bool kF16 = T == WeightType::F16;
  const int64_t K = w.K, N = w.N;
  const uint16_t* W = static_cast<const uint16_t*>(w.data);
#ifdef QKV_NO_SIMD
  (void)x_scaled;
  for (int64_t n = n0; n < n1; ++n) {  // one column at a time, in k order
    const int64_t first = n / kPanel * kPanel, width = std::min(kPanel, N - first);
    const uint16_t* p = W + first * K + (n - first);
    float sum = bias ? bias[n] : 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      const uint16_t h = p[k * width];
      sum = simd::madd(x[k], kF16 ? halves::f16_to_f32(h) : halves::bf16_to_f32(h), sum);
    }
    y[n] = sum;
  }
#else
  (void)x;
  const int64_t whole = N / kPanel * kPanel;  // columns [0, whole) in whole panels
  const auto column = [&](int64_t n) { return W + n / kPanel * kPanel * K + n % kPanel; };  // W[0, n], a whole panel
  thread_local std::vector<float> acc_buffer;
  acc_buffer.resize(size_t((n1 - n0 + 7) / 8 * 8));
  float* acc = acc_buffer.data() - n0;  // acc[n] for n in [n0, n0 + the groups' columns)
  // F16 groups carry a factor 2^-56 (the widening's), bias included, undone exactly at the end
  const float scale = kF16 ? 1.0f / halves::kF16Half : 1.0f;
  groups_from_bias(acc, bias, scale, n0, n1);
  const float* xs = x_scaled;
  int64_t n = walk_whole_panels(n0, n1, N, [&](auto streams, auto full_panel, const int64_t* columns) {
    constexpr int S = decltype(streams)::value, H = decltype(full_panel)::value ? 2 : 1;
    const uint16_t* p[S];
    float* out[S];
    QKV_UNROLL
    for (int s = 0; s < S; ++s) p[s] = column(columns[s]), out[s] = acc + columns[s];
    half_panel_runs<kF16, S, H>(p, kPanel, K, xs, out);
  });
  const int64_t width = N - whole;  // the last panel: [K][width]
  for (; n < n1; n += 8) {
    const int64_t count = std::min<int64_t>(8, n1 - n);
    const uint16_t* p = W + whole * K + (n - whole);
    float* out = acc + n;
    if (count == 8) {
      half_panel_runs<kF16, 1, 1>(&p, width, K, xs, &out);
      continue;
    }
    F4 even = F4::load_unaligned(out), odd = F4::load_unaligned(out + 4);
    uint16_t row[8] = {};
    for (int64_t k = 0; k < K; ++k, p += width) {
      std::copy(p, p + count, row);
      const I4 u = halves::load_pairs(row);
      even = simd::madd(F4(xs[k]), halves::wide_even<kF16>(u), even);
      odd = simd::madd(F4(xs[k]), halves::wide_odd<kF16>(u), odd);
    }
    even.store_unaligned(out);
    odd.store_unaligned(out + 4);
  }
  groups_to_y(acc, scale, n0, n1, y);  // back to natural order (F16: undo the 2^-56)
#endif
}

}  // namespace

void gemv_half(const WeightMatrix& w, const float* x, const float* x_scaled, const float* bias, float* y, int64_t n0,
               int64_t n1) {
  const bool panels = w.layout == WeightLayout::Panels;
  if (w.type == WeightType::F16) {
    return panels ? gemv_half_panels<WeightType::F16>(w, x, x_scaled, bias, y, n0, n1)
                  : gemv_half_inout<WeightType::F16>(w, x, x_scaled, bias, y, n0, n1);
  }
  return panels ? gemv_half_panels<WeightType::BF16>(w, x, x_scaled, bias, y, n0, n1)
                : gemv_half_inout<WeightType::BF16>(w, x, x_scaled, bias, y, n0, n1);
}

}  // namespace qkv::detail
