// GPT-2 forward on qkv's kernels against the committed PyTorch reference
// (tests/data/model/*.json, written by tools/model/make_reference.py), KV-cache generation
// against full recompute, seeded sampling, and damaged checkpoints.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "model/gpt2.hpp"
#include "model/json.hpp"
#include "model/safetensors.hpp"
#include "test_model_util.hpp"

using namespace qkv;
using namespace qkv::model_testing;

namespace {

const std::string kData = source_path("tests/data/model");

std::vector<float> read_f32(const std::string& path, size_t want) {
  auto b = read_bytes(path);
  REQUIRE(b.size() == want * 4);
  std::vector<float> v(want);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

float max_abs_err(const float* a, const float* b, size_t n) {
  float worst = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    float d = std::fabs(a[i] - b[i]);
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
  }
  return worst;
}

std::vector<int32_t> ids_of(const nlohmann::json& v) { return v.get<std::vector<int32_t>>(); }

struct Loaded {
  std::vector<uint8_t> st;
  std::string config;
};

Loaded load_dir(const std::string& dir) {
  return {read_bytes(dir + "/model.safetensors"), read_text(dir + "/config.json")};
}

GPT2 load_model(const Loaded& l) { return GPT2::load(l.config, l.st.data(), l.st.size()); }

// Checks forward() against every case of a reference manifest; returns the worst errors.
void check_reference(const std::string& manifest_name, float* worst_logits, float* worst_atts) {
  const std::string manifest_path = kData + "/" + manifest_name;
  REQUIRE_MESSAGE(file_exists(manifest_path),
                  "missing reference " << manifest_path << " (tools/model/make_reference.py writes it)");
  const nlohmann::json m = json::parse(read_text(manifest_path));
  const std::string dir = kData + "/" + m.at("model_dir").get<std::string>();
  GPT2 model = load_model(load_dir(dir));
  const auto& c = model.config();
  const auto& mc = m.at("config");
  CHECK(c.n_layer == mc.at("n_layer").get<int64_t>());
  CHECK(c.n_head == mc.at("n_head").get<int64_t>());
  CHECK(c.n_embd == mc.at("n_embd").get<int64_t>());
  CHECK(c.vocab_size == mc.at("vocab_size").get<int64_t>());
  CHECK(c.n_positions == mc.at("n_positions").get<int64_t>());

  *worst_logits = *worst_atts = 0.0f;
  for (const auto& cs : m.at("cases")) {
    const std::string name = cs.at("name").get<std::string>();
    CAPTURE(name);
    const auto ids = ids_of(cs.at("ids"));
    const int64_t L = int64_t(ids.size()), V = c.vocab_size, H = c.n_head, NL = c.n_layer;
    auto ref_logits = read_f32(kData + "/" + cs.at("logits").at("file").get<std::string>(), size_t(L * V));
    auto ref_atts = read_f32(kData + "/" + cs.at("attentions").at("file").get<std::string>(), size_t(NL * H * L * L));

    std::vector<float> logits_1t;
    for (int threads : {1, 3}) {
      CAPTURE(threads);
      model.set_threads(threads);
      std::vector<float> logits(size_t(L * V)), atts(size_t(NL * H * L * L));
      model.forward(ids.data(), L, logits.data(), atts.data());
      const float el = max_abs_err(logits.data(), ref_logits.data(), logits.size());
      const float ea = max_abs_err(atts.data(), ref_atts.data(), atts.size());
      CHECK(el <= 1e-4f);
      CHECK(ea <= 1e-5f);
      *worst_logits = std::max(*worst_logits, el);
      *worst_atts = std::max(*worst_atts, ea);
      CHECK(argmax(logits.data() + (L - 1) * V, V) == cs.at("last_logits_argmax").get<int64_t>());

      // without attentions requested the logits are the same
      std::vector<float> logits2(size_t(L * V));
      model.forward(ids.data(), L, logits2.data());
      CHECK(logits2 == logits);
      // and the thread count changes no bit
      if (threads == 1) logits_1t = logits;
      CHECK(logits == logits_1t);
    }
    model.set_threads(1);

    // greedy continuation through the KV cache matches PyTorch's (where its steps are not near-ties)
    if (cs.contains("greedy")) {
      const auto& g = cs.at("greedy");
      const auto want = ids_of(g.at("new_ids"));
      const double min_margin = g.at("min_margin").get<double>();
      const int64_t n_new = int64_t(want.size());
      if (L + n_new <= c.n_positions && min_margin > 1e-3) {
        auto got = generate(model, ids, n_new, {0.0f, 0}, 0, true);
        CHECK(std::vector<int32_t>(got.begin() + L, got.end()) == want);
      }
    }
  }
}

}  // namespace

