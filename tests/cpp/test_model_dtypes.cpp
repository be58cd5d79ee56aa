// The model with its weights held as F16, BF16, 8-bit (Q8) and 4-bit (Q4) against the F32 path and the
// committed PyTorch reference (tests/data/model/), KV-cache decoding against full recompute
// per dtype, the load options and where the bytes go, and the errors of converting.
//
// Tolerances per dtype, on logits (max abs error over every position and token; logits of
// these models reach ~10-20) and on the mean KL divergence of the next-token distributions
// from PyTorch's: they follow the weights' rounding (F16: 2^-11 relative, BF16: 2^-8, Q8:
// 1/254 of each 32-block's largest |w|), with ~2-3x margin over what was measured here
// (tiny-kjv / random GPT-2, max abs: F16 0.011 / 0.006, BF16 0.089 / 0.053, int8 0.25 / 0.13;
// mean KL: F16 4e-7 / 9e-7, BF16 3e-5 / 5e-5, int8 2.2e-4 / 3.0e-4 nats; int4, Q4's 1/16 of a
// block's largest |w|: max abs 3.6-3.8 / 1.8-2.0, mean KL 0.034-0.036 / 0.075-0.077 nats).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "matmul/halves.hpp"
#include "model/gpt2.hpp"
#include "model/safetensors.hpp"
#include "test_model_util.hpp"

using namespace qkv;
using namespace qkv::model_testing;

namespace {

const std::string kData = source_path("tests/data/model");

struct Case {
  std::string name;
  std::vector<int32_t> ids;
  std::vector<float> logits;  // PyTorch's [L, V]
};

struct Reference {
  std::string config;
  std::vector<uint8_t> file;
  std::vector<Case> cases;
};

Reference reference(const std::string& manifest_name) {
  const nlohmann::json m = nlohmann::json::parse(read_text(kData + "/" + manifest_name));
  const std::string dir = kData + "/" + m["model_dir"].get<std::string>();
  Reference r{read_text(dir + "/config.json"), read_bytes(dir + "/model.safetensors"), {}};
  const int64_t V = m["config"]["vocab_size"].get<int64_t>();
  for (const auto& c : m["cases"]) {
    Case k{c["name"].get<std::string>(), c["ids"].get<std::vector<int32_t>>(), {}};
    const auto b = read_bytes(kData + "/" + c["logits"]["file"].get<std::string>());
    REQUIRE(b.size() == k.ids.size() * size_t(V) * 4);
    k.logits.resize(b.size() / 4);
    std::memcpy(k.logits.data(), b.data(), b.size());
    r.cases.push_back(std::move(k));
  }
  return r;
}

// The same safetensors file with every F32 tensor stored as F16 or BF16 (rounded to nearest).
std::vector<uint8_t> as_half(const std::vector<uint8_t>& f32_file, const char* dtype) {
  const safetensors::File f = safetensors::File::parse(f32_file.data(), f32_file.size());
  std::vector<StTensor> out;
  for (const auto& t : f.tensors()) {
    std::vector<float> v = f.to_f32(t);
    StTensor s{t.name, dtype, t.shape, {}};
    for (float x : v) {
      const uint16_t h = std::string(dtype) == "F16" ? halves::f32_to_f16(x) : halves::f32_to_bf16(x);
      s.bytes.push_back(uint8_t(h & 0xFF));
      s.bytes.push_back(uint8_t(h >> 8));
    }
    out.push_back(std::move(s));
  }
  return build_safetensors(out);
}

float max_abs_err(const std::vector<float>& a, const float* b) {
  float worst = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
  }
  return worst;
}

struct Variant {
  const char* name;
  const char* file;  // "F32" (the committed file), "F16", "BF16": how the file stores the weights
  WeightFormat format;
  const char* held;    // the matrices' dtype after loading
  float tol_torch;     // max abs logits error vs PyTorch (and vs our F32 path)
  double tol_kl;       // mean KL(PyTorch || ours) of the next-token distributions, nats
  float tol_last;      // Logits::Last (the matrix-vector kernel) vs the last row of Logits::All
  int agree_pct = 90;  // argmax agrees with PyTorch's at >= this % of positions
};

