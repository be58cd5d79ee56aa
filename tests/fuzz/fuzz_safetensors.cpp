// libFuzzer target: the safetensors reader (and the strict JSON parser under it, and the
// GPT-2 weight loader over it, from a whole file and as it streams in) must reject any damaged
// input with std::invalid_argument and never read out of bounds. Built by -DQKV_FUZZ=ON; run by tools/stages/51-fuzz.sh
// over the seed corpus in tests/fuzz/corpus/safetensors/.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "model/decoder_stream.hpp"
#include "model/gpt2.hpp"
#include "model/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  qkv::safetensors::File file;
  try {
    file = qkv::safetensors::File::parse(data, size);
  } catch (const std::invalid_argument&) {
    return 0;  // rejected: the expected outcome for damaged input
  }
  // Accepted: every tensor lies inside the buffer, so converting must stay in bounds.
  uint64_t total = 0;
  for (const auto& t : file.tensors()) {
    if (t.end > size - file.data_offset() || t.begin > t.end) std::abort();  // invariant broken
    total += t.end - t.begin;
    try {
      auto v = file.to_f32(t);
      if (int64_t(v.size()) != t.numel()) std::abort();
    } catch (const std::invalid_argument&) {
      // a dtype without a float32 conversion
    }
  }
  if (total != size - file.data_offset()) std::abort();  // tensors tile the data region
  // The GPT-2 weight loader over it, with a tiny fixed config: in place and converted, from the
  // whole file and as it streams in (in chunks of a size the input picks): the two accept and
  // reject the same files, and hold the same bytes.
  const char* config_json = "{\"n_layer\": 1, \"n_head\": 1, \"n_embd\": 2, \"n_positions\": 2, \"vocab_size\": 3}";
  const qkv::GPT2Config config = qkv::GPT2Config::from_json(config_json);
  const size_t chunk = 1 + size_t(data[size - 1]) % 61;
  for (qkv::WeightFormat format :
       {qkv::WeightFormat::Auto, qkv::WeightFormat::F16, qkv::WeightFormat::Int8, qkv::WeightFormat::Int4}) {
    qkv::MallocBytes copy(static_cast<uint8_t*>(std::malloc(size ? size : 1)));
    if (!copy) std::abort();
    std::memcpy(copy.get(), data, size);
    bool whole_ok = false;
    size_t whole_bytes = 0;
    try {
      whole_bytes = qkv::GPT2WeightStore::load(config, std::move(copy), size, format).bytes().matrices;
      whole_ok = true;
    } catch (const std::invalid_argument&) {
    }
    try {
      qkv::DecoderStream<qkv::GPT2> stream(config_json, data, size_t(file.data_offset()), size, format);
      if (!stream.streams()) continue;
      for (size_t at = 0; at < size; at += chunk) stream.feed(data + at, std::min(chunk, size - at));
      const qkv::GPT2 model = stream.finish();
      if (!whole_ok || model.weight_store().bytes().matrices != whole_bytes) std::abort();
    } catch (const std::invalid_argument&) {
      if (whole_ok) std::abort();  // the stream refused what the whole file loads
    }
  }
  return 0;
}
