// The Embind mapping GPT2Model (bindings_model.cpp) and LlamaModel (bindings_llama.cpp) share:
// the two decoders have the same methods, so web/lib/model/decoder.ts drives either. Mapping
// only, with the conventions of bindings_model.cpp (byte addresses into the wasm heap; "" or
// "<kind>|<message>" from entry points; the factory returns null and leaves its message in
// the model's last-error string).
#pragma once

#include <emscripten/bind.h>

#include <cstdint>
#include <string>
#include <utility>

#include "guarded.hpp"
#include "interventions_arg.hpp"
#include "model/decoder_stream.hpp"
#include "model/weight_loader.hpp"
#include "stream_load.hpp"

namespace qkv::wasm {

// Where a decoder's bytes are (all in the wasm heap); registered once, in bindings_model.cpp.
struct DecoderMemory {
  double file = 0, matrices = 0, vectors = 0, converted = 0, kvCache = 0, scratch = 0;
  std::string matrixType;
};

// A loaded model (qkv::GPT2, qkv::Llama), its one generation session (KV caches) and
// forward()'s buffers, kept between calls. create() leaves its message in last_error.
template <class Model, class Session, class Scratch, std::string& error>
struct Decoder {
  Model model;
  Session session;
  Scratch scratch;
  explicit Decoder(Model m) : model(std::move(m)), session(model) {}
  static constexpr std::string& last_error = error;

  // Takes ownership of `bytes` (from modelFileAlloc); weights: "auto" | "f32" | "f16" | "int8" | "int4".
  static Decoder* create(const std::string& config_json, uintptr_t bytes, double size, const std::string& weights) {
    MallocBytes file(ptr<uint8_t>(bytes));
    Decoder* d = nullptr;
    last_error = guarded([&] {
      const WeightFormat format = parse_weight_format(weights);
      d = new Decoder(Model::load(config_json, std::move(file), static_cast<size_t>(size), format));
    });
    return d;
  }

  // ids [L] int32 -> logits [L, V] (last_only: [1, V] of the last position); attentions
  // [n_layer, H, L, L] or 0; queries [n_layer, H, L, D], keys [n_layer, Hkv, L, D] or 0; iv:
  // head interventions (interventions_arg.hpp)
  std::string forward(uintptr_t ids, int L, uintptr_t logits, uintptr_t attentions, uintptr_t queries, uintptr_t keys,
                      bool last_only, const InterventionsArg& iv) {
    return guarded([&] {
      const Interventions i(iv);
      model.run(ptr<const int32_t>(ids), L, 0, nullptr, scratch, ptr<float>(logits), !last_only, ptr<float>(attentions),
                ptr<float>(queries), ptr<float>(keys), i.ptr);
    });
  }

  DecoderMemory memory() const {
    const WeightBytes w = model.weight_store().bytes();
    DecoderMemory out;
    out.file = double(w.file);
    out.matrices = double(w.matrices);
    out.vectors = double(w.vectors);
    out.converted = double(w.converted);
    out.kvCache = double(session.cache_bytes());
    out.scratch = double(scratch.bytes());
    out.matrixType = model.weight_store().matrix_type();
    return out;
  }

  // session: ids [L] at the next positions -> logits of the last [V] (all_logits: [L, V]);
  // attentions [n_layer, H, L, pos + L] or 0; queries [n_layer, H, L, D], keys
  // [n_layer, Hkv, L, D] of these L tokens or 0; iv: head interventions for these rows
  std::string prefill(uintptr_t ids, int L, uintptr_t logits, uintptr_t attentions, uintptr_t queries, uintptr_t keys,
                      bool all_logits, const InterventionsArg& iv) {
    return guarded([&] {
      const Interventions i(iv);
      session.prefill(ptr<const int32_t>(ids), L, ptr<float>(logits), ptr<float>(attentions), ptr<float>(queries),
                      ptr<float>(keys), all_logits, i.ptr);
    });
  }

  // session: one token -> logits [V]; attentions [n_layer, H, pos + 1] or 0; iv: a head mask
  std::string step(int id, uintptr_t logits, uintptr_t attentions, const InterventionsArg& iv) {
    return guarded([&] {
      const Interventions i(iv);
      session.step(id, ptr<float>(logits), ptr<float>(attentions), i.ptr);
    });
  }

  // session: room for `positions` in the KV caches now (generate: prompt + maxNewTokens), so they are
  // allocated once rather than grown by doubling
  std::string reserve(int positions) {
    return guarded([&] { session.reserve(positions); });
  }

  void reset() { session.reset(); }
  int position() const { return static_cast<int>(session.position()); }
  void set_threads(int threads) { model.set_threads(threads); }
  int threads() const { return model.threads(); }
};

// Registers the Decoder type D as the JS class `name` and its streamed load (stream_load.hpp,
// begin(config, head, headSize, fileSize, weights)) as `name` + "Load".
template <class D>
void bind_decoder(const char* name) {
  bind_stream_load<StreamLoad<DecoderStream<decltype(D::model)>, D, D::last_error>, std::string>(std::string(name) +
                                                                                                 "Load");
  emscripten::class_<D>(name)
      .class_function("create", &D::create, emscripten::allow_raw_pointers())
      .function("forward", &D::forward)
      .function("memory", &D::memory)
      .function("prefill", &D::prefill)
      .function("step", &D::step)
      .function("reserve", &D::reserve)
      .function("reset", &D::reset)
      .function("position", &D::position)
      .function("setThreads", &D::set_threads)
      .function("threads", &D::threads);
}

}  // namespace qkv::wasm