// int8's Logits::Last also quantizes the activations to int16 per block (matmul.hpp)
const Variant kVariants[] = {
    {"F32 file, auto", "F32", WeightFormat::Auto, "F32", 1e-4f, 1e-9, 1e-4f},
    {"F16 file, auto", "F16", WeightFormat::Auto, "F16", 0.03f, 3e-6, 1e-4f},
    {"BF16 file, auto", "BF16", WeightFormat::Auto, "BF16", 0.25f, 2e-4, 1e-4f},
    {"F32 file, f16", "F32", WeightFormat::F16, "F16", 0.03f, 3e-6, 1e-4f},
    {"F16 file, f32", "F16", WeightFormat::F32, "F32", 0.03f, 3e-6, 1e-4f},
    {"F32 file, int8", "F32", WeightFormat::Int8, "Q8", 0.6f, 1e-3, 1e-3f},
    {"F16 file, int8", "F16", WeightFormat::Int8, "Q8", 0.6f, 1e-3, 1e-3f},
    // int4: 1/16 of a block's largest |w| per weight, ~16x int8's error (~250x its KL); these random
    // models' flat distributions make the top-1 agreement low (measured 0.63-0.91, KL 0.034-0.077)
    {"F32 file, int4", "F32", WeightFormat::Int4, "Q4", 8.0f, 0.2, 1e-3f, 50},
    {"BF16 file, int4", "BF16", WeightFormat::Int4, "Q4", 8.0f, 0.2, 1e-3f, 50},
};

// KL(p || q) of softmax(a), softmax(b) over n logits, in nats
double kl(const float* a, const float* b, int64_t n) {
  double ma = -INFINITY, mb = -INFINITY, za = 0.0, zb = 0.0, sum = 0.0;
  for (int64_t i = 0; i < n; ++i) ma = std::max(ma, double(a[i])), mb = std::max(mb, double(b[i]));
  for (int64_t i = 0; i < n; ++i) za += std::exp(a[i] - ma), zb += std::exp(b[i] - mb);
  for (int64_t i = 0; i < n; ++i) {
    const double p = std::exp(a[i] - ma) / za;
    sum += p * ((double(a[i]) - ma - std::log(za)) - (double(b[i]) - mb - std::log(zb)));
  }
  return sum;
}

void check_dtypes(const std::string& manifest_name) {
  const Reference ref = reference(manifest_name);
  const std::vector<uint8_t> f16 = as_half(ref.file, "F16"), bf16 = as_half(ref.file, "BF16");
  GPT2 base = GPT2::load(ref.config, ref.file.data(), ref.file.size());
  const int64_t V = base.config().vocab_size;
  for (const Variant& v : kVariants) {
    const std::string variant = v.name;
    CAPTURE(variant);
    const std::vector<uint8_t>& file = std::string(v.file) == "F16"    ? f16
                                       : std::string(v.file) == "BF16" ? bf16
                                                                       : ref.file;
    GPT2 model = GPT2::load(ref.config, file.data(), file.size(), v.format);
    CHECK(std::string(model.weight_store().matrix_type()) == v.held);
    float worst_torch = 0.0f, worst_f32 = 0.0f;
    int64_t agree = 0, positions = 0;
    double kl_sum = 0.0;
    for (const Case& c : ref.cases) {
      CAPTURE(c.name);
      const int64_t L = int64_t(c.ids.size());
      std::vector<float> logits(size_t(L * V)), f32(size_t(L * V));
      model.forward(c.ids.data(), L, logits.data());
      base.forward(c.ids.data(), L, f32.data());
      worst_torch = std::max(worst_torch, max_abs_err(logits, c.logits.data()));
      worst_f32 = std::max(worst_f32, max_abs_err(logits, f32.data()));
      for (int64_t t = 0; t < L; ++t) {
        agree += argmax(logits.data() + t * V, V) == argmax(c.logits.data() + t * V, V);
        kl_sum += kl(c.logits.data() + t * V, logits.data() + t * V, V);
        ++positions;
      }
      // threads change no bit; Logits::Last is the last row (through the matrix-vector kernel)
      model.set_threads(3);
      std::vector<float> threaded(logits.size()), last(static_cast<size_t>(V));
      model.forward(c.ids.data(), L, threaded.data());
      CHECK(threaded == logits);
      model.forward(c.ids.data(), L, last.data(), nullptr, nullptr, nullptr, Logits::Last);
      model.set_threads(1);
      std::vector<float> want(logits.end() - V, logits.end());
      CHECK(max_abs_err(want, last.data()) <= v.tol_last);
    }
    const double mean_kl = kl_sum / double(positions);
    MESSAGE(manifest_name << " " << variant << ": logits vs PyTorch max abs err " << worst_torch << ", vs our F32 path "
                          << worst_f32 << "; mean KL " << mean_kl << " nats; argmax agrees with PyTorch at " << agree
                          << "/" << positions << " positions");
    CHECK(worst_torch <= v.tol_torch);
    CHECK(worst_f32 <= v.tol_torch);
    CHECK(mean_kl <= v.tol_kl);
    CHECK(agree * 100 >= positions * v.agree_pct);
  }
}

