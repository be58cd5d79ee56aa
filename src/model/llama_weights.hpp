// A Llama-family model's weights (Hugging Face tensor names, nn.Linear [out, in] layout), held
// once, as GPT-2's are (weight_loader.hpp): read in place from the safetensors buffer in the
// dtype they came in (F32, F16, BF16), or converted once on load (to F32, F16 or 8-bit Q8)
// into one new buffer, after which the file's buffer is freed. The matmul kernels
// (src/matmul/) read every matrix where it is held; the tied LM head is embed_tokens itself.
#pragma once

#include <cstdint>
#include <vector>

#include "matmul/weights.hpp"
#include "model/llama_config.hpp"
#include "model/weight_loader.hpp"  // WeightFormat, MallocBytes, WeightBytes

namespace qkv {

// The matrices are OutIn as the file stores them, except that the float ones a matmul reads are
// rewritten on load in panels of 16 columns (WeightLayout::Panels, WeightLoader::load).
struct LlamaLayerWeights {
  const float* input_layernorm = nullptr;                               // [E]
  WeightMatrix q_proj, k_proj, v_proj;                                  // [H*D, E], [Hkv*D, E], [Hkv*D, E] (OutIn)
  const float *q_bias = nullptr, *k_bias = nullptr, *v_bias = nullptr;  // [H*D], [Hkv*D], [Hkv*D] or null
  WeightMatrix o_proj;                                                  // [E, H*D]
  const float* o_bias = nullptr;                                        // [E] or null
  const float* post_attention_layernorm = nullptr;   // [E] the norm before the MLP (Gemma 3: pre_feedforward_layernorm)
  const float *q_norm = nullptr, *k_norm = nullptr;  // [D] or null (Qwen3, Gemma 3)
  const float* attn_output_norm = nullptr;  // [E] or null: Gemma 3's post_attention_layernorm, on the attention output
  const float* mlp_output_norm = nullptr;   // [E] or null: Gemma 3's post_feedforward_layernorm, on the MLP output
  WeightMatrix gate_proj, up_proj;          // [I, E]
  WeightMatrix down_proj;                   // [E, I]
};

struct LlamaWeights {
  WeightMatrix embed_tokens;  // the [V, E] table as K = E, N = V (OutIn): column v = token v's embedding
  std::vector<LlamaLayerWeights> layers;
  const float* norm = nullptr;  // [E]
  WeightMatrix lm_head;         // [V, E] as K = E, N = V; embed_tokens itself when tied
  float embed_scale = 1.0f;     // Gemma 3: sqrt(E) rounded to embed_tokens' dtype (Gemma3TextScaledWordEmbedding)
};

class LlamaWeightStore {
 public:
  // Reads every tensor the config needs from a safetensors file held in `file` (size bytes;
  // ownership passes here: kept while tensors are read from it in place, else freed).
  // Gemma 3's norms are held as 1 + w (in float32, as Gemma3RMSNorm forms them), so every
  // RMSNorm scales by its vector alike. WeightFormat::Int8 quantizes the matmuls' matrices; an untied embed_tokens,
  // only gathered from, keeps its stored dtype. Throws std::invalid_argument naming the tensor for a missing one, a
  // wrong shape, a dtype other than F32 / F16 / BF16, or values that do not fit.
  static LlamaWeightStore load(const LlamaConfig& config, MallocBytes file, size_t size, WeightFormat format);

  // load's two halves, for a file that streams in (model/decoder_stream.hpp), as
  // GPT2WeightStore's: plan checks every tensor and returns the loader that fills this store
  // (which must not move until finish).
  WeightLoader plan(const LlamaConfig& config, const safetensors::File& file, WeightFormat format);
  void finish(const LlamaConfig& config, const WeightLoader& loader, WeightBuffers buffers);

  const LlamaWeights& weights() const { return weights_; }
  // The matmuls' matrices' dtype: "F32", "F16", "BF16", "Q8", or "mixed".
  const char* matrix_type() const { return matrix_type_; }
  WeightBytes bytes() const { return buffers_.bytes; }  // where the bytes are (file, matrices, vectors, converted)

  LlamaWeightStore() = default;
  LlamaWeightStore(LlamaWeightStore&&) = default;
  LlamaWeightStore& operator=(LlamaWeightStore&&) = default;
  LlamaWeightStore(const LlamaWeightStore&) = delete;  // the views point into this store's buffers

 private:
  void hold_plus_one(const LlamaConfig& c);  // every norm vector replaced by 1 + w, held in plus_one_

  WeightBuffers buffers_;        // the file (when read in place), the converted matrices, widened vectors
  std::vector<float> plus_one_;  // Gemma 3: every norm vector as 1 + w
  LlamaWeights weights_;
  const char* matrix_type_ = "F32";
};

}  // namespace qkv