TEST_CASE("gpt2: config.json parsing and validation") {
  TinyConfig tc;
  auto c = GPT2Config::from_json(tc.json());
  CHECK(c.n_layer == 2);
  CHECK(c.n_head == 2);
  CHECK(c.n_embd == 16);
  CHECK(c.n_positions == 32);
  CHECK(c.vocab_size == 50);
  CHECK(c.inner() == 64);
  CHECK(c.layer_norm_epsilon == doctest::Approx(1e-5));

  // n_ctx stands in for n_positions (older configs); n_inner may be given
  auto c2 = GPT2Config::from_json(R"({"n_layer":1,"n_head":1,"n_embd":4,"n_ctx":8,"vocab_size":3,"n_inner":10})");
  CHECK(c2.n_positions == 8);
  CHECK(c2.inner() == 10);

  auto err = [](const std::string& text) {
    return error_of<std::invalid_argument>([&] { GPT2Config::from_json(text); });
  };
  CHECK(contains(err(R"({"n_head":1,"n_embd":4,"n_positions":8,"vocab_size":3})"), "lacks \"n_layer\""));
  CHECK(contains(err(R"({"n_layer":1,"n_head":3,"n_embd":4,"n_positions":8,"vocab_size":3})"),
                 "n_embd (4) must be divisible by n_head (3)"));
  CHECK(contains(err(R"({"n_layer":0,"n_head":1,"n_embd":4,"n_positions":8,"vocab_size":3})"),
                 "\"n_layer\" must be in [1,"));
  CHECK(contains(err(R"({"n_layer":1.5,"n_head":1,"n_embd":4,"n_positions":8,"vocab_size":3})"),
                 "\"n_layer\" must be an integer"));
  CHECK(contains(err(R"({"n_layer":1,"n_head":1,"n_embd":4,"vocab_size":3})"), "lacks \"n_positions\""));
  CHECK(contains(err(R"({"model_type":"llama","n_layer":1,"n_head":1,"n_embd":4,"n_positions":8,"vocab_size":3})"),
                 "model_type must be \"gpt2\", got \"llama\""));
  CHECK(contains(
      err(R"({"activation_function":"relu","n_layer":1,"n_head":1,"n_embd":4,"n_positions":8,"vocab_size":3})"),
      "activation_function must be \"gelu_new\""));
  CHECK(contains(err(R"({"n_layer":1,"n_head":1,"n_embd":4,"n_positions":8,"vocab_size":3,"layer_norm_epsilon":-1})"),
                 "layer_norm_epsilon"));
  CHECK(contains(err("{\"n_layer\":1,"), "config.json is not valid JSON"));
  CHECK(contains(err("[]"), "must hold a JSON object"));
}

TEST_CASE("gpt2: forward matches PyTorch (tiny-kjv)") {
  float el = 0, ea = 0;
  check_reference("tiny-kjv.json", &el, &ea);
  MESSAGE("tiny-kjv vs PyTorch: logits max abs err " << el << ", attentions " << ea);
}

TEST_CASE("gpt2: forward matches PyTorch (random GPT-2, 3 layers, 6 heads, n_embd 192)") {
  float el = 0, ea = 0;
  check_reference("random-gpt2.json", &el, &ea);
  MESSAGE("random-gpt2 vs PyTorch: logits max abs err " << el << ", attentions " << ea);
}

namespace {

GPT2 random_model(const TinyConfig& tc, uint32_t seed, const std::string& prefix = "") {
  auto bytes = build_safetensors(random_gpt2_tensors(tc, seed, prefix));
  return GPT2::load(tc.json(), bytes.data(), bytes.size());
}

GPT2 model_under_test() {
  // the trained tiny model when present (its greedy path is meaningful); else a random one
  const std::string dir = source_path("web/models/tiny-kjv");
  if (file_exists(dir + "/model.safetensors")) return load_model(load_dir(dir));
  TinyConfig tc;
  tc.n_positions = 96;
  tc.vocab_size = 256;
  tc.n_embd = 32;
  tc.n_head = 4;
  return random_model(tc, 11);
}

}  // namespace

