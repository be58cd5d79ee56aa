// Packing W for the matrix product (gemm.cpp): the rows [k0, k1) and columns [j0, j1) of a
// weight matrix, whatever its type and layout, into float panels of kNR columns, [kc][kNR] each,
// that the micro-kernel reads in order. Each weight is widened or dequantized once per call.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "matmul/gemm_parts.hpp"
#include "matmul/gemm_q4.hpp"
#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"
#include "simd.hpp"

#ifndef QKV_NO_SIMD
#include <smmintrin.h>
#endif

namespace qkv::detail {
namespace {

// out[0 : n] = row[0 : n] widened: F16 (f16) or BF16, 8 at a time as the GEMV widens them
void widen_run(const uint16_t* row, int64_t n, bool f16, float* out) {
  int64_t j = 0;
#ifndef QKV_NO_SIMD
  using halves::F4;
  using halves::I4;
  const F4 scale(f16 ? halves::kF16Scale : 1.0f);
  for (; j + 8 <= n; j += 8) {
    const I4 u = halves::load_pairs(row + j);
    const F4 even =
        f16 ? halves::f16_high_scaled(halves::even_high(u)) * scale : halves::bf16_high(halves::even_high(u));
    const F4 odd = f16 ? halves::f16_high_scaled(halves::odd_high(u)) * scale : halves::bf16_high(halves::odd_high(u));
    xsimd::zip_lo(even, odd).store_unaligned(out + j);  // 4-lane zips: the natural order again
    xsimd::zip_hi(even, odd).store_unaligned(out + j + 4);
  }
#endif
  for (; j < n; ++j) out[j] = f16 ? halves::f16_to_f32(row[j]) : halves::bf16_to_f32(row[j]);
}

// out[j - j0] = W[k, j] for j in [j0, j1): one row of an InOut matrix, widened
void row_inout(const WeightMatrix& w, int64_t k, int64_t j0, int64_t j1, float* out) {
  if (w.type == WeightType::F32) {
    std::memcpy(out, static_cast<const float*>(w.data) + k * w.N + j0, size_t(j1 - j0) * 4);
    return;
  }
  widen_run(static_cast<const uint16_t*>(w.data) + k * w.N + j0, j1 - j0, w.type == WeightType::F16, out);
}

// out[k - k0] = W[k, j] for k in [k0, k1): part of one column of an OutIn matrix, widened
void column_outin(const WeightMatrix& w, int64_t j, int64_t k0, int64_t k1, float* out) {
  const size_t at = size_t(j * w.K);
  switch (w.type) {
    case WeightType::F32:
      std::memcpy(out, static_cast<const float*>(w.data) + at + k0, size_t(k1 - k0) * 4);
      return;
    case WeightType::F16: {
      const uint16_t* p = static_cast<const uint16_t*>(w.data) + at;
      for (int64_t k = k0; k < k1; ++k) out[k - k0] = halves::f16_to_f32(p[k]);
      return;
    }
    case WeightType::BF16: {
      const uint16_t* p = static_cast<const uint16_t*>(w.data) + at;
      for (int64_t k = k0; k < k1; ++k) out[k - k0] = halves::bf16_to_f32(p[k]);
      return;
    }
    case WeightType::Q8:
    case WeightType::Q4:
      return;  // not a float layout (pack_q8, pack_q4)
  }
}

// Q8 columns [j0, j1), rows [k0, k1) into the panels: panel[k - k0][c] = d * q
void pack_q8(const WeightMatrix& w, int64_t k0, int64_t k1, int64_t j0, int64_t j1, float* panels) {
  const Q8Layout q = Q8Layout::of(w.K, w.N);
  const int8_t* data = static_cast<const int8_t*>(w.data);
  const int64_t kc = k1 - k0;
  const auto place = [&](int64_t j) { return panels + (j - j0) / kNR * kc * kNR + (j - j0) % kNR; };
  int64_t j = j0;
#ifndef QKV_NO_SIMD
  // whole groups of 4 columns (kNR and kKC are multiples of 4 and 2: groups and k-pairs align);
  // columns past N hold zeros, and the panels have room up to a multiple of kNR
  for (; j < j1; j += 4) {
    const int64_t g = j / 4;
    float* dst = place(j);
    for (int64_t k = k0; k < k1; k += 2) {
      const int64_t b = k / 32;
      // 8 bytes: (k, k + 1) of the 4 columns -> [c0k c0k' c1k c1k'], [c2k c2k' c3k c3k'] as floats
      const __m128i v =
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(data + (g * q.blocks + b) * 128 + (k % 32) / 2 * 8));
      const __m128 lo = _mm_cvtepi32_ps(_mm_cvtepi8_epi32(v)),
                   hi = _mm_cvtepi32_ps(_mm_cvtepi8_epi32(_mm_srli_si128(v, 4)));
      const halves::F4 d = halves::positive_halves(w.scales + (g * q.blocks + b) * 4);
      (halves::F4(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))) * d).store_unaligned(dst + (k - k0) * kNR);
      if (k + 1 < k1)
        (halves::F4(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))) * d).store_unaligned(dst + (k + 1 - k0) * kNR);
    }
  }
