// Llama-family forward (llama, mistral, qwen2) against the committed float64 PyTorch reference
// (tests/data/llama/, written by tools/model/make_llama_reference.py): logits, attentions, q/k
// after rotation; KV-cache decoding against full recompute; F16 / BF16 / int8 weights through
// the same path; damaged and inconsistent configs and checkpoints.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "matmul/halves.hpp"
#include "model/json.hpp"
#include "model/layers.hpp"
#include "model/llama.hpp"
#include "model/safetensors.hpp"
#include "test_model_util.hpp"

using namespace qkv;
using namespace qkv::model_testing;

namespace {

const std::string kData = source_path("tests/data/llama");
const char* const kModels[] = {"llama-rope3", "mistral-win", "qwen2-bias", "llama-narrow"};

struct Checkpoint {
  std::string config;
  std::vector<uint8_t> st;
  nlohmann::json ref;
  std::string ref_dir;
};

Checkpoint read_checkpoint(const std::string& name) {
  const std::string dir = kData + "/" + name;
  REQUIRE_MESSAGE(file_exists(dir + "/config.json"), "missing " << dir << " (tools/model/make_llama_reference.py)");
  return {read_text(dir + "/config.json"), read_bytes(dir + "/model.safetensors"),
          json::parse(read_text(dir + "-ref/ref.json")), dir + "-ref"};
}

std::vector<float> read_f32(const std::string& path, size_t want) {
  auto b = read_bytes(path);
  REQUIRE(b.size() == want * 4);
  std::vector<float> v(want);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

float max_abs_err(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float worst = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
  }
  return worst;
}

size_t numel(const nlohmann::json& shape) {
  size_t n = 1;
  for (const auto& d : shape) n *= d.get<size_t>();
  return n;
}

Llama load(const Checkpoint& c, WeightFormat f = WeightFormat::Auto) {
  return Llama::load(c.config, c.st.data(), c.st.size(), f);
}

// config.json with one key changed (null removes it)
std::string edit(const std::string& config, const std::string& key, const nlohmann::json& value) {
  nlohmann::json j = json::parse(config);
  if (value.is_null()) {
    j.erase(key);
  } else {
    j[key] = value;
  }
  return j.dump();
}

struct Outputs {
  std::vector<float> logits, attentions, queries, keys;
};

Outputs run_forward(const Llama& m, const std::vector<int32_t>& ids) {
  const LlamaConfig& c = m.config();
  const int64_t L = int64_t(ids.size()), NL = c.num_hidden_layers, H = c.num_attention_heads, D = c.head_dim;
  Outputs o;
  o.logits.resize(size_t(L * c.vocab_size));
  o.attentions.resize(size_t(NL * H * L * L));
  o.queries.resize(size_t(NL * H * L * D));
  o.keys.resize(size_t(NL * c.num_key_value_heads * L * D));
  m.forward(ids.data(), L, o.logits.data(), o.attentions.data(), o.queries.data(), o.keys.data());
  return o;
}

}  // namespace

TEST_CASE("llama: swiglu (vector exp2 and its scalar tail) matches silu(gate) * up in double") {
  std::vector<float> gate, up;
  for (int i = 0; i < 203; ++i) {  // not a multiple of the vector width: the tail runs too
    gate.push_back(float(i - 101) * 0.37f);
    up.push_back(0.5f + float(i % 7));
  }
  gate[0] = -120.0f;  // e^120 overflows float: silu -> -0
  gate[1] = 95.0f;
  gate[2] = 0.0f;
  gate[3] = 1e-20f;
  std::vector<float> out = gate;
  swiglu(out.data(), up.data(), int64_t(out.size()));
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i], want = g / (1.0 + std::exp(-g)) * up[i];
    CAPTURE(g);
    // float32's rounding of the exponent -g log2(e) is an absolute error of |g| * 1e-7 in it, a
    // relative one of that size in e^-g and so in the result where g << 0; beyond exp2's domain
    // (g < -44.4) the result is -0 where the true value is under 3e-18 * up
    const double floor = g < -44.3 ? 3e-18 * up[i] : 1e-38;
    CHECK(std::fabs(out[i] - want) <= 1e-6 * (1.0 + std::fabs(g)) * std::fabs(want) + floor);
  }
  CHECK(out[0] == 0.0f);
  CHECK(out[2] == 0.0f);
}

