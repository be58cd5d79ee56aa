// The Embind boundary for the encoder-decoder (src/model/seq2seq.*): mapping only.
//
// Conventions as in bindings_model.cpp: arrays travel as byte addresses into the wasm heap;
// entry points return "" on success or "<kind>|<message>"; the factory returns null and
// leaves its message in seq2seqLastError(). Sampling uses bindings_model.cpp's Sampler.
#include <emscripten/bind.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "guarded.hpp"
#include "interventions_arg.hpp"
#include "model/seq2seq.hpp"
#include "stream_load.hpp"

using namespace emscripten;
using qkv::wasm::bind_stream_load;
using qkv::wasm::guarded;
using qkv::wasm::Interventions;
using qkv::wasm::InterventionsArg;
using qkv::wasm::ptr;
using qkv::wasm::StreamLoad;

namespace {

std::string seq2seq_last_error;

// A loaded model and its generation session (one input at a time: the encoder output's
// cross-attention K/V and the decoder's self-attention KV caches).
struct Seq2Seq {
  qkv::Bart bart;
  std::unique_ptr<qkv::BartSession> session;
  explicit Seq2Seq(qkv::Bart m) : bart(std::move(m)) {}
};

// Takes ownership of `bytes` (from modelFileAlloc, bindings_model.cpp) and frees it: the
// model converts its tensors to float32 while loading.
Seq2Seq* seq2seq_create(const std::string& config_json, uintptr_t bytes, double size) {
  Seq2Seq* m = nullptr;
  seq2seq_last_error = guarded(
      [&] { m = new Seq2Seq(qkv::Bart::load(config_json, ptr<const uint8_t>(bytes), static_cast<size_t>(size))); });
  std::free(ptr<void>(bytes));
  return m;
}

// src [Ls], tgt [Lt] int32 -> logits [Lt, V]; encoder [Le, He, Ls, Ls], decoder [Ld, Hd, Lt, Lt],
// cross [Ld, Hd, Lt, Ls] attentions, each or 0; hidden states of the encoder [Le + 1, Ls, E] and
// of the decoder [Ld + 1, Lt, E], each or 0; head interventions of each attention kind
std::string seq2seq_forward(Seq2Seq& m, uintptr_t src, int Ls, uintptr_t tgt, int Lt, uintptr_t logits, uintptr_t enc,
                            uintptr_t dec, uintptr_t cross, uintptr_t enc_hidden, uintptr_t dec_hidden,
                            const InterventionsArg& iv_enc, const InterventionsArg& iv_dec,
                            const InterventionsArg& iv_cross) {
  return guarded([&] {
    const Interventions e(iv_enc), d(iv_dec), c(iv_cross);
    m.bart.forward(ptr<const int32_t>(src), Ls, ptr<const int32_t>(tgt), Lt, ptr<float>(logits), ptr<float>(enc),
                   ptr<float>(dec), ptr<float>(cross), qkv::BartInterventions{e.ptr, d.ptr, c.ptr},
                   ptr<float>(enc_hidden), ptr<float>(dec_hidden));
  });
}

// A new session for src [Ls]: runs the encoder (attentions [Le, He, Ls, Ls] or 0) and the cross K/V once
std::string seq2seq_begin(Seq2Seq& m, uintptr_t src, int Ls, uintptr_t enc, const InterventionsArg& iv_enc) {
  return guarded([&] {
    const Interventions e(iv_enc);
    m.session.reset();
    m.session = std::make_unique<qkv::BartSession>(m.bart, ptr<const int32_t>(src), Ls, ptr<float>(enc), e.ptr);
  });
}

// One decoder token -> logits [V]; self [Ld, Hd, pos + 1], cross [Ld, Hd, Ls] attentions or 0; head masks
std::string seq2seq_step(Seq2Seq& m, int id, uintptr_t logits, uintptr_t self, uintptr_t cross,
                         const InterventionsArg& iv_dec, const InterventionsArg& iv_cross) {
  return guarded([&] {
    if (!m.session) throw std::invalid_argument("Seq2Seq.step: no session (call begin() with an input first)");
    const Interventions d(iv_dec), c(iv_cross);
    m.session->step(id, ptr<float>(logits), ptr<float>(self), ptr<float>(cross),
                    qkv::BartInterventions{nullptr, d.ptr, c.ptr});
  });
}

int seq2seq_position(const Seq2Seq& m) { return m.session ? static_cast<int>(m.session->position()) : 0; }
int seq2seq_source_length(const Seq2Seq& m) { return m.session ? static_cast<int>(m.session->source_length()) : 0; }
void seq2seq_set_threads(Seq2Seq& m, int threads) { m.bart.set_threads(threads); }
int seq2seq_threads(const Seq2Seq& m) { return m.bart.threads(); }
int seq2seq_decoder_start_token_id(const Seq2Seq& m) { return m.bart.config().decoder_start_token_id; }
int seq2seq_eos_token_id(const Seq2Seq& m) { return m.bart.config().eos_token_id; }
std::string get_seq2seq_last_error() { return seq2seq_last_error; }

}  // namespace

EMSCRIPTEN_BINDINGS(qkv_seq2seq) {
  function("seq2seqLastError", &get_seq2seq_last_error);
  // begin(config, head, headSize, fileSize) (stream_load.hpp)
  bind_stream_load<StreamLoad<qkv::Bart::Stream, Seq2Seq, seq2seq_last_error>>("Seq2SeqModelLoad");

  class_<Seq2Seq>("Seq2SeqModel")
      .class_function("create", &seq2seq_create, allow_raw_pointers())
      .function("forward", &seq2seq_forward)
      .function("begin", &seq2seq_begin)
      .function("step", &seq2seq_step)
      .function("position", &seq2seq_position)
      .function("sourceLength", &seq2seq_source_length)
      .function("setThreads", &seq2seq_set_threads)
      .function("threads", &seq2seq_threads)
      .function("decoderStartTokenId", &seq2seq_decoder_start_token_id)
      .function("eosTokenId", &seq2seq_eos_token_id);
}
