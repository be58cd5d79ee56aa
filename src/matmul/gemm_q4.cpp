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
#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"

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

namespace {

#ifndef QKV_NO_SIMD
// u of nibble J of each int16 lane (a constant shift: wasm's shift by a variable count costs a
// mask and a move per use in V8)
template <int J>
inline __m128i nibble(__m128i v) {
  if constexpr (J == 3) return _mm_srli_epi16(v, 12);
  if constexpr (J == 0) return _mm_and_si128(v, _mm_set1_epi16(15));
  if constexpr (J == 1 || J == 2) return _mm_and_si128(_mm_srli_epi16(v, 4 * J), _mm_set1_epi16(15));
}

// group J of a Q4 set (its nibble J) for all blocks, into Q8's k-pair order as int16: q = u - 8,
// one k-pair (8 lanes) per load and store, k-pair kp at out + kp * stride
template <int J>
void unpack_group(const uint8_t* set_data, int64_t blocks, int16_t* out, int64_t stride) {
  const __m128i eight = _mm_set1_epi16(8);
  for (int64_t kp = 0; kp < blocks * 16; ++kp) {  // k-pairs of all blocks, in order
    const __m128i u = nibble<J>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(set_data + kp * 16)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + kp * stride), _mm_sub_epi16(u, eight));
  }
}
#endif

// Q4's panel for groups [g, g + count) (gemm_int8.hpp): q = u - 8 of each nibble, in Q8's
// k-pair order, the groups' k-pairs side by side, and the groups' scales (d of either sign) as
// floats worth d * 2^-112. Q8's k-pair lanes (c, parity) are Q4's int16 lanes L = 2 c + parity,
// so a group is its nibble j = group % 4 of every lane; Q4's blocks of a set follow each other as
// Q8's blocks of a group do.
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
    const int j = int((g + i) % 4);                // the group's nibble in each int16 lane
    const uint8_t* sd = src + set * blocks * 256;  // [blocks][16 k-pairs][8 int16 lanes]
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
    for (int64_t kp = 0; kp < blocks * 16; ++kp) {
      for (int lane = 0; lane < 8; ++lane) {
        const int u = (sd[kp * 16 + lane * 2 + j / 2] >> ((j % 2) * 4)) & 15;  // the lane's little-endian bytes
        out[kp * stride + lane] = int16_t(u - 8);
      }
    }
#endif
  }
  return {data.data(), scales.data()};
}

}  // namespace

void gemm_q4(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int threads) {
  gemm_int8(w, x, M, bias, y, threads, q4_panel);
}

}  // namespace qkv::detail
