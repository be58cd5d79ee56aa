#include "kv_cache.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace qkv {

KVCache::KVCache(int64_t batch, int64_t kv_heads, int64_t capacity, int64_t head_dim, int64_t value_dim)
    : batch_(batch), kv_heads_(kv_heads), capacity_(capacity), head_dim_(head_dim), value_dim_(value_dim) {
  if (batch < 1 || kv_heads < 1 || capacity < 1 || head_dim < 1 || value_dim < 1) {
    throw std::invalid_argument("KVCache: batch, kv_heads, capacity, head_dim and value_dim must be >= 1, got [" +
                                std::to_string(batch) + ", " + std::to_string(kv_heads) + ", " +
                                std::to_string(capacity) + ", " + std::to_string(head_dim) + ", " +
                                std::to_string(value_dim) + "]");
  }
  keys_.assign(batch * kv_heads * capacity * head_dim, 0.0f);
  values_.assign(batch * kv_heads * capacity * value_dim, 0.0f);
}

void KVCache::append(const float* key, const float* value, int64_t n) {
  if (n < 1 || length_ + n > capacity_) {
    throw std::length_error("KVCache.append: cannot append " + std::to_string(n) + " positions to a cache holding " +
                            std::to_string(length_) + " of capacity " + std::to_string(capacity_));
  }
  for (int64_t bg = 0; bg < batch_ * kv_heads_; ++bg) {  // each (batch, kv head)
    std::copy(key + bg * n * head_dim_, key + (bg + 1) * n * head_dim_,
              keys_.data() + (bg * capacity_ + length_) * head_dim_);
    std::copy(value + bg * n * value_dim_, value + (bg + 1) * n * value_dim_,
              values_.data() + (bg * capacity_ + length_) * value_dim_);
  }
  length_ += n;
}

void KVCache::reserve(int64_t capacity) {
  if (capacity <= capacity_) return;
  std::vector<float> keys(size_t(batch_ * kv_heads_ * capacity * head_dim_), 0.0f);
  std::vector<float> values(size_t(batch_ * kv_heads_ * capacity * value_dim_), 0.0f);
  for (int64_t bg = 0; bg < batch_ * kv_heads_; ++bg) {  // each (batch, kv head): its first length_ rows
    std::copy_n(keys_.data() + bg * capacity_ * head_dim_, length_ * head_dim_,
                keys.data() + bg * capacity * head_dim_);
    std::copy_n(values_.data() + bg * capacity_ * value_dim_, length_ * value_dim_,
                values.data() + bg * capacity * value_dim_);
  }
  keys_ = std::move(keys);
  values_ = std::move(values);
  capacity_ = capacity;
}

void reserve_positions(std::vector<KVCache>& caches, int64_t layers, int64_t kv_heads, int64_t head_dim,
                       int64_t positions, int64_t limit) {
  const int64_t cap = caches.empty() ? 0 : caches[0].capacity();
  if (!caches.empty() && cap >= positions) return;
  const int64_t want = std::min(limit, std::max({positions, 2 * cap, int64_t(64)}));
  if (caches.empty()) {
    caches.reserve(size_t(layers));
    for (int64_t l = 0; l < layers; ++l) caches.emplace_back(1, kv_heads, want, head_dim, head_dim);
  } else {
    for (auto& cache : caches) cache.reserve(want);  // a layer at a time: one old and one new cache at once
  }
}

size_t cache_bytes(const std::vector<KVCache>& caches) {
  size_t n = 0;
  for (const KVCache& c : caches) {
    n += size_t(c.batch() * c.kv_heads() * c.capacity() * (c.head_dim() + c.value_dim())) * sizeof(float);
  }
  return n;
}

void KVCache::attend(const float* query, int64_t heads, int64_t lq, const AttentionOptions& options, float* output,
                     float* weights) const {
  // read the cache in place: each kv head holds `capacity` rows, the first length() are used
  const AttentionShape shape{batch_, heads, kv_heads_, lq, length_, head_dim_, value_dim_, capacity_};
  if (length_ == 0) {
    throw std::invalid_argument("KVCache.attend: the cache is empty; append keys and values first");
  }
  attention(shape, query, keys_.data(), values_.data(), options, output, weights);
}

}  // namespace qkv
