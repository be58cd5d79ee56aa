// config.json of a Llama-family model (model_type "llama", "mistral", "qwen2", "qwen3",
// "gemma3_text", and "gemma3" whose text_config holds the text model), as Hugging Face writes
// it, read into what the forward pass needs: sizes, RMSNorm epsilon, rotary embedding
// (rope_theta, the "llama3" and "linear" rope_scaling, Gemma 3's local base), attention biases,
// the sliding window per layer, and the parts Qwen3 and Gemma 3 add (q/k norms, Gemma's (1 + w)
// norms, sandwich norms, scaled embeddings, GeGLU, attention scale, logit soft-capping).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qkv {

enum class LlamaArch { Llama, Mistral, Qwen2, Qwen3, Gemma3 };

const char* llama_arch_name(LlamaArch a);  // "llama", "mistral", "qwen2", "qwen3", "gemma3_text"

// The MLP's gate activation: SwiGLU (silu) or Gemma's GeGLU (gelu_pytorch_tanh).
enum class MlpActivation { SiLU, GeluTanh };

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
  double rope_linear_factor = 1.0;   // rope_scaling {"rope_type": "linear"}: inv_freq / factor (Gemma 3: global layers)

  // Qwen3 and Gemma 3
  bool qk_norm = false;  // self_attn.q_norm / k_norm [D]: RMSNorm over each head of q and k before the rotation
  // Gemma 3 (gemma3_config.cpp)
  bool norm_plus_one = false;   // every RMSNorm scales by (1 + w), w as stored (Gemma3RMSNorm)
  bool sandwich_norms = false;  // post_attention_layernorm / post_feedforward_layernorm on each sub-block's
                                // output before the residual add, pre_feedforward_layernorm before the MLP
  bool embed_scaled = false;    // embeddings times sqrt(hidden_size), rounded to embed_tokens' dtype
  MlpActivation activation = MlpActivation::SiLU;
  double attn_scale = 0.0;  // the softmax scale; 0 = 1 / sqrt(head_dim) (Gemma 3: query_pre_attn_scalar^-0.5)
  double final_logit_softcapping = 0.0;  // > 0: logits = cap * tanh(logits / cap)
  double rope_local_theta = 0.0;         // > 0: the rotary base of the layers with local_rope (no scaling there)
  std::vector<uint8_t> local_rope;       // [num_hidden_layers] or empty: 1 = the layer uses rope_local_theta
  bool multimodal = false;  // model_type "gemma3": tensors under language_model.model. (or model.language_model.)

  int64_t kv_group() const { return num_attention_heads / num_key_value_heads; }  // query heads per kv head

  // Parses and validates config.json. Throws std::invalid_argument("LlamaConfig: ...")
  // naming the key (and the value) for anything missing, malformed or unsupported.
  static LlamaConfig from_json(std::string_view text);
  void validate() const;

  // The inverse frequencies of the rotary embedding [D / 2], linear or llama3 scaling applied;
  // local: those of the local layers (rope_local_theta, unscaled).
  std::vector<double> rope_inv_freq(bool local = false) const;
  bool uses_local_rope(int64_t layer) const { return !local_rope.empty() && local_rope[size_t(layer)]; }
};

// The model_type of a config.json ("" when absent), for choosing the architecture.
std::string config_model_type(std::string_view text);

class ConfigJson;
// What llama_config.cpp and gemma3_config.cpp share (each throws "LlamaConfig: ..."):
namespace llama_config {
[[noreturn]] void fail(const std::string& msg);
// rope_scaling: absent/null, "default", "linear" ({factor}: *linear_factor) or "llama3".
Llama3RopeScaling read_rope_scaling(const ConfigJson& r, double* linear_factor);
// layer_types ["sliding_attention" | "full_attention", ...] of n layers: 1 = sliding; empty when absent.
std::vector<uint8_t> read_layer_types(const ConfigJson& r, int64_t n);
// Gemma 3 (model_type "gemma3_text", or "gemma3" with text_config): gemma3_config.cpp
LlamaConfig gemma3_from_json(const ConfigJson& r);
}  // namespace llama_config

}  // namespace qkv
