// Native baseline for the model benchmark: prefill time at prompt lengths 32/128/256 and
// generation tokens/s through the KV cache, for a model folder (config.json + model.safetensors).
//   bench_model_native web/models/tiny-kjv [threads]
// Prints one JSON object (bench/model/run.mjs folds it into its table when present).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "model/gpt2.hpp"

static std::vector<uint8_t> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + p);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

static double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "web/models/tiny-kjv";
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  auto st = slurp(dir + "/model.safetensors");
  auto cfg = slurp(dir + "/config.json");
  qkv::GPT2 model = qkv::GPT2::load(std::string(cfg.begin(), cfg.end()), st.data(), st.size());
  model.set_threads(threads);
  const auto& c = model.config();
  std::printf("{\"runtime\": \"native\", \"threads\": %d, \"prefill_ms\": {", threads);
  bool first = true;
  for (int L : {32, 128, 256}) {
    if (L > c.n_positions) continue;
    std::vector<int32_t> ids(L);
    for (int i = 0; i < L; ++i) ids[i] = (i * 7 + 3) % int(c.vocab_size);
    std::vector<float> logits(size_t(c.vocab_size));
    std::vector<double> times;
    for (int rep = 0; rep < 12; ++rep) {
      qkv::GPT2Session s(model);
      double t0 = now_ms();
      s.prefill(ids.data(), L, logits.data());
      times.push_back(now_ms() - t0);
    }
    std::sort(times.begin(), times.end());
    std::printf("%s\"%d\": %.3f", first ? "" : ", ", L, times[times.size() / 2]);
    first = false;
  }
  // generation: prompt 16 tokens, then n_new greedy steps (median of 5 runs)
  const int n_new = int(std::min<int64_t>(200, c.n_positions - 16));
  std::vector<double> rates;
  for (int rep = 0; rep < 5; ++rep) {
    qkv::GPT2Session s(model);
    std::vector<int32_t> prompt(16, 32);
    std::vector<float> logits(size_t(c.vocab_size));
    s.prefill(prompt.data(), 16, logits.data());
    double t0 = now_ms();
    for (int i = 0; i < n_new; ++i) s.step(qkv::argmax(logits.data(), c.vocab_size), logits.data());
    rates.push_back(n_new / ((now_ms() - t0) / 1000.0));
  }
  std::sort(rates.begin(), rates.end());
  std::printf("}, \"generate_tokens_per_s\": %.1f, \"generated\": %d}\n", rates[rates.size() / 2], n_new);
  return 0;
}
