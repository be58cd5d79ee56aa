// Qwen3 and Gemma 3 in the Llama family against the committed float64 PyTorch reference
// (tests/data/llama/, written by tools/model/make_qwen3_gemma3_reference.py): logits,
// attentions, q/k after the q/k norms and the rotation; KV-cache decoding against a full
// recompute past the sliding windows; the configs as read (layer types, rotary bases, scales,
// gemma3's text_config defaults); the GeGLU and soft-capping layers against double.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "model/json.hpp"
#include "model/layers.hpp"
#include "model/llama.hpp"
#include "test_model_util.hpp"

using namespace qkv;
using namespace qkv::model_testing;

namespace {

const std::string kData = source_path("tests/data/llama");
const char* const kModels[] = {"qwen3-tied", "qwen3-window", "gemma3-text", "gemma3-mm"};

struct Reference {
  std::string config;
  std::vector<uint8_t> st;
  nlohmann::json ref;
  std::string ref_dir;
};

Reference read_reference(const std::string& name) {
  const std::string dir = kData + "/" + name;
  REQUIRE_MESSAGE(file_exists(dir + "/config.json"),
                  "missing " << dir << " (tools/model/make_qwen3_gemma3_reference.py)");
  return {read_text(dir + "/config.json"), read_bytes(dir + "/model.safetensors"),
          json::parse(read_text(dir + "-ref/ref.json")), dir + "-ref"};
}

std::vector<float> floats(const std::string& path, size_t want) {
  const std::vector<uint8_t> b = read_bytes(path);
  REQUIRE(b.size() == want * 4);
  std::vector<float> v(want);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

float worst(const float* a, const float* b, size_t n) {
  float w = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= w)) w = std::isnan(d) ? INFINITY : d;
  }
  return w;
}

std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

}  // namespace

TEST_CASE("qwen3/gemma3: forward matches the float64 PyTorch reference") {
  for (const char* name : kModels) {
    CAPTURE(name);
    const Reference r = read_reference(name);
    const Llama m = Llama::load(r.config, r.st.data(), r.st.size());
    const LlamaConfig& c = m.config();
    const std::vector<int32_t> ids = ids_of(r.ref["ids"]);
    const int64_t L = int64_t(ids.size()), NL = c.num_hidden_layers, H = c.num_attention_heads, D = c.head_dim;
    const int64_t Hkv = c.num_key_value_heads, V = c.vocab_size;
    std::vector<float> logits(size_t(L * V)), att(size_t(NL * H * L * L)), q(size_t(NL * H * L * D)),
        k(size_t(NL * Hkv * L * D));
    m.forward(ids.data(), L, logits.data(), att.data(), q.data(), k.data());
    const double f32_logits = r.ref["torch_f32_error"]["logits"].get<double>();
    const double f32_att = r.ref["torch_f32_error"]["attentions"].get<double>();
    CHECK(worst(logits.data(), floats(r.ref_dir + "/logits.bin", logits.size()).data(), logits.size()) <=
          std::max(1e-4, f32_logits));
    CHECK(worst(att.data(), floats(r.ref_dir + "/attentions.bin", att.size()).data(), att.size()) <=
          std::max(1e-5, f32_att));
    CHECK(worst(q.data(), floats(r.ref_dir + "/queries.bin", q.size()).data(), q.size()) <= 1e-5);
    CHECK(worst(k.data(), floats(r.ref_dir + "/keys.bin", k.size()).data(), k.size()) <= 1e-5);
    CHECK(c.window == r.ref["windows"].get<std::vector<int64_t>>());
    // greedy through the session = the reference's full-recompute continuation
    const std::vector<int32_t> prompt = ids_of(r.ref["greedy_prompt"]);
    CHECK(generate(m, prompt, 8, SamplingOptions{0.0f, 0}, 1, true) == ids_of(r.ref["greedy_ids"]));
  }
}

TEST_CASE("qwen3/gemma3: the KV-cache session equals a full recompute past the windows") {
  for (const char* name : {"gemma3-text", "gemma3-mm", "qwen3-window"}) {
    CAPTURE(name);
    const Reference r = read_reference(name);
    const Llama m = Llama::load(r.config, r.st.data(), r.st.size());
    const int64_t V = m.config().vocab_size;
    std::vector<int32_t> ids = ids_of(r.ref["ids"]);
    for (int32_t t : ids_of(r.ref["ids"])) ids.push_back((t * 7 + 3) % int32_t(V));  // 24 tokens
    LlamaSession s(m);
    std::vector<float> step(static_cast<size_t>(V)), full(ids.size() * static_cast<size_t>(V));
    s.prefill(ids.data(), 2, step.data());
    for (size_t n = 3; n <= ids.size(); ++n) {
      s.step(ids[n - 1], step.data());
      m.forward(ids.data(), int64_t(n), full.data());
      CAPTURE(n);
      CHECK(worst(step.data(), full.data() + (n - 1) * size_t(V), size_t(V)) <= 1e-5f);
    }
    // the cache-less generate (recompute per token) and the session's agree
    CHECK(generate(m, {ids[0], ids[1], ids[2]}, 12, SamplingOptions{0.0f, 0}, 1, true) ==
          generate(m, {ids[0], ids[1], ids[2]}, 12, SamplingOptions{0.0f, 0}, 1, false));
  }
}

