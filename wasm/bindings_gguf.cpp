// The Embind boundary for GGUF files (src/model/gguf*.hpp): mapping only. ggufHeader reads a
// GGUF file's header from its first `available` bytes and returns, as JSON text,
// {"config": <the config.json the models read>, "metadata": {key: value, ...}} (arrays as JSON
// arrays); "more" when the header runs past the bytes given (the caller reads more and asks
// again); or "<kind>|<message>" for a damaged file or an architecture qkv does not run.
#include <emscripten/bind.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "guarded.hpp"
#include "model/gguf.hpp"
#include "model/gguf_model.hpp"

using namespace emscripten;
using qkv::wasm::guarded;
using qkv::wasm::ptr;

namespace {

nlohmann::json value_json(const qkv::gguf::Value& v) {
  using qkv::gguf::ValueType;
  if (v.type == ValueType::STRING) return v.s;
  if (v.type == ValueType::BOOL) return v.i != 0;
  if (v.type == ValueType::F32 || v.type == ValueType::F64) return v.f;
  if (v.type != ValueType::ARRAY) return v.i;
  if (v.element == ValueType::STRING) return v.strings;
  if (v.element == ValueType::F32 || v.element == ValueType::F64) return v.floats;
  return v.ints;
}

std::string gguf_header(uintptr_t bytes, double available, double size) {
  std::string out;
  std::string err = guarded([&] {
    try {
      const qkv::gguf::File f = qkv::gguf::File::parse_header(ptr<const uint8_t>(bytes), static_cast<size_t>(available),
                                                              static_cast<uint64_t>(size));
      nlohmann::json meta = nlohmann::json::object();
      for (const auto& [k, v] : f.metadata()) meta[k] = value_json(v);
      const std::string config = qkv::gguf::hf_config_json(f);
      qkv::gguf::hf_index(f);  // every tensor's type and name checked now, before the weights stream
      out = "{\"config\":" + config +
            ",\"metadata\":" + meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "}";
    } catch (const qkv::gguf::Incomplete&) {
      out = "more";
    }
  });
  return err.empty() ? out : err;
}

}  // namespace

EMSCRIPTEN_BINDINGS(qkv_gguf) { function("ggufHeader", &gguf_header); }
