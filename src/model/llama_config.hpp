// config.json of a Llama-family model (model_type "llama", "mistral", "qwen2"), as Hugging Face
// writes it, read into what the forward pass needs: sizes, RMSNorm epsilon, rotary embedding
// (rope_theta, the "llama3" rope_scaling), attention biases, the sliding window per layer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qkv {

enum class LlamaArch { Llama, Mistral, Qwen2 };

const char* llama_arch_name(LlamaArch a);  // "llama", "mistral", "qwen2"

// rope_scaling {"rope_type": "llama3", ...} (Llama 3.1/3.2): long wavelengths divided by
// `factor`, short ones kept, a smooth blend between (transformers' _compute_llama3_parameters).
struct Llama3RopeScaling {
  bool enabled = false;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
};

struct LlamaConfig {
  LlamaArch arch = LlamaArch::Llama;
  int64_t hidden_size = 0;        // E
  int64_t intermediate_size = 0;  // I
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;      // H (query heads)
  int64_t num_key_value_heads = 0;      // Hkv (divides H; absent = H)
  int64_t head_dim = 0;                 // D (absent = E / H)
  int64_t vocab_size = 0;               // V
  int64_t max_position_embeddings = 0;  // positions the model accepts
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;  // required: a config without it is an Error
  Llama3RopeScaling rope_scaling;
  bool tie_word_embeddings = false;  // lm_head = embed_tokens
  bool qkv_bias = false;             // q/k/v_proj biases (Qwen2 always; Llama's attention_bias)
  bool o_bias = false;               // o_proj bias (Llama's attention_bias)
  std::vector<int64_t> window;       // [num_hidden_layers]: sliding window of each layer, 0 = full causal

  int64_t kv_group() const { return num_attention_heads / num_key_value_heads; }  // query heads per kv head

  // Parses and validates config.json. Throws std::invalid_argument("LlamaConfig: ...")
  // naming the key (and the value) for anything missing, malformed or unsupported.
  static LlamaConfig from_json(std::string_view text);
  void validate() const;

  // The inverse frequencies of the rotary embedding [D / 2], llama3 scaling applied.
  std::vector<double> rope_inv_freq() const;
};

// The model_type of a config.json ("" when absent), for choosing the architecture.
std::string config_model_type(std::string_view text);

}  // namespace qkv
