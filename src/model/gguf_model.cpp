#include "model/gguf_model.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>
#include <vector>

namespace qkv::gguf {

namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument("gguf: " + msg); }

std::string architecture(const File& f) {
  const std::string arch = f.string("general.architecture");
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "gemma3" && arch != "gpt2") {
    bad("general.architecture \"" + arch + "\" is not supported (llama, qwen2, qwen3, gemma3, gpt2)");
  }
  return arch;
}

// rows of token_embd.weight: the vocabulary size when {arch}.vocab_size is absent
int64_t vocab_rows(const File& f) {
  const TensorInfo* t = f.find_tensor("token_embd.weight");
  if (!t || t->ne.size() != 2) bad("tensor \"token_embd.weight\" is missing or not a matrix");
  return t->ne[1];
}

// "blk.N.<rest>" -> N and rest; false for another name
bool block_name(const std::string& name, int64_t* n, std::string* rest) {
  if (name.rfind("blk.", 0) != 0) return false;
  size_t i = 4;
  int64_t v = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && v < (int64_t(1) << 40)) v = v * 10 + (name[i++] - '0');
  if (i == 4 || i >= name.size() || name[i] != '.') return false;
  *n = v;
  *rest = name.substr(i + 1);
  return true;
}

// The Hugging Face name of a GGUF tensor ("" for one no loader reads)
std::string hf_name(const std::string& arch, const std::string& name) {
  const bool gpt2 = arch == "gpt2", gemma = arch == "gemma3";
  if (gpt2) {
    if (name == "token_embd.weight") return "wte.weight";
    if (name == "position_embd.weight") return "wpe.weight";
    if (name == "output_norm.weight") return "ln_f.weight";
    if (name == "output_norm.bias") return "ln_f.bias";
  } else {
    if (name == "token_embd.weight") return "model.embed_tokens.weight";
    if (name == "output_norm.weight") return "model.norm.weight";
    if (name == "output.weight") return "lm_head.weight";
  }
  int64_t n;
  std::string rest;
  if (!block_name(name, &n, &rest) || rest.find('.') == std::string::npos) return "";
  const std::string suffix = rest.substr(rest.rfind('.'));  // ".weight" / ".bias"
  const std::string part = rest.substr(0, rest.rfind('.'));
  if (gpt2) {
    static const std::pair<const char*, const char*> kGpt2[] = {
        {"attn_norm", "ln_1"}, {"attn_qkv", "attn.c_attn"}, {"attn_output", "attn.c_proj"},
        {"ffn_norm", "ln_2"},  {"ffn_up", "mlp.c_fc"},      {"ffn_down", "mlp.c_proj"},
    };
    for (const auto& [g, h] : kGpt2)
      if (part == g) return "h." + std::to_string(n) + "." + h + suffix;
    return "";
  }
  static const std::pair<const char*, const char*> kLlama[] = {
      {"attn_norm", "input_layernorm"},    {"attn_q", "self_attn.q_proj"},      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},      {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"}, {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
  };
  const std::string layer = "model.layers." + std::to_string(n) + ".";
  for (const auto& [g, h] : kLlama)
    if (part == g) return layer + h + suffix;
  if (gemma) {  // the sandwich norms
    if (part == "post_attention_norm") return layer + "post_attention_layernorm" + suffix;
    if (part == "ffn_norm") return layer + "pre_feedforward_layernorm" + suffix;
    if (part == "post_ffw_norm") return layer + "post_feedforward_layernorm" + suffix;
  } else if (part == "ffn_norm") {
    return layer + "post_attention_layernorm" + suffix;
  }
  return "";
}

safetensors::DType dtype_of(const TensorInfo& t) {
  switch (t.type) {
    case TensorType::F32:
      return safetensors::DType::F32;
    case TensorType::F16:
      return safetensors::DType::F16;
    case TensorType::BF16:
      return safetensors::DType::BF16;
    case TensorType::Q8_0:
      return safetensors::DType::Q8_0;
    case TensorType::Q4_0:
      return safetensors::DType::Q4_0;
    case TensorType::Q4_K:
      return safetensors::DType::Q4_K;
    case TensorType::Q5_K:
      return safetensors::DType::Q5_K;
    case TensorType::Q6_K:
      return safetensors::DType::Q6_K;
    default:
      bad("tensor \"" + t.name + "\" has type " + tensor_type_name(t.type) +
          ", which qkv does not read (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K and Q6_K)");
  }
}

}  // namespace

