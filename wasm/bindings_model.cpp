// The Embind boundary for the GPT-2 model (src/model/): mapping only.
//
// Conventions as in bindings.cpp: arrays travel as byte addresses into the wasm heap (the JS
// layer in web/lib/model/ mallocs and copies); no C++ exception crosses into JS: entry points
// return "" on success or "<kind>|<message>"; the factory returns null and leaves its message
// in modelLastError().
#include <emscripten/bind.h>

#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "model/gpt2.hpp"
#include "guarded.hpp"

using namespace emscripten;
using qkv::wasm::guarded;
using qkv::wasm::ptr;

namespace {

std::string model_last_error;

// A loaded model and its one generation session (KV caches).
struct Model {
  qkv::GPT2 gpt2;
  qkv::GPT2Session session;
  qkv::GPT2Scratch scratch;  // forward()'s buffers, kept between calls
  explicit Model(qkv::GPT2 m) : gpt2(std::move(m)), session(gpt2) {}
};

Model* model_create(const std::string& config_json, uintptr_t bytes, double size) {
  Model* m = nullptr;
  model_last_error = guarded([&] {
    m = new Model(qkv::GPT2::load(config_json, ptr<const uint8_t>(bytes), static_cast<size_t>(size)));
  });
  return m;
}

// ids [L] int32 -> logits [L, V]; attentions [n_layer, H, L, L] or 0; queries, keys [n_layer, H, L, D] or 0
std::string model_forward(Model& m, uintptr_t ids, int L, uintptr_t logits, uintptr_t attentions, uintptr_t queries,
                          uintptr_t keys) {
  return guarded([&] {
    m.gpt2.run(ptr<const int32_t>(ids), L, 0, nullptr, m.scratch, ptr<float>(logits), true, ptr<float>(attentions),
               ptr<float>(queries), ptr<float>(keys));
  });
}

// session: ids [L] at the next positions -> logits of the last [V]; attentions [n_layer, H, L, pos + L] or 0
std::string model_prefill(Model& m, uintptr_t ids, int L, uintptr_t logits, uintptr_t attentions) {
  return guarded([&] { m.session.prefill(ptr<const int32_t>(ids), L, ptr<float>(logits), ptr<float>(attentions)); });
}

// session: one token -> logits [V]; attentions [n_layer, H, pos + 1] or 0
std::string model_step(Model& m, int id, uintptr_t logits, uintptr_t attentions) {
  return guarded([&] { m.session.step(id, ptr<float>(logits), ptr<float>(attentions)); });
}

void model_reset(Model& m) { m.session.reset(); }
int model_position(const Model& m) { return static_cast<int>(m.session.position()); }
void model_set_threads(Model& m, int threads) { m.gpt2.set_threads(threads); }
int model_threads(const Model& m) { return m.gpt2.threads(); }

// A seeded sampler (PCG32): greedy when temperature <= 0, else top-k (0 = all) softmax sampling.
struct Sampler {
  qkv::Rng rng;
  explicit Sampler(double seed) : rng(static_cast<uint64_t>(seed)) {}
};

Sampler* sampler_create(double seed) { return new Sampler(seed); }

// Returns the token, or -1 with the message in modelLastError().
int sampler_sample(Sampler& s, uintptr_t logits, int n, double temperature, int top_k) {
  int token = -1;
  model_last_error = guarded([&] {
    qkv::SamplingOptions o;
    o.temperature = static_cast<float>(temperature);
    o.top_k = top_k;
    token = qkv::sample(ptr<const float>(logits), n, o, s.rng);
  });
  return token;
}

std::string get_model_last_error() { return model_last_error; }

}  // namespace

EMSCRIPTEN_BINDINGS(qkv_model) {
  function("modelLastError", &get_model_last_error);

  class_<Model>("GPT2Model")
      .class_function("create", &model_create, allow_raw_pointers())
      .function("forward", &model_forward)
      .function("prefill", &model_prefill)
      .function("step", &model_step)
      .function("reset", &model_reset)
      .function("position", &model_position)
      .function("setThreads", &model_set_threads)
      .function("threads", &model_threads);

  class_<Sampler>("Sampler")
      .class_function("create", &sampler_create, allow_raw_pointers())
      .function("sample", &sampler_sample);
}
