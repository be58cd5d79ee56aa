// The matrix-vector product over 8-bit weights (Q8, weights.hpp): x quantized to int16 per
// block of 32, int16 dot products (pmaddwd / i32x4.dot_i16x8_s) putting each column's partial
// sum in its own lane, 8 groups of 4 columns far apart (gemv.cpp's file comment: the streams).
#include <algorithm>
#include <cmath>
#include <vector>

#include "matmul/gemv_parts.hpp"
#include "matmul/halves.hpp"
#include "matmul/x_int16.hpp"
#include "simd.hpp"

#ifndef QKV_NO_SIMD
#include <smmintrin.h>  // SSE4.1 integer widening and pmaddwd: Emscripten lowers them to SIMD128
#endif

// Groups side by side (streams in flight); QKV_Q8_GROUPS overrides it (for measurements)
#ifndef QKV_Q8_GROUPS
#define QKV_Q8_GROUPS 8
#endif

namespace qkv::detail {

// x [K] -> int16 per block of 32 (round_block: scale d = max|x| / limit, xq = nearest(x / d);
// limit kXqLimit16, or 127 for the 4-bit kernels' int8 dot), laid out as the kernel
// reads it: each k-pair (xq[2p], xq[2p+1]) 4 times, once per column of a group. The vectors keep
// their capacity from call to call (no allocation).
void prepare_q8(const float* x, int64_t K, GemvInput& in, float limit) {
  const Q8Layout q = Q8Layout::of(K, 4);
  in.pairs.resize(size_t(q.blocks * 16 * 8));
  in.block_scale.resize(size_t(q.blocks));
  in.block_scale_wide.resize(size_t(q.blocks));
  in.wide_finite = true;
  for (int64_t b = 0; b < q.blocks; ++b) {
    // xb [32] = the block, zeros past K
    float xb[32] = {};
    const int64_t n = std::min<int64_t>(32, K - b * 32);
    std::copy(x + b * 32, x + b * 32 + n, xb);
    int16_t* out = in.pairs.data() + b * 16 * 8;  // [16 k-pairs][4 copies][2]
    int16_t rounded[32];
    const float d = round_block(xb, limit, rounded);
#ifndef QKV_NO_SIMD
    for (int i = 0; i < 32; i += 8) {
      const __m128i xq = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rounded + i));  // k-pairs i/2 .. i/2+4
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (i / 2 + 0) * 8), _mm_shuffle_epi32(xq, 0x00));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (i / 2 + 1) * 8), _mm_shuffle_epi32(xq, 0x55));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (i / 2 + 2) * 8), _mm_shuffle_epi32(xq, 0xAA));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (i / 2 + 3) * 8), _mm_shuffle_epi32(xq, 0xFF));
    }
#else
    for (int i = 0; i < 32; ++i) {
      for (int c = 0; c < 4; ++c) out[(i / 2) * 8 + c * 2 + i % 2] = rounded[i];
    }
#endif
    in.block_scale[size_t(b)] = d;
    in.block_scale_wide[size_t(b)] = d * halves::kF16Scale;
    in.wide_finite = in.wide_finite && std::isfinite(in.block_scale_wide[size_t(b)]);
  }
}

