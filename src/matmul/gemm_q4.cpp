// Q4 weights into the matrix product's float panels (gemm_q4.hpp): each nibble widened,
// less 8, times its block's scale, as it is used by all M rows of the product. The product
// itself is gemm.cpp's float micro-kernel, as for Q8: prefill is bound by arithmetic, not by
// the weights' bytes, so 4-bit weights cost what 8-bit ones do there.
#include "matmul/gemm_q4.hpp"

#include <algorithm>

#include "matmul/halves.hpp"

#ifndef QKV_NO_SIMD
#include <smmintrin.h>
#endif

namespace qkv::detail {

void pack_q4(const WeightMatrix& w, int64_t k0, int64_t k1, int64_t j0, int64_t j1, float* panels, int64_t nr) {
  const Q4Layout q = Q4Layout::of(w.K, w.N);
  const uint8_t* data = static_cast<const uint8_t*>(w.data);
  const int64_t kc = k1 - k0;
  const auto place = [&](int64_t j) { return panels + (j - j0) / nr * kc * nr + (j - j0) % nr; };
  for (int64_t set = j0 / 16; set * 16 < j1; ++set) {
    // the set's groups of 4 columns within [j0, j1)
    const int64_t g0 = std::max<int64_t>(0, (j0 - set * 16) / 4), g1 = std::min<int64_t>(4, (j1 - set * 16 + 3) / 4);
    float* dst[4] = {};
    for (int64_t g = g0; g < g1; ++g) dst[g] = place(set * 16 + g * 4);
    int64_t k = k0;
#ifndef QKV_NO_SIMD
    // one 16-byte load per k-pair gives the 4 groups (nibble g of each 16-bit lane: column
    // 4 g + c at k, k + 1); each group's nibbles -> q as int16 -> floats times its 4 scales
    const __m128i mask = _mm_set1_epi16(15), eight = _mm_set1_epi16(8);
    __m128 d[4] = {};
    int64_t db = -1;  // the block whose scales d holds
    for (; k + 2 <= k1; k += 2) {
      const int64_t b = k / 32, p = (k % 32) / 2;
      if (b != db) {
        const uint16_t* h = w.scales + (set * q.blocks + b) * 16;
        for (int64_t g = g0; g < g1; ++g)
          d[g] = _mm_setr_ps(halves::f16_to_f32(h[4 * g]), halves::f16_to_f32(h[4 * g + 1]),
                             halves::f16_to_f32(h[4 * g + 2]), halves::f16_to_f32(h[4 * g + 3]));
        db = b;
      }
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + ((set * q.blocks + b) * 16 + p) * 16));
      for (int64_t g = g0; g < g1; ++g) {
        // [c0k c0k' c1k c1k' c2k c2k' c3k c3k'] as int16
        const __m128i n = _mm_sub_epi16(_mm_and_si128(_mm_srli_epi16(v, int(4 * g)), mask), eight);
        const __m128 lo = _mm_cvtepi32_ps(_mm_cvtepi16_epi32(n)),
                     hi = _mm_cvtepi32_ps(_mm_cvtepi16_epi32(_mm_srli_si128(n, 8)));
        _mm_storeu_ps(dst[g] + (k - k0) * nr, _mm_mul_ps(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)), d[g]));
        _mm_storeu_ps(dst[g] + (k + 1 - k0) * nr, _mm_mul_ps(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)), d[g]));
      }
    }
#endif
    for (; k < k1; ++k) {
      for (int64_t g = g0; g < g1; ++g) {
        for (int64_t c = 0; c < 4; ++c) {
          const int64_t j = set * 16 + g * 4 + c;
          dst[g][(k - k0) * nr + c] = j < w.N ? weight_at(w, k, j) : 0.0f;
        }
      }
    }
  }
}

}  // namespace qkv::detail
