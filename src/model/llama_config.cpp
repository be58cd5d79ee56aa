#include "model/llama_config.hpp"

#include <cmath>
#include <stdexcept>

#include "model/config_json.hpp"
#include "model/json.hpp"

namespace qkv {

const char* llama_arch_name(LlamaArch a) {
  switch (a) {
    case LlamaArch::Llama:
      return "llama";
    case LlamaArch::Mistral:
      return "mistral";
    case LlamaArch::Qwen2:
      return "qwen2";
    case LlamaArch::Qwen3:
      return "qwen3";
    case LlamaArch::Gemma3:
      return "gemma3_text";
  }
  return "?";
}

namespace {

constexpr char kConfigError[] = "LlamaConfig: ";  // what every config error starts with

[[noreturn]] void config_error(const std::string& msg) { llama_config::fail(msg); }

std::string quoted(const char* key) { return std::string("\"") + key + "\""; }

}  // namespace

namespace llama_config {

void fail(const std::string& msg) { throw std::invalid_argument(kConfigError + msg); }

// rope_scaling: absent/null or {"rope_type" (or the older "type"): "default" | "linear" | "llama3", ...}
Llama3RopeScaling read_rope_scaling(const ConfigJson& r, double* linear_factor) {
  Llama3RopeScaling s;
  *linear_factor = 1.0;
  const nlohmann::json* rs = r.member("rope_scaling");
  if (!rs) return s;
  if (!rs->is_object()) config_error("\"rope_scaling\" must be an object or null, got " + json_describe(*rs));
  const nlohmann::json* type = json_member(*rs, "rope_type");
  if (!type) type = json_member(*rs, "type");
  if (!type) config_error("\"rope_scaling\" lacks \"rope_type\"");
  if (*type == "default") return s;
  if (*type != "llama3" && *type != "linear") {
    config_error("rope_scaling type " + json_describe(*type) +
                 " is not supported (\"llama3\", \"linear\" and \"default\" are)");
  }
  auto num = [&](const char* key) {
    const nlohmann::json* v = json_member(*rs, key);
    if (!v) config_error("rope_scaling (" + type->get<std::string>() + ") lacks " + quoted(key));
    if (!v->is_number() || !(v->get<double>() > 0) || !std::isfinite(v->get<double>())) {
      config_error(std::string("rope_scaling.") + key + " must be a positive number, got " + json_describe(*v));
    }
    return v->get<double>();
  };
  if (*type == "linear") {  // transformers' _compute_linear_scaling_rope_parameters: inv_freq / factor
    *linear_factor = num("factor");
    return s;
  }
  s.enabled = true;
  s.factor = num("factor");
  s.low_freq_factor = num("low_freq_factor");
  s.high_freq_factor = num("high_freq_factor");
  s.original_max_position_embeddings = num("original_max_position_embeddings");
  if (!(s.high_freq_factor > s.low_freq_factor)) {
    config_error("rope_scaling.high_freq_factor (" + std::to_string(s.high_freq_factor) +
                 ") must be greater than low_freq_factor (" + std::to_string(s.low_freq_factor) + ")");
  }
  return s;
}

std::vector<uint8_t> read_layer_types(const ConfigJson& r, int64_t n) {
  const nlohmann::json* lt = r.member("layer_types");
  if (!lt) return {};
  if (!lt->is_array() || int64_t(lt->size()) != n) {
    config_error("\"layer_types\" must be an array of num_hidden_layers (" + std::to_string(n) + ") strings, got " +
                 json_describe(*lt) + (lt->is_array() ? " of " + std::to_string(lt->size()) : std::string()));
  }
  std::vector<uint8_t> sliding(size_t(n), 0);
  for (size_t l = 0; l < size_t(n); ++l) {
    const nlohmann::json& t = (*lt)[l];
    if (t == "sliding_attention") {
      sliding[l] = 1;
    } else if (t != "full_attention") {
      config_error("layer_types[" + std::to_string(l) + "] must be \"sliding_attention\" or \"full_attention\", got " +
                   json_describe(t));
    }
  }
  return sliding;
}

}  // namespace llama_config

std::string config_model_type(std::string_view text) {
  const nlohmann::json root = json::parse(text);
  const nlohmann::json* mt = root.is_object() ? json_member(root, "model_type") : nullptr;
  return mt && mt->is_string() ? mt->get<std::string>() : std::string();
}

LlamaConfig LlamaConfig::from_json(std::string_view text) {
  const ConfigJson r(text, kConfigError);
  LlamaConfig c;
  const nlohmann::json* mt = r.member("model_type");
  if (!mt)
    config_error("config.json lacks \"model_type\" (\"llama\", \"mistral\", \"qwen2\", \"qwen3\" or \"gemma3_text\")");
  if (*mt == "gemma3_text" || *mt == "gemma3") return llama_config::gemma3_from_json(r);
  if (*mt == "llama") {
    c.arch = LlamaArch::Llama;
  } else if (*mt == "mistral") {
    c.arch = LlamaArch::Mistral;
  } else if (*mt == "qwen2") {
    c.arch = LlamaArch::Qwen2;
  } else if (*mt == "qwen3") {
    c.arch = LlamaArch::Qwen3;
  } else {
    config_error("model_type " + json_describe(*mt) +
                 " is not supported (\"llama\", \"mistral\", \"qwen2\", \"qwen3\", \"gemma3_text\", \"gemma3\")");
  }
  if (const nlohmann::json* act = r.member("hidden_act"); act && *act != "silu") {
    config_error("\"hidden_act\" must be \"silu\" (SwiGLU), got " + json_describe(*act));
  }
  if (r.get_bool("mlp_bias", false)) config_error("\"mlp_bias\": true is not supported");

  c.hidden_size = r.get_int("hidden_size");
  c.intermediate_size = r.get_int("intermediate_size");
  c.num_hidden_layers = r.get_int("num_hidden_layers");
  c.num_attention_heads = r.get_int("num_attention_heads");
  c.num_key_value_heads = r.get_int("num_key_value_heads", c.num_attention_heads);
  c.vocab_size = r.get_int("vocab_size");
  c.max_position_embeddings = r.get_int("max_position_embeddings");
  if (c.num_attention_heads < 1) {
    config_error("\"num_attention_heads\" must be >= 1, got " + std::to_string(c.num_attention_heads));
  }
  c.head_dim = r.get_int("head_dim", c.hidden_size / c.num_attention_heads);
  if (!r.member("head_dim") && c.hidden_size % c.num_attention_heads != 0) {
    config_error("hidden_size (" + std::to_string(c.hidden_size) + ") must be divisible by num_attention_heads (" +
                 std::to_string(c.num_attention_heads) + ") when \"head_dim\" is absent");
  }
  c.rms_norm_eps = r.get_number("rms_norm_eps", 1e-6);
  // a missing rope_theta is an Error rather than a silent 10000: Llama 3 uses 500000, Qwen2 1000000
  c.rope_theta = r.get_number("rope_theta");
  c.rope_scaling = llama_config::read_rope_scaling(r, &c.rope_linear_factor);
  c.tie_word_embeddings = r.get_bool("tie_word_embeddings", false);
  if (c.arch == LlamaArch::Qwen2) {
    c.qkv_bias = true;  // Qwen2Attention: q/k/v_proj with bias, o_proj without
  } else {              // Llama, Mistral, Qwen3: attention_bias on all four (Qwen3Attention as LlamaAttention)
    c.qkv_bias = c.o_bias = r.get_bool("attention_bias", false);
  }

  // The sliding window of each layer, as transformers decides it.
  c.window.assign(size_t(std::max<int64_t>(c.num_hidden_layers, 0)), 0);
  if (c.arch == LlamaArch::Mistral) {
    // MistralConfig: sliding_window defaults to 4096; null = full attention; every layer
    const auto it = r.root().find("sliding_window");
    const nlohmann::json* sw = it == r.root().end() ? nullptr : &*it;
    const int64_t w = !sw ? 4096 : sw->is_null() ? 0 : r.get_int("sliding_window");
    if (sw && !sw->is_null() && w < 1)
      config_error("\"sliding_window\" must be >= 1 or null, got " + std::to_string(w));
    for (auto& x : c.window) x = w;
  } else if (c.arch == LlamaArch::Qwen2 && r.get_bool("use_sliding_window", false)) {
    // Qwen2Config: with use_sliding_window, layers l >= max_window_layers attend within sliding_window
    const int64_t w = r.get_int("sliding_window", 4096);
    const int64_t first = r.get_int("max_window_layers", 28);
    if (w < 1) config_error("\"sliding_window\" must be >= 1, got " + std::to_string(w));
    if (first < 0) config_error("\"max_window_layers\" must be >= 0, got " + std::to_string(first));
    for (int64_t l = first; l < c.num_hidden_layers; ++l) c.window[size_t(l)] = w;
  } else if (c.arch == LlamaArch::Qwen3) {
    // Qwen3Config: q/k norms; sliding_window only with use_sliding_window, on the layers layer_types
    // calls "sliding_attention" (absent: those >= max_window_layers)
    c.qk_norm = true;
    const std::vector<uint8_t> types = llama_config::read_layer_types(r, c.num_hidden_layers);
    if (r.get_bool("use_sliding_window", false)) {
      const int64_t w = r.get_int("sliding_window", 4096);
      const int64_t first = r.get_int("max_window_layers", 28);
      if (w < 1) config_error("\"sliding_window\" must be >= 1, got " + std::to_string(w));
      for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        const bool sliding = types.empty() ? l >= first : types[size_t(l)] != 0;
        if (sliding) c.window[size_t(l)] = w;
      }
    }
  }
  c.validate();
  return c;
}