namespace {

#ifndef QKV_NO_SIMD
using halves::F4;
#endif

#ifndef QKV_NO_SIMD
// out[g][4] = x W for G groups of 4 columns side by side, group g at data + g * stride groups
// (G streams of weights in flight): per block and group, sum (int32, exact, so in any order)
// the 16 k-pairs' int16 dot products (8 bytes widened in the load, pmovsxbw / v128.load8x8_s;
// pmaddwd / i32x4.dot_i16x8_s) in two accumulators, then acc += sum * d_w * d_x in float.
// One group at a time within a block keeps 2 sums live, where the pairs-outer order kept G
// (16 sums, 16 accumulators and the x pair: more than x86's 16 vector registers, so V8
// spilled). In wasm, 1 thread, min of runs on this loaded machine: 576 x 576 in cache 21.4 ->
// 20.7 us, the 49152 x 576 LM head 2.6-3.2 -> 2.0-2.2 ms (G = 16 pairs-outer -> G = 8 this way)
//
// The weights' scales are halves (weights.hpp): 4 of a group's block zero-extended to 32-bit
// lanes and shifted into float32's fields give d * 2^-112 (halves.hpp), exact and normal (the
// quantizer keeps d >= 2^-14 or 0); sx holds x's block scales times 2^112, so the product
// d * dx is (d * 2^-112) * (dx * 2^112), the same float with no op for the 2^112 (where
// dx * 2^112 would overflow, |x| beyond ~2^31, gemv_q8 takes q8_groups_plain instead).
// The shift and a 2^112 multiply both in the loop (a v128.const V8 builds each time) lost
// 15-20%.
template <int G>
void q8_groups(const int8_t* data, const uint16_t* scales, int64_t blocks, int64_t stride, const int16_t* xp,
               const float* sx, float* out) {
  F4 acc[G];
  QKV_UNROLL
  for (int g = 0; g < G; ++g) acc[g] = F4(0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* wb = data + b * 128;
    const int16_t* xb = xp + b * 16 * 8;  // [16 k-pairs][(x[2p], x[2p+1]) x 4]
    const F4 dx(sx[b]);
    QKV_UNROLL
    for (int g = 0; g < G; ++g) {
      const int8_t* w = wb + g * stride * blocks * 128;
      __m128i s0 = _mm_setzero_si128(), s1 = _mm_setzero_si128();
      QKV_UNROLL
      for (int p = 0; p < 16; p += 2) {  // k-pairs p and p + 1 against 8 bytes each of the group
        const __m128i w0 = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + p * 8)));
        const __m128i w1 = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + p * 8 + 8)));
        s0 = _mm_add_epi32(s0, _mm_madd_epi16(w0, _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + p * 8))));
        s1 = _mm_add_epi32(s1, _mm_madd_epi16(w1, _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + p * 8 + 8))));
      }
      const F4 sum(_mm_cvtepi32_ps(_mm_add_epi32(s0, s1)));
      const F4 d_low = halves::positive_halves_low(scales + (g * stride * blocks + b) * 4);  // d * 2^-112
      acc[g] += sum * (d_low * dx);
    }
  }
  QKV_UNROLL
  for (int g = 0; g < G; ++g) acc[g].store_unaligned(out + g * 4);
}
#endif

// The plain loop over Q8 groups [g0, g1) into out (4 floats per group): the scalar build's
// kernel, and the SIMD build's for an x beyond the folded scales' range (see q8_groups). The
// same operations per column as q8_groups: the int32 sums are exact, then sum * (d * dx).
// Not inlined, so that it leaves the vector kernels' code as it was.
__attribute__((noinline)) void q8_groups_plain(const WeightMatrix& w, const GemvInput& in, int64_t g0, int64_t g1,
                                               float* out) {
  const Q8Layout q = Q8Layout::of(w.K, w.N);
  const int8_t* data = static_cast<const int8_t*>(w.data);
  const int16_t* xp = in.pairs.data();
  for (int64_t i = 0; i < g1 - g0; ++i) {
    const int8_t* wg = data + (g0 + i) * q.blocks * 128;
    const uint16_t* dg = w.scales + (g0 + i) * q.blocks * 4;
    for (int c = 0; c < 4; ++c) out[i * 4 + c] = 0.0f;
    for (int64_t b = 0; b < q.blocks; ++b) {
      for (int c = 0; c < 4; ++c) {
        int32_t sum = 0;
        for (int p = 0; p < 16; ++p) {
          const int8_t* wp = wg + b * 128 + p * 8 + c * 2;
          const int16_t* xq = xp + (b * 16 + p) * 8 + c * 2;
          sum += int32_t(wp[0]) * xq[0] + int32_t(wp[1]) * xq[1];
        }
        out[i * 4 + c] += float(sum) * (halves::f16_to_f32(dg[b * 4 + c]) * in.block_scale[size_t(b)]);
      }
    }
  }
}

}  // namespace

