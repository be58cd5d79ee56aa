// The BART encoder-decoder (src/model/seq2seq.*) against the committed PyTorch float64
// reference (tests/data/seq2seq/*.json, written by tools/seq2seq/make_reference.py): logits
// and all three kinds of attention; KV-cached generation against full recompute; greedy
// output against Python's; the trained number speller's cross-attention alignment; bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "model/json.hpp"
#include "model/seq2seq.hpp"
#include "test_model_util.hpp"

using namespace qkv;
using namespace qkv::model_testing;

namespace {

struct Manifest {
  nlohmann::json m;
  Bart model;
};

Bart load_bart(const std::string& dir) {
  const auto st = read_bytes(dir + "/model.safetensors");
  return Bart::load(read_text(dir + "/config.json"), st.data(), st.size());
}

nlohmann::json manifest(const std::string& name) {
  const std::string path = source_path("tests/data/seq2seq/" + name);
  REQUIRE_MESSAGE(file_exists(path), "missing " << path << " (tools/seq2seq/make_reference.py writes it)");
  return json::parse(read_text(path));
}

std::vector<float> read_bin(const nlohmann::json& entry) {
  const auto b = read_bytes(source_path("tests/data/seq2seq/" + entry.at("file").get<std::string>()));
  size_t want = 1;
  for (const auto& d : entry.at("shape")) want *= d.get<size_t>();
  REQUIRE(b.size() == want * 4);
  std::vector<float> v(want);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
  }
  return worst;
}

// forward() on every case of a manifest against the reference: logits <= 1e-4, attentions <= 1e-5
void check_cases(const std::string& name, int threads) {
  const nlohmann::json m = manifest(name);
  Bart model = load_bart(source_path(m.at("model_dir").get<std::string>()));
  model.set_threads(threads);
  const BartConfig& c = model.config();
  REQUIRE(m.at("cases").size() >= 2);
  for (const auto& cs : m.at("cases")) {
    const auto src = cs.at("input_ids").get<std::vector<int32_t>>();
    const auto tgt = cs.at("decoder_input_ids").get<std::vector<int32_t>>();
    const int64_t Ls = int64_t(src.size()), Lt = int64_t(tgt.size());
    std::vector<float> logits(size_t(Lt * c.vocab_size)), enc(size_t(c.encoder_layers * c.encoder_heads * Ls * Ls)),
        dec(size_t(c.decoder_layers * c.decoder_heads * Lt * Lt)),
        cross(size_t(c.decoder_layers * c.decoder_heads * Lt * Ls));
    model.forward(src.data(), Ls, tgt.data(), Lt, logits.data(), enc.data(), dec.data(), cross.data());
    INFO(name << " case " << cs.at("name").get<std::string>() << ", threads " << threads);
    const double el = max_abs_diff(logits, read_bin(cs.at("logits")));
    const double ee = max_abs_diff(enc, read_bin(cs.at("encoder_attentions")));
    const double ed = max_abs_diff(dec, read_bin(cs.at("decoder_attentions")));
    const double ec = max_abs_diff(cross, read_bin(cs.at("cross_attentions")));
    MESSAGE(name << " " << cs.at("name").get<std::string>() << ": max abs err logits " << el << ", encoder " << ee
                 << ", decoder " << ed << ", cross " << ec);
    CHECK(el <= 1e-4);
    CHECK(ee <= 1e-5);
    CHECK(ed <= 1e-5);
    CHECK(ec <= 1e-5);
  }
}

}  // namespace

TEST_CASE("Bart forward matches the PyTorch reference (random checkpoint: 1 + 3 layers, 2 / 4 heads)") {
  check_cases("random-bart.json", 1);
  check_cases("random-bart.json", 3);
}

TEST_CASE("Bart forward matches the PyTorch reference (the trained number speller)") {
  check_cases("tiny-numbers.json", 1);
}

TEST_CASE("Bart forward: the same bits on 1 and 4 threads") {
  Bart model = load_bart(source_path("tests/data/seq2seq/random-bart"));
  const BartConfig& c = model.config();
  std::vector<int32_t> src(20), tgt(24);
  for (size_t i = 0; i < src.size(); ++i) src[i] = int32_t((i * 7 + 3) % size_t(c.vocab_size));
  for (size_t i = 0; i < tgt.size(); ++i) tgt[i] = int32_t((i * 11 + 2) % size_t(c.vocab_size));
  auto run = [&](int threads) {
    model.set_threads(threads);
    std::vector<float> out(size_t(24 * c.vocab_size + c.decoder_layers * c.decoder_heads * 24 * (24 + 20)));
    float* cross = out.data() + 24 * c.vocab_size;
    float* dec = cross + c.decoder_layers * c.decoder_heads * 24 * 20;
    model.forward(src.data(), 20, tgt.data(), 24, out.data(), nullptr, dec, cross);
    return out;
  };
  const auto one = run(1), four = run(4);
  CHECK(std::memcmp(one.data(), four.data(), one.size() * sizeof(float)) == 0);
}

