// Q4 weights into the matrix product's float panels (gemm_q4.hpp): each nibble widened,
// less 8, times its block's scale, as it is used by all M rows of the product. The product
// itself is gemm.cpp's float micro-kernel, as for Q8: prefill is bound by arithmetic, not by
// the weights' bytes, so 4-bit weights cost what 8-bit ones do there.
#include "matmul/gemm_q4.hpp"

#include "matmul/halves.hpp"

#ifndef QKV_NO_SIMD
#include <smmintrin.h>
#endif

namespace qkv::detail {

void pack_q4(const WeightMatrix& w, int64_t k0, int64_t k1, int64_t j0, int64_t j1, float* panels, int64_t nr) {
  const Q4Layout q = Q4Layout::of(w.K, w.N);
  const uint8_t* data = static_cast<const uint8_t*>(w.data);
  const int64_t kc = k1 - k0;
  for (int64_t j = j0; j < j1; j += 4) {
    const int64_t s = j / 16, jj = (j % 16) / 4;  // the set, and the nibble its group is
    float* dst = panels + (j - j0) / nr * kc * nr + (j - j0) % nr;
    int64_t k = k0;
#ifndef QKV_NO_SIMD
    const __m128i shift = _mm_cvtsi32_si128(int(4 * jj)), mask = _mm_set1_epi16(15), eight = _mm_set1_epi16(8);
    int64_t db = -1;  // the block whose scales d holds
    __m128 d = _mm_setzero_ps();
    for (; k + 2 <= k1; k += 2) {
      const int64_t b = k / 32, p = (k % 32) / 2;
      if (b != db) {
        const uint16_t* h = w.scales + (s * q.blocks + b) * 16 + 4 * jj;
        d = _mm_setr_ps(halves::f16_to_f32(h[0]), halves::f16_to_f32(h[1]), halves::f16_to_f32(h[2]),
                        halves::f16_to_f32(h[3]));
        db = b;
      }
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + ((s * q.blocks + b) * 16 + p) * 16));
      // q as int16, lanes (c, parity): [c0k c0k' c1k c1k' c2k c2k' c3k c3k']
      const __m128i n = _mm_sub_epi16(_mm_and_si128(_mm_srl_epi16(v, shift), mask), eight);
      const __m128 lo = _mm_cvtepi32_ps(_mm_cvtepi16_epi32(n)),
                   hi = _mm_cvtepi32_ps(_mm_cvtepi16_epi32(_mm_srli_si128(n, 8)));
      _mm_storeu_ps(dst + (k - k0) * nr, _mm_mul_ps(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)), d));
      _mm_storeu_ps(dst + (k + 1 - k0) * nr, _mm_mul_ps(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)), d));
    }
#endif
    for (; k < k1; ++k) {
      for (int64_t c = 0; c < 4; ++c) dst[(k - k0) * nr + c] = j + c < w.N ? weight_at(w, k, j + c) : 0.0f;
    }
  }
}

}  // namespace qkv::detail