TEST_CASE("gpt2: KV-cache greedy generation == full recompute, 64 tokens") {
  GPT2 model = model_under_test();
  std::string prompt = "In the beginning";
  std::vector<int32_t> ids(prompt.begin(), prompt.end());
  auto cached = generate(model, ids, 64, {0.0f, 0}, 0, true);
  auto recomputed = generate(model, ids, 64, {0.0f, 0}, 0, false);
  REQUIRE(cached.size() == ids.size() + 64);
  CHECK(cached == recomputed);

  // the random GPT-2 of another shape, too, filling its whole context
  TinyConfig tc;
  tc.n_layer = 3, tc.n_head = 6, tc.n_embd = 48, tc.n_positions = 72, tc.vocab_size = 300;
  GPT2 other = random_model(tc, 5, "transformer.");
  std::vector<int32_t> p2 = {1, 2, 3, 250, 7, 8};
  CHECK(generate(other, p2, 66, {0.0f, 0}, 0, true) == generate(other, p2, 66, {0.0f, 0}, 0, false));
}

TEST_CASE("gpt2: session steps give the same logits and attention rows as the full forward") {
  TinyConfig tc;
  tc.n_layer = 2, tc.n_head = 4, tc.n_embd = 32, tc.n_positions = 40, tc.vocab_size = 64;
  GPT2 model = random_model(tc, 3);
  const int64_t L = 20, P = 7, V = tc.vocab_size, H = tc.n_head, NL = tc.n_layer;
  std::vector<int32_t> ids(L);
  for (int64_t i = 0; i < L; ++i) ids[size_t(i)] = int32_t((i * 37 + 5) % V);

  std::vector<float> logits(size_t(L * V)), atts(size_t(NL * H * L * L));
  model.forward(ids.data(), L, logits.data(), atts.data());

  GPT2Session s(model);
  std::vector<float> last(static_cast<size_t>(V)), patt(size_t(NL * H * P * P));
  s.prefill(ids.data(), P, last.data(), patt.data());
  CHECK(max_abs_err(last.data(), logits.data() + (P - 1) * V, size_t(V)) <= 1e-5f);
  for (int64_t l = 0; l < NL; ++l) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < P; ++i) {
        CHECK(max_abs_err(patt.data() + ((l * H + h) * P + i) * P, atts.data() + ((l * H + h) * L + i) * L,
                          size_t(P)) <= 1e-6f);
      }
    }
  }
  for (int64_t t = P; t < L; ++t) {
    const int64_t Lk = t + 1;
    std::vector<float> row(size_t(NL * H * Lk));
    s.step(ids[size_t(t)], last.data(), row.data());
    CHECK(s.position() == t + 1);
    CHECK(max_abs_err(last.data(), logits.data() + t * V, size_t(V)) <= 1e-5f);
    for (int64_t l = 0; l < NL; ++l) {
      for (int64_t h = 0; h < H; ++h) {
        CHECK(max_abs_err(row.data() + (l * H + h) * Lk, atts.data() + ((l * H + h) * L + t) * L, size_t(Lk)) <= 1e-6f);
      }
    }
  }
  // the context is full at n_positions: a clear error, the cache untouched
  s.reset();
  std::vector<int32_t> full(size_t(tc.n_positions), 1);
  s.prefill(full.data(), int64_t(full.size()), last.data());
  CHECK(contains(error_of<std::length_error>([&] { s.step(1, last.data()); }), "exceed n_positions = 40"));
  CHECK(s.position() == tc.n_positions);
  std::vector<int32_t> too_long(size_t(tc.n_positions + 1), 1);
  std::vector<float> big(too_long.size() * size_t(V));
  CHECK(contains(
      error_of<std::length_error>([&] { model.forward(too_long.data(), int64_t(too_long.size()), big.data()); }),
      "41 positions (0 already + 41 new) exceed n_positions = 40"));
  CHECK(contains(error_of<std::invalid_argument>([&] {
                   int32_t bad = int32_t(V);
                   model.forward(&bad, 1, big.data());
                 }),
                 "ids[0] = 64 is out of range [0, 64)"));
  CHECK(contains(error_of<std::invalid_argument>([&] { model.forward(ids.data(), 0, big.data()); }), "ids is empty"));
  CHECK(contains(error_of<std::length_error>([&] {
                   generate(model, ids, 21, {0.0f, 0}, 0, true);
                 }),
                 "prompt (20) + n_new (21) exceed n_positions = 40"));
}

