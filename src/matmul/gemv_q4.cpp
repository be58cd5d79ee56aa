// The matrix-vector product over 4-bit weights (Q4, weights.hpp): x quantized to int16 per
// block of 32 as for Q8 (prepare_q8), the weights' nibbles masked out of one 16-byte load (a quad
// of k, half a set) into 4 vectors of int16: the even and the odd k of 2 groups of 4 columns,
// each meeting its x pair in an int16 dot product (pmaddwd / i32x4.dot_i16x8_s): each column's
// partial sum in its own lane. The nibbles are u = q + 8 (0..15): the int32 sum of u * xq over a
// block, less 8 * sum(xq), is the sum of q * xq, exactly. One set of 16 columns at a time, its
// whole K (QKV_Q4_SETS > 1: that many far apart, as gemv_q8 takes its groups).
// The relaxed-SIMD builds, where the JS loader found the engine computes it as the spec says
// (Node 20's baseline tier does not), take x as int8 instead and the nibbles as bytes, one
// i32x4.relaxed_dot_i8x16_i7x16_add_s per 16 weights (docs/kernels.md, "The relaxed int8 dot").
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "matmul/gemv_parts.hpp"
#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"
#include "matmul/relaxed_dot.hpp"
#include "matmul/x_int16.hpp"
#include "simd.hpp"

#ifndef QKV_NO_SIMD
#include <smmintrin.h>  // SSE4.1: Emscripten lowers these to SIMD128
#endif

// Sets side by side (streams in flight), of the int16 and of the int8-dot kernel; QKV_Q4_SETS and
// QKV_Q4_DOT_SETS override them (for measurements). One each: 4 kept 16 float accumulators beside
// each set's sums and operands (spilled). GPT-2 small int4 decode, Chromium 156, Zen 5: int16
// 126 -> 149-153 tok/s, int8 dot 154 -> 210-224; from memory (Node --no-liftoff, the bench)
// 17.1-18.1 -> 21.2-21.6 and 20.5 -> 27.0 Gweights/s.
#ifndef QKV_Q4_SETS
#define QKV_Q4_SETS 1
#endif
#ifndef QKV_Q4_DOT_SETS
#define QKV_Q4_DOT_SETS 1
#endif

namespace qkv::detail {

#if defined(QKV_RELAXED_SIMD) && !defined(QKV_NO_SIMD)
namespace {
bool relaxed_dot_on = false;  // set_relaxed_int8_dot
}  // namespace
#endif

inline bool use_relaxed_dot() {
#if defined(QKV_RELAXED_SIMD) && !defined(QKV_NO_SIMD)
  return relaxed_dot_on;
#else
  return false;
#endif
}

float q4_x_limit() { return use_relaxed_dot() ? 127.0f : kXqLimit16; }

}  // namespace qkv::detail

namespace qkv {

void set_relaxed_int8_dot([[maybe_unused]] bool on) {
#if defined(QKV_RELAXED_SIMD) && !defined(QKV_NO_SIMD)
  detail::relaxed_dot_on = on;
#endif
}

bool relaxed_int8_dot() { return detail::use_relaxed_dot(); }

}  // namespace qkv

