// The argument checks GPT2::run and Llama::run share (and their forward()s): each throws a
// std::invalid_argument (std::length_error past the position limit) whose message starts with
// `fn`, the function checked ("GPT2::run").
#pragma once

#include <cstdint>
#include <vector>

#include "kv_cache.hpp"

namespace qkv {

// ids [L], L >= 1, each in [0, vocab_size), at positions [pos0, pos0 + L) within max_positions
// (called `limit_name` in the message: "n_positions", "max_position_embeddings").
void check_decoder_ids(const char* fn, const int32_t* ids, int64_t L, int64_t pos0, int64_t vocab_size,
                       int64_t max_positions, const char* limit_name);

// pos0 >= 0; without caches (null) pos0 = 0; with them one per layer (n_layer), each holding
// pos0 positions of [1, kv_heads, capacity >= pos0 + L, head_dim] keys and values.
void check_decoder_caches(const char* fn, const std::vector<KVCache>* caches, int64_t n_layer, int64_t pos0, int64_t L,
                          int64_t kv_heads, int64_t head_dim);

}  // namespace qkv