// Session logits (the matrix-vector kernel, one token at a time) against the full forward (the
// matrix-matrix kernel) for every position, and greedy generation through both.
void check_decode(const GPT2& model, const std::vector<int32_t>& prompt, int64_t n_new, float tol) {
  const int64_t V = model.config().vocab_size;
  auto cached = generate(model, prompt, n_new, {0.0f, 0}, 0, true);
  auto recomputed = generate(model, prompt, n_new, {0.0f, 0}, 0, false);
  CHECK(cached == recomputed);
  const int64_t L = int64_t(cached.size()) - 1;
  std::vector<float> all(size_t(L * V)), step(static_cast<size_t>(V));
  model.forward(cached.data(), L, all.data());
  GPT2Session s(model);
  float worst = 0.0f;
  s.prefill(cached.data(), 1, step.data());
  for (int64_t t = 0; t < L; ++t) {
    if (t > 0) s.step(cached[size_t(t)], step.data());
    worst =
        std::max(worst, max_abs_err(std::vector<float>(all.begin() + t * V, all.begin() + (t + 1) * V), step.data()));
  }
  CHECK(worst <= tol);
}

}  // namespace

TEST_CASE("gpt2 dtypes: F16, BF16 and int8 weights vs the F32 path and PyTorch (tiny-kjv)") {
  check_dtypes("tiny-kjv.json");
}

TEST_CASE("gpt2 dtypes: F16, BF16 and int8 weights vs the F32 path and PyTorch (random GPT-2, BPE)") {
  check_dtypes("random-gpt2.json");
}

TEST_CASE("gpt2 dtypes: KV-cache decoding == full recompute for every dtype") {
  const Reference ref = reference("tiny-kjv.json");
  const std::vector<uint8_t> f16 = as_half(ref.file, "F16"), bf16 = as_half(ref.file, "BF16");
  const std::string prompt = "In the beginning";
  const std::vector<int32_t> ids(prompt.begin(), prompt.end());
  SUBCASE("F32") { check_decode(GPT2::load(ref.config, ref.file.data(), ref.file.size()), ids, 48, 1e-4f); }
  SUBCASE("F16") { check_decode(GPT2::load(ref.config, f16.data(), f16.size()), ids, 48, 1e-4f); }
  SUBCASE("BF16") { check_decode(GPT2::load(ref.config, bf16.data(), bf16.size()), ids, 48, 1e-4f); }
  // int8 decoding also quantizes each activation vector to int16 (2^-16 of a 32-block's largest)
  SUBCASE("int8") {
    check_decode(GPT2::load(ref.config, ref.file.data(), ref.file.size(), WeightFormat::Int8), ids, 48, 2e-3f);
  }
}

