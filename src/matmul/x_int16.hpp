// The activations' int16 rounding shared by the 8-bit kernels (gemv_q8.cpp's prepare_q8,
// gemm_q8.cpp): x * inv clamped to +-32767, rounded to the nearest integer (ties to even), the
// scale inv = 32767 / max|x| of x's block chosen by the caller.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#ifndef QKV_NO_SIMD
#include <smmintrin.h>  // SSE4.1: Emscripten lowers these to SIMD128
#endif

namespace qkv::detail {

// The largest |xq| of the int16 rounding (the 4-bit kernels' int8 dot takes 127: q4_x_limit)
constexpr float kXqLimit16 = 32767.0f;

inline int16_t round_to_i16(float x, float inv) {
  return int16_t(std::max(-32767.0f, std::min(32767.0f, std::nearbyint(x * inv))));
}

#ifndef QKV_NO_SIMD
// x[0 .. 8) as int16, in order. Rounds by adding 1.5 * 2^23, whose float has ulp 1: the integer
// is then the low mantissa bits.
inline __m128i round_to_i16x8(const float* x, __m128 inv) {
  const __m128 limit = _mm_set1_ps(32767.0f), magic = _mm_set1_ps(12582912.0f);
  const __m128i magic_bits = _mm_castps_si128(magic);
  __m128i v[2];
  for (int h = 0; h < 2; ++h) {
    __m128 t = _mm_mul_ps(_mm_loadu_ps(x + 4 * h), inv);
    t = _mm_max_ps(_mm_min_ps(t, limit), _mm_sub_ps(_mm_setzero_ps(), limit));
    v[h] = _mm_sub_epi32(_mm_castps_si128(_mm_add_ps(t, magic)), magic_bits);
  }
  return _mm_packs_epi32(v[0], v[1]);
}
#endif

// max |x[i]| over one block of 32 (a NaN is passed over, as std::max(amax, |x|) passes it)
inline float block_amax(const float* x) {
#ifndef QKV_NO_SIMD
  // lane-wise, then across lanes; max is exact in any order
  const __m128 sign = _mm_set1_ps(-0.0f);
  __m128 m = _mm_setzero_ps();
  for (int i = 0; i < 32; i += 4) m = _mm_max_ps(_mm_andnot_ps(sign, _mm_loadu_ps(x + i)), m);
  m = _mm_max_ps(m, _mm_shuffle_ps(m, m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = _mm_max_ps(m, _mm_shuffle_ps(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtss_f32(m);
#else
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
#endif
}

// One block of 32 (xb, zeros past K) rounded as the matrix products round x: d = max|x| / limit,
// q[i] = nearest(x[i] / d); returns d (0 for an all-zero block, then q is all zeros). gemv_q8.cpp's
// prepare_q8 makes the same d and q, so a row of a product gets the decode's bits.
inline float round_block(const float* xb, float limit, int16_t* q) {
  const float d = block_amax(xb) / limit;
  const float inv = d > 0.0f ? 1.0f / d : 0.0f;
#ifndef QKV_NO_SIMD
  const __m128 vinv = _mm_set1_ps(inv);
  for (int i = 0; i < 32; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), round_to_i16x8(xb + i, vinv));
#else
  for (int i = 0; i < 32; ++i) q[i] = round_to_i16(xb[i], inv);
#endif
  return d;
}

}  // namespace qkv::detail
