// Llama-family decoders (Llama 2/3, Mistral, Qwen2, Qwen3, Gemma 3, SmolLM2, TinyLlama) on qkv's kernels, in the
// style of llama2.c's run.c: RMSNorm, rotary position embedding (HF's rotate_half layout),
// grouped-query attention through the attention kernel's grouped heads (K/V stored once per kv
// head, in attention and in the KV cache), the sliding window through the kernel's window
// option, a SwiGLU MLP; incremental decoding through one KVCache per layer. Qwen3 adds RMSNorm on
// each head's q and k; Gemma 3 those, (1 + w) norms, norms on the sub-blocks' outputs, scaled
// embeddings, GeGLU, its own attention scale, local layers with their own rotary base, and
// logit soft-capping (LlamaConfig says which).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kv_cache.hpp"
#include "model/gpt2.hpp"  // Rng, SamplingOptions, sample(): shared by every model
#include "model/llama_config.hpp"
#include "model/llama_weights.hpp"

namespace qkv {

// Per-call scratch buffers for run(), grown to the largest call so far (shapes in run()).
struct LlamaScratch {
  std::vector<float> x, xb, xb2, q, k, v, qh, kh, vh, att, hb, hb2, cos, sin;
  std::vector<float> cos_local, sin_local;  // Gemma 3's local layers' rotary angles
  size_t bytes() const;                     // the memory the buffers hold (their capacity)
};

class Llama {
 public:
  using Config = LlamaConfig;
  using Store = LlamaWeightStore;
  Llama(LlamaConfig config, LlamaWeightStore store);

  // config.json text + the safetensors file, whose buffer the model takes (read in place, or
  // converted and freed; freed on error too).
  static Llama load(std::string_view config_json, MallocBytes safetensors_bytes, size_t size, WeightFormat format);
  // The same from bytes someone else holds (copied first).
  static Llama load(std::string_view config_json, const uint8_t* safetensors_bytes, size_t size,
                    WeightFormat format = WeightFormat::Auto);

  const LlamaConfig& config() const { return config_; }
  const LlamaWeights& weights() const { return store_.weights(); }
  const LlamaWeightStore& weight_store() const { return store_; }

  // Worker threads for the attention kernel and the matmuls; results do not depend on it.
  void set_threads(int threads) { threads_ = threads < 1 ? 1 : threads; }
  int threads() const { return threads_; }

  // Full forward pass without a cache: ids [L] -> logits [L, V].
  // attentions, if not null: [n_layer, H, L, L]. queries: [n_layer, H, L, D], keys:
  // [n_layer, Hkv, L, D]: q and k after the rotary embedding, exactly as attention reads them
  // (q before the softmax scale, 1/sqrt(D) or Gemma's query_pre_attn_scalar^-0.5; keys once per kv head, query head h
  // reads kv head h / (H / Hkv)). Throws std::invalid_argument for an empty sequence or an id out of range,
  // std::length_error past max_position_embeddings.
  void forward(const int32_t* ids, int64_t L, float* logits, float* attentions = nullptr, float* queries = nullptr,
               float* keys = nullptr) const;

  // The core of forward() and LlamaSession: L tokens at positions [pos0, pos0 + L). With caches
  // (one per layer, each holding pos0 positions, capacity >= pos0 + L) the new keys/values are
  // appended and the queries attend through the cache; without, pos0 must be 0. logits: [L, V]
  // when all_logits, else [1, V] for the last token. attentions: [n_layer, H, L, pos0 + L].
  void run(const int32_t* ids, int64_t L, int64_t pos0, std::vector<KVCache>* caches, LlamaScratch& scratch,
           float* logits, bool all_logits, float* attentions, float* queries = nullptr, float* keys = nullptr,
           const HeadInterventions* iv = nullptr,
           const ResidualHooks* rh = nullptr) const;  // iv, rh: as GPT2::run

  // The read-out of n residual-stream rows x [n, E]: the final RMSNorm of each row, the LM head
  // over all n rows at once, Gemma's soft-cap -> logits [n, V].
  void unembed(const float* x, int64_t n, float* logits) const;

 private:
  LlamaConfig config_;
  LlamaWeightStore store_;
  std::vector<double> inv_freq_;        // [D/2] rotary inverse frequencies
  std::vector<double> inv_freq_local_;  // [D/2] those of the local layers (Gemma 3), else empty
  int threads_ = 1;
};

// Incremental decoding: one KV cache per layer of [Hkv, capacity, D], grown by doubling as
// positions are added (a Llama 3 context of 131072 is not allocated up front).
class LlamaSession {
 public:
  explicit LlamaSession(const Llama& model);

  // ids [L] at the next positions -> logits of the last [V] (all_logits: [L, V]); attentions,
  // if not null: [n_layer, H, L, position() + L]; queries [n_layer, H, L, D], keys
  // [n_layer, Hkv, L, D] of these L tokens if not null (as Llama::run).
  // Throws std::length_error past max_position_embeddings.
  void prefill(const int32_t* ids, int64_t L, float* logits, float* attentions = nullptr, float* queries = nullptr,
               float* keys = nullptr, bool all_logits = false, const HeadInterventions* iv = nullptr,
               const ResidualHooks* rh = nullptr);
  // One token: logits [V]; attentions [n_layer, H, position() + 1] if not null.
  void step(int32_t id, float* logits, float* attentions = nullptr, const HeadInterventions* iv = nullptr,
            const ResidualHooks* rh = nullptr);

  void reset();
  int64_t position() const { return position_; }
  int64_t capacity() const { return caches_.empty() ? 0 : caches_[0].capacity(); }
  size_t cache_bytes() const;  // the KV caches' memory (capacity() positions)
  // Room for `positions` in the caches now (at least 64, at most max_position_embeddings), so a
  // generation of known length grows them once, not by doubling; keeps what they hold.
  void reserve(int64_t positions);

 private:
  const Llama& model_;
  std::vector<KVCache> caches_;
  LlamaScratch scratch_;
  int64_t position_ = 0;
};

// n_new tokens after `prompt`: through LlamaSession (use_cache) or by recomputing the whole
// forward pass per token (the reference).
std::vector<int32_t> generate(const Llama& model, const std::vector<int32_t>& prompt, int64_t n_new,
                              const SamplingOptions& options, uint64_t seed, bool use_cache);

}  // namespace qkv
