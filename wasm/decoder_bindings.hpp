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
#include "model/patching.hpp"
#include "model/readout.hpp"
#include "model/weight_loader.hpp"
#include "residual_arg.hpp"
#include "stream_load.hpp"

namespace qkv::wasm {

// Where a decoder's bytes are (all in the wasm heap); registered once, in bindings_model.cpp.
struct DecoderMemory {
  double file = 0, matrices = 0, vectors = 0, converted = 0, kvCache = 0, scratch = 0;
  std::string matrixType;
};

// Which parts an attribution has (qkv::AttributionLayout); registered in bindings_residual.cpp.
struct AttributionLayoutArg {
  bool posEmbed = false, attnBias = false, finalBias = false;
  int count = 0;
};

// A patching sweep over a decoder (qkv::PatchSweep); registered with its decoder.
template <class Model, class Scratch>
struct Sweep {
  PatchSweep<Model, Scratch> sweep;
  Sweep(const Model& m, uintptr_t clean, uintptr_t corrupted, int T, int correct, int wrong)
      : sweep(m, ptr<const int32_t>(clean), ptr<const int32_t>(corrupted), T, correct, wrong) {}
  double cleanMetric() const { return sweep.clean_metric(); }
  double corruptedMetric() const { return sweep.corrupted_metric(); }
  // cells [begin, end) of sweep `kind` (SweepKind) into out [cells]: "" or "<kind>|<message>"
  std::string run(int kind, int begin, int end, uintptr_t out) {
    return guarded([&] { sweep.run(static_cast<SweepKind>(kind), begin, end, ptr<float>(out)); });
  }
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

  // the sweep object of the last sweepBegin (null when it failed: its message in last_error)
  using SweepType = Sweep<Model, Scratch>;

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
  // head interventions (interventions_arg.hpp); rh: residual hooks (residual_arg.hpp)
  std::string forward(uintptr_t ids, int L, uintptr_t logits, uintptr_t attentions, uintptr_t queries, uintptr_t keys,
                      bool last_only, const InterventionsArg& iv, const ResidualArg& rh) {
    return guarded([&] {
      const Interventions i(iv);
      const Residual r(rh);
      model.run(ptr<const int32_t>(ids), L, 0, nullptr, scratch, ptr<float>(logits), !last_only, ptr<float>(attentions),
                ptr<float>(queries), ptr<float>(keys), i.ptr, r.ptr);
    });
  }

  // rows x [n, d] -> logits [n, V]: the final norm per row, the LM head over all rows (one product)
  std::string unembed(uintptr_t x, int n, uintptr_t logits) {
    return guarded([&] { model.unembed(ptr<const float>(x), n, ptr<float>(logits)); });
  }

  AttributionLayoutArg attributionLayout() const {
    const AttributionLayout a = attribution_layout(model);
    return {a.pos_embed, a.attn_bias, a.final_bias, static_cast<int>(a.count)};
  }

  // direct logit attribution at `position` of ids [L] for token a (minus b when b >= 0): parts
  // [attributionLayout().count] and, in total [1], the forward's logit (difference)
  std::string attribute(uintptr_t ids, int L, int position, int a, int b, uintptr_t parts, uintptr_t total) {
    return guarded([&] {
      *ptr<float>(total) = qkv::attribute(model, ptr<const int32_t>(ids), L, position, a, b, ptr<float>(parts));
    });
  }

  // a patching sweep of clean / corrupted ids [T] each; null with the message in last_error
  SweepType* sweepBegin(uintptr_t clean, uintptr_t corrupted, int T, int correct, int wrong) {
    SweepType* s = nullptr;
    last_error = guarded([&] { s = new SweepType(model, clean, corrupted, T, correct, wrong); });
    return s;
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
                      bool all_logits, const InterventionsArg& iv, const ResidualArg& rh) {
    return guarded([&] {
      const Interventions i(iv);
      const Residual r(rh);
      session.prefill(ptr<const int32_t>(ids), L, ptr<float>(logits), ptr<float>(attentions), ptr<float>(queries),
                      ptr<float>(keys), all_logits, i.ptr, r.ptr);
    });
  }

  // session: one token -> logits [V]; attentions [n_layer, H, pos + 1] or 0; iv: a head mask;
  // rh: steering at every row
  std::string step(int id, uintptr_t logits, uintptr_t attentions, const InterventionsArg& iv, const ResidualArg& rh) {
    return guarded([&] {
      const Interventions i(iv);
      const Residual r(rh);
      session.step(id, ptr<float>(logits), ptr<float>(attentions), i.ptr, r.ptr);
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
  using S = typename D::SweepType;
  emscripten::class_<S>((std::string(name) + "Sweep").c_str())
      .function("cleanMetric", &S::cleanMetric)
      .function("corruptedMetric", &S::corruptedMetric)
      .function("run", &S::run);
  emscripten::class_<D>(name)
      .class_function("create", &D::create, emscripten::allow_raw_pointers())
      .function("forward", &D::forward)
      .function("unembed", &D::unembed)
      .function("attributionLayout", &D::attributionLayout)
      .function("attribute", &D::attribute)
      .function("sweepBegin", &D::sweepBegin, emscripten::allow_raw_pointers())
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