TEST_CASE("Bart greedy generation equals Python's, with and without the KV cache") {
  for (const char* name : {"random-bart.json", "tiny-numbers.json"}) {
    const nlohmann::json m = manifest(name);
    Bart model = load_bart(source_path(m.at("model_dir").get<std::string>()));
    REQUIRE(m.at("greedy").size() >= 2);
    for (const auto& g : m.at("greedy")) {
      const auto src = g.at("input_ids").get<std::vector<int32_t>>();
      const auto want = g.at("output_ids").get<std::vector<int32_t>>();
      INFO(name << " input of " << src.size() << " tokens");
      const SamplingOptions greedy{0.0f, 0};
      CHECK(generate_seq2seq(model, src, int64_t(want.size()), greedy, 0, true) == want);
      CHECK(generate_seq2seq(model, src, int64_t(want.size()), greedy, 0, false) == want);
    }
  }
}

TEST_CASE("Bart sampled generation: the KV-cached session equals full recompute, bit for bit") {
  Bart model = load_bart(source_path("tests/data/seq2seq/random-bart"));
  const std::vector<int32_t> src{5, 17, 3, 44, 9, 21, 30};
  for (uint64_t seed : {1u, 2u, 3u}) {
    const SamplingOptions opt{1.3f, 0};
    const auto a = generate_seq2seq(model, src, 20, opt, seed, true);
    const auto b = generate_seq2seq(model, src, 20, opt, seed, false);
    CHECK(a == b);
    CHECK(a.size() >= 2);
  }
  // the session's per-step attentions equal the last rows of a full forward over the same tokens
  const BartConfig& c = model.config();
  const int64_t Ls = int64_t(src.size()), H = c.decoder_heads, NL = c.decoder_layers;
  std::vector<int32_t> tgt{c.decoder_start_token_id, 7, 12, 40, 1, 8};
  const int64_t Lt = int64_t(tgt.size());
  std::vector<float> logits(size_t(Lt * c.vocab_size)), dec(size_t(NL * H * Lt * Lt)), cross(size_t(NL * H * Lt * Ls));
  model.forward(src.data(), Ls, tgt.data(), Lt, logits.data(), nullptr, dec.data(), cross.data());
  BartSession s(model, src.data(), Ls);
  std::vector<float> lg(size_t(c.vocab_size)), sa(size_t(NL * H * Lt)), ca(size_t(NL * H * Ls));
  for (int64_t t = 0; t < Lt; ++t) {
    s.step(tgt[size_t(t)], lg.data(), sa.data(), ca.data());
    double worst = 0.0;
    for (int64_t v = 0; v < c.vocab_size; ++v)
      worst = std::max(worst, double(std::fabs(lg[size_t(v)] - logits[size_t(t * c.vocab_size + v)])));
    CHECK(worst <= 1e-4);
    for (int64_t l = 0; l < NL; ++l) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t j = 0; j <= t; ++j) {
          CHECK(std::fabs(sa[size_t((l * H + h) * (t + 1) + j)] - dec[size_t(((l * H + h) * Lt + t) * Lt + j)]) <=
                1e-5);
        }
        for (int64_t j = 0; j < Ls; ++j) {
          CHECK(std::fabs(ca[size_t((l * H + h) * Ls + j)] - cross[size_t(((l * H + h) * Lt + t) * Ls + j)]) <= 1e-5);
        }
      }
    }
  }
  CHECK(s.position() == Lt);
}