TEST_CASE("qwen3/gemma3: config.json as read") {
  const LlamaConfig q = LlamaConfig::from_json(read_reference("qwen3-tied").config);
  CHECK(q.arch == LlamaArch::Qwen3);
  CHECK(q.qk_norm);
  CHECK_FALSE(q.norm_plus_one);
  CHECK(q.head_dim == 16);  // given apart from hidden_size / heads (8)
  CHECK(q.tie_word_embeddings);
  CHECK_FALSE(q.qkv_bias);
  const LlamaConfig qw = LlamaConfig::from_json(read_reference("qwen3-window").config);
  CHECK((qw.qkv_bias && qw.o_bias && !qw.tie_word_embeddings));
  CHECK(qw.window == std::vector<int64_t>{0, 4});

  const LlamaConfig g = LlamaConfig::from_json(read_reference("gemma3-text").config);
  CHECK(g.arch == LlamaArch::Gemma3);
  CHECK((g.qk_norm && g.norm_plus_one && g.sandwich_norms && g.embed_scaled));
  CHECK(g.activation == MlpActivation::GeluTanh);
  CHECK(g.attn_scale == doctest::Approx(1.0 / std::sqrt(12.0)));
  CHECK(g.final_logit_softcapping == 2.5);
  CHECK(g.window == std::vector<int64_t>{4, 4, 0});
  CHECK(g.local_rope == std::vector<uint8_t>{1, 1, 0});
  CHECK(g.rope_inv_freq(true)[1] == doctest::Approx(std::pow(10000.0, -2.0 / 8.0)));
  CHECK(g.rope_inv_freq(false)[1] == doctest::Approx(std::pow(1000000.0, -2.0 / 8.0)));

  const LlamaConfig mm = LlamaConfig::from_json(read_reference("gemma3-mm").config);
  CHECK(mm.multimodal);
  CHECK(mm.window == std::vector<int64_t>{5, 0, 5});  // sliding_window_pattern 2
  CHECK(mm.rope_linear_factor == 4.0);
  CHECK(mm.rope_inv_freq(false)[1] == doctest::Approx(std::pow(100000.0, -2.0 / 12.0) / 4.0));
  CHECK(mm.rope_inv_freq(true)[1] == doctest::Approx(std::pow(1000.0, -2.0 / 12.0)));  // unscaled
  CHECK(mm.final_logit_softcapping == 0.0);

  // a gemma3 config with an empty text_config: Gemma3TextConfig's defaults (google/gemma-3-4b's sizes
  // are what its text_config overrides)
  const LlamaConfig d = LlamaConfig::from_json(R"({"model_type": "gemma3", "text_config": {"hidden_size": 2560,
      "intermediate_size": 10240, "num_hidden_layers": 34, "sliding_window": 1024,
      "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}})");
  CHECK((d.num_attention_heads == 8 && d.num_key_value_heads == 4 && d.head_dim == 256));
  CHECK((d.vocab_size == 262208 && d.max_position_embeddings == 131072));
  CHECK(d.rope_theta == 1000000.0);
  CHECK(d.rope_local_theta == 10000.0);
  CHECK(d.tie_word_embeddings);
  int globals = 0;
  for (size_t l = 0; l < d.window.size(); ++l) {
    CHECK(d.window[l] == ((l + 1) % 6 ? 1024 : 0));
    globals += d.window[l] == 0;
  }
  CHECK(globals == 5);  // layers 6, 12, 18, 24, 30 (1-based)
  // transformers 5's rope_parameters
  const LlamaConfig rp = LlamaConfig::from_json(R"({"model_type": "gemma3_text", "num_hidden_layers": 2,
      "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 5000.0},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 700.0}}})");
  CHECK((rp.rope_theta == 5000.0 && rp.rope_linear_factor == 2.0 && rp.rope_local_theta == 700.0));
}

TEST_CASE("qwen3/gemma3: unsupported configs name the key") {
  auto err = [](const char* text) { return error_of([&] { LlamaConfig::from_json(text); }); };
  CHECK(contains(err(R"({"model_type": "gemma3_text", "attn_logit_softcapping": 50.0})"),
                 "\"attn_logit_softcapping\" is not supported"));
  CHECK(contains(err(R"({"model_type": "gemma3_text", "use_bidirectional_attention": true})"),
                 "\"use_bidirectional_attention\""));
  CHECK(contains(err(R"({"model_type": "gemma3_text", "num_hidden_layers": 2, "layer_types": ["full_attention"]})"),
                 "\"layer_types\" must be an array of num_hidden_layers (2)"));
  CHECK(contains(err(R"({"model_type": "gemma3_text", "sliding_window_pattern": 0})"), "\"sliding_window_pattern\""));
  CHECK(contains(err(R"({"model_type": "gemma3", "text_config": 3})"), "\"text_config\" must be an object"));
  CHECK(contains(err(R"({"model_type": "gemma3", "text_config": {"hidden_size": "big"}})"),
                 "text_config: \"hidden_size\" must be an integer"));
}

TEST_CASE("gemma3: geglu_tanh and softcap against double") {
  std::vector<float> gate, up;
  for (int i = 0; i < 37; ++i) {  // a vector tail too
    gate.push_back(float(i - 18) * 0.41f);
    up.push_back(0.25f + float(i % 5));
  }
  std::vector<float> out = gate;
  geglu_tanh(out.data(), up.data(), int64_t(out.size()));
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    const double want = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * up[i];
    CHECK(std::fabs(out[i] - want) <= 2e-6 * (std::fabs(want) + 1.0));
  }
  std::vector<float> x{-100.0f, -3.0f, 0.0f, 0.5f, 2.5f, 1e4f};
  std::vector<float> y = x;
  softcap(y.data(), int64_t(y.size()), 2.5f);
  for (size_t i = 0; i < x.size(); ++i) CHECK(y[i] == doctest::Approx(2.5 * std::tanh(x[i] / 2.5)).epsilon(1e-6));
}