TEST_CASE("llama: config.json of each model_type") {
  const LlamaConfig l = LlamaConfig::from_json(read_checkpoint("llama-rope3").config);
  CHECK(l.arch == LlamaArch::Llama);
  CHECK(l.head_dim == 16);  // given: hidden 48 / 4 heads would be 12
  CHECK(l.kv_group() == 2);
  CHECK(l.rope_scaling.enabled);
  CHECK(l.window == std::vector<int64_t>{0, 0});
  CHECK(!l.qkv_bias);
  const LlamaConfig m = LlamaConfig::from_json(read_checkpoint("mistral-win").config);
  CHECK(m.arch == LlamaArch::Mistral);
  CHECK(m.window == std::vector<int64_t>{5, 5});
  CHECK(m.tie_word_embeddings);
  const LlamaConfig q = LlamaConfig::from_json(read_checkpoint("qwen2-bias").config);
  CHECK(q.arch == LlamaArch::Qwen2);
  CHECK(q.window == std::vector<int64_t>{0, 4, 4});  // max_window_layers 1: layer 0 full
  CHECK(q.qkv_bias);
  CHECK(!q.o_bias);
  // Mistral without the key: MistralConfig's default 4096; null: full attention
  CHECK(LlamaConfig::from_json(edit(read_checkpoint("mistral-win").config, "sliding_window", nullptr)).window[0] ==
        4096);
  nlohmann::json j = json::parse(read_checkpoint("mistral-win").config);
  j["sliding_window"] = nullptr;
  CHECK(LlamaConfig::from_json(j.dump()).window[0] == 0);
  // Qwen2 with use_sliding_window false: no window
  CHECK(LlamaConfig::from_json(edit(read_checkpoint("qwen2-bias").config, "use_sliding_window", false)).window[2] == 0);
}

TEST_CASE("llama: llama3 rope_scaling matches transformers' bands") {
  LlamaConfig c = LlamaConfig::from_json(read_checkpoint("llama-rope3").config);
  const std::vector<double> f = c.rope_inv_freq();
  REQUIRE(f.size() == 8);
  const double pi = 3.14159265358979323846;
  for (size_t i = 0; i < f.size(); ++i) {
    const double base = 1.0 / std::pow(10000.0, double(2 * i) / 16.0), wavelen = 2 * pi / base;
    CAPTURE(i);
    if (wavelen < 8) {
      CHECK(f[i] == doctest::Approx(base));  // short wavelengths kept
    } else if (wavelen > 32) {
      CHECK(f[i] == doctest::Approx(base / 8));  // long ones divided by factor
    } else {
      CHECK(f[i] < base);  // blended, strictly between
      CHECK(f[i] > base / 8);
    }
  }
}

TEST_CASE("llama: forward matches the float64 PyTorch reference (llama, mistral, qwen2)") {
  for (const std::string name : kModels) {
    CAPTURE(name);
    const Checkpoint ck = read_checkpoint(name);
    Llama m = load(ck);
    const auto ids = ck.ref.at("ids").get<std::vector<int32_t>>();
    const auto ref_logits = read_f32(ck.ref_dir + "/logits.bin", numel(ck.ref.at("logits_shape")));
    const auto ref_atts = read_f32(ck.ref_dir + "/attentions.bin", numel(ck.ref.at("attentions_shape")));
    const auto ref_q = read_f32(ck.ref_dir + "/queries.bin", numel(ck.ref.at("queries_shape")));
    const auto ref_k = read_f32(ck.ref_dir + "/keys.bin", numel(ck.ref.at("keys_shape")));
    // the floor: PyTorch's own float32 error on this input, measured by the generator
    const double torch_logits = ck.ref.at("torch_f32_error").at("logits").get<double>();
    const double torch_atts = ck.ref.at("torch_f32_error").at("attentions").get<double>();
    Outputs first;
    for (int threads : {1, 3}) {
      CAPTURE(threads);
      m.set_threads(threads);
      Outputs o = run_forward(m, ids);
      const float el = max_abs_err(o.logits, ref_logits), ea = max_abs_err(o.attentions, ref_atts);
      MESSAGE(name << " threads " << threads << ": logits error " << el << " (torch f32 " << torch_logits
                   << "), attentions " << ea << " (torch f32 " << torch_atts << "), q " << max_abs_err(o.queries, ref_q)
                   << ", k " << max_abs_err(o.keys, ref_k));
      CHECK(el <= std::max(1e-4, torch_logits));
      CHECK(ea <= std::max(1e-5, torch_atts));
      CHECK(max_abs_err(o.queries, ref_q) <= 1e-5f);
      CHECK(max_abs_err(o.keys, ref_k) <= 1e-5f);
      if (threads == 1) {
        first = o;
      } else {
        CHECK(o.logits == first.logits);  // the thread count changes no bit
        CHECK(o.attentions == first.attentions);
      }
    }
  }
}