namespace qkv::detail {

void prepare_q4(const float* x, int64_t K, GemvInput& in) {
  const bool dot8 = use_relaxed_dot();  // x8 for the int8 dot, else quads
  prepare_q8(x, K, in, q4_x_limit());
  const int64_t blocks = (K + 31) / 32;
  in.block_sum8.resize(size_t(blocks));
  if (dot8) {
    in.x8.resize(size_t(blocks * 32));
  } else {
    in.quads.resize(size_t(blocks * 8 * 16));
  }
  const int16_t* xp = in.pairs.data();  // xq[k] at xp[(k / 2) * 8 + k % 2]
  for (int64_t b = 0; b < blocks; ++b) {
    int32_t sum = 0;  // |xq| <= 32767: 32 of them fit
    const int16_t* xb = xp + b * 16 * 8;
    for (int p = 0; p < 16; ++p) sum += int32_t(xb[p * 8]) + int32_t(xb[p * 8 + 1]);
    in.block_sum8[size_t(b)] = 8 * sum;
    if (dot8) {
      for (int k = 0; k < 32; ++k) in.x8[size_t(b * 32 + k)] = int8_t(xb[(k / 2) * 8 + k % 2]);
      continue;
    }
    for (int q = 0; q < 8; ++q) {
      int16_t* out = in.quads.data() + (b * 8 + q) * 16;  // [even, odd][4 copies][2]
      for (int c = 0; c < 4; ++c) {
        out[c * 2] = xb[(2 * q) * 8];                  // k = 4q
        out[c * 2 + 1] = xb[(2 * q + 1) * 8];          // 4q + 2
        out[8 + c * 2] = xb[(2 * q) * 8 + 1];          // 4q + 1
        out[8 + c * 2 + 1] = xb[(2 * q + 1) * 8 + 1];  // 4q + 3
      }
    }
  }
}

namespace {

#ifndef QKV_NO_SIMD
using halves::F4;
using halves::halves_low;

// G sets' float accumulators (4 vectors of 4 columns each): zeroed, and stored to out[G * 16]
template <int G>
inline void zero_sets(F4 (&acc)[G][4]) {
  QKV_UNROLL
  for (int g = 0; g < G; ++g) {
    QKV_UNROLL
    for (int j = 0; j < 4; ++j) acc[g][j] = F4(0.0f);
  }
}
template <int G>
inline void store_sets(const F4 (&acc)[G][4], float* out) {
  QKV_UNROLL
  for (int g = 0; g < G; ++g) {
    QKV_UNROLL
    for (int j = 0; j < 4; ++j) acc[g][j].store_unaligned(out + g * 16 + j * 4);
  }
}

// out[g][16] = x W for G sets of 16 columns, set g at data + g * stride sets (G streams in
// flight). Per block and set: 8 quads of 2 halves, one 16-byte load each; of half h, the low
// nibbles of the int16 lanes' low bytes (group 2h, even k), of their high bytes (group 2h, odd
// k), the high nibbles of the low bytes left in place (group 2h + 1, even k, times 16) and of
// the high bytes (group 2h + 1, odd k): 5 ops for 4 vectors, as the k-pair layout before this
// one took. The int32 sums are exact, so the order does not matter: group 2h + 1's are
// 16 * sum(u xq) once its odd-k part is shifted in; then acc += (sum - 8 sum(xq)) * (d * 2^-112)
// * (dx * 2^112), as q8_groups folds the scales.
template <int G>
void q4_sets(const uint8_t* data, const uint16_t* scales, int64_t blocks, int64_t stride, const int16_t* xq,
             const float* sx, const int32_t* sum8, float* out) {
  F4 acc[G][4];
  zero_sets(acc);
  const __m128i mask = _mm_set1_epi16(0x000F), mask1 = _mm_set1_epi16(0x00F0);
  for (int64_t b = 0; b < blocks; ++b) {
    const int16_t* xb = xq + b * 8 * 16;  // [8 quads][even, odd][8]
    const F4 dx(sx[b]);
    const __m128i corr = _mm_set1_epi32(sum8[b]), corr16 = _mm_slli_epi32(corr, 4);
    QKV_UNROLL
    for (int g = 0; g < G; ++g) {
      const uint8_t* w = data + (g * stride * blocks + b) * 256;
      __m128i s[4] = {_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128()};
      __m128i odd1 = _mm_setzero_si128(), odd3 = odd1;  // groups 1 and 3 at odd k (not times 16)
      QKV_UNROLL
      for (int q = 0; q < 8; ++q) {
        const __m128i xe = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + q * 16));
        const __m128i xo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + q * 16 + 8));
        const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + q * 32));
        const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + q * 32 + 16));
        s[0] = _mm_add_epi32(s[0], _mm_madd_epi16(_mm_and_si128(v0, mask), xe));
        s[0] = _mm_add_epi32(s[0], _mm_madd_epi16(_mm_and_si128(_mm_srli_epi16(v0, 8), mask), xo));
        s[1] = _mm_add_epi32(s[1], _mm_madd_epi16(_mm_and_si128(v0, mask1), xe));
        odd1 = _mm_add_epi32(odd1, _mm_madd_epi16(_mm_srli_epi16(v0, 12), xo));
        s[2] = _mm_add_epi32(s[2], _mm_madd_epi16(_mm_and_si128(v1, mask), xe));
        s[2] = _mm_add_epi32(s[2], _mm_madd_epi16(_mm_and_si128(_mm_srli_epi16(v1, 8), mask), xo));
        s[3] = _mm_add_epi32(s[3], _mm_madd_epi16(_mm_and_si128(v1, mask1), xe));
        odd3 = _mm_add_epi32(odd3, _mm_madd_epi16(_mm_srli_epi16(v1, 12), xo));
      }
      // 16 sum(u xq) < 2^28 for groups 1 and 3; 16 (S - 8 sum(xq)) is exact in float, and so is its 1/16
      s[1] = _mm_add_epi32(s[1], _mm_slli_epi32(odd1, 4));
      s[3] = _mm_add_epi32(s[3], _mm_slli_epi32(odd3, 4));
      const uint16_t* d = scales + (g * stride * blocks + b) * 16;
      QKV_UNROLL
      for (int j = 0; j < 4; ++j) {
        const F4 sum = j % 2 ? F4(_mm_cvtepi32_ps(_mm_sub_epi32(s[j], corr16))) * F4(0.0625f)
                             : F4(_mm_cvtepi32_ps(_mm_sub_epi32(s[j], corr)));
        acc[g][j] += sum * (halves_low(d + 4 * j) * dx);
      }
    }
  }
  store_sets(acc, out);
}

