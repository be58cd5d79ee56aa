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
  }
  return "?";
}

namespace {

constexpr char kConfigError[] = "LlamaConfig: ";  // what every config error starts with

[[noreturn]] void config_error(const std::string& msg) { throw std::invalid_argument(kConfigError + msg); }

std::string quoted(const char* key) { return std::string("\"") + key + "\""; }

// rope_scaling: absent/null or {"rope_type" (or the older "type"): "default" | "llama3", ...}
Llama3RopeScaling read_rope_scaling(const ConfigJson& r) {
  Llama3RopeScaling s;
  const nlohmann::json* rs = r.member("rope_scaling");
  if (!rs) return s;
  if (!rs->is_object()) config_error("\"rope_scaling\" must be an object or null, got " + json_describe(*rs));
  const nlohmann::json* type = json_member(*rs, "rope_type");
  if (!type) type = json_member(*rs, "type");
  if (!type) config_error("\"rope_scaling\" lacks \"rope_type\"");
  if (*type == "default") return s;
  if (*type != "llama3") {
    config_error("rope_scaling type " + json_describe(*type) + " is not supported (\"llama3\" and \"default\" are)");
  }
  s.enabled = true;
  auto num = [&](const char* key) {
    const nlohmann::json* v = json_member(*rs, key);
    if (!v) config_error(std::string("rope_scaling (llama3) lacks ") + quoted(key));
    if (!v->is_number() || !(v->get<double>() > 0) || !std::isfinite(v->get<double>())) {
      config_error(std::string("rope_scaling.") + key + " must be a positive number, got " + json_describe(*v));
    }
    return v->get<double>();
  };
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

}  // namespace

std::string config_model_type(std::string_view text) {
  const nlohmann::json root = json::parse(text);
  const nlohmann::json* mt = root.is_object() ? json_member(root, "model_type") : nullptr;
  return mt && mt->is_string() ? mt->get<std::string>() : std::string();
}

LlamaConfig LlamaConfig::from_json(std::string_view text) {
  const ConfigJson r(text, kConfigError);
  LlamaConfig c;
  const nlohmann::json* mt = r.member("model_type");
  if (!mt) config_error("config.json lacks \"model_type\" (\"llama\", \"mistral\" or \"qwen2\")");
  if (*mt == "llama") {
    c.arch = LlamaArch::Llama;
  } else if (*mt == "mistral") {
    c.arch = LlamaArch::Mistral;
  } else if (*mt == "qwen2") {
    c.arch = LlamaArch::Qwen2;
  } else {
    config_error("model_type " + json_describe(*mt) + " is not supported (\"llama\", \"mistral\", \"qwen2\")");
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
  c.rope_scaling = read_rope_scaling(r);
  c.tie_word_embeddings = r.get_bool("tie_word_embeddings", false);
  if (c.arch == LlamaArch::Qwen2) {
    c.qkv_bias = true;  // Qwen2Attention: q/k/v_proj with bias, o_proj without
  } else {
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
  if (int64_t(window.size()) != num_hidden_layers) {
    config_error("window has " + std::to_string(window.size()) + " entries for " + std::to_string(num_hidden_layers) +
                 " layers");
  }
}

std::vector<double> LlamaConfig::rope_inv_freq() const {
  const int64_t half = head_dim / 2;
  std::vector<double> f(static_cast<size_t>(half));
  // default: inv_freq[i] = theta^(-2i / D)
  for (int64_t i = 0; i < half; ++i) f[size_t(i)] = 1.0 / std::pow(rope_theta, double(2 * i) / double(head_dim));
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