TEST_CASE("gpt2 dtypes: where the bytes are, per load option") {
  TinyConfig tc;
  tc.n_embd = 32, tc.n_head = 4, tc.vocab_size = 70;
  const auto f32 = build_safetensors(random_gpt2_tensors(tc, 9));
  const size_t E = 32, I = 128, V = 70, P = 32, NL = 2;
  const size_t matrix_elements = V * E + P * E + NL * (E * 3 * E + E * E + E * I + I * E);
  const size_t vector_elements = NL * (4 * E + 3 * E + E + I + E) + 2 * E;
  {
    GPT2 m = GPT2::load(tc.json(), f32.data(), f32.size(), WeightFormat::Auto);
    const WeightBytes b = m.weight_store().bytes();
    CHECK(b.file == f32.size());  // read in place
    CHECK(b.converted == 0);
    CHECK(b.vectors == 0);
    CHECK(b.matrices == matrix_elements * 4);
    // F32 matrices: rewritten in panels in the file's own buffer (WeightLoader::load), the
    // gathered-only position table as stored
    CHECK(m.weight_store().weights().h[0].mlp_c_fc.layout == WeightLayout::Panels);
    CHECK(m.weight_store().weights().wte.layout == WeightLayout::Panels);
    CHECK(m.weight_store().weights().wpe.layout == WeightLayout::OutIn);
  }
  {
    GPT2 m = GPT2::load(tc.json(), f32.data(), f32.size(), WeightFormat::F16);
    const WeightBytes b = m.weight_store().bytes();
    // 16-bit Conv1D matrices are rewritten in panels on load, as F32 ones (WeightLoader::load);
    // their values are checked against the F32 path and PyTorch above
    for (const GPT2LayerWeights& L : m.weight_store().weights().h) {
      for (const WeightMatrix* w : {&L.attn_c_attn, &L.attn_c_proj, &L.mlp_c_fc, &L.mlp_c_proj}) {
        CHECK(w->layout == WeightLayout::Panels);
        CHECK(w->type == WeightType::F16);
      }
    }
    CHECK(m.weight_store().weights().h[0].mlp_c_fc.K == int64_t(E));
    CHECK(m.weight_store().weights().h[0].mlp_c_fc.N == int64_t(I));
    CHECK(b.file == 0);  // no longer read as a file
    CHECK(b.matrices == matrix_elements * 2);
    // converted in the file's own buffer, tensor by tensor (each no larger than its source): no
    // second buffer beside the file while loading (the load peaks)
    CHECK(b.converted == f32.size());
    CHECK(b.vectors == vector_elements * 4);
  }
  {
    GPT2 m = GPT2::load(tc.json(), f32.data(), f32.size(), WeightFormat::Int8);
    const WeightBytes b = m.weight_store().bytes();
    CHECK(b.file == 0);
    // Q8: 1 byte + a float per 32 (K padded to 32); wpe stays F32
    const size_t q8 = Q8Layout::of(E, V).bytes() + NL * (Q8Layout::of(E, 3 * E).bytes() + Q8Layout::of(E, E).bytes() +
                                                         Q8Layout::of(E, I).bytes() + Q8Layout::of(I, E).bytes());
    CHECK(b.matrices == q8 + P * E * 4);
    CHECK(b.converted == f32.size());                            // in the file's own buffer
    CHECK(std::string(m.weight_store().matrix_type()) == "Q8");  // the matmuls' (wpe: F32)
  }
  CHECK(std::string(weight_format_name(parse_weight_format("int8"))) == "int8");
  {
    GPT2 m = GPT2::load(tc.json(), f32.data(), f32.size(), WeightFormat::Int4);
    const WeightBytes b = m.weight_store().bytes();
    CHECK(b.file == 0);
    // Q4: half a byte + a half per 32 (K padded to 32, N to 16); wpe stays F32
    const size_t q4 = Q4Layout::of(E, V).bytes() + NL * (Q4Layout::of(E, 3 * E).bytes() + Q4Layout::of(E, E).bytes() +
                                                         Q4Layout::of(E, I).bytes() + Q4Layout::of(I, E).bytes());
    CHECK(b.matrices == q4 + P * E * 4);
    CHECK(b.converted == f32.size());
    CHECK(std::string(m.weight_store().matrix_type()) == "Q4");
  }
  CHECK(std::string(weight_format_name(parse_weight_format("int4"))) == "int4");
  CHECK_THROWS_WITH_AS(parse_weight_format("q4"),
                       "Model::load: weights must be 'auto', 'f32', 'f16', 'int8' or 'int4', got 'q4'",
                       std::invalid_argument);
}

