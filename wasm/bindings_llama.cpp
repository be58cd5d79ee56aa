// The Embind boundary for Llama-family models (src/model/llama.hpp): mapping only, with the
// conventions of bindings_model.cpp (byte addresses into the wasm heap; "" or "<kind>|<message>"
// from entry points; the factory returns null and leaves its message in llamaLastError()).
// The file buffer comes from modelFileAlloc (bindings_model.cpp) and LlamaModel.create takes it.
// The methods match GPT2Model's, so web/lib/model/decoder.ts drives either.
#include <emscripten/bind.h>

#include <cstdint>
#include <string>

#include "guarded.hpp"
#include "model/llama.hpp"

using namespace emscripten;
using qkv::wasm::guarded;
using qkv::wasm::ptr;

namespace {

std::string llama_last_error;

// A loaded model and its one generation session (KV caches, grown as positions are added).
struct LlamaHandle {
  qkv::Llama llama;
  qkv::LlamaSession session;
  qkv::LlamaScratch scratch;  // forward()'s buffers, kept between calls
  explicit LlamaHandle(qkv::Llama m) : llama(std::move(m)), session(llama) {}
};

// Takes ownership of `bytes` (from modelFileAlloc); weights: "auto" | "f32" | "f16" | "int8".
LlamaHandle* llama_create(const std::string& config_json, uintptr_t bytes, double size, const std::string& weights) {
  qkv::MallocBytes file(ptr<uint8_t>(bytes));
  LlamaHandle* m = nullptr;
  llama_last_error = guarded([&] {
    const qkv::WeightFormat format = qkv::parse_weight_format(weights);
    m = new LlamaHandle(qkv::Llama::load(config_json, std::move(file), static_cast<size_t>(size), format));
  });
  return m;
}

// ids [L] -> logits [L, V] (last_only: [1, V]); attentions [n_layer, H, L, L] or 0;
// queries [n_layer, H, L, D], keys [n_layer, Hkv, L, D] or 0 (after rotation)
std::string llama_forward(LlamaHandle& m, uintptr_t ids, int L, uintptr_t logits, uintptr_t attentions,
                          uintptr_t queries, uintptr_t keys, bool last_only) {
  return guarded([&] {
    m.llama.run(ptr<const int32_t>(ids), L, 0, nullptr, m.scratch, ptr<float>(logits), !last_only,
                ptr<float>(attentions), ptr<float>(queries), ptr<float>(keys));
  });
}

struct LlamaMemory {
  double file = 0, matrices = 0, vectors = 0, converted = 0, kvCache = 0, scratch = 0;
  std::string matrixType;
};

LlamaMemory llama_memory(const LlamaHandle& m) {
  const qkv::GPT2WeightBytes w = m.llama.store().bytes();
  LlamaMemory out;
  out.file = double(w.file);
  out.matrices = double(w.matrices);
  out.vectors = double(w.vectors);
  out.converted = double(w.converted);
  out.kvCache = double(m.session.cache_bytes());
  size_t scratch = 0;
  const qkv::LlamaScratch& s = m.scratch;
  for (const auto* v :
       {&s.x, &s.xb, &s.xb2, &s.q, &s.k, &s.v, &s.qh, &s.kh, &s.vh, &s.att, &s.hb, &s.hb2, &s.cos, &s.sin})
    scratch += v->capacity() * sizeof(float);
  out.scratch = double(scratch);
  out.matrixType = m.llama.store().matrix_type();
  return out;
}

// session: ids [L] at the next positions -> logits of the last [V]; attentions [n_layer, H, L, pos + L] or 0
std::string llama_prefill(LlamaHandle& m, uintptr_t ids, int L, uintptr_t logits, uintptr_t attentions) {
  return guarded([&] { m.session.prefill(ptr<const int32_t>(ids), L, ptr<float>(logits), ptr<float>(attentions)); });
}

// session: one token -> logits [V]; attentions [n_layer, H, pos + 1] or 0
std::string llama_step(LlamaHandle& m, int id, uintptr_t logits, uintptr_t attentions) {
  return guarded([&] { m.session.step(id, ptr<float>(logits), ptr<float>(attentions)); });
}

void llama_reset(LlamaHandle& m) { m.session.reset(); }
int llama_position(const LlamaHandle& m) { return static_cast<int>(m.session.position()); }
void llama_set_threads(LlamaHandle& m, int threads) { m.llama.set_threads(threads); }
int llama_threads(const LlamaHandle& m) { return m.llama.threads(); }
std::string get_llama_last_error() { return llama_last_error; }

}  // namespace

EMSCRIPTEN_BINDINGS(qkv_llama) {
  function("llamaLastError", &get_llama_last_error);
  value_object<LlamaMemory>("LlamaMemory")
      .field("file", &LlamaMemory::file)
      .field("matrices", &LlamaMemory::matrices)
      .field("vectors", &LlamaMemory::vectors)
      .field("converted", &LlamaMemory::converted)
      .field("kvCache", &LlamaMemory::kvCache)
      .field("scratch", &LlamaMemory::scratch)
      .field("matrixType", &LlamaMemory::matrixType);

  class_<LlamaHandle>("LlamaModel")
      .class_function("create", &llama_create, allow_raw_pointers())
      .function("forward", &llama_forward)
      .function("memory", &llama_memory)
      .function("prefill", &llama_prefill)
      .function("step", &llama_step)
      .function("reset", &llama_reset)
      .function("position", &llama_position)
      .function("setThreads", &llama_set_threads)
      .function("threads", &llama_threads);
}