// y[4 g0 .. 4 g1) (clipped to N) = bias + x W for the Q8 groups [g0, g1).
// A function of its own (not inlined into gemv_columns): the vector kernels' speed in V8 depends
// on how the code around their loops is laid out, and this split is the one that measured well
// for all three (bench/matmul, wasm, 1 thread, two interleaved pairs, before -> after the half
// scales): Q8 576 x 576 in cache 12.0-13.3 -> 16.7-17.2 Gweights/s, the LM head 11.9-13.4 ->
// 17.6, SmolLM2's layers from memory 9.9-10.4 -> 10.8-11.4; F32 and F16 unchanged. Tried and
// lost: the Q8 kernel inlined with a second instantiation for the plain scales (F32 in cache 42
// -> 25 GB/s, F16 13.4 -> 12.3 from memory), only the dot-product loops kept apart (F16 -10%)
__attribute__((noinline)) void gemv_q8(const WeightMatrix& w, const GemvInput& in, const float* bias, float* y,
                                       int64_t g0, int64_t g1) {
  // 8 groups (32 columns) side by side: 8 weight streams (+ their scales) in flight. Earlier,
  // with the pairs-outer kernel, from memory, GPT-2 shapes, wasm, 1 thread, adjacent groups: 4
  // groups 0.57, 8 0.63, 12 0.67, 16 0.66-0.69 of the read bandwidth (the LM head: 0.55 / 0.61 /
  // 0.67 / 0.70); 16 far apart (below): 0.69-0.70 (the LM head: 0.83-0.88). With the
  // group-at-a-time kernel, far apart, SmolLM2's LM head: 8 groups 14.5-15.9 GB/s, 12 14.1-14.4,
  // 16 12.8-14.0 (the old kernel with 16: 10.0-12.2). The bits depend on none of these choices
  constexpr int64_t kGroups = QKV_Q8_GROUPS;
#ifndef QKV_NO_SIMD
  const Q8Layout q = Q8Layout::of(w.K, w.N);
  const int8_t* data = static_cast<const int8_t*>(w.data);
  const int16_t* xp = in.pairs.data();
  const float* sx = in.block_scale_wide.data();
  // groups far apart, as gemv_outin takes its columns: the range cut into 8 parts (part_stride), step
  // j takes group j of each, so each weight stream walks through one part's consecutive groups
  while (in.wide_finite && g1 - g0 >= kGroups) {
    const int64_t part = part_stride(g1 - g0, q.blocks * 128, kGroups);  // groups per part (not 4 KiB apart)
    for (int64_t j = 0; j < part; ++j) {
      float out[kGroups * 4];
      const int64_t g = g0 + j;
      q8_groups<kGroups>(data + g * q.blocks * 128, w.scales + g * q.blocks * 4, q.blocks, part, xp, sx, out);
      for (int64_t i = 0; i < kGroups; ++i) {
        const int64_t n = (g + i * part) * 4;
        for (int64_t c = 0; c < 4 && n + c < w.N; ++c) y[n + c] = out[i * 4 + c] + (bias ? bias[n + c] : 0.0f);
      }
    }
    g0 += kGroups * part;  // then the groups left over: again, the last < 8 below
  }
#endif
  for (int64_t g = g0; g < g1;) {
    const int64_t count = std::min(kGroups, g1 - g);
    float out[kGroups * 4];
#ifndef QKV_NO_SIMD
    if (in.wide_finite) {
      const int8_t* wg = data + g * q.blocks * 128;
      const uint16_t* dg = w.scales + g * q.blocks * 4;
      int64_t i = 0;  // fewer than 8 groups left: 4 at a time, then 1
      for (; i + 4 <= count; i += 4)
        q8_groups<4>(wg + i * q.blocks * 128, dg + i * q.blocks * 4, q.blocks, 1, xp, sx, out + i * 4);
      for (; i < count; ++i)
        q8_groups<1>(wg + i * q.blocks * 128, dg + i * q.blocks * 4, q.blocks, 1, xp, sx, out + i * 4);
    } else {
      q8_groups_plain(w, in, g, g + count, out);
    }
#else
    q8_groups_plain(w, in, g, g + count, out);
#endif
    for (int64_t c = 0; c < count * 4 && g * 4 + c < w.N; ++c) y[g * 4 + c] = out[c] + (bias ? bias[g * 4 + c] : 0.0f);
    g += count;
  }
}

}  // namespace qkv::detail
