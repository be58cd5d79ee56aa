// Packing 4-bit weights (Q4, weights.hpp) into the matrix product's float panels (gemm.cpp).
// Internal to src/matmul.
#pragma once

#include <cstdint>

#include "matmul/weights.hpp"

namespace qkv::detail {

// Q4 columns [j0, j1) (j0 a multiple of 4), rows [k0, k1) (k0 even) into panels of nr columns
// ([ceil((j1 - j0) / nr)][k1 - k0][nr]): panel[k - k0][c] = d * q, exactly the dequantized
// weight (weight_at). Whole groups of 4 columns are written (columns past N: zeros); the panels
// must have room up to a multiple of nr.
void pack_q4(const WeightMatrix& w, int64_t k0, int64_t k1, int64_t j0, int64_t j1, float* panels, int64_t nr);

}  // namespace qkv::detail
