// Helpers for the model tests: writing safetensors files, random GPT-2 checkpoints, reading
// the committed PyTorch reference data (tests/data/model/).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace qkv::model_testing {

inline std::string source_path(const std::string& rel) {
#ifdef QKV_SOURCE_DIR
  return std::string(QKV_SOURCE_DIR) + "/" + rel;
#else
  return rel;
#endif
}

// The message of the E that `f` throws ("" when it throws none).
template <class E = std::invalid_argument, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

inline bool file_exists(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return bool(f);
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline std::string read_text(const std::string& path) {
  auto b = read_bytes(path);
  return std::string(b.begin(), b.end());
}

struct StTensor {
  std::string name;
  std::string dtype;  // "F32", "F16", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

inline std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());  // little-endian hosts only (x86, wasm)
  return out;
}

// A safetensors file from a raw header string and data region (for damaged files).
inline std::vector<uint8_t> raw_safetensors(const std::string& header, const std::vector<uint8_t>& data,
                                            uint64_t header_len_override = UINT64_MAX) {
  std::vector<uint8_t> out(8 + header.size() + data.size());
  uint64_t n = header_len_override == UINT64_MAX ? header.size() : header_len_override;
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(n >> (8 * i));
  if (!header.empty()) std::memcpy(out.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}

inline std::string shape_json(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// A well-formed file: tensors laid out in order, header padded to 8 bytes.
inline std::vector<uint8_t> build_safetensors(const std::vector<StTensor>& tensors, bool metadata = true) {
  std::string h = "{";
  if (metadata) h += "\"__metadata__\":{\"format\":\"pt\"}";
  std::vector<uint8_t> data;
  for (const auto& t : tensors) {
    if (h.size() > 1) h += ",";
    h += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":" + shape_json(t.shape) + ",\"data_offsets\":[" +
         std::to_string(data.size()) + "," + std::to_string(data.size() + t.bytes.size()) + "]}";
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  h += "}";
  while ((8 + h.size()) % 8) h += ' ';
  return raw_safetensors(h, data);
}

struct TinyConfig {
  int64_t n_layer = 2, n_head = 2, n_embd = 16, n_positions = 32, vocab_size = 50;
  std::string json() const {
    return "{\"model_type\": \"gpt2\", \"n_layer\": " + std::to_string(n_layer) +
           ", \"n_head\": " + std::to_string(n_head) + ", \"n_embd\": " + std::to_string(n_embd) +
           ", \"n_positions\": " + std::to_string(n_positions) + ", \"vocab_size\": " + std::to_string(vocab_size) +
           ", \"n_inner\": null, \"layer_norm_epsilon\": 1e-05, \"activation_function\": \"gelu_new\"}";
  }
};

// Every tensor of a random GPT-2 with this config (HF names, Conv1D layout).
inline std::vector<StTensor> random_gpt2_tensors(const TinyConfig& c, uint32_t seed, const std::string& prefix = "",
                                                 float stddev = 0.2f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  const int64_t E = c.n_embd, I = 4 * c.n_embd;
  std::vector<StTensor> out;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float offset = 0.0f) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = offset + dist(rng);
    out.push_back({prefix + name, "F32", shape, f32_bytes(v)});
  };
  add("wte.weight", {c.vocab_size, E});
  add("wpe.weight", {c.n_positions, E});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    add(p + "ln_1.weight", {E}, 1.0f);
    add(p + "ln_1.bias", {E});
    add(p + "attn.c_attn.weight", {E, 3 * E});
    add(p + "attn.c_attn.bias", {3 * E});
    add(p + "attn.c_proj.weight", {E, E});
    add(p + "attn.c_proj.bias", {E});
    add(p + "ln_2.weight", {E}, 1.0f);
    add(p + "ln_2.bias", {E});
    add(p + "mlp.c_fc.weight", {E, I});
    add(p + "mlp.c_fc.bias", {I});
    add(p + "mlp.c_proj.weight", {I, E});
    add(p + "mlp.c_proj.bias", {E});
  }
  add("ln_f.weight", {E}, 1.0f);
  add("ln_f.bias", {E});
  return out;
}

}  // namespace qkv::model_testing
