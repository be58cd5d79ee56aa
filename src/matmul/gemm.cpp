// Matrix products for prefill: y[M, N] = x[M, K] W + bias, M > 1, blocked and packed.
//
// The loops, after BLIS (Goto's algorithm), sized for one core's caches and 16 vector registers:
//   for each block of <= kNC output columns (a thread's work item):
//     for each block of kKC rows of W (pc):
//       pack W[pc : pc+kc, cols] into float panels of kNR columns, [kc][kNR] each (16 KB: L1),
//         widening F16/BF16 and dequantizing Q8 on the way: each weight is decoded once per
//         call and then used by all M rows;
//       pack x[:, pc : pc+kc] into row blocks of kMR, [kc][kMR] each;
//       for each panel, for each row block: the micro-kernel adds a kMR x kNR tile of
//         products into y, its kMR x kNV accumulators held in registers across the kc rows.
// The micro-kernel is kMR rows x kNV vectors, its multiply-add simd::madd (simd_madd.hpp).
// Plain SIMD build: 2 rows x 4 vectors (16 columns in wasm), 8 chains, 4 loads and 2
// broadcasts per k. Measured in Node 20 (GPT-2-small shapes, M = 32 / 128 / 512, builds
// alternating, CPU time), 2 x 4 against 3 x 3: plain +0-1% / +2-9% / +5-6%. Larger tiles spill
// in V8: TurboFan schedules all loads of a block before its arithmetic, so R x NV keeps
// R*NV + NV + R vectors live (plus the products of a mul + add), and x64 V8 has 15 xmm
// registers to give (2 x 6: 5 accumulators stored and reloaded every k).
// Relaxed SIMD build: 6 rows x 2 vectors (8 columns), 12 fused chains, 2 loads and 6
// broadcasts per k: 12 + 2 + 1 live vectors, as a fused madd needs no product register. In
// Chromium 156 (V8 15), relaxed/plain per M: 6 x 2 1.19 / 1.25-1.28 / 1.27-1.29, 2 x 4
// 1.16-1.20 / 1.19-1.22 / 1.19-1.21; 5 x 2, 3 x 3, 4 x 2 between; 7 x 2, 2 x 5, 2 x 6, 3 x 4,
// 4 x 3 slower. Node 20's V8 11 runs 6 x 2 8-13% slower than 2 x 4 (its relaxed SIMD is behind
// a flag there). Unrolling k by hand puts more loads in one block (7-25% slower in both V8s);
// LLVM's own unrolling keeps an exit test, so a block, per k. README "The relaxed-SIMD build".
// QKV_GEMM_MR / QKV_GEMM_NV override the tile (for such measurements).
// Every y element adds its products in k order in any split, so the thread count changes no bit
// (a float InOut W: in k order within each of its two parts, matmul.hpp's inout_split).
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "matmul/gemm_q4.hpp"
#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"
#include "simd.hpp"  // and simd_madd.hpp
#include "thread_pool.hpp"

#ifndef QKV_NO_SIMD
#include <smmintrin.h>
#endif

