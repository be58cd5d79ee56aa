// Gemma 3's config.json (Gemma3TextConfig, model_type "gemma3_text"; or a Gemma3Config,
// model_type "gemma3", whose "text_config" holds it) read into a LlamaConfig. Keys absent take
// Gemma3TextConfig's defaults, as transformers does: a gemma3 checkpoint's text_config names
// only what differs from them.
#include <cmath>
#include <string>

#include "model/config_json.hpp"
#include "model/json.hpp"
#include "model/llama_config.hpp"

namespace qkv {

namespace {

using llama_config::fail;

// rope_parameters (transformers 5) {"full_attention": {...}, "sliding_attention": {...}}, each
// {"rope_type", "rope_theta", "factor"?}: the rotary bases and the global layers' linear factor.
void read_rope_parameters(const nlohmann::json& rp, LlamaConfig& c) {
  auto part = [&](const char* key, double* theta, double* factor) {
    const nlohmann::json* p = json_member(rp, key);
    if (!p) return;
    if (!p->is_object()) fail(std::string("rope_parameters.") + key + " must be an object, got " + json_describe(*p));
    const nlohmann::json* t = json_member(*p, "rope_theta");
    if (t) {
      if (!t->is_number()) fail(std::string("rope_parameters.") + key + ".rope_theta must be a number");
      *theta = t->get<double>();
    }
    const nlohmann::json* type = json_member(*p, "rope_type");
    if (!type || *type == "default") return;
    if (*type != "linear" || !factor) {
      fail(std::string("rope_parameters.") + key + ".rope_type " + json_describe(*type) +
           " is not supported (\"default\"" + (factor ? ", \"linear\")" : ")"));
    }
    const nlohmann::json* f = json_member(*p, "factor");
    if (!f || !f->is_number()) fail(std::string("rope_parameters.") + key + " (linear) lacks a numeric \"factor\"");
    *factor = f->get<double>();
  };
  part("full_attention", &c.rope_theta, &c.rope_linear_factor);
  part("sliding_attention", &c.rope_local_theta, nullptr);
}

LlamaConfig gemma3_text(const ConfigJson& r) {
  LlamaConfig c;
  c.arch = LlamaArch::Gemma3;
  // Gemma3TextConfig's defaults
  c.hidden_size = r.get_int("hidden_size", 2304);
  c.intermediate_size = r.get_int("intermediate_size", 9216);
  c.num_hidden_layers = r.get_int("num_hidden_layers", 26);
  c.num_attention_heads = r.get_int("num_attention_heads", 8);
  c.num_key_value_heads = r.get_int("num_key_value_heads", 4);
  c.head_dim = r.get_int("head_dim", 256);
  c.vocab_size = r.get_int("vocab_size", 262208);
  c.max_position_embeddings = r.get_int("max_position_embeddings", 131072);
  c.rms_norm_eps = r.get_number("rms_norm_eps", 1e-6);
  c.rope_theta = r.get_number("rope_theta", 1000000.0);
  c.rope_local_theta = r.get_number("rope_local_base_freq", 10000.0);
  c.rope_scaling = llama_config::read_rope_scaling(r, &c.rope_linear_factor);
  if (c.rope_scaling.enabled) fail("rope_scaling \"llama3\" is not supported for Gemma 3 (\"linear\" is)");
  if (const nlohmann::json* rp = r.member("rope_parameters")) {
    if (!rp->is_object()) fail("\"rope_parameters\" must be an object, got " + json_describe(*rp));
    read_rope_parameters(*rp, c);
  }
  c.tie_word_embeddings = r.get_bool("tie_word_embeddings", true);
  c.qkv_bias = c.o_bias = r.get_bool("attention_bias", false);
  if (const nlohmann::json* act = r.member("hidden_activation"); act && *act != "gelu_pytorch_tanh") {
    fail("\"hidden_activation\" must be \"gelu_pytorch_tanh\" (GeGLU), got " + json_describe(*act));
  }
  if (r.member("attn_logit_softcapping")) {
    fail(
        "\"attn_logit_softcapping\" is not supported (Gemma 3 sets it null; Gemma 2's tanh on the scores is not "
        "in the attention kernel)");
  }
  if (r.get_bool("use_bidirectional_attention", false)) fail("\"use_bidirectional_attention\": true is not supported");
  c.final_logit_softcapping = r.get_number("final_logit_softcapping", 0.0);
  if (r.member("final_logit_softcapping") && !(c.final_logit_softcapping > 0.0)) {
    fail("\"final_logit_softcapping\" must be a positive number or null, got " +
         std::to_string(c.final_logit_softcapping));
  }
  const double scalar = r.get_number("query_pre_attn_scalar", 256.0);
  if (!(scalar > 0.0) || !std::isfinite(scalar)) {
    fail("\"query_pre_attn_scalar\" must be a positive number, got " + std::to_string(scalar));
  }
  c.attn_scale = 1.0 / std::sqrt(scalar);  // Gemma3Attention.scaling = query_pre_attn_scalar ** -0.5
  c.qk_norm = c.norm_plus_one = c.sandwich_norms = c.embed_scaled = true;
  c.activation = MlpActivation::GeluTanh;

  // Sliding layers: layer_types, else every sliding_window_pattern-th layer (1-based) is global
  check_config_range("LlamaConfig: ", "num_hidden_layers", c.num_hidden_layers, 1024);
  std::vector<uint8_t> sliding = llama_config::read_layer_types(r, c.num_hidden_layers);
  if (sliding.empty()) {
    const int64_t pattern = r.get_int("sliding_window_pattern", 6);
    if (pattern < 1) fail("\"sliding_window_pattern\" must be >= 1, got " + std::to_string(pattern));
    sliding.resize(size_t(c.num_hidden_layers));
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) sliding[size_t(l)] = (l + 1) % pattern != 0;
  }
  const int64_t w = r.get_int("sliding_window", 4096);
  if (w < 1) fail("\"sliding_window\" must be >= 1, got " + std::to_string(w));
  c.window.assign(size_t(c.num_hidden_layers), 0);
  for (size_t l = 0; l < sliding.size(); ++l) c.window[l] = sliding[l] ? w : 0;
  c.local_rope = sliding;  // sliding layers rotate with rope_local_base_freq, global ones with rope_theta
  return c;
}

}  // namespace

LlamaConfig llama_config::gemma3_from_json(const ConfigJson& r) {
  const nlohmann::json* mt = r.member("model_type");
  if (*mt == "gemma3_text") {
    LlamaConfig c = gemma3_text(r);
    c.validate();
    return c;
  }
  // Gemma3Config: the text model in text_config (absent: Gemma3TextConfig's defaults)
  const nlohmann::json* tc = r.member("text_config");
  if (tc && !tc->is_object()) fail("\"text_config\" must be an object, got " + json_describe(*tc));
  const ConfigJson text(tc ? tc->dump() : std::string("{}"), "LlamaConfig: text_config: ");
  if (const nlohmann::json* tmt = text.member("model_type"); tmt && *tmt != "gemma3_text") {
    fail("text_config.model_type must be \"gemma3_text\", got " + json_describe(*tmt));
  }
  LlamaConfig c = gemma3_text(text);
  // tie_word_embeddings: the text config's, else the outer config's, else true
  if (!text.member("tie_word_embeddings")) c.tie_word_embeddings = r.get_bool("tie_word_embeddings", true);
  c.multimodal = true;
  c.validate();
  return c;
}

}  // namespace qkv
