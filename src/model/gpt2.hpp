// GPT-2 on qkv's own kernels, in the style of llama2.c's run.c: a config, the weights, a
// forward pass (prefill through the tiled attention kernel), incremental decoding through
// the KV cache, and sampling helpers.
//
// Weights follow the Hugging Face GPT-2 layout (tensor names as GPT2Model, with an optional
// "transformer." prefix; Conv1D weights are [in, out]); the LM head is tied to wte. They are
// held once, as stored or converted on load (gpt2_weights.hpp), and read in place by the
// matmul kernels (src/matmul/): one token at a time through matrix-vector products at memory
// speed, many through blocked matrix products.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kv_cache.hpp"
#include "model/gpt2_weights.hpp"
#include "model/interventions.hpp"
#include "model/residual.hpp"

namespace qkv {

struct GPT2Config {
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_embd = 0;
  int64_t n_positions = 0;
  int64_t vocab_size = 0;
  int64_t n_inner = 0;  // 0 = 4 * n_embd (config.json: null or absent)
  float layer_norm_epsilon = 1e-5f;
  bool scale_attn_weights = true;

  int64_t inner() const { return n_inner > 0 ? n_inner : 4 * n_embd; }
  int64_t head_dim() const { return n_embd / n_head; }

  // Parses a Hugging Face GPT-2 config.json (n_ctx is read when n_positions is absent) and
  // validates it. Throws std::invalid_argument("GPT2Config: ...") naming the key.
  static GPT2Config from_json(std::string_view text);
  void validate() const;
};

// Per-call scratch buffers for run(), grown to the largest call so far (shapes in run()).
struct GPT2Scratch {
  std::vector<float> x, xb, xb2, qkv, q, k, v, att, hb;
  size_t bytes() const;  // the memory the buffers hold (their capacity)
};

// Which positions get logits: every one ([L, V]) or the last one only ([1, V], what
// generation needs: the LM head is the largest matmul of a step).
enum class Logits { All, Last };

class GPT2 {
 public:
  using Config = GPT2Config;
  using Store = GPT2WeightStore;
  GPT2(GPT2Config config, GPT2WeightStore weights);

  // config.json text + safetensors bytes -> model. This one copies the bytes (they are only
  // read during the call).
  static GPT2 load(std::string_view config_json, const uint8_t* safetensors_bytes, size_t size,
                   WeightFormat format = WeightFormat::Auto);
  // This one takes ownership of a malloc'd buffer holding the whole file (freed on error, or
  // once nothing reads it): with format Auto the tensors are read from it in place.
  static GPT2 load(std::string_view config_json, MallocBytes safetensors_bytes, size_t size, WeightFormat format);

  const GPT2Config& config() const { return config_; }
  const GPT2Weights& weights() const { return store_.weights(); }
  const GPT2WeightStore& weight_store() const { return store_; }

  // Worker threads for the attention kernel and the matmuls (which split output columns); the
  // results do not depend on it, bit for bit.
  void set_threads(int threads) { threads_ = threads < 1 ? 1 : threads; }
  int threads() const { return threads_; }

  // Full forward pass without a cache: ids [L] -> logits [L, V] (Logits::All) or [1, V] for the
  // last position (Logits::Last).
  // attentions, if not null: [n_layer, H, L, L], the softmax probabilities of every head.
  // queries, keys, if not null: [n_layer, H, L, D] (D = head_dim), every head's query and key
  // vectors exactly as attention consumes them (queries before the 1/sqrt(D) scaling), so
  // softmax(q k^T * scale + causal mask) reproduces `attentions`.
  // Throws std::invalid_argument for an empty sequence, L > n_positions or an id out of range.
  void forward(const int32_t* ids, int64_t L, float* logits, float* attentions = nullptr, float* queries = nullptr,
               float* keys = nullptr, Logits which = Logits::All) const;

