// The Embind boundary for the GPT-2 model (src/model/): mapping only.
//
// Conventions as in bindings.cpp: arrays travel as byte addresses into the wasm heap (the JS
// layer in web/lib/model/ mallocs and copies); no C++ exception crosses into JS: entry points
// return "" on success or "<kind>|<message>"; the factory returns null and leaves its message
// in modelLastError().
//
// The safetensors file travels once: JS asks for a buffer (modelFileAlloc), streams the file
// into it, and GPT2Model.create takes ownership of it (the model reads the tensors there in
// place, or converts them and frees it; on error it is freed too).
#include <emscripten/bind.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "guarded.hpp"
#include "model/gpt2.hpp"

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

// A buffer for the safetensors file (malloc: GPT2Model.create frees it), or 0 when memory is short.
uintptr_t model_file_alloc(double size) {
  return size >= 1 && size <= 4294967295.0 ? reinterpret_cast<uintptr_t>(std::malloc(static_cast<size_t>(size))) : 0;
}
// For a file buffer that never reached create (a cancelled or failed download).
void model_file_free(uintptr_t bytes) { std::free(ptr<void>(bytes)); }

// Takes ownership of `bytes` (from modelFileAlloc); weights: "auto" | "f32" | "f16" | "int8".
Model* model_create(const std::string& config_json, uintptr_t bytes, double size, const std::string& weights) {
  qkv::MallocBytes file(ptr<uint8_t>(bytes));
  Model* m = nullptr;
  model_last_error = guarded([&] {
    const qkv::WeightFormat format = qkv::parse_weight_format(weights);
    m = new Model(qkv::GPT2::load(config_json, std::move(file), static_cast<size_t>(size), format));
  });
  return m;
}

// ids [L] int32 -> logits [L, V] (last_only: [1, V] of the last position); attentions
// [n_layer, H, L, L] or 0; queries, keys [n_layer, H, L, D] or 0
std::string model_forward(Model& m, uintptr_t ids, int L, uintptr_t logits, uintptr_t attentions, uintptr_t queries,
                          uintptr_t keys, bool last_only) {
  return guarded([&] {
    m.gpt2.run(ptr<const int32_t>(ids), L, 0, nullptr, m.scratch, ptr<float>(logits), !last_only,
               ptr<float>(attentions), ptr<float>(queries), ptr<float>(keys));
  });
}

// Where the model's bytes are (all in the wasm heap).
struct ModelMemory {
  double file = 0, matrices = 0, vectors = 0, converted = 0, kvCache = 0, scratch = 0;
  std::string matrixType;
};

ModelMemory model_memory(const Model& m) {
  const qkv::GPT2WeightBytes w = m.gpt2.weight_store().bytes();
  ModelMemory out;
  out.file = double(w.file);
  out.matrices = double(w.matrices);
  out.vectors = double(w.vectors);
  out.converted = double(w.converted);
  out.kvCache = double(m.session.cache_bytes());
  size_t scratch = 0;
  for (const auto* v : {&m.scratch.x, &m.scratch.xb, &m.scratch.xb2, &m.scratch.qkv, &m.scratch.q, &m.scratch.k,
                        &m.scratch.v, &m.scratch.att, &m.scratch.hb})
    scratch += v->capacity() * sizeof(float);
  out.scratch = double(scratch);
  out.matrixType = m.gpt2.weight_store().matrix_type();
  return out;
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

  function("modelFileAlloc", &model_file_alloc);
  function("modelFileFree", &model_file_free);
  value_object<ModelMemory>("ModelMemory")
      .field("file", &ModelMemory::file)
      .field("matrices", &ModelMemory::matrices)
      .field("vectors", &ModelMemory::vectors)
      .field("converted", &ModelMemory::converted)
      .field("kvCache", &ModelMemory::kvCache)
      .field("scratch", &ModelMemory::scratch)
      .field("matrixType", &ModelMemory::matrixType);

  class_<Model>("GPT2Model")
      .class_function("create", &model_create, allow_raw_pointers())
      .function("forward", &model_forward)
      .function("memory", &model_memory)
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
