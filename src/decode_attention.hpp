// The attention path for a few query rows per head (decode: Lq = 1), and the constants it
// shares with the flash kernel (src/flash.cpp) so that both walk the same key tiles and make the
// same online-softmax decisions: a query row gets the same bits whichever path computes it.
#pragma once

#include <cstdint>
#include <limits>

#include "attention.hpp"

namespace qkv::detail {

constexpr int64_t kKeyTile = 64;  // keys per tile (both paths)
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kLog2e = 1.44269504088896341f;
// Scores are kept in log2 units (the queries are multiplied by scale * log2(e) once), so the
// softmax's exponential is a bare exp2. The running max m lags behind: it moves only when a
// tile's max exceeds it by more than this (FlashAttention-4's conditional rescaling), so the
// accumulator is rarely rescaled; p = 2^(s - m) <= 2^8 meanwhile, and the result is the same
// after the final division by l.
constexpr float kRescaleThreshold = 8.0f;

// Query rows per head up to which attention() takes the few-rows path: below the 4 lanes of a
// wasm vector, the flash kernel's vectors across query rows are mostly empty.
constexpr int64_t kFewQueryRows = 3;

inline bool few_query_rows(const AttentionShape& s) { return s.Lq <= kFewQueryRows; }

// attention() for few_query_rows(s), validated already; scale is the resolved scale.
void attention_few_rows(const AttentionShape& s, const float* query, const float* key, const float* value,
                        const AttentionOptions& o, float scale, float* output, float* weights);

// Scratch bytes attention_few_rows allocates for one call.
int64_t attention_few_rows_workspace_bytes(const AttentionShape& s, const AttentionOptions& o);

}  // namespace qkv::detail