TEST_CASE("gpt2 dtypes: unaligned tensors in the file are copied, not read unaligned") {
  TinyConfig tc;
  auto tensors = random_gpt2_tensors(tc, 4);
  auto base = build_safetensors(tensors);
  // an extra 3-element F16 tensor first shifts every F32 tensor after it by 6 bytes
  tensors.insert(tensors.begin(), StTensor{"extra.odd", "F16", {3}, std::vector<uint8_t>(6, 0)});
  auto shifted = build_safetensors(tensors);
  GPT2 a = GPT2::load(tc.json(), base.data(), base.size());
  GPT2 b = GPT2::load(tc.json(), shifted.data(), shifted.size());
  CHECK(b.weight_store().bytes().file == 0);  // the matrices went to an aligned buffer
  std::vector<int32_t> ids = {1, 2, 3, 4, 5};
  std::vector<float> la(5 * 50), lb(5 * 50);
  a.forward(ids.data(), 5, la.data());
  b.forward(ids.data(), 5, lb.data());
  CHECK(la == lb);
}

TEST_CASE("gpt2 dtypes: weights that do not fit the requested dtype are errors naming the tensor") {
  TinyConfig tc;
  auto load = [&](std::vector<StTensor> ts, WeightFormat f) {
    auto bytes = build_safetensors(ts);
    try {
      GPT2::load(tc.json(), bytes.data(), bytes.size(), f);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto set = [](std::vector<StTensor>& ts, const std::string& name, size_t i, float v) {
    for (auto& t : ts) {
      if (t.name == name) std::memcpy(t.bytes.data() + 4 * i, &v, 4);
    }
  };
  auto big = random_gpt2_tensors(tc, 2);
  set(big, "h.1.mlp.c_fc.weight", 5, 1e5f);
  CHECK(load(big, WeightFormat::Auto).empty());
  CHECK(load(big, WeightFormat::Int8).empty());
  CHECK(load(big, WeightFormat::F16)
            .find("GPT2: tensor \"h.1.mlp.c_fc.weight\": element 5 = 100000.000000 does not fit in F16") == 0);
  auto nan = random_gpt2_tensors(tc, 2);
  set(nan, "h.0.attn.c_attn.weight", 7, NAN);
  CHECK(load(nan, WeightFormat::Int8).find("GPT2: tensor \"h.0.attn.c_attn.weight\": quantize_q8: a weight is nan") ==
        0);
  // an F16 file holding inf: refused as stored (the kernels' widening assumes finite halves)
  auto half = random_gpt2_tensors(tc, 2);
  for (auto& t : half) {
    std::vector<uint8_t> out;
    for (size_t i = 0; i < t.bytes.size() / 4; ++i) {
      float x;
      std::memcpy(&x, t.bytes.data() + 4 * i, 4);
      const uint16_t h = t.name == "wte.weight" && i == 3 ? uint16_t(0x7C00) : halves::f32_to_f16(x);
      out.push_back(uint8_t(h & 0xFF));
      out.push_back(uint8_t(h >> 8));
    }
    t.bytes = out;
    t.dtype = "F16";
  }
  CHECK(load(half, WeightFormat::Auto) == "GPT2: tensor \"wte.weight\": F16 weights hold inf at element 3 (of 800)");
  CHECK(load(half, WeightFormat::F32).empty());  // widened exactly: inf stays inf, nothing is hidden
}
