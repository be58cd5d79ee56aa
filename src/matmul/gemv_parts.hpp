// What the matrix-vector kernels share (gemv.cpp: F32 weights, every float type's OutIn layout, and
// the dispatch; gemv_half.cpp: 16-bit weights; gemv_q8.cpp: 8-bit weights; gemv_q4.cpp: 4-bit): x as
// each weight type reads it, how a column range is cut into far-apart streams, and the walk over
// whole panels. Internal to src/matmul.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "matmul/weights.hpp"

namespace qkv::detail {

// x prepared once per call, shared by every thread.
struct GemvInput {
  const float* x = nullptr;
  std::vector<float> scaled;            // F16 InOut: x * 2^56 (the other half of the widening's 2^112)
  std::vector<float> even, odd;         // F16/BF16 OutIn: x[0::2], x[1::2] (F16: * 2^56), padded to K/2 rounded up
  std::vector<int16_t> pairs;           // Q8: [Kp/2][4 copies of (xq[2p], xq[2p+1])]
  std::vector<float> block_scale;       // Q8: [Kp/32] x ~= block_scale[b] * xq
  std::vector<float> block_scale_wide;  // Q8: [Kp/32] block_scale * 2^112 (see q8_groups)
  bool wide_finite = true;              // Q8: block_scale_wide has no inf (|x| < ~2^31)
  std::vector<int32_t> block_sum8;      // Q4: [Kp/32] 8 * the block's sum of xq (the nibbles' offset)
  std::vector<int16_t> quads;           // Q4: [Kp/4][even, odd][4 copies of (xq[4q], xq[4q+2]) / (xq[4q+1], xq[4q+3])]
  std::vector<int8_t> x8;               // Q4, int8 dot: [Kp] xq (|xq| <= 127)
};

// Rows per part for `streams` parts of `count` rows of `row_bytes` each (gemv_outin; gemv_q8 with
// groups for rows): the largest stride <= count / streams whose stream starts, stride rows apart,
// fall on at least streams / 2 different 64-byte lines of a 4 KiB page (at most 2 streams per L1
// set: the streams advance together, so starts that share a set keep sharing it), trying 8 strides
// down, else the one that spreads them most. Streams a multiple of 4 KiB apart all fall in one
// 12-way L1 set and evict each other's lines: 576 x 1536 (16 parts of 96 rows of 1152 bytes:
// 27 x 4 KiB), 1536 x 576 (36 x 3072 bytes) and SmolLM2's LM head (49152 x 576: 3072 x 1152 bytes) did;
// the Q8 kernel's 8 parts of 48 groups of 2304 bytes (576 x 1536) too.
int64_t part_stride(int64_t count, int64_t row_bytes, int streams);

#ifndef QKV_NO_SIMD
// The walk both panel kernels (F32, 16-bit) take over the columns [n, n1), n on an 8-column
// boundary: whole panels two at a time, half the range apart (two sequential streams); an odd
// one alone; a half panel alone where the range starts or ends inside one (threads cut at 8
// columns). run(streams, full_panel, columns) takes streams (std::integral_constant<int, 1 or 2>)
// runs of 16 columns (full_panel: std::true_type) or 8 (std::false_type), run s from column
// columns[s]. Returns where the last, narrower panel's columns start (n1 if none are in range).
template <class Run>
int64_t walk_whole_panels(int64_t n, int64_t n1, int64_t N, const Run& run) {
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  const int64_t stop = std::min(n1, N / kPanel * kPanel);  // the whole panels' columns of the range end here
  if (n % kPanel && n < stop) run(One{}, std::false_type{}, &n), n += 8;
  const int64_t panels = n < stop ? (stop - n) / kPanel : 0, pairs = panels / 2;
  for (int64_t j = 0; j < pairs; ++j) {
    const int64_t columns[2] = {n + j * kPanel, n + (pairs + j) * kPanel};
    run(Two{}, std::true_type{}, columns);
  }
  if (panels % 2) {
    const int64_t column = n + 2 * pairs * kPanel;
    run(One{}, std::true_type{}, &column);
  }
  n += panels * kPanel;
  if (n < stop) run(One{}, std::false_type{}, &n), n += 8;
  return std::min(n, n1);
}
#endif

// y[n0:n1] = bias + x W for 16-bit weights (F16, BF16) in InOut [K, N] or Panels (gemv_half.cpp);
// x_scaled: x * 2^56 for F16, x for BF16. Panels: n0 on an 8-column boundary.
void gemv_half(const WeightMatrix& w, const float* x, const float* x_scaled, const float* bias, float* y, int64_t n0,
               int64_t n1);

// x [K] -> in.pairs, in.block_scale(_wide), in.wide_finite: x quantized to int16 per block of 32,
// |xq| <= limit (kXqLimit16, x_int16.hpp; Q4 with the relaxed int8 dot: 127).
void prepare_q8(const float* x, int64_t K, GemvInput& in, float limit);

// y[4 g0 .. 4 g1) (clipped to N) = bias + x W for the Q8 groups [g0, g1) (x prepared by prepare_q8).
void gemv_q8(const WeightMatrix& w, const GemvInput& in, const float* bias, float* y, int64_t g0, int64_t g1);

// The largest |xq| of the 4-bit products' activations (gemv_q4, gemm_q4: the same rounding, so a
// decoded token gets a prefill's bits): 127 where the relaxed-SIMD build's int8 dot product
// (i32x4.relaxed_dot_i8x16_i7x16_add_s) runs and computes as the spec says, else 32767.
float q4_x_limit();

// x [K] -> what prepare_q8 makes (limit q4_x_limit()), in.block_sum8, and in.quads or, for the
// int8 dot, in.x8 (the same xq, in the kernel's k order).
void prepare_q4(const float* x, int64_t K, GemvInput& in);

// y[n0, n1) = bias + x W for Q4 weights (x prepared by prepare_q4).
void gemv_q4(const WeightMatrix& w, const GemvInput& in, const float* bias, float* y, int64_t n0, int64_t n1);

}  // namespace qkv::detail