TEST_CASE("gpt2: the session's cache grows with the context, not allocated for all n_positions") {
  TinyConfig tc;
  tc.n_layer = 2, tc.n_head = 4, tc.n_embd = 32, tc.n_positions = 300, tc.vocab_size = 64;
  GPT2 model = random_model(tc, 9);
  const int64_t L = 150, V = tc.vocab_size, D = tc.n_embd / tc.n_head;
  std::vector<int32_t> ids(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) ids[size_t(i)] = int32_t((i * 37 + 11) % V);
  std::vector<float> full(size_t(L * V));
  model.forward(ids.data(), L, full.data());
  GPT2Session s(model);
  CHECK(s.cache_bytes() == 0);
  std::vector<float> logits(static_cast<size_t>(V));
  s.prefill(ids.data(), 60, logits.data());
  CHECK(s.capacity() == 64);
  CHECK(s.cache_bytes() == size_t(tc.n_layer * 2 * tc.n_head * 64 * D) * sizeof(float));
  float worst = max_abs_err(logits.data(), full.data() + 59 * V, size_t(V));
  for (int64_t t = 60; t < L; ++t) {
    s.step(ids[size_t(t)], logits.data());
    worst = std::max(worst, max_abs_err(logits.data(), full.data() + t * V, size_t(V)));
  }
  CHECK(s.capacity() == 256);  // 64 -> 128 -> 256
  CHECK(worst <= 1e-5f);
  s.reset();  // keeps the grown caches
  CHECK(s.capacity() == 256);
  std::vector<int32_t> to_end(size_t(tc.n_positions), 1);
  s.prefill(to_end.data(), tc.n_positions, logits.data());
  CHECK(s.capacity() == 300);  // never past n_positions
  // a generation of known length reserves it up front: one allocation, no doubling
  GPT2Session r(model);
  r.reserve(100);
  CHECK(r.capacity() == 100);
  CHECK(r.cache_bytes() == size_t(tc.n_layer * 2 * tc.n_head * 100 * D) * sizeof(float));
  r.prefill(ids.data(), 90, logits.data());
  CHECK(r.capacity() == 100);
  CHECK(max_abs_err(logits.data(), full.data() + 89 * V, size_t(V)) <= 1e-5f);
  r.reserve(5000);
  CHECK(r.capacity() == 300);
  r.step(ids[90], logits.data());  // the 90 cached positions moved intact
  CHECK(max_abs_err(logits.data(), full.data() + 90 * V, size_t(V)) <= 1e-5f);
}

TEST_CASE("gpt2: forward's queries and keys reproduce its attentions") {
  // softmax(q k^T / sqrt(D) + causal mask) over the returned q and k == the returned attentions
  auto check = [](const GPT2& model, const std::vector<int32_t>& ids) {
    const GPT2Config& c = model.config();
    const int64_t L = int64_t(ids.size()), V = c.vocab_size, H = c.n_head, NL = c.n_layer, D = c.head_dim();
    std::vector<float> logits(size_t(L * V)), atts(size_t(NL * H * L * L));
    std::vector<float> qs(size_t(NL * H * L * D), NAN), ks(size_t(NL * H * L * D), NAN);
    model.forward(ids.data(), L, logits.data(), atts.data(), qs.data(), ks.data());
    // asking for q/k changes nothing else
    std::vector<float> logits2(size_t(L * V)), atts2(size_t(NL * H * L * L));
    model.forward(ids.data(), L, logits2.data(), atts2.data());
    CHECK(logits == logits2);
    CHECK(atts == atts2);
    const double scale = 1.0 / std::sqrt(double(D));
    double worst = 0.0;
    for (int64_t l = 0; l < NL; ++l) {
      for (int64_t h = 0; h < H; ++h) {
        const float* q = qs.data() + (l * H + h) * L * D;  // [L, D]
        const float* k = ks.data() + (l * H + h) * L * D;  // [L, D]
        for (int64_t i = 0; i < L; ++i) {
          std::vector<double> s(size_t(L), 0.0);
          double m = -INFINITY, sum = 0.0;
          for (int64_t j = 0; j <= i; ++j) {
            double dot = 0.0;
            for (int64_t d = 0; d < D; ++d) dot += double(q[i * D + d]) * double(k[j * D + d]);
            s[size_t(j)] = dot * scale;
            m = std::max(m, s[size_t(j)]);
          }
          for (int64_t j = 0; j <= i; ++j) sum += (s[size_t(j)] = std::exp(s[size_t(j)] - m));
          const float* row = atts.data() + ((l * H + h) * L + i) * L;
          for (int64_t j = 0; j < L; ++j) {
            const double want = j <= i ? s[size_t(j)] / sum : 0.0;  // masked keys: exactly 0
            worst = std::max(worst, std::fabs(want - double(row[j])));
          }
        }
      }
    }
    CHECK(worst <= 1e-5);
    // every element written (they started as NaN)
    CHECK(std::all_of(qs.begin(), qs.end(), [](float x) { return std::isfinite(x); }));
    CHECK(std::all_of(ks.begin(), ks.end(), [](float x) { return std::isfinite(x); }));
  };
  std::string text = "In the beginning God created";
  check(model_under_test(), std::vector<int32_t>(text.begin(), text.end()));
  TinyConfig tc;
  tc.n_layer = 3, tc.n_head = 6, tc.n_embd = 48, tc.n_positions = 72, tc.vocab_size = 300;
  GPT2 other = random_model(tc, 5, "transformer.");
  std::vector<int32_t> ids(40);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 53 + 11) % 300);
  check(other, ids);
}

