// libFuzzer target: the GGUF reader (header, metadata, tensor infos), the architecture mapping
// over it (config.json and the tensor index) and the Llama / GPT-2 weight loaders reading a GGUF
// file (block formats, q / k rows, transposed matrices), from a whole file and as it streams in,
// must reject any damaged input with std::invalid_argument and never read out of bounds. Built
// by -DQKV_FUZZ=ON; run by tools/stages/51-fuzz.sh over the seed corpus in tests/fuzz/corpus/gguf/
// (tools/fuzz/make_gguf_corpus.mjs).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "model/decoder_stream.hpp"
#include "model/gguf.hpp"
#include "model/gguf_blocks.hpp"
#include "model/gguf_model.hpp"
#include "model/gpt2.hpp"
#include "model/llama.hpp"

namespace {

// Loads the file as Model whole and streamed (chunks of a size the input picks): the two accept
// and reject the same files, and hold the same bytes.
template <class Model>
void load_both(const std::string& config_json, const uint8_t* data, size_t size, size_t head) {
  const typename Model::Config config = Model::Config::from_json(config_json);
  const size_t chunk = 1 + size_t(data[size - 1]) % 61;
  for (qkv::WeightFormat format : {qkv::WeightFormat::Auto, qkv::WeightFormat::F32, qkv::WeightFormat::Int4}) {
    qkv::MallocBytes copy(static_cast<uint8_t*>(std::malloc(size)));
    if (!copy) std::abort();
    std::memcpy(copy.get(), data, size);
    bool whole_ok = false;
    size_t whole_bytes = 0;
    try {
      whole_bytes = Model::Store::load(config, std::move(copy), size, format).bytes().matrices;
      whole_ok = true;
    } catch (const std::invalid_argument&) {
    }
    try {
      qkv::DecoderStream<Model> stream(config_json, data, head, size, format);
      if (!stream.streams()) continue;
      for (size_t at = 0; at < size; at += chunk) stream.feed(data + at, std::min(chunk, size - at));
      const Model model = stream.finish();
      if (!whole_ok || model.weight_store().bytes().matrices != whole_bytes) std::abort();
    } catch (const std::invalid_argument&) {
      if (whole_ok) std::abort();  // the stream refused what the whole file loads
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  qkv::gguf::File file;
  try {
    file = qkv::gguf::File::parse(data, size);
  } catch (const std::invalid_argument&) {
    return 0;  // rejected: the expected outcome for damaged input
  }
  // Accepted: every tensor lies inside the buffer, so dequantizing must stay in bounds.
  for (const auto& t : file.tensors()) {
    if (file.data_offset() + t.offset + t.bytes > size) std::abort();  // invariant broken
    if (!qkv::gguf::can_dequantize(t.type) || t.ne.empty() || t.numel() > (1 << 16)) continue;
    const int64_t K = t.ne[0], rows = K ? t.numel() / K : 0;
    std::vector<float> out(size_t(t.numel()));
    try {
      qkv::gguf::dequantize_rows(t.type, file.bytes(t), K, rows, out.data());
    } catch (const std::invalid_argument&) {
      // an inf / NaN block scale
    }
  }
  std::string config;
  try {
    config = qkv::gguf::hf_config_json(file);
    qkv::gguf::hf_index(file);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  const size_t head = size_t(file.data_offset());
  const std::string arch = file.string("general.architecture");
  if (file.integer(arch + ".context_length") > 4096) return 0;  // (what the models allocate stays small)
  try {
    if (qkv::config_model_type(config) == "gpt2") {
      load_both<qkv::GPT2>(config, data, size, head);
    } else {
      load_both<qkv::Llama>(config, data, size, head);
    }
  } catch (const std::invalid_argument&) {
    // a config the model refuses
  }
  return 0;
}