TEST_CASE("Bart: the number speller's cross-attention on a digit word peaks on that digit") {
  // "1907" -> [CLS] 1 ##9 ##0 ##7 [SEP]; the words naming one digit ("one" = thousands, "nine" =
  // hundreds, "seven" = units) should look, averaged over the last decoder layer's heads, at
  // the encoder position of their digit: positions 1, 2 and 4.
  Bart model = load_bart(source_path("web/models/tiny-numbers"));
  const BartConfig& c = model.config();
  std::vector<std::string> vocab;  // vocab.txt: one token per line, id = line number
  {
    const std::string text = read_text(source_path("web/models/tiny-numbers/vocab.txt"));
    for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
      vocab.push_back(text.substr(at, nl - at));
  }
  auto id = [&](const std::string& token) {
    const auto it = std::find(vocab.begin(), vocab.end(), token);
    REQUIRE(it != vocab.end());
    return int32_t(it - vocab.begin());
  };
  const std::vector<int32_t> src{id("[CLS]"), id("1"), id("##9"), id("##0"), id("##7"), id("[SEP]")};
  const int64_t Ls = int64_t(src.size()), H = c.decoder_heads;
  BartSession s(model, src.data(), Ls);
  std::vector<float> logits(size_t(c.vocab_size)), cross(size_t(c.decoder_layers * H * Ls));
  const std::vector<std::pair<int32_t, int64_t>> want{{id("one"), 1}, {id("nine"), 2}, {id("seven"), 4}};
  int32_t token = c.decoder_start_token_id;
  std::vector<int32_t> out;
  size_t checked = 0;
  for (int step = 0; step < 8 && token != c.eos_token_id; ++step) {
    s.step(token, logits.data(), nullptr, cross.data());
    token = argmax(logits.data(), c.vocab_size);
    out.push_back(token);
    // the query that *produces* a word is the step whose logits chose it
    for (const auto& [word, pos] : want) {
      if (token != word) continue;
      std::vector<double> mean(size_t(Ls), 0.0);
      const int64_t l = c.decoder_layers - 1;
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t j = 0; j < Ls; ++j) mean[size_t(j)] += cross[size_t((l * H + h) * Ls + j)] / double(H);
      }
      const int64_t peak = int64_t(std::max_element(mean.begin(), mean.end()) - mean.begin());
      INFO("word id " << word << " at step " << step);
      CHECK(peak == pos);
      ++checked;
    }
  }
  CHECK(out == std::vector<int32_t>{id("one"), id("thousand"), id("nine"), id("hundred"), id("seven"), id("[SEP]")});
  CHECK(checked == 3);
}

TEST_CASE("Bart rejects bad input with errors naming the function and the argument") {
  Bart model = load_bart(source_path("tests/data/seq2seq/random-bart"));
  const BartConfig& c = model.config();
  std::vector<float> logits(size_t(64 * c.vocab_size));
  const std::vector<int32_t> ok{1, 2, 3};
  const std::vector<int32_t> bad{1, 50, 3};
  CHECK(contains(error_of<std::invalid_argument>([&] { model.forward(bad.data(), 3, ok.data(), 3, logits.data()); }),
                 "Bart::forward: input ids[1] = 50 is out of range [0, 50)"));
  CHECK(contains(error_of<std::invalid_argument>([&] { model.forward(ok.data(), 3, bad.data(), 3, logits.data()); }),
                 "decoder input ids[1] = 50"));
  CHECK(contains(error_of<std::invalid_argument>([&] { model.forward(ok.data(), 0, ok.data(), 3, logits.data()); }),
                 "input ids is empty"));
  std::vector<int32_t> long_ids(25, 1);
  CHECK(contains(error_of<std::length_error>([&] { model.forward(long_ids.data(), 25, ok.data(), 3, logits.data()); }),
                 "past max_position_embeddings = 24"));
  BartSession s(model, ok.data(), 3);
  for (int i = 0; i < 24; ++i) s.step(1, logits.data());
  CHECK(contains(error_of<std::length_error>([&] { s.step(1, logits.data()); }), "BartSession::step: position 24"));

  const std::string config = read_text(source_path("tests/data/seq2seq/random-bart/config.json"));
  const auto st = read_bytes(source_path("tests/data/seq2seq/random-bart/model.safetensors"));
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = config;
    const size_t at = t.find(from);
    REQUIRE(at != std::string::npos);
    return t.replace(at, from.size(), to);
  };
  CHECK(contains(error_of<std::invalid_argument>([&] { Bart::load(with("\"bart\"", "\"t5\""), st.data(), st.size()); }),
                 "BartConfig: model_type must be \"bart\""));
  CHECK(contains(error_of<std::invalid_argument>(
                     [&] { Bart::load(with("\"d_model\": 32", "\"d_model\": 33"), st.data(), st.size()); }),
                 "d_model (33) must be divisible"));
  CHECK(
      contains(error_of<std::invalid_argument>([&] {
                 Bart::load(with("\"decoder_ffn_dim\": 80", "\"decoder_ffn_dim\": 81"), st.data(), st.size());
               }),
               "Bart: tensor \"model.decoder.layers.0.fc1.weight\" has shape [80, 32], but the config needs [81, 32]"));
  // no decoder_start_token_id: BART's default, eos_token_id
  const std::string no_start = with("\"decoder_start_token_id\": 2", "\"unrelated\": 2");
  const std::string eos1 = no_start.substr(0, no_start.find("\"eos_token_id\": 2")) + "\"eos_token_id\": 1" +
                           no_start.substr(no_start.find("\"eos_token_id\": 2") + 17);
  CHECK(Bart::load(eos1, st.data(), st.size()).config().decoder_start_token_id == 1);
  CHECK(contains(error_of<std::invalid_argument>(
                     [&] { Bart::load(with("\"eos_token_id\": 2", "\"eos_token_id\": 99"), st.data(), st.size()); }),
                 "\"eos_token_id\" = 99 is out of range"));
}
