// A decoder (GPT2 or Llama) loaded while its safetensors file streams in: the header, once it
// has arrived, is parsed and every tensor checked against the config (as Model::load does);
// then the bytes are fed in order and each tensor converted as it completes (WeightLoader's
// feed), so a load that converts ('f16', 'int8', 'int4', or a file whose tensors are not
// aligned) never holds the file whole: loading GPT-2 small's F32 file as 'int4' takes the 69 MB
// of 4-bit weights and a few MB of scratch, not the 475 MB file. A load that reads every
// matrix in place (streams() false) needs the whole file: Model::load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "model/gguf_model.hpp"
#include "model/safetensors.hpp"
#include "model/weight_loader.hpp"

namespace qkv {

template <class Model>
class DecoderStream {
 public:
  using Config = typename Model::Config;
  using Store = typename Model::Store;

  // head: the file's first head_size bytes, holding its 8-byte length and whole JSON header;
  // file_size: the whole file's. Throws std::invalid_argument as Model::load does (config,
  // header, a tensor missing or of the wrong shape or dtype).
  DecoderStream(std::string_view config_json, const uint8_t* head, size_t head_size, uint64_t file_size,
                WeightFormat format)
      : config_(Config::from_json(config_json)), header_(gguf::open_weights_header(head, head_size, file_size)),
        store_(std::make_unique<Store>()), loader_(store_->plan(config_, header_, format)) {
    if (loader_.streams()) loader_.begin_stream();
  }
  DecoderStream(const DecoderStream&) = delete;  // the loader points at header_ and *store_
  DecoderStream& operator=(const DecoderStream&) = delete;

  bool streams() const { return loader_.streams(); }
  // The file's next n bytes, from its first (the header's included).
  void feed(const uint8_t* bytes, size_t n) { loader_.feed(bytes, n); }
  // The model, once every byte has arrived (else std::invalid_argument: truncated). Once only.
  Model finish() {
    store_->finish(config_, loader_, loader_.finish());
    return Model(config_, std::move(*store_));
  }

 private:
  Config config_;
  safetensors::File header_;
  std::unique_ptr<Store> store_;
  WeightLoader loader_;
};

}  // namespace qkv