namespace qkv::detail {
namespace {

#ifndef QKV_NO_SIMD
using V = halves::F4;
#else
using V = float;
#endif
constexpr int kW = simd::lanes<V>;
#if defined(QKV_RELAXED_SIMD) && !defined(QKV_GEMM_MR) && !defined(QKV_GEMM_NV)
#define QKV_GEMM_MR 6  // fused madd needs no product registers: 12 accumulators fit (see above)
#define QKV_GEMM_NV 2
#endif
#ifndef QKV_GEMM_MR
#define QKV_GEMM_MR 2
#endif
#ifndef QKV_GEMM_NV
#define QKV_GEMM_NV 4
#endif
constexpr int kMR = QKV_GEMM_MR;  // rows of a micro-tile
constexpr int kNV = QKV_GEMM_NV;  // vectors of a micro-tile
constexpr int kNR = kNV * kW;     // columns of a micro-tile and of a packed panel (16 in wasm)
constexpr int64_t kKC = 256;      // rows of W per packed block
constexpr int64_t kNC = 768;      // columns per work item (its packed block: 768 KB)

// Where a micro-tile's sums start and end: from c (from_zero false) or from zero; back into c
// (sum_into null) or added to sum_into's tile (rows ld_into apart) as sum_into + acc
struct TileEnds {
  bool from_zero = false;
  float* sum_into = nullptr;
  int64_t ld_into = 0;
};

// c[R][kNR] += a[kc][R] b[kc][kNR] (or as `ends` says): a and b packed, c rows ldc apart
template <int R>
void micro_kernel(const float* a, const float* b, int64_t kc, float* c, int64_t ldc, const TileEnds& ends) {
  V acc[R][kNV];
  QKV_UNROLL
  for (int r = 0; r < R; ++r) {
    QKV_UNROLL
    for (int v = 0; v < kNV; ++v) acc[r][v] = ends.from_zero ? V(0.0f) : simd::load<V>(c + r * ldc + v * kW);
  }
  for (int64_t k = 0; k < kc; ++k, a += R, b += kNR) {
    V bk[kNV];
    QKV_UNROLL
    for (int v = 0; v < kNV; ++v) bk[v] = simd::load<V>(b + v * kW);
    QKV_UNROLL
    for (int r = 0; r < R; ++r) {
      const V ar = simd::splat<V>(a[r]);
      QKV_UNROLL
      for (int v = 0; v < kNV; ++v) acc[r][v] = simd::madd(ar, bk[v], acc[r][v]);
    }
  }
  if (ends.sum_into) {
    QKV_UNROLL
    for (int r = 0; r < R; ++r) {
      float* out = ends.sum_into + r * ends.ld_into;
      QKV_UNROLL
      for (int v = 0; v < kNV; ++v) simd::store(out + v * kW, simd::load<V>(out + v * kW) + acc[r][v]);
    }
    return;
  }
  QKV_UNROLL
  for (int r = 0; r < R; ++r) {
    QKV_UNROLL
    for (int v = 0; v < kNV; ++v) simd::store(c + r * ldc + v * kW, acc[r][v]);
  }
}

// the tile's rows: kMR, or fewer at the bottom edge
template <int R = kMR>
void micro(int rows, const float* a, const float* b, int64_t kc, float* c, int64_t ldc, const TileEnds& ends) {
  if constexpr (R > 1) {
    if (rows < R) return micro<R - 1>(rows, a, b, kc, c, ldc, ends);
  }
  micro_kernel<R>(a, b, kc, c, ldc, ends);
}

// ------------------------------------------------------------------ packing W

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

// Packs W[k0 : k1, j0 : j1] into panels [ceil((j1 - j0) / kNR)][k1 - k0][kNR], zero-padded.
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

// x[:, k0 : k1] -> row blocks of kMR (the last may be shorter), each [k1 - k0][rows]. The wasm
// tiles' blocks go 4 columns at a time: two rows with vector zips, six (the relaxed tile's) with
// a 4 x 4 transpose and a zip; the plain loop with 64-bit indices became emulated i64x2
// multiplies in wasm, ~4% of a 512-row product.
void pack_x(const float* x, int64_t M, int64_t K, int64_t k0, int64_t k1, float* out) {
  const int64_t kc = k1 - k0;
  for (int64_t m0 = 0; m0 < M; m0 += kMR) {
    const int rows = int(std::min<int64_t>(kMR, M - m0));
    const float* src = x + m0 * K + k0;
    float* dst = out + m0 * kc;
    int64_t k = 0;
#ifndef QKV_NO_SIMD
    if (rows == 2) {  // dst = [x0[k] x1[k] x0[k+1] x1[k+1] ...]
      for (; k + kW <= kc; k += kW) {
        const V r0 = simd::load<V>(src + k), r1 = simd::load<V>(src + K + k);
        simd::store(dst + 2 * k, xsimd::zip_lo(r0, r1));
        simd::store(dst + 2 * k + kW, xsimd::zip_hi(r0, r1));
      }
    } else if (rows == 6 && kW == 4) {
      // dst = [x0[k] .. x5[k] x0[k+1] ...]: rows 0-3 transposed 4 x 4, rows 4-5 zipped
      for (; k + 4 <= kc; k += 4) {
        __m128 r0 = _mm_loadu_ps(src + k), r1 = _mm_loadu_ps(src + K + k), r2 = _mm_loadu_ps(src + 2 * K + k),
               r3 = _mm_loadu_ps(src + 3 * K + k);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);  // r_i = x0..3 at k + i
        const __m128 r4 = _mm_loadu_ps(src + 4 * K + k), r5 = _mm_loadu_ps(src + 5 * K + k);
        const __m128 lo = _mm_unpacklo_ps(r4, r5), hi = _mm_unpackhi_ps(r4, r5);  // x4 x5 at k, k+1 | k+2, k+3
        float* d = dst + 6 * k;
        _mm_storeu_ps(d, r0), _mm_storel_pi(reinterpret_cast<__m64*>(d + 4), lo);
        _mm_storeu_ps(d + 6, r1), _mm_storeh_pi(reinterpret_cast<__m64*>(d + 10), lo);
        _mm_storeu_ps(d + 12, r2), _mm_storel_pi(reinterpret_cast<__m64*>(d + 16), hi);
        _mm_storeu_ps(d + 18, r3), _mm_storeh_pi(reinterpret_cast<__m64*>(d + 22), hi);
      }
    }
#endif
    for (; k < kc; ++k) {
      for (int r = 0; r < rows; ++r) dst[k * rows + r] = src[r * K + k];
    }
  }
}

// ------------------------------------------------------------------ one work item

// y[:, j0 : j1] = bias + x W[:, j0 : j1]; a float InOut W in two parts of its rows (inout_split):
// the first added to bias in y, the second summed from zero apart (in `second`, [M][cols], when
// it takes more than one block of rows), its last block's sums then added to y
void gemm_columns(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int64_t j0,
                  int64_t j1) {
  const int64_t K = w.K, N = w.N, cols = j1 - j0, count = (cols + kNR - 1) / kNR, split = inout_split(w);
  thread_local std::vector<float> panels, xs, line, second;
  panels.resize(size_t(count * kKC * kNR));
  xs.resize(size_t(M * std::min(K, kKC)));
  for (int64_t m = 0; m < M; ++m) {
    float* row = y + m * N;
    if (bias) {
      std::copy(bias + j0, bias + j1, row + j0);
    } else {
      std::fill(row + j0, row + j1, 0.0f);
    }
  }
  // out[m * ld + j - j0] += x[m, kb : ke] W[kb : ke, j] for j in [j0, j1), in blocks of about
  // equal length, a multiple of 8 rows of W (Q8's k-pairs, the 16-bit packing's 8) up to kKC.
  // apart: the sums start from zero, and the last block's go to y (y + sums) rather than out
  const auto add_rows = [&](int64_t kb, int64_t ke, float* out, int64_t ld, bool apart) {
    const int64_t blocks = (ke - kb + kKC - 1) / kKC, step = ((ke - kb + blocks - 1) / blocks + 7) / 8 * 8;
    for (int64_t k0 = kb; k0 < ke; k0 += step) {
      const int64_t k1 = std::min(ke, k0 + step), kc = k1 - k0;
      pack_w(w, k0, k1, j0, j1, panels.data(), line);
      pack_x(x, M, K, k0, k1, xs.data());
      for (int64_t p = 0; p < count; ++p) {
        const float* b = panels.data() + p * kc * kNR;
        const int64_t c0 = p * kNR, n = std::min<int64_t>(kNR, cols - c0);
        for (int64_t m0 = 0; m0 < M; m0 += kMR) {
          const int rows = int(std::min<int64_t>(kMR, M - m0));
          const float* a = xs.data() + m0 * kc;
          float* c = out + m0 * ld + c0;
          float* yc = y + m0 * N + j0 + c0;
          TileEnds ends;
          ends.from_zero = apart && k0 == kb;
          if (apart && k1 == ke) ends.sum_into = yc, ends.ld_into = N;
          if (n == kNR) {
            micro(rows, a, b, kc, c, ld, ends);
          } else {  // the last, narrower panel: through a full-width tile
            float tile[kMR * kNR] = {};
            if (!ends.from_zero)
              for (int r = 0; r < rows; ++r) std::copy(c + r * ld, c + r * ld + n, tile + r * kNR);
            micro(rows, a, b, kc, tile, kNR, TileEnds{});
            for (int r = 0; r < rows; ++r) {
              for (int64_t j = 0; j < n; ++j) {
                if (ends.sum_into) {
                  yc[r * N + j] = yc[r * N + j] + tile[r * kNR + j];
                } else {
                  c[r * ld + j] = tile[r * kNR + j];
                }
              }
            }
          }
        }
      }
    }
  };
  add_rows(0, split, y + j0, N, false);
  if (split == K) return;
  if (K - split <= kKC) return add_rows(split, K, y + j0, N, true);  // one block: from zero straight into y
  second.resize(size_t(M * cols));                                   // the blocks before the last sum into it
  add_rows(split, K, second.data(), cols, true);
}

}  // namespace

void gemm(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int threads) {
  if (M <= 0) return;
  // work items: runs of whole panels, at most kNC columns, and a multiple of the thread count
  const int64_t panels = (w.N + kNR - 1) / kNR;
  threads = useful_threads(threads, panels, M * w.K * w.N, kMinWorkPerThread);
  int64_t items = (panels * kNR + kNC - 1) / kNC;
  if (threads > 1) items = (std::max<int64_t>(items, threads) + threads - 1) / threads * threads;
  items = std::min(items, panels);
  const auto columns = [&](int64_t item, int) {
    const int64_t j0 = std::min(w.N, panels * item / items * kNR);
    const int64_t j1 = std::min(w.N, panels * (item + 1) / items * kNR);
    if (j0 < j1) gemm_columns(w, x, M, bias, y, j0, j1);
  };
  if (threads <= 1) {
    for (int64_t i = 0; i < items; ++i) columns(i, 0);
  } else {
    parallel_for(items, threads, columns);
  }
}

}  // namespace qkv::detail
