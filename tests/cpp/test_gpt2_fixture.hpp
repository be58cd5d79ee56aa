// The small GPT-2 the native intervention and residual-stream tests share:
// tests/data/interventions/gpt2 (made by tools/model/make_interventions_reference.py).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt2.hpp"
#include "test_model_util.hpp"

namespace qkv::model_testing {

inline GPT2 load_interventions_gpt2() {
  const std::string dir = source_path("tests/data/interventions/gpt2");
  const std::vector<uint8_t> st = read_bytes(dir + "/model.safetensors");
  return GPT2::load(read_text(dir + "/config.json"), st.data(), st.size());
}

}  // namespace qkv::model_testing