TEST_CASE("gpt2: seeded sampling is deterministic") {
  GPT2 model = model_under_test();
  std::string prompt = "And the LORD said";
  std::vector<int32_t> ids(prompt.begin(), prompt.end());
  SamplingOptions o{0.8f, 40};
  auto a = generate(model, ids, 48, o, 42, true);
  auto b = generate(model, ids, 48, o, 42, true);
  auto c = generate(model, ids, 48, o, 42, false);
  auto d = generate(model, ids, 48, o, 43, true);
  CHECK(a == b);
  CHECK(a == c);  // cache and recompute draw the same tokens
  CHECK(a != d);  // another seed, another text (overwhelmingly likely)
  // top_k = 1 is greedy whatever the temperature
  CHECK(generate(model, ids, 16, {1.5f, 1}, 9, true) == generate(model, ids, 16, {0.0f, 0}, 0, true));

  // the generator itself: PCG32's published stream for seed 42, sequence 54
  Rng rng(42);
  CHECK(rng.next_u32() == 0xa15c02b7u);
  CHECK(rng.next_u32() == 0x7b47f409u);
  // sampling frequencies follow the softmax
  std::vector<float> logits = {0.0f, std::log(3.0f), -INFINITY, 0.0f};
  Rng r2(1);
  int counts[4] = {0, 0, 0, 0};
  for (int i = 0; i < 20000; ++i) counts[sample(logits.data(), 4, {1.0f, 0}, r2)]++;
  CHECK(counts[2] == 0);
  CHECK(counts[1] / 20000.0 == doctest::Approx(0.6).epsilon(0.05));
  CHECK(counts[0] / 20000.0 == doctest::Approx(0.2).epsilon(0.1));
  counts[0] = counts[1] = counts[3] = 0;
  for (int i = 0; i < 2000; ++i) counts[sample(logits.data(), 4, {1.0f, 2}, r2)]++;
  CHECK(counts[3] == 0);  // top-2 = {1, 0}: ties go to the lower index
  CHECK(argmax(logits.data(), 4) == 1);
}

