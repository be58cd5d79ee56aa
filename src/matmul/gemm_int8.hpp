// The integer matrix product over int8 weights in Q8's layout (gemm_q8.cpp), shared by the
// 8-bit prefill (Q8's stored panels) and the 4-bit one (gemm_q4.cpp unpacks Q4's nibbles).
// Each tile of weights reaches the micro-kernel widened to int16 with its scales as floats: the
// widening is done once per tile, not once per tile and group of rows. Internal to src/matmul.
#pragma once

#include <cstdint>

#include "matmul/weights.hpp"

namespace qkv::detail {

// The weights of `count` consecutive groups of 4 columns widened to int16, the groups' k-pairs
// side by side: data [blocks][16 k-pairs][count groups][4 columns][2] (the int8 values exactly;
// a group's k-pair as Q8 stores it), scales [blocks][count][4] (d * 2^-112 with d's sign, what
// halves::halves_low gives for the stored IEEE half; |d| >= 2^-14 or d = 0). The micro-kernel
// then reads one k-pair of the whole tile at one pointer.
struct Int16Panel {
  const int16_t* data = nullptr;
  const float* scales = nullptr;
};

// w's panel for groups [g, g + count) (count: the micro-tile's groups, fewer at the right edge),
// in the calling thread's buffer, valid until that thread's next call
using PanelOf = Int16Panel (*)(const WeightMatrix& w, int64_t g, int count);

// `pairs` k-pairs of int8 values at q (8 each, consecutive) -> int16, k-pair p at out + p * stride;
// n IEEE halves at h -> d * 2^-112 at out (the value halves::halves_low gives, for any n)
void widen_int8_pairs(const int8_t* q, int64_t pairs, int16_t* out, int64_t stride);
void widen_scales(const uint16_t* h, int64_t n, float* out);

// y[M, N] = x[M, K] W + bias, x rounded to int16 per row and block of 32 (|xq| <= x_limit:
// 32767, or 127 for Q4 with the relaxed int8 dot), int32 block sums (exact), each block's sum
// times d_w d_x into float accumulators. Groups of 4 columns are split over the threads in tiles
// of whole groups; the thread count changes no bit.
void gemm_int8(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int threads,
               PanelOf panel_of, float x_limit);

}  // namespace qkv::detail
