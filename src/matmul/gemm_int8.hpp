// The integer matrix product over int8 weight panels in Q8's layout (gemm_q8.cpp), shared by the
// 8-bit prefill (the panels are the Q8 matrix as stored) and the 4-bit one (gemm_q4.cpp unpacks
// each tile's Q4 nibbles into such a panel). Internal to src/matmul.
#pragma once

#include <cstdint>

#include "matmul/weights.hpp"

namespace qkv::detail {

// int8 weights of `count` consecutive groups of 4 columns in Q8's layout (weights.hpp): group
// i's values at data + i * blocks * 128 ([blocks][16 k-pairs][4 columns][2]), its scales at
// scales + i * blocks * 4 ([blocks][4] IEEE halves of either sign, |d| >= 2^-14 or d = 0)
struct Int8Panel {
  const int8_t* data = nullptr;
  const uint16_t* scales = nullptr;
};

// w's panel for groups [g, g + count) (count: the micro-tile's groups, fewer at the right edge):
// Q8 points into w; Q4 unpacks into the calling thread's buffer, valid until that thread's next
// call
using PanelOf = Int8Panel (*)(const WeightMatrix& w, int64_t g, int count);

// y[M, N] = x[M, K] W + bias, x rounded to int16 per row and block of 32, int32 block sums
// (exact), each block's sum times d_w d_x into float accumulators. Groups of 4 columns are split
// over the threads in tiles of whole groups; the thread count changes no bit.
void gemm_int8(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int threads,
               PanelOf panel_of);

}  // namespace qkv::detail