TEST_CASE("gpt2: damaged checkpoints each give their error") {
  TinyConfig tc;
  auto tensors = random_gpt2_tensors(tc, 1);
  auto load = [&](const std::vector<StTensor>& ts, const std::string& config) {
    auto bytes = build_safetensors(ts);
    return error_of<std::invalid_argument>([&] { GPT2::load(config, bytes.data(), bytes.size()); });
  };
  CHECK(load(tensors, tc.json()).empty());

  SUBCASE("missing tensor") {
    auto ts = tensors;
    ts.erase(std::remove_if(ts.begin(), ts.end(), [](const StTensor& t) { return t.name == "h.1.mlp.c_fc.bias"; }),
             ts.end());
    CHECK(contains(load(ts, tc.json()), "GPT2: missing tensor \"h.1.mlp.c_fc.bias\" (expected shape [64])"));
  }
  SUBCASE("shape not matching the config") {
    TinyConfig wider = tc;
    wider.n_embd = 32;
    CHECK(contains(load(tensors, wider.json()),
                   "GPT2: tensor \"wte.weight\" has shape [50, 16], but the config needs [50, 32]"));
    TinyConfig longer = tc;
    longer.n_positions = 64;
    CHECK(contains(load(tensors, longer.json()),
                   "tensor \"wpe.weight\" has shape [32, 16], but the config needs [64, 16]"));
    auto ts = tensors;
    for (auto& t : ts) {
      if (t.name == "h.0.attn.c_attn.weight") t.shape = {48, 16};  // nn.Linear layout: transposed
    }
    CHECK(contains(load(ts, tc.json()),
                   "tensor \"h.0.attn.c_attn.weight\" has shape [48, 16], but the config needs [16, 48]"));
    TinyConfig deeper = tc;
    deeper.n_layer = 3;
    CHECK(contains(load(tensors, deeper.json()), "missing tensor \"h.2.ln_1.weight\""));
  }
  SUBCASE("damaged file") {
    auto bytes = build_safetensors(tensors);
    bytes.resize(bytes.size() - 1);
    CHECK(contains(error_of<std::invalid_argument>([&] { GPT2::load(tc.json(), bytes.data(), bytes.size()); }),
                   "safetensors: tensor \"ln_f.bias\": data_offsets"));
  }
  SUBCASE("unconvertible dtype") {
    auto ts = tensors;
    for (auto& t : ts) {
      if (t.name == "ln_f.bias") t.dtype = "I32";
    }
    CHECK(contains(load(ts, tc.json()), "tensor \"ln_f.bias\": dtype I32 cannot be converted to float32"));
  }
  SUBCASE("transformer. prefix, extra tensors and F16 weights load") {
    auto ts = random_gpt2_tensors(tc, 1, "transformer.");
    ts.push_back({"lm_head.weight", "F32", {tc.vocab_size, tc.n_embd}, f32_bytes(std::vector<float>(50 * 16, 0.0f))});
    ts.push_back({"transformer.h.0.attn.bias", "U8", {1, 1, 4, 4}, std::vector<uint8_t>(16, 1)});
    CHECK(load(ts, tc.json()).empty());
    auto f32 = build_safetensors(tensors);
    auto prefixed = build_safetensors(ts);
    GPT2 a = GPT2::load(tc.json(), f32.data(), f32.size());
    GPT2 b = GPT2::load(tc.json(), prefixed.data(), prefixed.size());
    std::vector<int32_t> ids = {1, 2, 3, 4};
    std::vector<float> la(4 * 50), lb(4 * 50);
    a.forward(ids.data(), 4, la.data());
    b.forward(ids.data(), 4, lb.data());
    CHECK(la == lb);

    // the same weights rounded to F16 (and BF16) give nearly the same logits
    for (const char* half : {"F16", "BF16"}) {
      CAPTURE(half);
      auto hs = tensors;
      for (auto& t : hs) {
        std::vector<float> v(t.bytes.size() / 4);
        std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
        std::vector<uint8_t> out;
        for (float x : v) {
          uint32_t bits;
          std::memcpy(&bits, &x, 4);
          uint16_t h;
          if (std::string(half) == "BF16") {
            h = uint16_t((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
          } else {  // values here are normal in half precision: round the mantissa
            const uint32_t sign = (bits >> 16) & 0x8000;
            const int32_t exp = int32_t((bits >> 23) & 0xFF) - 127 + 15;
            const uint32_t man = bits & 0x7FFFFF;
            if (exp <= 0) {
              h = uint16_t(sign);  // tiny: flush to zero (close enough for this check)
            } else {
              uint32_t r = (uint32_t(exp) << 10 | (man >> 13)) + ((man >> 12) & 1);
              h = uint16_t(sign | r);
            }
          }
          out.push_back(uint8_t(h & 0xFF));
          out.push_back(uint8_t(h >> 8));
        }
        t.bytes = out;
        t.dtype = half;
      }
      auto hb = build_safetensors(hs);
      GPT2 c = GPT2::load(tc.json(), hb.data(), hb.size());
      std::vector<float> lc(4 * 50);
      c.forward(ids.data(), 4, lc.data());
      CHECK(max_abs_err(la.data(), lc.data(), la.size()) < (std::string(half) == "BF16" ? 0.5f : 0.05f));
    }
  }
}