std::string hf_config_json(const File& f) {
  const std::string arch = architecture(f);
  const std::string a = arch + ".";
  const auto key = [&](const char* k) { return a + k; };
  nlohmann::json c;
  const int64_t L = f.integer(key("block_count")), E = f.integer(key("embedding_length"));
  const int64_t H = f.integer(key("attention.head_count"));
  const int64_t V = f.integer_or(key("vocab_size"), vocab_rows(f));
  const int64_t ctx = f.integer(key("context_length"));
  const int64_t I = f.integer(key("feed_forward_length"));
  const bool tied = f.find_tensor("output.weight") == nullptr;
  if (arch == "gpt2") {
    c = {{"model_type", "gpt2"}, {"n_layer", L},
         {"n_head", H},          {"n_embd", E},
         {"n_positions", ctx},   {"n_inner", I},
         {"vocab_size", V},      {"layer_norm_epsilon", f.number_or(key("attention.layer_norm_epsilon"), 1e-5)}};
    return c.dump();
  }
  if (H <= 0) bad("metadata " + key("attention.head_count") + " must be positive");
  const int64_t Hkv = f.integer_or(key("attention.head_count_kv"), H);
  const int64_t D = f.integer_or(key("attention.key_length"), E / H);
  c = {{"model_type", arch == "gemma3" ? "gemma3_text" : arch},
       {"hidden_size", E},
       {"intermediate_size", I},
       {"num_hidden_layers", L},
       {"num_attention_heads", H},
       {"num_key_value_heads", Hkv},
       {"head_dim", D},
       {"vocab_size", V},
       {"max_position_embeddings", ctx},
       {"rms_norm_eps", f.number_or(key("attention.layer_norm_rms_epsilon"), 1e-6)},
       {"rope_theta", f.number_or(key("rope.freq_base"), arch == "gemma3" ? 1e6 : 10000.0)},
       {"tie_word_embeddings", tied}};
  if (arch == "llama") {
    if (f.find_tensor("rope_freqs.weight")) {
      bad("tensor \"rope_freqs.weight\" (Llama 3.1's rope scaling, stored as factors) is not supported");
    }
    c["attention_bias"] = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  }
  if (arch == "gemma3") {
    c["hidden_activation"] = "gelu_pytorch_tanh";
    // llama.cpp scales the scores by 1 / sqrt(key_length) (by 1 / sqrt(E / H) for the 62-layer 27B)
    c["query_pre_attn_scalar"] = L == 62 ? E / H : D;
    c["sliding_window"] = f.integer_or(key("attention.sliding_window"), 512);
    c["sliding_window_pattern"] = f.integer_or(key("attention.sliding_window_pattern"), 6);
    c["rope_local_base_freq"] = 10000.0;
    const double factor = f.number_or(key("rope.scaling.factor"), 1.0);
    if (factor != 1.0) c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", factor}};
    const double cap = f.number_or(key("final_logit_softcapping"), 0.0);
    if (cap > 0.0) c["final_logit_softcapping"] = cap;
  }
  return c.dump();
}

safetensors::File hf_index(const File& f) {
  const std::string arch = architecture(f);
  const int64_t H = f.integer(arch + ".attention.head_count");
  const int64_t Hkv = f.integer_or(arch + ".attention.head_count_kv", H);
  std::vector<safetensors::TensorInfo> out;
  for (const TensorInfo& t : f.tensors()) {
    std::string name = hf_name(arch, t.name);
    if (name.empty()) {
      if (arch == "llama" && t.name == "rope_freqs.weight") hf_config_json(f);  // names it
      continue;
    }
    safetensors::TensorInfo s;
    s.name = std::move(name);
    s.dtype = dtype_of(t);
    s.shape = t.shape();
    s.begin = t.offset;
    s.end = t.offset + t.bytes;
    if (arch == "gpt2" && s.shape.size() == 2 && t.name.rfind("blk.", 0) == 0) {
      s.transposed = true;  // stored [out, in]; Conv1D's weight is [in, out]
      std::swap(s.shape[0], s.shape[1]);
    }
    if (arch == "llama") {  // the converter's permute(): q and k rows interleaved per head
      const bool q = t.name.find(".attn_q.") != std::string::npos, k = t.name.find(".attn_k.") != std::string::npos;
      const int64_t heads = q ? H : k ? Hkv : 0;
      if (heads > 0) {
        const int64_t rows = s.shape[0];
        if (rows % heads != 0 || (rows / heads) % 2 != 0) {
          bad("tensor \"" + t.name + "\": " + std::to_string(rows) + " rows are not " + std::to_string(heads) +
              " heads of an even size");
        }
        s.rope_rows = rows / heads;
      }
    }
    if (arch == "gemma3" && s.shape.size() == 1 && t.name.find("norm") != std::string::npos) s.stored_plus = 1.0f;
    out.push_back(std::move(s));
  }
  return safetensors::File::index(std::move(out), f.data_offset(), f.size(), f.base());
}

safetensors::File open_weights(const uint8_t* data, size_t size) {
  if (!is_gguf(data, size)) return safetensors::File::parse(data, size);
  return hf_index(File::parse(data, size));
}

safetensors::File open_weights_header(const uint8_t* data, size_t available, uint64_t size) {
  if (!is_gguf(data, available)) return safetensors::File::parse_header(data, available, size);
  return hf_index(File::parse_header(data, available, size));
}

}  // namespace qkv::gguf
