// The encoder's other layouts, made from the committed random BERT (tests/data/encoder/random-bert)
// by renaming its tensors: a BertModel without the MLM head (sentence-transformers' layout, no
// "bert." prefix) and a RoBERTa (roberta.*, lm_head.*, positions from padding_idx + 1).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "model/bert.hpp"
#include "test_model_util.hpp"

using namespace qkv;
using namespace qkv::model_testing;

namespace {

const std::string kBert = source_path("tests/data/encoder/random-bert");

// random-bert's tensors, renamed by `rename` (an empty name drops the tensor), as a new file.
template <class F>
std::vector<uint8_t> renamed(F&& rename) {
  const auto bytes = read_bytes(kBert + "/model.safetensors");
  const auto f = safetensors::File::parse(bytes.data(), bytes.size());
  std::vector<StTensor> out;
  for (const auto& t : f.tensors()) {
    const std::string name = rename(t.name);
    if (name.empty()) continue;
    const uint8_t* p = f.bytes(t);
    out.push_back({name, "F32", t.shape, std::vector<uint8_t>(p, p + (t.end - t.begin))});
  }
  return build_safetensors(out);
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

struct Out {
  std::vector<float> logits, hidden;
};

Out run(const Encoder& enc, const std::vector<int32_t>& ids, const std::vector<uint8_t>* mask = nullptr,
        bool logits = true) {
  EncoderScratch s;
  const auto& c = enc.config();
  const int64_t L = int64_t(ids.size());
  Out o;
  o.hidden.resize(size_t(L * c.hidden));
  if (logits) o.logits.resize(size_t(L * c.vocab_size));
  enc.forward(ids.data(), 1, L, nullptr, mask ? mask->data() : nullptr, s, logits ? o.logits.data() : nullptr, nullptr,
              o.hidden.data());
  return o;
}

double max_diff(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

}  // namespace

TEST_CASE("encoder: a BertModel without cls.* loads headless and gives the full model's hidden states") {
  const auto full_bytes = read_bytes(kBert + "/model.safetensors");
  const std::string cfg = read_text(kBert + "/config.json");
  const Encoder full = Encoder::load(cfg, full_bytes.data(), full_bytes.size());
  CHECK(full.has_mlm_head());
  const auto bytes = renamed([](const std::string& n) {
    if (n.rfind("cls.", 0) == 0) return std::string();
    return n.rfind("bert.", 0) == 0 ? n.substr(5) : n;
  });
  const Encoder enc = Encoder::load(cfg, bytes.data(), bytes.size());
  CHECK_FALSE(enc.has_mlm_head());
  const std::vector<int32_t> ids{2, 7, 30, 41, 9, 3};
  const Out a = run(full, ids), b = run(enc, ids, nullptr, false);
  CHECK(max_diff(a.hidden.data(), b.hidden.data(), a.hidden.size()) == 0.0);
  EncoderScratch s;
  std::vector<float> logits(ids.size() * 120);
  CHECK_THROWS_WITH_AS(
      enc.forward(ids.data(), 1, int64_t(ids.size()), nullptr, nullptr, s, logits.data()),
      doctest::Contains("logits asked of a bert checkpoint without a masked-LM head (no cls.predictions.*"),
      std::invalid_argument);
}

TEST_CASE("encoder: RoBERTa counts positions from padding_idx + 1, pad tokens at padding_idx") {
  const std::string bert_cfg = read_text(kBert + "/config.json");
  const auto rob_bytes = renamed([](const std::string& n) {
    std::string m = n;
    if (m.rfind("bert.", 0) == 0) m = "roberta." + m.substr(5);
    if (m.rfind("cls.predictions.", 0) == 0) {
      m = "lm_head." + m.substr(16);
      m = replaced(replaced(m, "transform.LayerNorm", "layer_norm"), "transform.dense", "dense");
    }
    return m.rfind("roberta.pooler.", 0) == 0 ? std::string() : m;
  });
  const std::string rob_cfg = replaced(bert_cfg, "\"bert\"", "\"roberta\"");
  REQUIRE(rob_cfg != bert_cfg);
  const Encoder rob = Encoder::load(replaced(rob_cfg, "\"pad_token_id\": 0", "\"pad_token_id\": 1"), rob_bytes.data(),
                                    rob_bytes.size());
  CHECK(rob.config().roberta());
  CHECK(rob.config().max_tokens() == 38);  // 40 positions, the first two unused
  CHECK(rob.has_mlm_head());

  // a BERT whose position table is RoBERTa's shifted by padding_idx + 1 = 2 gives the same outputs
  const auto bytes = read_bytes(kBert + "/model.safetensors");
  const auto f = safetensors::File::parse(bytes.data(), bytes.size());
  std::vector<StTensor> shifted;
  for (const auto& t : f.tensors()) {
    const uint8_t* p = f.bytes(t);
    StTensor s{t.name, "F32", t.shape, std::vector<uint8_t>(p, p + (t.end - t.begin))};
    if (t.name == "bert.embeddings.position_embeddings.weight") {
      const size_t row = size_t(t.shape[1]) * 4;
      std::vector<uint8_t> moved(s.bytes.size(), 0);
      std::copy(s.bytes.begin() + std::ptrdiff_t(2 * row), s.bytes.end(), moved.begin());
      s.bytes = moved;
    }
    shifted.push_back(s);
  }
  const auto sb = build_safetensors(shifted);
  const Encoder bert = Encoder::load(bert_cfg, sb.data(), sb.size());
  const std::vector<int32_t> ids{0, 7, 30, 41, 9, 2};
  const Out r = run(rob, ids), b = run(bert, ids);
  CHECK(max_diff(r.logits.data(), b.logits.data(), r.logits.size()) == 0.0);

  // left padding (pad id 1, masked): the real tokens keep their positions, so their outputs
  const std::vector<int32_t> padded{1, 1, 1, 0, 7, 30, 41, 9, 2};
  const std::vector<uint8_t> mask{0, 0, 0, 1, 1, 1, 1, 1, 1};
  const Out p = run(rob, padded, &mask);
  CHECK(max_diff(p.logits.data() + 3 * 120, r.logits.data(), r.logits.size()) < 1e-5);

  EncoderScratch s;
  std::vector<int32_t> long_ids(39, 5);
  std::vector<float> logits(39 * 120);
  CHECK_THROWS_WITH_AS(rob.forward(long_ids.data(), 1, 39, nullptr, nullptr, s, logits.data()),
                       doctest::Contains("39 tokens exceed max_position_embeddings - padding_idx - 1 = 38"),
                       std::length_error);
  CHECK_THROWS_WITH_AS(
      Encoder::load(replaced(rob_cfg, "\"pad_token_id\": 0", "\"pad_token_id\": 39"), rob_bytes.data(),
                    rob_bytes.size()),
      doctest::Contains("\"pad_token_id\" (RoBERTa's padding_idx) = 39 must be a token id below vocab_size = 120 and "
                        "below max_position_embeddings - 1 = 39"),
      std::invalid_argument);
}
