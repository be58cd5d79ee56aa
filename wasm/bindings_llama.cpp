// The Embind boundary for Llama-family models (src/model/llama.hpp): mapping only, with the
// conventions of bindings_model.cpp (byte addresses into the wasm heap; "" or "<kind>|<message>"
// from entry points; the factory returns null and leaves its message in llamaLastError()).
// The file buffer comes from modelFileAlloc (bindings_model.cpp) and LlamaModel.create takes it.
// The methods are GPT2Model's (decoder_bindings.hpp), so web/lib/model/decoder.ts drives either.
#include <emscripten/bind.h>

#include <string>

#include "decoder_bindings.hpp"
#include "model/llama.hpp"

using namespace emscripten;

namespace {

std::string llama_last_error;

using LlamaHandle = qkv::wasm::Decoder<qkv::Llama, qkv::LlamaSession, qkv::LlamaScratch, llama_last_error>;

std::string get_llama_last_error() { return llama_last_error; }

}  // namespace

EMSCRIPTEN_BINDINGS(qkv_llama) {
  function("llamaLastError", &get_llama_last_error);
  qkv::wasm::bind_decoder<LlamaHandle>("LlamaModel");
}