#endif
  for (; j < j1; ++j) {
    const int64_t g = j / 4, c = j % 4;
    float* dst = place(j);
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t b = k / 32;
      const int8_t qv = data[(g * q.blocks + b) * 128 + (k % 32) / 2 * 8 + c * 2 + k % 2];
      dst[(k - k0) * kNR] = halves::f16_to_f32(w.scales[(g * q.blocks + b) * 4 + c]) * float(qv);
    }
  }
}

// dst[0 : n] = src[0 : n], n <= kNR: a whole panel row as kNV vector copies (a memcpy of a
// run-time size is a call into Emscripten's memcpy, which copies 4 bytes at a time: with it,
// packing took ~24% of a 32-row product instead of ~14%)
inline void copy_panel_row(float* dst, const float* src, int64_t n) {
  if (n == kNR) {
    QKV_UNROLL
    for (int v = 0; v < kNV; ++v) simd::store(dst + v * kW, simd::load<V>(src + v * kW));
  } else {
    std::memcpy(dst, src, size_t(n) * 4);
  }
}

#ifndef QKV_NO_SIMD
// 16-bit OutIn columns [j0, j1) (whole groups of 4), rows [k0, k1), into the panels: for 4
// columns (4 rows of storage) x 8 k at a time, each column's 8 halves widened as the GEMV
// widens them (even and odd k in two vectors; F16 times 2^112, exact), then the 4 columns'
// vectors transposed (4 x 4) so that each k's 4 values are one store. The scalar widening of
// one element at a time (column_outin) made a 16-bit prefill pack ~5x slower than F32's.
template <bool kF16>
void pack_half_outin(const WeightMatrix& w, int64_t k0, int64_t k1, int64_t j0, int64_t j1, float* panels) {
  const int64_t kc = k1 - k0;
  const uint16_t* data = static_cast<const uint16_t*>(w.data);
  const V scale(kF16 ? halves::kF16Scale : 1.0f);
  for (int64_t j = j0; j + 4 <= j1; j += 4) {
    float* dst = panels + (j - j0) / kNR * kc * kNR + (j - j0) % kNR;  // kNR is a multiple of 4
    const uint16_t* col[4];
    QKV_UNROLL
    for (int c = 0; c < 4; ++c) col[c] = data + (j + c) * w.K;
    int64_t k = k0;
    for (; k + 8 <= k1; k += 8) {
      __m128 even[4], odd[4];  // even[c] = W[k, k+2, k+4, k+6 ; j + c], odd[c] the k+1, ... ones
      QKV_UNROLL
      for (int c = 0; c < 4; ++c) {
        const halves::I4 u = halves::load_pairs(col[c] + k);
        even[c] = kF16 ? halves::wide_even<true>(u) * scale : halves::wide_even<false>(u);
        odd[c] = kF16 ? halves::wide_odd<true>(u) * scale : halves::wide_odd<false>(u);
      }
      _MM_TRANSPOSE4_PS(even[0], even[1], even[2], even[3]);  // even[i] = W[k + 2i ; j .. j+3]
      _MM_TRANSPOSE4_PS(odd[0], odd[1], odd[2], odd[3]);      // odd[i] = W[k + 2i + 1 ; j .. j+3]
      QKV_UNROLL
      for (int i = 0; i < 4; ++i) {
        _mm_storeu_ps(dst + (k + 2 * i - k0) * kNR, even[i]);
        _mm_storeu_ps(dst + (k + 2 * i + 1 - k0) * kNR, odd[i]);
      }
    }
    for (; k < k1; ++k) {
      QKV_UNROLL
      for (int c = 0; c < 4; ++c)
        dst[(k - k0) * kNR + c] = kF16 ? halves::f16_to_f32(col[c][k]) : halves::bf16_to_f32(col[c][k]);
    }
  }
}

