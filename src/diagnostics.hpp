// Diagnostics over attention weights [rows, Lk]: what the playground and the tests read.
#pragma once

#include <cstdint>

namespace qkv {

// Shannon entropy (nats) of each row: -sum p log p, 0 for an all-zero (fully masked) row.
void row_entropy(const float* weights, int64_t rows, int64_t lk, float* entropy);

// Largest |sum_j w[r,j] - 1| over rows that are not all zero; all-zero rows are skipped
// (that is what a fully masked row must be). Returns 0 for an empty input.
float max_row_sum_error(const float* weights, int64_t rows, int64_t lk);

}  // namespace qkv