void LlamaConfig::validate() const {
  auto in_range = [](const char* key, int64_t v, int64_t hi) { check_config_range(kConfigError, key, v, hi); };
  in_range("hidden_size", hidden_size, 1 << 16);
  in_range("intermediate_size", intermediate_size, 1 << 18);
  in_range("num_hidden_layers", num_hidden_layers, 1024);
  in_range("num_attention_heads", num_attention_heads, 1024);
  in_range("num_key_value_heads", num_key_value_heads, 1024);
  in_range("head_dim", head_dim, 1024);
  in_range("vocab_size", vocab_size, 1 << 24);
  in_range("max_position_embeddings", max_position_embeddings, 1 << 24);
  if (num_attention_heads % num_key_value_heads != 0) {
    config_error("num_attention_heads (" + std::to_string(num_attention_heads) +
                 ") must be divisible by num_key_value_heads (" + std::to_string(num_key_value_heads) + ")");
  }
  if (head_dim % 2 != 0)
    config_error("head_dim must be even for the rotary embedding, got " + std::to_string(head_dim));
  if (!(rms_norm_eps > 0.0) || !std::isfinite(rms_norm_eps)) {
    config_error("\"rms_norm_eps\" must be a positive finite number, got " + std::to_string(rms_norm_eps));
  }
  if (!(rope_theta > 1.0) || !std::isfinite(rope_theta)) {
    config_error("\"rope_theta\" must be a finite number > 1, got " + std::to_string(rope_theta));
  }
  if (!(rope_linear_factor > 0.0) || !std::isfinite(rope_linear_factor)) {
    config_error("rope_scaling.factor must be a positive number, got " + std::to_string(rope_linear_factor));
  }
  if (!local_rope.empty() && int64_t(local_rope.size()) != num_hidden_layers) {
    config_error("local_rope has " + std::to_string(local_rope.size()) + " entries for " +
                 std::to_string(num_hidden_layers) + " layers");
  }
  if (!local_rope.empty() && (!(rope_local_theta > 1.0) || !std::isfinite(rope_local_theta))) {
    config_error("\"rope_local_base_freq\" must be a finite number > 1, got " + std::to_string(rope_local_theta));
  }
  if (int64_t(window.size()) != num_hidden_layers) {
    config_error("window has " + std::to_string(window.size()) + " entries for " + std::to_string(num_hidden_layers) +
                 " layers");
  }
}

std::vector<double> LlamaConfig::rope_inv_freq(bool local) const {
  const int64_t half = head_dim / 2;
  const double theta = local ? rope_local_theta : rope_theta;
  std::vector<double> f(static_cast<size_t>(half));
  // default: inv_freq[i] = theta^(-2i / D)
  for (int64_t i = 0; i < half; ++i) f[size_t(i)] = 1.0 / std::pow(theta, double(2 * i) / double(head_dim));
  if (local) return f;
  // linear: every frequency divided by the factor
  if (rope_linear_factor != 1.0)
    for (double& x : f) x /= rope_linear_factor;
  if (!rope_scaling.enabled) return f;
  // llama3: wavelengths longer than old_context / low_freq_factor are divided by `factor`, those
  // shorter than old_context / high_freq_factor kept, the ones between blended smoothly
  const Llama3RopeScaling& s = rope_scaling;
  const double pi = 3.14159265358979323846;
  const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  for (double& x : f) {
    const double wavelen = 2.0 * pi / x;
    if (wavelen > low_wavelen) {
      x = x / s.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth =
          (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      x = (1.0 - smooth) * x / s.factor + smooth * x;
    }
  }
  return f;
}

}  // namespace qkv