// F32 OutIn columns [j0, j1) (whole groups of 4), rows [k0, k1), into the panels: 4 columns x 4 k
// at a time, transposed (4 x 4) so that each k's 4 values are one store. Before, each column went
// through a memcpy of kc floats (>= 512 bytes: Emscripten hands it to JS's copyWithin, and into a
// threads build's SharedArrayBuffer heap V8 copies word by word) and then a scalar scatter:
// ~7% of SmolLM2's 128-token prefill in that memmove alone (perf, wasm, 1 thread).
void pack_f32_outin(const WeightMatrix& w, int64_t k0, int64_t k1, int64_t j0, int64_t j1, float* panels) {
  const int64_t kc = k1 - k0;
  const float* data = static_cast<const float*>(w.data);
  for (int64_t j = j0; j + 4 <= j1; j += 4) {
    float* dst = panels + (j - j0) / kNR * kc * kNR + (j - j0) % kNR;  // kNR is a multiple of 4
    const float* col[4];
    QKV_UNROLL
    for (int c = 0; c < 4; ++c) col[c] = data + (j + c) * w.K;
    int64_t k = k0;
    for (; k + 4 <= k1; k += 4) {
      __m128 r[4];  // r[c] = W[k .. k+3 ; j + c]
      QKV_UNROLL
      for (int c = 0; c < 4; ++c) r[c] = _mm_loadu_ps(col[c] + k);
      _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);  // r[i] = W[k + i ; j .. j+3]
      QKV_UNROLL
      for (int i = 0; i < 4; ++i) _mm_storeu_ps(dst + (k + i - k0) * kNR, r[i]);
    }
    for (; k < k1; ++k) {
      QKV_UNROLL
      for (int c = 0; c < 4; ++c) dst[(k - k0) * kNR + c] = col[c][k];
    }
  }
}
#endif

// dst[k][0 : n] = src[k * width ..][0 : n] widened, for k < kc (rows kNR apart): 16-bit panel
// rows into a packed panel, 8 columns at a time as the GEMV widens them (F16 then times 2^112,
// exact), zipped back to the natural order; fewer than 8 one at a time. (Through widen_run's
// general loop, row by row, a 32-token F16 prefill took 5% longer than from [N, K].)
void pack_half_rows(const uint16_t* src, int64_t width, int64_t kc, int64_t n, bool f16, float* dst) {
  int64_t j = 0;
#ifndef QKV_NO_SIMD
  using halves::F4;
  using halves::I4;
  const int64_t runs = n / 8 * 8;
  const auto rows = [&](auto f16_tag) {
    constexpr bool kF16 = decltype(f16_tag)::value;
    const F4 scale(kF16 ? halves::kF16Scale : 1.0f);
    const uint16_t* s = src;
    float* d = dst;
    for (int64_t k = 0; k < kc; ++k, s += width, d += kNR) {
      for (int64_t c = 0; c < runs; c += 8) {
        const I4 u = halves::load_pairs(s + c);
        const F4 even = kF16 ? halves::wide_even<true>(u) * scale : halves::wide_even<false>(u);
        const F4 odd = kF16 ? halves::wide_odd<true>(u) * scale : halves::wide_odd<false>(u);
        xsimd::zip_lo(even, odd).store_unaligned(d + c);
        xsimd::zip_hi(even, odd).store_unaligned(d + c + 4);
      }
    }
  };
  f16 ? rows(std::true_type{}) : rows(std::false_type{});
  j = runs;
#endif
  if (j < n) {
    for (int64_t k = 0; k < kc; ++k) widen_run(src + k * width + j, n - j, f16, dst + k * kNR + j);
  }
}

}  // namespace

