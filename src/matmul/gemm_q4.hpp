// Packing 4-bit weights (Q4, weights.hpp) into the matrix product's float panels (gemm.cpp), and
// the 4-bit prefill with the relaxed int8 dot. Internal to src/matmul.
#pragma once

#include <cstdint>

#include "matmul/matmul.hpp"
#include "matmul/weights.hpp"

namespace qkv::detail {

// Q4 columns [j0, j1) (j0 a multiple of 4), rows [k0, k1) (k0 even) into panels of nr columns
// ([ceil((j1 - j0) / nr)][k1 - k0][nr]): panel[k - k0][c] = d * q, exactly the dequantized
// weight (weight_at). Whole groups of 4 columns are written (columns past N: zeros); the panels
// must have room up to a multiple of nr.
void pack_q4(const WeightMatrix& w, int64_t k0, int64_t k1, int64_t j0, int64_t j1, float* panels, int64_t nr);

// gemm_q4 with the relaxed int8 dot (gemm_q4_dot.cpp): false, having done nothing, outside the
// relaxed-SIMD builds and where x's folded scales would overflow (|x| beyond ~2^31); the caller
// takes the int16 product then. Only while relaxed_int8_dot() is on (x rounded to int8).
// Every output is Q4 with x's K; their sets are split over the threads in one job.
bool gemm_q4_dot(const MatmulOutput* outputs, size_t count, const float* x, int64_t M, int threads);

}  // namespace qkv::detail
