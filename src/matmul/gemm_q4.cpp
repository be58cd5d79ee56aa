// Q4 weights unpacked into the matrix products' panels, a tile at a time, as all M rows of the
// product then use it:
//  gemm_q4 (matmul()'s prefill for Q4): into the int16 panels of the 8-bit prefill (Q8's
//    layout, q = nibble - 8; gemm_q8.cpp's gemm_int8: x in int16, int32 block sums); the
//    unpacking costs a few vector ops per 8 weights, once per call.
//  pack_q4 (gemm_q4.hpp, for detail::gemm): into the float GEMM's panels, each nibble widened,
//    less 8, times its block's scale.
#include "matmul/gemm_q4.hpp"

#include <algorithm>
#include <vector>

#include "matmul/gemm_int8.hpp"
#include "matmul/gemv_parts.hpp"
#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"

#ifndef QKV_NO_SIMD
#include <smmintrin.h>
#endif

namespace qkv::detail {

void pack_q4(const WeightMatrix& w, int64_t k0, int64_t k1, int64_t j0, int64_t j1, float* panels, int64_t nr) {
  [[maybe_unused]] const Q4Layout q = Q4Layout::of(w.K, w.N);
  [[maybe_unused]] const uint8_t* data = static_cast<const uint8_t*>(w.data);
  const int64_t kc = k1 - k0;
  const auto place = [&](int64_t j) { return panels + (j - j0) / nr * kc * nr + (j - j0) % nr; };
  for (int64_t set = j0 / 16; set * 16 < j1; ++set) {
    // the set's groups of 4 columns within [j0, j1)
    const int64_t g0 = std::max<int64_t>(0, (j0 - set * 16) / 4), g1 = std::min<int64_t>(4, (j1 - set * 16 + 3) / 4);
    float* dst[4] = {};
    for (int64_t g = g0; g < g1; ++g) dst[g] = place(set * 16 + g * 4);
    int64_t k = k0;
#ifndef QKV_NO_SIMD
    // one 16-byte load per quad and half gives 2 groups (low and high nibbles: column c's 4 k at
    // bytes 4c .. 4c + 3); a byte shuffle turns each to k-major (4 columns per k), then each k's
    // 4 bytes -> q as int32 -> floats times the group's 4 scales
    for (; k < k1 && k % 4 != 0; ++k) {
      for (int64_t g = g0; g < g1; ++g)
        for (int64_t c = 0; c < 4; ++c) {
          const int64_t j = set * 16 + g * 4 + c;
          dst[g][(k - k0) * nr + c] = j < w.N ? weight_at(w, k, j) : 0.0f;
        }
    }
    const __m128i low = _mm_set1_epi8(15), eight = _mm_set1_epi32(8);
    const __m128i by_k = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m128 d[4] = {};
    int64_t db = -1;  // the block whose scales d holds
    for (; k + 4 <= k1; k += 4) {
      const int64_t b = k / 32, quad = (k % 32) / 4;
      if (b != db) {
        const uint16_t* h = w.scales + (set * q.blocks + b) * 16;
        for (int64_t g = g0; g < g1; ++g)
          d[g] = _mm_setr_ps(halves::f16_to_f32(h[4 * g]), halves::f16_to_f32(h[4 * g + 1]),
                             halves::f16_to_f32(h[4 * g + 2]), halves::f16_to_f32(h[4 * g + 3]));
        db = b;
      }
      const uint8_t* qd = data + ((set * q.blocks + b) * 8 + quad) * 32;
      for (int64_t g = g0; g < g1; ++g) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qd + (g / 2) * 16));
        const __m128i u = _mm_and_si128(g % 2 ? _mm_srli_epi16(v, 4) : v, low);  // u of column c at k + i: byte 4c + i
        const __m128i t = _mm_shuffle_epi8(u, by_k);                             // byte 4i + c
        // k + i's 4 columns: bytes 4i .. 4i + 3 of t
        const __m128i q0 = _mm_sub_epi32(_mm_cvtepu8_epi32(t), eight),
                      q1 = _mm_sub_epi32(_mm_cvtepu8_epi32(_mm_srli_si128(t, 4)), eight),
                      q2 = _mm_sub_epi32(_mm_cvtepu8_epi32(_mm_srli_si128(t, 8)), eight),
                      q3 = _mm_sub_epi32(_mm_cvtepu8_epi32(_mm_srli_si128(t, 12)), eight);
        _mm_storeu_ps(dst[g] + (k - k0) * nr, _mm_mul_ps(_mm_cvtepi32_ps(q0), d[g]));
        _mm_storeu_ps(dst[g] + (k + 1 - k0) * nr, _mm_mul_ps(_mm_cvtepi32_ps(q1), d[g]));
        _mm_storeu_ps(dst[g] + (k + 2 - k0) * nr, _mm_mul_ps(_mm_cvtepi32_ps(q2), d[g]));
        _mm_storeu_ps(dst[g] + (k + 3 - k0) * nr, _mm_mul_ps(_mm_cvtepi32_ps(q3), d[g]));
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

namespace {

#ifndef QKV_NO_SIMD
// group G of a Q4 set for all blocks, into Q8's k-pair order as int16: q = u - 8, k-pair kp at
// out + kp * stride. One load per quad (half G / 2, nibble G % 2: column c's 4 k at bytes
// 4c .. 4c + 3), a byte shuffle to (c, k) pairs, widened: k-pairs 2 quad and 2 quad + 1.
template <int G>
void unpack_group(const uint8_t* set_data, int64_t blocks, int16_t* out, int64_t stride) {
  const __m128i low = _mm_set1_epi8(15), eight = _mm_set1_epi16(8);
  // [c0k0 c0k1 c1k0 c1k1 c2k0 c2k1 c3k0 c3k1 | the same for k2, k3]
  const __m128i pairs = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  for (int64_t quad = 0; quad < blocks * 8; ++quad) {  // quads of all blocks, in order
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(set_data + quad * 32 + (G / 2) * 16));
    const __m128i u = _mm_shuffle_epi8(_mm_and_si128(G % 2 ? _mm_srli_epi16(v, 4) : v, low), pairs);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * quad) * stride), _mm_sub_epi16(_mm_cvtepu8_epi16(u), eight));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * quad + 1) * stride),
                     _mm_sub_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(u, 8)), eight));
  }
}
#endif

