// A Llama-family model's weights (Hugging Face tensor names, nn.Linear [out, in] layout), held
// once in the dtype chosen on load: as stored (F32, F16, BF16), or converted to F32, F16 or
// 8-bit Q8, each matrix read in place by the matmul kernels (src/matmul/). The safetensors
// bytes are only read during load().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "matmul/weights.hpp"
#include "model/llama_config.hpp"

namespace qkv {

// How the matrices are held: "auto" (as stored), "f32", "f16", "int8" (Q8 for the matmuls'
// matrices; an untied embedding table, only gathered from, keeps its stored dtype).
enum class LlamaWeightFormat { Auto, F32, F16, Int8 };

// "auto" | "f32" | "f16" | "int8"; throws std::invalid_argument naming the value otherwise.
LlamaWeightFormat parse_llama_weight_format(std::string_view name);

struct LlamaLayerWeights {
  const float* input_layernorm = nullptr;           // [E]
  WeightMatrix q_proj, k_proj, v_proj;              // [H*D, E], [Hkv*D, E], [Hkv*D, E] (OutIn)
  const float *q_bias = nullptr, *k_bias = nullptr, *v_bias = nullptr;  // [H*D], [Hkv*D], [Hkv*D] or null
  WeightMatrix o_proj;                              // [E, H*D]
  const float* o_bias = nullptr;                    // [E] or null
  const float* post_attention_layernorm = nullptr;  // [E]
  WeightMatrix gate_proj, up_proj;                  // [I, E]
  WeightMatrix down_proj;                           // [E, I]
};

struct LlamaWeights {
  WeightMatrix embed_tokens;  // the [V, E] table as K = E, N = V (OutIn): column v = token v's embedding
  std::vector<LlamaLayerWeights> layers;
  const float* norm = nullptr;  // [E]
  WeightMatrix lm_head;         // [V, E] as K = E, N = V; embed_tokens itself when tied
};

class LlamaWeightStore {
 public:
  // Reads every tensor the config needs from the safetensors bytes (only during the call).
  // Throws std::invalid_argument naming the tensor for a missing one, a wrong shape, a dtype
  // other than F32 / F16 / BF16, or values that do not fit the chosen dtype.
  static LlamaWeightStore load(const LlamaConfig& config, const uint8_t* bytes, size_t size, LlamaWeightFormat format);

  const LlamaWeights& weights() const { return weights_; }
  // The matmuls' matrices' dtype: "F32", "F16", "BF16", "Q8", or "mixed".
  const char* matrix_type() const { return matrix_type_; }
  size_t bytes() const { return matrices_.size() + 4 * vectors_.size(); }  // held in memory

  LlamaWeightStore() = default;
  LlamaWeightStore(LlamaWeightStore&&) = default;
  LlamaWeightStore& operator=(LlamaWeightStore&&) = default;
  LlamaWeightStore(const LlamaWeightStore&) = delete;  // the views point into this store's buffers

 private:
  std::vector<uint8_t> matrices_;  // every matrix, 16-byte aligned offsets
  std::vector<float> vectors_;     // norms and biases, float32
  LlamaWeights weights_;
  const char* matrix_type_ = "F32";
};

}  // namespace qkv
