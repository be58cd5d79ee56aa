// libFuzzer target: the safetensors reader (and the strict JSON parser under it, and the
// GPT-2 weight loader over it) must reject any damaged input with std::invalid_argument and
// never read out of bounds. Built by -DQKV_FUZZ=ON; run by tools/stages/51-fuzz.sh over the
// seed corpus in tests/fuzz/corpus/safetensors/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

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
  // The GPT-2 weight loader over it, with a tiny fixed config: in place and converted.
  qkv::GPT2Config config;
  config.n_layer = 1, config.n_head = 1, config.n_embd = 2, config.n_positions = 2, config.vocab_size = 3;
  for (qkv::WeightFormat format : {qkv::WeightFormat::Auto, qkv::WeightFormat::F16, qkv::WeightFormat::Int8}) {
    qkv::MallocBytes copy(static_cast<uint8_t*>(std::malloc(size ? size : 1)));
    if (!copy) std::abort();
    std::memcpy(copy.get(), data, size);
    try {
      qkv::GPT2WeightStore::load(config, std::move(copy), size, format);
    } catch (const std::invalid_argument&) {
    }
  }
  return 0;
}