#if defined(QKV_RELAXED_SIMD)
// q4_sets with the relaxed int8 dot: per block, set and quad, x's 4 bytes (k = 4q .. 4q + 3)
// in every lane against each half's low and high nibbles as bytes (0..15, valid i7 operands):
// one instruction per group of 4 columns and 4 k, the int32 sums the same exact values the int16
// path (and gemm_q4) makes from the same xq; the same scale products after.
template <int G>
void q4_sets_dot(const uint8_t* data, const uint16_t* scales, int64_t blocks, int64_t stride, const int8_t* x8,
                 const float* sx, const int32_t* sum8, float* out) {
  F4 acc[G][4];
  zero_sets(acc);
  const __m128i low = _mm_set1_epi8(15);
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* xb = x8 + b * 32;
    const F4 dx(sx[b]);
    const __m128i corr = _mm_set1_epi32(sum8[b]);
    QKV_UNROLL
    for (int g = 0; g < G; ++g) {
      const uint8_t* w = data + (g * stride * blocks + b) * 256;
      __m128i s[4] = {_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128()};
      QKV_UNROLL
      for (int q = 0; q < 8; ++q) {
        int32_t four;
        std::memcpy(&four, xb + q * 4, 4);
        const __m128i x = _mm_set1_epi32(four);
        const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + q * 32));
        const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + q * 32 + 16));
        s[0] = relaxed_dot(x, _mm_and_si128(v0, low), s[0]);
        s[1] = relaxed_dot(x, _mm_and_si128(_mm_srli_epi16(v0, 4), low), s[1]);
        s[2] = relaxed_dot(x, _mm_and_si128(v1, low), s[2]);
        s[3] = relaxed_dot(x, _mm_and_si128(_mm_srli_epi16(v1, 4), low), s[3]);
      }
      const uint16_t* d = scales + (g * stride * blocks + b) * 16;
      QKV_UNROLL
      for (int j = 0; j < 4; ++j) {
        acc[g][j] += F4(_mm_cvtepi32_ps(_mm_sub_epi32(s[j], corr))) * (halves_low(d + 4 * j) * dx);
      }
    }
  }
  store_sets(acc, out);
}
#endif
#endif

// The plain loop over Q4 sets [s0, s1) into out (16 floats per set): the scalar build's kernel,
// and the SIMD build's for an x beyond the folded scales' range. The same operations per column
// as q4_sets: exact int32 sums, then (sum - 8 sum(xq)) * (d * dx).
__attribute__((noinline)) void q4_sets_plain(const WeightMatrix& w, const GemvInput& in, int64_t s0, int64_t s1,
                                             float* out) {
  const Q4Layout q = Q4Layout::of(w.K, w.N);
  const uint8_t* data = static_cast<const uint8_t*>(w.data);
  for (int64_t i = 0; i < s1 - s0; ++i) {
    for (int c = 0; c < 16; ++c) out[i * 16 + c] = 0.0f;
    for (int64_t b = 0; b < q.blocks; ++b) {
      const uint8_t* wb = data + ((s0 + i) * q.blocks + b) * 256;
      const uint16_t* d = w.scales + ((s0 + i) * q.blocks + b) * 16;
      for (int c16 = 0; c16 < 16; ++c16) {
        const int j = c16 / 4, c = c16 % 4;
        int32_t sum = 0;
        for (int kk = 0; kk < 32; ++kk) {  // weights.hpp's layout
          const int u = (wb[(kk / 4) * 32 + (j / 2) * 16 + 4 * c + kk % 4] >> ((j % 2) * 4)) & 15;
          sum += u * int32_t(in.pairs[size_t((b * 16 + kk / 2) * 8 + kk % 2)]);
        }
        sum -= in.block_sum8[size_t(b)];
        out[i * 16 + c16] += float(sum) * (halves::f16_to_f32(d[c16]) * in.block_scale[size_t(b)]);
      }
    }
  }
}