TEST_CASE("llama: the sliding window hides keys older than the window; GQA heads share keys") {
  const Checkpoint ck = read_checkpoint("mistral-win");
  Llama m = load(ck);
  const auto ids = ck.ref.at("ids").get<std::vector<int32_t>>();
  const int64_t L = int64_t(ids.size()), H = 4, W = 5;
  const Outputs o = run_forward(m, ids);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < L; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < L; ++j) {
        const float p = o.attentions[size_t((h * L + i) * L + j)];
        sum += p;
        if (j > i || j <= i - W) CHECK(p == 0.0f);
      }
      CHECK(sum == doctest::Approx(1.0));
    }
  }
  // one kv head: keys [n_layer, 1, L, D]
  CHECK(o.keys.size() == size_t(2 * 1 * L * 12));
}

TEST_CASE("llama: session (KV cache) equals full recompute; greedy generation too") {
  for (const std::string name : kModels) {
    CAPTURE(name);
    const Checkpoint ck = read_checkpoint(name);
    Llama m = load(ck);
    const LlamaConfig& c = m.config();
    const auto ids = ck.ref.at("ids").get<std::vector<int32_t>>();
    const int64_t L = int64_t(ids.size()), V = c.vocab_size, NL = c.num_hidden_layers, H = c.num_attention_heads;
    const Outputs full = run_forward(m, ids);
    // prefill 5, then one token at a time: each step's logits and attention rows as the full pass's
    LlamaSession s(m);
    std::vector<float> logits(static_cast<size_t>(V)), att(size_t(NL * H * 5 * 5));
    s.prefill(ids.data(), 5, logits.data(), att.data());
    float worst = 0;
    for (int64_t v = 0; v < V; ++v)
      worst = std::max(worst, std::fabs(logits[size_t(v)] - full.logits[size_t(4 * V + v)]));
    for (int64_t t = 5; t < L; ++t) {
      std::vector<float> row(size_t(NL * H * (t + 1)));
      s.step(ids[size_t(t)], logits.data(), row.data());
      for (int64_t v = 0; v < V; ++v) {
        worst = std::max(worst, std::fabs(logits[size_t(v)] - full.logits[size_t(t * V + v)]));
      }
      for (int64_t l = 0; l < NL; ++l) {
        for (int64_t h = 0; h < H; ++h) {
          for (int64_t j = 0; j <= t; ++j) {
            const float a = row[size_t((l * H + h) * (t + 1) + j)];
            const float b = full.attentions[size_t(((l * H + h) * L + t) * L + j)];
            CHECK(std::fabs(a - b) <= 1e-6f);
          }
        }
      }
    }
    CHECK(s.position() == L);
    CHECK(worst <= 1e-4f);
    // greedy: KV cache == recompute, and == the float64 reference's continuation
    const auto prompt = ck.ref.at("greedy_prompt").get<std::vector<int32_t>>();
    const auto cached = generate(m, prompt, 8, {0.0f, 0}, 0, true);
    CHECK(cached == generate(m, prompt, 8, {0.0f, 0}, 0, false));
    CHECK(cached == ck.ref.at("greedy_ids").get<std::vector<int32_t>>());
    // sampled: the same seed, the same tokens either way
    CHECK(generate(m, prompt, 8, {0.8f, 10}, 7, true) == generate(m, prompt, 8, {0.8f, 10}, 7, false));
  }
}

