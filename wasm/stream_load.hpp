// The load of a model whose file streams in, as one Embind class per model kind (GPT2ModelLoad,
// LlamaModelLoad, EncoderModelLoad, Seq2SeqModelLoad; web/lib/model/stream-load.ts drives them):
// begin() with the file's head (its 8-byte length and JSON header, copied from `head`), then
// feed() the file's bytes in order from its first, then finish() -> the model object that the
// kind's create() would give. begin and finish return null and leave their message in the kind's
// last-error string; feed returns "" or "<kind>|<message>". Deleting it (JS .delete()) before
// finish frees what it holds. Mapping only: the streams are the models' own (model/decoder_stream.hpp,
// EncoderStream, Bart::Stream).
#pragma once

#include <emscripten/bind.h>

#include <cstdint>
#include <string>
#include <utility>  // std::declval

#include "guarded.hpp"
#include "model/weight_loader.hpp"

namespace qkv::wasm {

// A load option as JS passes it -> as the stream takes it: the weights string ("auto" | "f32" |
// "f16" | "int8" | "int4") to a WeightFormat; anything else (an encoder's int8 flag) as it is.
inline WeightFormat load_option(const std::string& weights) { return parse_weight_format(weights); }
template <class T>
T load_option(T value) {
  return value;
}

// Stream: the model's stream (feed, finish() -> the model); Result: the bound object built from
// finish()'s model; last_error: where begin and finish leave their message.
template <class Stream, class Result, std::string& last_error>
struct StreamLoad {
  Stream stream;
  template <class... Options>
  StreamLoad(const std::string& config_json, const uint8_t* head, size_t head_size, double file_size,
             const Options&... options)
      : stream(config_json, head, head_size, static_cast<uint64_t>(file_size), load_option(options)...) {}

  template <class... Options>
  static StreamLoad* begin(const std::string& config_json, uintptr_t head, double head_size, double file_size,
                           Options... options) {
    StreamLoad* l = nullptr;
    last_error = guarded([&] {
      l = new StreamLoad(config_json, ptr<const uint8_t>(head), static_cast<size_t>(head_size), file_size, options...);
    });
    return l;
  }
  // false: the load reads the file in place and needs it whole (the kind's create()); the
  // encoders and BART convert every tensor, so they always stream
  bool streams() const {
    if constexpr (has_streams<Stream>(0)) {
      return stream.streams();
    } else {
      return true;
    }
  }
  std::string feed(uintptr_t bytes, double n) {
    return guarded([&] { stream.feed(ptr<const uint8_t>(bytes), static_cast<size_t>(n)); });
  }
  Result* finish() {
    Result* r = nullptr;
    last_error = guarded([&] { r = new Result(stream.finish()); });
    return r;
  }

 private:
  template <class S>
  static constexpr auto has_streams(int) -> decltype(std::declval<const S&>().streams(), bool()) {
    return true;
  }
  template <class S>
  static constexpr bool has_streams(...) {
    return false;
  }
};

// Registers StreamLoad L as the JS class `name`, its begin taking the options Options...
template <class L, class... Options>
void bind_stream_load(const std::string& name) {
  emscripten::class_<L>(name.c_str())
      .class_function("begin", &L::template begin<Options...>, emscripten::allow_raw_pointers())
      .function("streams", &L::streams)
      .function("feed", &L::feed)
      .function("finish", &L::finish, emscripten::allow_raw_pointers());
}

}  // namespace qkv::wasm
