#include "model/decoder_checks.hpp"

#include <stdexcept>
#include <string>

namespace qkv {

void check_decoder_ids(const char* fn, const int32_t* ids, int64_t L, int64_t pos0, int64_t vocab_size,
                       int64_t max_positions, const char* limit_name) {
  if (L < 1) throw std::invalid_argument(std::string(fn) + ": ids is empty (need at least 1 token)");
  if (pos0 + L > max_positions) {
    throw std::length_error(std::string(fn) + ": " + std::to_string(pos0 + L) + " positions (" + std::to_string(pos0) +
                            " already + " + std::to_string(L) + " new) exceed " + limit_name + " = " +
                            std::to_string(max_positions));
  }
  for (int64_t i = 0; i < L; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      throw std::invalid_argument(std::string(fn) + ": ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                                  " is out of range [0, " + std::to_string(vocab_size) + ")");
    }
  }
}

void check_decoder_caches(const char* fn, const std::vector<KVCache>* caches, int64_t n_layer, int64_t pos0, int64_t L,
                          int64_t kv_heads, int64_t head_dim) {
  if (pos0 < 0) throw std::invalid_argument(std::string(fn) + ": pos0 must be >= 0, got " + std::to_string(pos0));
  if (!caches) {
    if (pos0 != 0) throw std::invalid_argument(std::string(fn) + ": pos0 must be 0 without KV caches");
    return;
  }
  if (int64_t(caches->size()) != n_layer) {
    throw std::invalid_argument(std::string(fn) + ": " + std::to_string(caches->size()) + " KV caches, the model has " +
                                std::to_string(n_layer) + " layers");
  }
  for (const KVCache& cache : *caches) {
    if (cache.length() != pos0 || cache.batch() != 1 || cache.kv_heads() != kv_heads || cache.head_dim() != head_dim ||
        cache.value_dim() != head_dim || cache.capacity() < pos0 + L) {
      throw std::invalid_argument(std::string(fn) + ": a KV cache of length " + std::to_string(cache.length()) +
                                  " (capacity " + std::to_string(cache.capacity()) + ", " +
                                  std::to_string(cache.kv_heads()) + " heads of " + std::to_string(cache.head_dim()) +
                                  ") does not fit pos0 = " + std::to_string(pos0) + ", L = " + std::to_string(L));
    }
  }
}

}  // namespace qkv