  // The core both forward() and Session use: runs L tokens at positions [pos0, pos0 + L).
  // With caches (one per layer, holding pos0 positions) the new keys/values are appended and
  // the queries attend through the cache; without, pos0 must be 0 and attention is computed
  // over these L tokens directly. logits: [L, V] when all_logits, else [1, V] for the last
  // token. attentions, if not null: [n_layer, H, L, pos0 + L]. queries, keys, if not null:
  // [n_layer, H, L, D], the queries (unscaled) and keys of these L tokens (the cached keys of
  // earlier positions are not repeated). iv, if not null: head interventions (head mask,
  // knockout, head outputs, patching; model/interventions.hpp) for rows [pos0, pos0 + L). rh, if
  // not null: the residual stream's records, patches, steering and start (model/residual.hpp).
  void run(const int32_t* ids, int64_t L, int64_t pos0, std::vector<KVCache>* caches, GPT2Scratch& scratch,
           float* logits, bool all_logits, float* attentions, float* queries = nullptr, float* keys = nullptr,
           const HeadInterventions* iv = nullptr, const ResidualHooks* rh = nullptr) const;

  // The read-out of n residual-stream rows x [n, E]: the final layernorm of each row (its own
  // mean and variance), then the LM head over all n rows at once -> logits [n, V].
  void unembed(const float* x, int64_t n, float* logits) const;

 private:
  GPT2Config config_;
  GPT2WeightStore store_;
  int threads_ = 1;
};

// Incremental decoding: one KV cache per layer, positions 0 .. n_positions - 1.
class GPT2Session {
 public:
  explicit GPT2Session(const GPT2& model);

  // Runs ids [L] at the next positions (the prompt, or more of it) and returns the logits of
  // the last one [V] (all_logits: of each of the L tokens, [L, V]). attentions, if not null:
  // [n_layer, H, L, position() + L] (before the call). queries, keys, if not null:
  // [n_layer, H, L, D], those of these L tokens (as GPT2::run). A prompt run in chunks gives
  // forward()'s rows chunk by chunk.
  // Throws std::length_error when position() + L > n_positions (the cache is left unchanged).
  void prefill(const int32_t* ids, int64_t L, float* logits, float* attentions = nullptr, float* queries = nullptr,
               float* keys = nullptr, bool all_logits = false, const HeadInterventions* iv = nullptr,
               const ResidualHooks* rh = nullptr);

  // One token at position(): logits [V]; attentions, if not null: [n_layer, H, position() + 1],
  // the new row of every head (the key axis covers every cached position, this one included).
  void step(int32_t id, float* logits, float* attentions = nullptr, const HeadInterventions* iv = nullptr,
            const ResidualHooks* rh = nullptr);

  void reset();
  int64_t position() const { return position_; }
  int64_t capacity() const { return caches_.empty() ? 0 : caches_[0].capacity(); }
  // Room for `positions` in the caches now (at least 64, at most n_positions), so a generation of
  // known length grows them once, not by doubling; keeps what they hold.
  void reserve(int64_t positions);
  size_t cache_bytes() const;  // the KV caches' memory (capacity() positions)
  const GPT2& model() const { return model_; }

 private:
  const GPT2& model_;
  std::vector<KVCache> caches_;
  GPT2Scratch scratch_;
  int64_t position_ = 0;
};

// ----------------------------------------------------------------------------- sampling

// A small seeded generator (PCG32, O'Neill 2014): the same seed gives the same stream on
// every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0);
  uint32_t next_u32();
  double next_double();  // uniform in [0, 1) with 53 random bits (two draws)
 private:
  uint64_t state_ = 0;
  uint64_t inc_ = 0;
};

struct SamplingOptions {
  float temperature = 1.0f;  // <= 0: greedy
  int64_t top_k = 0;         // 0: all tokens
};

// Index of the largest logit (the first one on ties).
int32_t argmax(const float* logits, int64_t n);

// Greedy when temperature <= 0; else samples from softmax(logits / temperature) restricted
// to the top_k largest logits (ties broken by lower index). Deterministic given the Rng.
int32_t sample(const float* logits, int64_t n, const SamplingOptions& options, Rng& rng);

// Generates n_new tokens after `prompt`. use_cache: through GPT2Session (one step at a time);
// otherwise by recomputing the full forward pass for every token (the reference).
// Throws std::length_error when prompt + n_new exceeds n_positions.
std::vector<int32_t> generate(const GPT2& model, const std::vector<int32_t>& prompt, int64_t n_new,
                              const SamplingOptions& options, uint64_t seed, bool use_cache);

}  // namespace qkv