TEST_CASE("llama: the session's cache grows past its first allocation without changing results") {
  Checkpoint ck = read_checkpoint("qwen2-bias");
  ck.config = edit(ck.config, "max_position_embeddings", 300);
  Llama m = load(ck);
  std::vector<int32_t> ids(150);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 37 + 11) % 67);
  const int64_t L = int64_t(ids.size()), V = 67;
  std::vector<float> full(size_t(L * V));
  m.forward(ids.data(), L, full.data());
  LlamaSession s(m);
  std::vector<float> logits(static_cast<size_t>(V));
  s.prefill(ids.data(), 60, logits.data());
  CHECK(s.capacity() == 64);
  float worst = 0;
  for (int64_t t = 60; t < L; ++t) {
    s.step(ids[size_t(t)], logits.data());
    for (int64_t v = 0; v < V; ++v) worst = std::max(worst, std::fabs(logits[size_t(v)] - full[size_t(t * V + v)]));
  }
  CHECK(s.capacity() == 256);  // 64 -> 128 -> 256
  CHECK(worst <= 1e-4f);
  CHECK_THROWS_AS(s.prefill(ids.data(), 151, logits.data()), std::length_error);  // 150 + 151 > 300
  CHECK(s.position() == L);
}

// The checkpoint's tensors rewritten as BF16 (float32's top 16 bits, rounded to nearest even).
std::vector<uint8_t> as_bf16(const std::vector<uint8_t>& st) {
  const safetensors::File f = safetensors::File::parse(st.data(), st.size());
  std::vector<StTensor> out;
  for (const auto& t : f.tensors()) {
    StTensor s{t.name, "BF16", t.shape, {}};
    for (float v : f.to_f32(t)) {
      const uint16_t b = halves::f32_to_bf16(v);
      s.bytes.push_back(uint8_t(b & 0xFF));
      s.bytes.push_back(uint8_t(b >> 8));
    }
    out.push_back(std::move(s));
  }
  return build_safetensors(out);
}

TEST_CASE("llama: F16, BF16 and int8 weights through the same path") {
  // Tolerances on max |logit error| / max |logit| against the float64 reference: F16 / BF16
  // round each weight to 11 / 8 significant bits, Q8 to 8 bits per block of 32 (measured:
  // F16 <= 6e-4, BF16 <= 4.3e-3, Q8 <= 1.2e-2; the numbers are printed).
  struct Case {
    WeightFormat format;
    std::string type;
    float logits_tol;
  };
  for (const std::string name : kModels) {
    CAPTURE(name);
    const Checkpoint ck = read_checkpoint(name);
    const auto ids = ck.ref.at("ids").get<std::vector<int32_t>>();
    const auto ref_logits = read_f32(ck.ref_dir + "/logits.bin", numel(ck.ref.at("logits_shape")));
    float scale = 0;
    for (float v : ref_logits) scale = std::max(scale, std::fabs(v));
    Checkpoint bf16 = ck;
    bf16.st = as_bf16(ck.st);
    for (const Case& cs : {Case{WeightFormat::F32, "F32", 1e-4f}, Case{WeightFormat::F16, "F16", 2e-3f},
                           Case{WeightFormat::Int8, "Q8", 3e-2f}, Case{WeightFormat::Auto, "BF16", 1e-2f}}) {
      CAPTURE(cs.type);
      // "auto" keeps the stored dtype: the BF16 file's
      Llama m = load(cs.format == WeightFormat::Auto ? bf16 : ck, cs.format);
      CHECK(m.weight_store().matrix_type() == cs.type);
      // held once: read in place from the file as stored (auto, or f32 on an F32 file), else
      // converted into one buffer and the file freed
      const WeightBytes b = m.weight_store().bytes();
      const bool in_place = cs.format == WeightFormat::Auto || cs.format == WeightFormat::F32;
      CHECK((b.file > 0) == in_place);
      CHECK((b.converted > 0) == !in_place);
      CHECK((b.vectors == 0) == (in_place && cs.type == "F32"));  // F32 norms read in place too
      const Outputs o = run_forward(m, ids);
      const float rel = max_abs_err(o.logits, ref_logits) / scale;
      MESSAGE(name << " " << cs.type << ": max logits error / max |logit| = " << rel);
      CHECK(rel <= cs.logits_tol);
      // cache == recompute holds in every dtype
      const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 4);
      CHECK(generate(m, prompt, 6, {0.0f, 0}, 0, true) == generate(m, prompt, 6, {0.0f, 0}, 0, false));
    }
  }
}