void pack_w(const WeightMatrix& w, int64_t k0, int64_t k1, int64_t j0, int64_t j1, float* panels,
            std::vector<float>& line) {
  const int64_t kc = k1 - k0, cols = j1 - j0, count = (cols + kNR - 1) / kNR;
  if (cols % kNR) {  // the last panel's columns past j1 stay zero
    float* last = panels + (count - 1) * kc * kNR;
    std::fill(last, last + kc * kNR, 0.0f);
  }
  if (w.type == WeightType::Q8) return pack_q8(w, k0, k1, j0, j1, panels);
  if (w.type == WeightType::Q4) return pack_q4(w, k0, k1, j0, j1, panels, kNR);
  if (w.layout == WeightLayout::Panels) {
    // panels of 16 (weights.hpp): a packed panel (kNR = 16 or 8 columns, from a multiple of kNR)
    // lies inside one of them, its rows a run of that panel's rows, copied or widened
    for (int64_t p = 0; p < count; ++p) {
      const int64_t end = j0 + std::min<int64_t>(cols, (p + 1) * kNR);
      for (int64_t j = j0 + p * kNR; j < end;) {  // (one run unless a tile override makes kNR not divide 16)
        const int64_t first = j / kPanel * kPanel, width = std::min(kPanel, w.N - first);
        const int64_t n = std::min(end, first + width) - j, at = first * w.K + k0 * width + (j - first);
        float* dst = panels + p * kc * kNR + (j - j0 - p * kNR);
        if (w.type == WeightType::F32) {
          const float* src = static_cast<const float*>(w.data) + at;
          for (int64_t k = 0; k < kc; ++k) copy_panel_row(dst + k * kNR, src + k * width, n);
        } else {
          pack_half_rows(static_cast<const uint16_t*>(w.data) + at, width, kc, n, w.type == WeightType::F16, dst);
        }
        j += n;
      }
    }
  } else if (w.layout == WeightLayout::InOut && w.type == WeightType::F32) {
    // 8 rows at a time: 8 reads in flight (one row at a time left the memory system half idle,
    // which at M = 32 cost ~12% of the whole product)
    const float* W = static_cast<const float*>(w.data);
    int64_t k = k0;
    for (; k + 8 <= k1; k += 8) {
      const float* rows = W + k * w.N + j0;
      for (int64_t p = 0; p < count; ++p) {
        const int64_t n = std::min<int64_t>(kNR, cols - p * kNR);
        float* dst = panels + (p * kc + (k - k0)) * kNR;
        QKV_UNROLL
        for (int r = 0; r < 8; ++r) copy_panel_row(dst + r * kNR, rows + r * w.N + p * kNR, n);
      }
    }
    for (; k < k1; ++k) {
      for (int64_t p = 0; p < count; ++p) {
        const int64_t n = std::min<int64_t>(kNR, cols - p * kNR);
        copy_panel_row(panels + (p * kc + (k - k0)) * kNR, W + k * w.N + j0 + p * kNR, n);
      }
    }
  } else if (w.layout == WeightLayout::InOut) {
    line.resize(size_t(cols));
    for (int64_t k = k0; k < k1; ++k) {
      row_inout(w, k, j0, j1, line.data());
      for (int64_t p = 0; p < count; ++p) {
        const int64_t n = std::min<int64_t>(kNR, cols - p * kNR);
        copy_panel_row(panels + (p * kc + (k - k0)) * kNR, line.data() + p * kNR, n);
      }
    }
  } else {
    int64_t j = j0;
#ifndef QKV_NO_SIMD
    if (w.type == WeightType::F16 || w.type == WeightType::BF16) {
      w.type == WeightType::F16 ? pack_half_outin<true>(w, k0, k1, j0, j1, panels)
                                : pack_half_outin<false>(w, k0, k1, j0, j1, panels);
      j = j0 + (j1 - j0) / 4 * 4;  // the last (j1 - j0) % 4 columns: below
    } else if (w.type == WeightType::F32) {
      pack_f32_outin(w, k0, k1, j0, j1, panels);
      j = j0 + (j1 - j0) / 4 * 4;
    }
#endif
    line.resize(size_t(kc));
    for (; j < j1; ++j) {
      column_outin(w, j, k0, k1, line.data());
      float* dst = panels + (j - j0) / kNR * kc * kNR + (j - j0) % kNR;
      for (int64_t k = 0; k < kc; ++k) dst[k * kNR] = line[size_t(k)];
    }
  }
}

}  // namespace qkv::detail
