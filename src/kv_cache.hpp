// A key/value cache for incremental decoding: keys and values are appended a step (or
// several) at a time and new queries attend to everything stored so far, causally,
// without recomputing the past.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attention.hpp"

namespace qkv {

class KVCache {
 public:
  // Storage for `capacity` positions of B x Hkv heads (GQA-shaped when Hkv < query heads).
  KVCache(int64_t batch, int64_t kv_heads, int64_t capacity, int64_t head_dim, int64_t value_dim);

  // Appends n positions: key [B, Hkv, n, D], value [B, Hkv, n, Dv].
  // Throws std::length_error when length() + n would exceed capacity().
  void append(const float* key, const float* value, int64_t n);

  // Attends query [B, H, Lq, D] to the cached positions (Lk = length()). With
  // options.causal the last Lq cached positions are the queries' own (bottom-right).
  // output [B, H, Lq, Dv]; weights [B, H, Lq, length()] if not null.
  void attend(const float* query, int64_t heads, int64_t lq, const AttentionOptions& options, float* output,
              float* weights = nullptr) const;

  // Grows the storage to hold at least `capacity` positions, keeping the cached ones (one copy
  // of each (batch, kv head)'s rows); never shrinks.
  void reserve(int64_t capacity);

  void clear() { length_ = 0; }
  // Keeps the first n cached positions (n <= length()); the storage is untouched, so positions
  // appended again overwrite the rows past n.
  void truncate(int64_t n) { length_ = n < 0 ? 0 : (n < length_ ? n : length_); }
  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  int64_t batch() const { return batch_; }
  int64_t kv_heads() const { return kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  int64_t value_dim() const { return value_dim_; }
  const float* keys() const { return keys_.data(); }      // [B, Hkv, capacity, D]
  const float* values() const { return values_.data(); }  // [B, Hkv, capacity, Dv]

 private:
  int64_t batch_, kv_heads_, capacity_, head_dim_, value_dim_;
  int64_t length_ = 0;
  std::vector<float> keys_;    // (B, Hkv, capacity, D)
  std::vector<float> values_;  // (B, Hkv, capacity, Dv)
};

// A decoder's per-layer caches, grown to hold `positions`: created on first use, then each grown
// to double its capacity (at least 64 positions, at least `positions`), never past `limit` (the
// model's context), so a short generation does not hold a cache for the whole context.
void reserve_positions(std::vector<KVCache>& caches, int64_t layers, int64_t kv_heads, int64_t head_dim,
                       int64_t positions, int64_t limit);

// The caches' memory: keys and values for their whole capacity, in bytes.
size_t cache_bytes(const std::vector<KVCache>& caches);

}  // namespace qkv