TEST_CASE("llama: damaged or inconsistent configs each give their Error") {
  const Checkpoint ck = read_checkpoint("llama-rope3");
  auto config_error = [&](const std::string& config) {
    return error_of<std::invalid_argument>([&] { Llama::load(config, ck.st.data(), ck.st.size()); });
  };
  auto has = [](const std::string& s, const std::string& part) {
    CAPTURE(s);
    CHECK(s.find(part) != std::string::npos);
  };
  has(config_error(edit(ck.config, "num_key_value_heads", 3)),
      "num_attention_heads (4) must be divisible by num_key_value_heads (3)");
  has(config_error(edit(ck.config, "rope_theta", nullptr)), "config.json lacks \"rope_theta\"");
  has(config_error(edit(ck.config, "model_type", "gpt_neox")), "model_type \"gpt_neox\" is not supported");
  has(config_error(edit(ck.config, "model_type", nullptr)), "lacks \"model_type\"");
  has(config_error(edit(ck.config, "rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}})),
      "rope_scaling type \"yarn\" is not supported");
  has(config_error(edit(ck.config, "rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}})),
      "rope_scaling (llama3) lacks \"low_freq_factor\"");
  has(config_error(edit(ck.config, "hidden_act", "gelu")), "\"hidden_act\" must be \"silu\"");
  has(config_error(edit(ck.config, "mlp_bias", true)), "\"mlp_bias\": true is not supported");
  has(config_error(edit(ck.config, "head_dim", 15)), "head_dim must be even");
  has(config_error(edit(ck.config, "hidden_size", "48")), "\"hidden_size\" must be an integer, got \"48\"");
  has(config_error(edit(ck.config, "num_hidden_layers", nullptr)), "lacks \"num_hidden_layers\"");
  has(config_error(edit(edit(ck.config, "head_dim", nullptr), "num_attention_heads", 5)),
      "hidden_size (48) must be divisible by num_attention_heads (5)");
  has(config_error("[1]"), "must hold a JSON object");
  has(config_error("{"), "not valid JSON");
  has(config_error(edit(read_checkpoint("mistral-win").config, "sliding_window", 0)),
      "\"sliding_window\" must be >= 1");

  // the checkpoint against the config: a wrong shape, a missing tensor, lm_head missing when untied
  has(config_error(edit(ck.config, "intermediate_size", 80)),
      "tensor \"model.layers.0.mlp.gate_proj.weight\" has shape [72, 48], but the config needs [80, 48]");
  has(config_error(edit(ck.config, "head_dim", 8)),
      "tensor \"model.layers.0.self_attn.q_proj.weight\" has shape [64, 48], but the config needs [32, 48]");
  has(config_error(edit(ck.config, "num_hidden_layers", 3)),
      "missing tensor \"model.layers.2.input_layernorm.weight\"");
  has(config_error(edit(ck.config, "attention_bias", true)), "missing tensor \"model.layers.0.self_attn.q_proj.bias\"");
  const Checkpoint tied = read_checkpoint("mistral-win");
  has(error_of<std::invalid_argument>([&] {
        const std::string c = edit(tied.config, "tie_word_embeddings", false);
        Llama::load(c, tied.st.data(), tied.st.size());
      }),
      "missing tensor \"lm_head.weight\"");

  // ids
  Llama m = load(ck);
  std::vector<float> logits(67 * 70);
  const int32_t bad[] = {1, 67};
  has(error_of<std::invalid_argument>([&] { m.forward(bad, 2, logits.data()); }),
      "ids[1] = 67 is out of range [0, 67)");
  std::vector<int32_t> long_ids(65, 1);
  has(error_of<std::length_error>([&] { m.forward(long_ids.data(), 65, logits.data()); }),
      "exceed max_position_embeddings = 64");
}
