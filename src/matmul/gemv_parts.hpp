// What the matrix-vector kernels share (gemv.cpp: F32 and 16-bit weights, and the dispatch;
// gemv_q8.cpp: 8-bit weights; gemv_q4.cpp: 4-bit): x as each weight type reads it, and how a column range is cut
// into far-apart streams. Internal to src/matmul.
#pragma once

#include <cstdint>
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