// Q4's panel for groups [g, g + count) (gemm_int8.hpp): q = u - 8 of each nibble, in Q8's
// k-pair order (lanes (c, parity) of k-pair kp: column c at k = 2 kp + parity), the groups'
// k-pairs side by side, and the groups' scales (d of either sign) as floats worth d * 2^-112.
// Q4's blocks of a set follow each other as Q8's blocks of a group do.
Int16Panel q4_panel(const WeightMatrix& w, int64_t g, int count) {
  const int64_t blocks = Q4Layout::of(w.K, w.N).blocks;
  thread_local std::vector<int16_t> data;  // [blocks][16 k-pairs][count][4 columns][2]
  thread_local std::vector<float> scales;  // [blocks][count][4]
  data.resize(size_t(count * blocks * 128));
  scales.resize(size_t(count * blocks * 4));
  const uint8_t* src = static_cast<const uint8_t*>(w.data);
  const int64_t stride = count * 8;  // int16 from one k-pair of a group to its next
  for (int i = 0; i < count; ++i) {
    const int64_t set = (g + i) / 4;
    const int j = int((g + i) % 4);                // the group within its set
    const uint8_t* sd = src + set * blocks * 256;  // [blocks][8 quads][2 halves][16 bytes]
    int16_t* out = data.data() + i * 8;            // k-pair kp at out + kp * stride
    for (int64_t b = 0; b < blocks; ++b)
      widen_scales(w.scales + (set * blocks + b) * 16 + 4 * j, 4, scales.data() + (b * count + i) * 4);
#ifndef QKV_NO_SIMD
    switch (j) {
      case 0:
        unpack_group<0>(sd, blocks, out, stride);
        break;
      case 1:
        unpack_group<1>(sd, blocks, out, stride);
        break;
      case 2:
        unpack_group<2>(sd, blocks, out, stride);
        break;
      default:
        unpack_group<3>(sd, blocks, out, stride);
        break;
    }
#else
    for (int64_t k = 0; k < blocks * 32; ++k) {
      for (int c = 0; c < 4; ++c) {
        const uint8_t byte = sd[(k / 4) * 32 + (j / 2) * 16 + 4 * c + k % 4];  // weights.hpp's layout
        out[(k / 2) * stride + c * 2 + k % 2] = int16_t(((byte >> ((j % 2) * 4)) & 15) - 8);
      }
    }
#endif
  }
  return {data.data(), scales.data()};
}

}  // namespace

void gemm_q4_many(const MatmulOutput* outputs, size_t count, const float* x, int64_t M, int threads) {
  if (relaxed_int8_dot() && gemm_q4_dot(outputs, count, x, M, threads)) return;
  gemm_int8(outputs, count, x, M, threads, q4_panel, q4_x_limit());  // as the decode's x (gemv_q4.cpp)
}

}  // namespace qkv::detail
