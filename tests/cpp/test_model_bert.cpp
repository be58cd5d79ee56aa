// BERT / DistilBERT encoders on qkv's kernels against the committed float64 PyTorch reference
// (tests/data/encoder/encoder.json, written by tools/model/make_bert_reference.py): logits,
// attentions, the padding mask, thread-count independence, fill-mask on the trained model,
// and bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "model/bert.hpp"
#include "model/json.hpp"
#include "test_model_util.hpp"

using namespace qkv;
using namespace qkv::model_testing;

namespace {

const std::string kEnc = source_path("tests/data/encoder");

Encoder load_dir(const std::string& dir) {
  const auto bytes = read_bytes(dir + "/model.safetensors");
  return Encoder::load(read_text(dir + "/config.json"), bytes.data(), bytes.size());
}

std::vector<float> read_floats(const std::string& path) {
  const auto b = read_bytes(path);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

template <class T>
std::vector<T> flat(const nlohmann::json& rows) {
  std::vector<T> out;
  for (const auto& r : rows)
    for (const auto& v : r) out.push_back(v.get<T>());
  return out;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

struct Run {
  std::vector<float> logits, attentions;
};

Run run_case(const Encoder& enc, const nlohmann::json& c, int threads = 1, bool with_mask = true) {
  const auto ids = flat<int32_t>(c["ids"]);
  const auto types = flat<int32_t>(c["token_type_ids"]);
  const auto mask = flat<uint8_t>(c["attention_mask"]);
  const int64_t B = int64_t(c["ids"].size()), L = int64_t(ids.size()) / B;
  const auto& cfg = enc.config();
  Run r;
  r.logits.resize(size_t(B * L * cfg.vocab_size));
  r.attentions.resize(size_t(cfg.layers * B * cfg.heads * L * L));
  EncoderScratch s;
  Encoder& e = const_cast<Encoder&>(enc);
  e.set_threads(threads);
  e.forward(ids.data(), B, L, types.data(), with_mask ? mask.data() : nullptr, s, r.logits.data(), r.attentions.data());
  return r;
}

}  // namespace

TEST_CASE("encoder: BERT and DistilBERT match the float64 PyTorch reference (logits <= 1e-4, attentions <= 1e-5)") {
  const auto manifest = json::parse(read_text(kEnc + "/encoder.json"));
  for (const char* name : {"random-bert", "random-distilbert"}) {
    const auto& m = manifest["models"][name];
    const Encoder enc = load_dir(kEnc + "/" + m["dir"].get<std::string>());
    CHECK(std::string(enc.config().name()) == (std::string(name) == "random-bert" ? "bert" : "distilbert"));
    for (const char* cname : {"single", "padded"}) {
      CAPTURE(name);
      CAPTURE(cname);
      const auto& c = m["cases"][cname];
      const Run r = run_case(enc, c);
      const double dl = max_diff(r.logits, read_floats(kEnc + "/" + c["logits"]["file"].get<std::string>()));
      const double da = max_diff(r.attentions, read_floats(kEnc + "/" + c["attentions"]["file"].get<std::string>()));
      MESSAGE(std::string(name) << " " << std::string(cname) << ": max |dlogits| " << dl << ", max |dattentions| "
                                << da);
      CHECK(dl <= 1e-4);
      CHECK(da <= 1e-5);
      // the threads split the matmul columns and attention's heads: the same bits
      const Run r2 = run_case(enc, c, 2);
      CHECK(r2.logits == r.logits);
      CHECK(r2.attentions == r.attentions);
    }
  }
}

TEST_CASE("encoder: the padding mask makes padded keys invisible") {
  const auto manifest = json::parse(read_text(kEnc + "/encoder.json"));
  const auto& m = manifest["models"]["random-bert"];
  const Encoder enc = load_dir(kEnc + "/random-bert");
  const auto& c = m["cases"]["padded"];
  const Run r = run_case(enc, c);
  const int64_t L = int64_t(c["ids"][0].size()), H = enc.config().heads, V = enc.config().vocab_size;
  int64_t L2 = 0;
  for (const auto& v : c["attention_mask"][1]) L2 += v.get<int>();
  REQUIRE(L2 < L);
  // sequence 1's weights on its padded keys are exactly 0 in every layer and head
  for (int64_t l = 0; l < enc.config().layers; ++l)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = L2; j < L; ++j) CHECK(r.attentions[size_t((((l * 2 + 1) * H + h) * L + i) * L + j)] == 0.0f);
  // and its real tokens' logits equal those of the same tokens run alone, unpadded
  std::vector<int32_t> ids, types;
  for (int64_t i = 0; i < L2; ++i) {
    ids.push_back(c["ids"][1][size_t(i)].get<int32_t>());
    types.push_back(c["token_type_ids"][1][size_t(i)].get<int32_t>());
  }
  std::vector<float> alone(size_t(L2 * V));
  EncoderScratch s;
  enc.forward(ids.data(), 1, L2, types.data(), nullptr, s, alone.data());
  std::vector<float> padded(r.logits.begin() + L * V, r.logits.begin() + L * V + L2 * V);
  CHECK(max_diff(alone, padded) <= 1e-5);
  // without the mask the padded keys change the real tokens' logits (the test can fail)
  const Run unmasked = run_case(enc, c, 1, false);
  std::vector<float> seen(unmasked.logits.begin() + L * V, unmasked.logits.begin() + L * V + L2 * V);
  CHECK(max_diff(alone, seen) > 1e-3);
}

TEST_CASE("encoder: fill-mask top-1 on the trained model is what the model in Python says") {
  const auto manifest = json::parse(read_text(kEnc + "/encoder.json"));
  REQUIRE(manifest.contains("fill_mask"));  // make_bert_reference.py --trained writes it
  const auto& fm = manifest["fill_mask"];
  const Encoder enc = load_dir(kEnc + "/" + fm["model_dir"].get<std::string>());
  const int64_t V = enc.config().vocab_size;
  for (const auto& c : fm["cases"]) {
    CAPTURE(c["text"].get<std::string>());
    std::vector<int32_t> ids;
    for (const auto& v : c["ids"]) ids.push_back(v.get<int32_t>());
    const int64_t L = int64_t(ids.size()), at = c["mask_index"].get<int64_t>();
    std::vector<float> logits(size_t(L * V));
    EncoderScratch s;
    enc.forward(ids.data(), 1, L, nullptr, nullptr, s, logits.data());
    const float* row = logits.data() + at * V;
    const int64_t top = std::max_element(row, row + V) - row;
    CHECK(top == c["top"][0]["token_id"].get<int64_t>());
    // its probability as the reference's
    double mx = row[top], sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
    CHECK(std::fabs(1.0 / sum - c["top"][0]["score"].get<double>()) < 1e-4);
  }
}

TEST_CASE("encoder: bad input is a clear error") {
  const Encoder enc = load_dir(kEnc + "/random-bert");
  EncoderScratch s;
  std::vector<float> logits(size_t(64 * 120));
  const int32_t bad_id[2] = {3, 120};
  CHECK_THROWS_WITH_AS(enc.forward(bad_id, 1, 2, nullptr, nullptr, s, logits.data()),
                       doctest::Contains("ids[1] = 120 is out of range [0, 120)"), std::invalid_argument);
  const int32_t ids[2] = {3, 4}, types[2] = {0, 2};
  CHECK_THROWS_WITH_AS(enc.forward(ids, 1, 2, types, nullptr, s, logits.data()),
                       doctest::Contains("tokenTypeIds[1] = 2"), std::invalid_argument);
  const uint8_t none[2] = {0, 0};
  CHECK_THROWS_WITH_AS(enc.forward(ids, 1, 2, nullptr, none, s, logits.data()),
                       doctest::Contains("attentionMask row 0 hides every token"), std::invalid_argument);
  std::vector<int32_t> long_ids(41, 5);
  CHECK_THROWS_WITH_AS(enc.forward(long_ids.data(), 1, 41, nullptr, nullptr, s, logits.data()),
                       doctest::Contains("41 tokens exceed max_position_embeddings = 40"), std::length_error);
  const auto bytes = read_bytes(kEnc + "/random-bert/model.safetensors");
  std::string cfg = read_text(kEnc + "/random-bert/config.json");
  CHECK_THROWS_WITH_AS(
      Encoder::load(std::string(cfg).replace(cfg.find("\"gelu\""), 6, "\"relu\""), bytes.data(), bytes.size()),
      doctest::Contains("\"hidden_act\" must be \"gelu\""), std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      Encoder::load(std::string(cfg).replace(cfg.find("\"vocab_size\": 120"), 17, "\"vocab_size\": 121"), bytes.data(),
                    bytes.size()),
      doctest::Contains("word_embeddings.weight\" has shape [120, 64], but the config needs [121, 64]"),
      std::invalid_argument);
  CHECK_THROWS_WITH_AS(Encoder::load(R"({"model_type": "gpt2"})", bytes.data(), bytes.size()),
                       doctest::Contains("model_type must be \"bert\", \"distilbert\", \"roberta\" or \"xlm-roberta\""),
                       std::invalid_argument);
}
