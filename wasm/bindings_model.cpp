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
#include <string>

#include "decoder_bindings.hpp"
#include "guarded.hpp"
#include "heap_alloc.hpp"
#include "model/gpt2.hpp"

using namespace emscripten;
using qkv::wasm::guarded;
using qkv::wasm::ptr;

namespace {

std::string model_last_error;

// A loaded model, its one generation session (KV caches) and forward()'s buffers.
using Model = qkv::wasm::Decoder<qkv::GPT2, qkv::GPT2Session, qkv::GPT2Scratch, model_last_error>;

// A buffer for the safetensors file (malloc'd, over 2 GB too: GPT2Model.create frees it), or 0
// when memory is short.
uintptr_t model_file_alloc(double size) {
  return size >= 1 && size <= 4294967295.0
             ? reinterpret_cast<uintptr_t>(qkv::wasm::heap_alloc(static_cast<size_t>(size)))
             : 0;
}
// For a file buffer that never reached create (a cancelled or failed download).
void model_file_free(uintptr_t bytes) { std::free(ptr<void>(bytes)); }

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
  value_object<qkv::wasm::DecoderMemory>("ModelMemory")
      .field("file", &qkv::wasm::DecoderMemory::file)
      .field("matrices", &qkv::wasm::DecoderMemory::matrices)
      .field("vectors", &qkv::wasm::DecoderMemory::vectors)
      .field("converted", &qkv::wasm::DecoderMemory::converted)
      .field("kvCache", &qkv::wasm::DecoderMemory::kvCache)
      .field("scratch", &qkv::wasm::DecoderMemory::scratch)
      .field("matrixType", &qkv::wasm::DecoderMemory::matrixType);
  qkv::wasm::bind_decoder<Model>("GPT2Model");

  class_<Sampler>("Sampler")
      .class_function("create", &sampler_create, allow_raw_pointers())
      .function("sample", &sampler_sample);
}
