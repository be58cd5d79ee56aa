// The Embind boundary for the BERT-family encoders (src/model/bert.hpp): mapping only.
//
// Conventions as in bindings_model.cpp: arrays travel as byte addresses into the wasm heap (the
// JS layer in web/lib/model/encoder.ts mallocs and copies); entry points return "" on success or
// "<kind>|<message>"; the factory returns null and leaves its message in encoderLastError().
#include <emscripten/bind.h>

#include <cstdint>
#include <string>

#include "guarded.hpp"
#include "interventions_arg.hpp"
#include "model/bert.hpp"
#include "stream_load.hpp"

using namespace emscripten;
using qkv::wasm::guarded;
using qkv::wasm::ptr;

namespace {

std::string encoder_last_error;

struct EncoderModel {
  qkv::Encoder encoder;
  qkv::EncoderScratch scratch;  // forward()'s buffers, kept between calls
  explicit EncoderModel(qkv::Encoder e) : encoder(std::move(e)) {}
};

EncoderModel* encoder_create(const std::string& config_json, uintptr_t bytes, double size, bool int8) {
  EncoderModel* m = nullptr;
  encoder_last_error = guarded([&] {
    m = new EncoderModel(qkv::Encoder::load(config_json, ptr<const uint8_t>(bytes), static_cast<size_t>(size), int8));
  });
  return m;
}

// ids [B, L] int32; types [B, L] int32 or 0; mask [B, L] uint8 or 0 -> logits [B, L, V] or 0,
// attentions [layers, B, H, L, L] or 0, hidden states [layers + 1, B, L, E] or 0;
// iv: head interventions (interventions_arg.hpp; B = 1)
std::string encoder_forward_with(EncoderModel& m, uintptr_t ids, int B, int L, uintptr_t types, uintptr_t mask,
                                 uintptr_t logits, uintptr_t attentions, uintptr_t hidden_states,
                                 const qkv::wasm::InterventionsArg& iv) {
  return guarded([&] {
    const qkv::wasm::Interventions i(iv);
    m.encoder.forward(ptr<const int32_t>(ids), B, L, ptr<const int32_t>(types), ptr<const uint8_t>(mask), m.scratch,
                      ptr<float>(logits), ptr<float>(attentions), nullptr, i.ptr, ptr<float>(hidden_states));
  });
}

// The same without interventions.
std::string encoder_forward(EncoderModel& m, uintptr_t ids, int B, int L, uintptr_t types, uintptr_t mask,
                            uintptr_t logits, uintptr_t attentions, uintptr_t hidden_states) {
  return encoder_forward_with(m, ids, B, L, types, mask, logits, attentions, hidden_states,
                              qkv::wasm::InterventionsArg{});
}

// x [N, E] hidden states -> logits [N, V] through the masked-LM head
std::string encoder_mlm_head(EncoderModel& m, uintptr_t x, int N, uintptr_t logits) {
  return guarded([&] { m.encoder.mlm_head(ptr<const float>(x), N, m.scratch, ptr<float>(logits)); });
}

// ids [B, L] int32; types [B, L] int32 or 0; mask [B, L] uint8 or 0 -> hidden [B, L, E] (the last layer)
std::string encoder_hidden(EncoderModel& m, uintptr_t ids, int B, int L, uintptr_t types, uintptr_t mask,
                           uintptr_t hidden) {
  return guarded([&] {
    m.encoder.forward(ptr<const int32_t>(ids), B, L, ptr<const int32_t>(types), ptr<const uint8_t>(mask), m.scratch,
                      nullptr, nullptr, ptr<float>(hidden));
  });
}

void encoder_set_threads(EncoderModel& m, int threads) { m.encoder.set_threads(threads); }
std::string encoder_architecture(const EncoderModel& m) { return m.encoder.config().name(); }
bool encoder_has_mlm_head(const EncoderModel& m) { return m.encoder.has_mlm_head(); }
std::string get_encoder_last_error() { return encoder_last_error; }

}  // namespace

EMSCRIPTEN_BINDINGS(qkv_encoder) {
  function("encoderLastError", &get_encoder_last_error);
  // begin(config, head, headSize, fileSize, int8) (stream_load.hpp)
  qkv::wasm::bind_stream_load<qkv::wasm::StreamLoad<qkv::EncoderStream, EncoderModel, encoder_last_error>, bool>(
      "EncoderModelLoad");
  class_<EncoderModel>("EncoderModel")
      .class_function("create", &encoder_create, allow_raw_pointers())
      .function("forward", &encoder_forward)
      .function("forwardWith", &encoder_forward_with)
      .function("hidden", &encoder_hidden)
      .function("mlmHead", &encoder_mlm_head)
      .function("hasMaskedLmHead", &encoder_has_mlm_head)
      .function("setThreads", &encoder_set_threads)
      .function("architecture", &encoder_architecture);
}