// y[n] = out[c] + bias for the set starting at column n0s, within [n0, n1)
inline void store_set(const float* out, int64_t n0s, int64_t n0, int64_t n1, const float* bias, float* y) {
  const int64_t a = std::max(n0, n0s), e = std::min(n1, n0s + 16);
  for (int64_t n = a; n < e; ++n) y[n] = out[n - n0s] + (bias ? bias[n] : 0.0f);
}

}  // namespace

#ifndef QKV_NO_SIMD
// Sets [s0, s1) into y: S at a time far apart, as gemv_q8 takes its groups (the range cut into S
// parts, step j takes set j of each), then the rest one at a time. `kernel(G, set, stride, out)`
// computes G (std::integral_constant) sets, stride apart, into out[G * 16].
template <int S, class Kernel>
void all_sets(int64_t s0, int64_t s1, int64_t set_bytes, int64_t n0, int64_t n1, const float* bias, float* y,
              Kernel kernel) {
  while (s1 - s0 >= S) {
    const int64_t part = part_stride(s1 - s0, set_bytes, S);
    for (int64_t j = 0; j < part; ++j) {
      float out[S * 16];
      const int64_t s = s0 + j;
      kernel(std::integral_constant<int, S>{}, s, part, out);
      for (int64_t i = 0; i < S; ++i) store_set(out + i * 16, (s + i * part) * 16, n0, n1, bias, y);
    }
    s0 += S * part;
  }
  for (; s0 < s1; ++s0) {
    float out[16];
    kernel(std::integral_constant<int, 1>{}, s0, 1, out);
    store_set(out, s0 * 16, n0, n1, bias, y);
  }
}
#endif

// y[n0, n1) = bias + x W (W Q4; n1 <= N). Computes the whole sets the range touches (a thread's
// range starts on an 8-column boundary: half a set) and writes only its own columns.
__attribute__((noinline)) void gemv_q4(const WeightMatrix& w, const GemvInput& in, const float* bias, float* y,
                                       int64_t n0, int64_t n1) {
  int64_t s0 = n0 / 16;
  const int64_t s1 = (n1 + 15) / 16;
#ifndef QKV_NO_SIMD
  const Q4Layout q = Q4Layout::of(w.K, w.N);
  const uint8_t* data = static_cast<const uint8_t*>(w.data);
  const int16_t* xq = in.quads.data();  // prepare_q4 made x8 instead for the int8 dot
  const float* sx = in.block_scale_wide.data();
  const int32_t* sum8 = in.block_sum8.data();
  const auto set_data = [&](int64_t s) { return data + s * q.blocks * 256; };
  const auto set_scales = [&](int64_t s) { return w.scales + s * q.blocks * 16; };
  if (in.wide_finite) {
#if defined(QKV_RELAXED_SIMD)
    if (use_relaxed_dot()) {
      const int8_t* x8 = in.x8.data();
      return all_sets<QKV_Q4_DOT_SETS>(
          s0, s1, q.blocks * 256, n0, n1, bias, y, [&](auto G, int64_t s, int64_t stride, float* out) {
            q4_sets_dot<G.value>(set_data(s), set_scales(s), q.blocks, stride, x8, sx, sum8, out);
          });
    }
#endif
    return all_sets<QKV_Q4_SETS>(s0, s1, q.blocks * 256, n0, n1, bias, y,
                                 [&](auto G, int64_t s, int64_t stride, float* out) {
                                   q4_sets<G.value>(set_data(s), set_scales(s), q.blocks, stride, xq, sx, sum8, out);
                                 });
  }
#endif
  // the scalar build, and x beyond the folded scales' range
  for (int64_t s = s0; s < s1; ++s) {
    float out[16];
    q4_sets_plain(w, in, s, s + 1, out);
    store_set(out, s * 16, n0, n1, bias, y);
  }
}

}  // namespace qkv::detail
