// The token loop of generate() that GPT-2 and the Llama family share (gpt2.cpp, llama.cpp):
// n_new tokens after `prompt`, sampled with `options` from a Rng seeded with `seed`; through
// a Session (use_cache: prefill once, then one step a token) or by recomputing the whole
// forward pass for every token (the reference). Throws std::invalid_argument for an empty
// prompt or n_new < 0, std::length_error when prompt + n_new exceeds max_positions (called
// `limit_name` in the message).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/gpt2.hpp"  // Rng, SamplingOptions, sample()

namespace qkv {

template <class Session, class Model>
std::vector<int32_t> generate_tokens(const Model& model, int64_t vocab_size, int64_t max_positions,
                                     const char* limit_name, const std::vector<int32_t>& prompt, int64_t n_new,
                                     const SamplingOptions& options, uint64_t seed, bool use_cache) {
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt is empty");
  if (n_new < 0) throw std::invalid_argument("generate: n_new must be >= 0");
  if (int64_t(prompt.size()) + n_new > max_positions) {
    throw std::length_error("generate: prompt (" + std::to_string(prompt.size()) + ") + n_new (" +
                            std::to_string(n_new) + ") exceed " + limit_name + " = " + std::to_string(max_positions));
  }
  Rng rng(seed);
  std::vector<int32_t> ids = prompt;
  std::vector<float> logits(static_cast<size_t>(vocab_size));
  if (use_cache) {
    // logits [V] of the last position, one step per new token
    Session session(model);
    session.reserve(int64_t(prompt.size()) + n_new);  // one allocation for the whole generation
    session.prefill(ids.data(), int64_t(ids.size()), logits.data());
    for (int64_t i = 0; i < n_new; ++i) {
      const int32_t next = sample(logits.data(), vocab_size, options, rng);
      ids.push_back(next);
      if (i + 1 < n_new) session.step(next, logits.data());
    }
  } else {
    // all [L, V] of the whole sequence, every time; the last row samples
    std::vector<float> all;
    for (int64_t i = 0; i < n_new; ++i) {
      const int64_t L = int64_t(ids.size());
      all.resize(size_t(L * vocab_size));
      model.forward(ids.data(), L, all.data());
      ids.push_back(sample(all.data() + (L - 1) * vocab_size, vocab_size, options, rng));
    }
  }
  return ids;
}

}  // namespace qkv
