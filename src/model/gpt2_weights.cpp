#include "model/gpt2_weights.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "matmul/halves.hpp"
#include "model/gpt2.hpp"
#include "model/safetensors.hpp"

namespace qkv {

WeightFormat parse_weight_format(std::string_view name) {
  if (name == "auto") return WeightFormat::Auto;
  if (name == "f32") return WeightFormat::F32;
  if (name == "f16") return WeightFormat::F16;
  if (name == "int8") return WeightFormat::Int8;
  throw std::invalid_argument("GPT2: weights must be 'auto', 'f32', 'f16' or 'int8', got '" + std::string(name) + "'");
}

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::Auto:
      return "auto";
    case WeightFormat::F32:
      return "f32";
    case WeightFormat::F16:
      return "f16";
    case WeightFormat::Int8:
      return "int8";
  }
  return "?";
}

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

[[noreturn]] void fail(const std::string& tensor, const std::string& msg) {
  throw std::invalid_argument("GPT2: tensor \"" + tensor + "\": " + msg);
}

// One tensor of the file, found by name and checked against the shape the config needs.
struct Source {
  std::string name;
  WeightType type = WeightType::F32;
  const uint8_t* bytes = nullptr;
  size_t count = 0;  // elements
  size_t element_size() const { return type == WeightType::F32 ? 4 : 2; }
  bool aligned() const { return reinterpret_cast<uintptr_t>(bytes) % element_size() == 0; }
};

class TensorFinder {
 public:
  explicit TensorFinder(const safetensors::File& f) : f_(f) {
    // a checkpoint uses the "transformer." prefix (GPT2LMHeadModel) or not (GPT2Model)
    prefixed_ = f.find("wte.weight") == nullptr && f.find("transformer.wte.weight") != nullptr;
  }

  Source get(const std::string& name, const std::vector<int64_t>& want) const {
    const std::string full = prefixed_ ? "transformer." + name : name;
    const safetensors::TensorInfo* t = f_.find(full);
    if (!t)
      throw std::invalid_argument("GPT2: missing tensor \"" + full + "\" (expected shape " + shape_str(want) + ")");
    if (t->shape != want) {
      throw std::invalid_argument("GPT2: tensor \"" + full + "\" has shape " + shape_str(t->shape) +
                                  ", but the config needs " + shape_str(want));
    }
    Source s;
    s.name = full;
    switch (t->dtype) {
      case safetensors::DType::F32:
        s.type = WeightType::F32;
        break;
      case safetensors::DType::F16:
        s.type = WeightType::F16;
        break;
      case safetensors::DType::BF16:
        s.type = WeightType::BF16;
        break;
      default:
        fail(full, std::string("dtype ") + safetensors::dtype_name(t->dtype) +
                       " cannot be converted to float32 (F32, F16 and BF16 can)");
    }
    s.bytes = f_.bytes(*t);
    s.count = size_t(t->numel());
    return s;
  }

 private:
  const safetensors::File& f_;
  bool prefixed_ = false;
};

// A matrix: where it comes from and what it becomes.
struct MatrixPlan {
  Source src;
  WeightLayout layout;
  int64_t K, N;
  WeightType to;
  WeightMatrix* dst;
  bool matmul;        // read by a matmul (wpe is only gathered)
  size_t offset = 0;  // in the converted buffer
};

// A 1-D parameter.
struct VectorPlan {
  Source src;
  const float** dst;
};

// The source's elements at an address aligned for their type (a copy when the file has them unaligned).
const uint8_t* aligned_bytes(const Source& s, std::vector<uint8_t>& copy) {
  if (s.aligned()) return s.bytes;
  copy.assign(s.bytes, s.bytes + s.count * s.element_size());
  return copy.data();
}

float element(const Source& s, const uint8_t* p, size_t i) {
  if (s.type == WeightType::F32) {
    float v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return s.type == WeightType::F16 ? halves::f16_to_f32(h) : halves::bf16_to_f32(h);
}

// Converts one matrix into dst (bytes: dst type's size of K x N).
void convert(const MatrixPlan& m, uint8_t* out) {
  const Source& s = m.src;
  if (m.to == s.type) {
    std::memcpy(out, s.bytes, s.count * s.element_size());
    return;
  }
  std::vector<uint8_t> copy;
  const uint8_t* in = aligned_bytes(s, copy);
  switch (m.to) {
    case WeightType::F32: {
      float* o = reinterpret_cast<float*>(out);
      for (size_t i = 0; i < s.count; ++i) o[i] = element(s, in, i);
      return;
    }
    case WeightType::F16:
    case WeightType::BF16: {
      uint16_t* o = reinterpret_cast<uint16_t*>(out);
      for (size_t i = 0; i < s.count; ++i) {
        const float v = element(s, in, i);
        if (m.to == WeightType::F16) {
          o[i] = halves::f32_to_f16(v);
          if ((o[i] & 0x7C00u) == 0x7C00u) {
            fail(s.name, "element " + std::to_string(i) + " = " + std::to_string(v) +
                             " does not fit in F16 (finite, |value| <= 65504)");
          }
        } else {
          o[i] = halves::f32_to_bf16(v);
        }
      }
      return;
    }
    case WeightType::Q8: {
      const Q8Layout q = Q8Layout::of(m.K, m.N);
      const WeightMatrix view{s.type, m.layout, m.K, m.N, in, nullptr};
      try {
        quantize_q8(view, reinterpret_cast<int8_t*>(out), reinterpret_cast<float*>(out + q.data_bytes()));
      } catch (const std::invalid_argument& e) {
        fail(s.name, e.what());
      }
      return;
    }
  }
}

size_t stored_bytes(WeightType t, int64_t K, int64_t N) { return WeightMatrix{t, WeightLayout::InOut, K, N}.bytes(); }

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

}  // namespace

GPT2WeightStore GPT2WeightStore::load(const GPT2Config& c, MallocBytes file, size_t size, WeightFormat format) {
  c.validate();
  const safetensors::File st = safetensors::File::parse(file.get(), size);
  const TensorFinder find(st);
  const int64_t E = c.n_embd, I = c.inner(), V = c.vocab_size, P = c.n_positions;

  GPT2WeightStore store;
  GPT2Weights& w = store.weights_;
  w.h.resize(size_t(c.n_layer));
  std::vector<MatrixPlan> matrices;
  std::vector<VectorPlan> vectors;
  // what a matrix becomes: int8 for the matmuls' matrices (wte included), the stored dtype for wpe
  const auto target = [&](WeightType from, bool matmul) {
    switch (format) {
      case WeightFormat::Auto:
        return from;
      case WeightFormat::F32:
        return WeightType::F32;
      case WeightFormat::F16:
        return WeightType::F16;
      case WeightFormat::Int8:
        return matmul ? WeightType::Q8 : from;
    }
    return from;
  };
  const auto matrix = [&](const std::string& name, std::vector<int64_t> shape, WeightLayout layout, WeightMatrix* dst,
                          bool matmul = true) {
    Source s = find.get(name, shape);
    // InOut [K, N]; OutIn tables [N, K]
    const int64_t K = layout == WeightLayout::InOut ? shape[0] : shape[1];
    const int64_t N = layout == WeightLayout::InOut ? shape[1] : shape[0];
    const WeightType to = target(s.type, matmul);
    matrices.push_back({std::move(s), layout, K, N, to, dst, matmul});
  };
  const auto vector = [&](const std::string& name, int64_t n, const float** dst) {
    vectors.push_back({find.get(name, {n}), dst});
  };

  // Every tensor is found and checked before anything is allocated.
  matrix("wte.weight", {V, E}, WeightLayout::OutIn, &w.wte);
  matrix("wpe.weight", {P, E}, WeightLayout::OutIn, &w.wpe, false);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    GPT2LayerWeights& L = w.h[size_t(l)];
    vector(p + "ln_1.weight", E, &L.ln_1_weight);
    vector(p + "ln_1.bias", E, &L.ln_1_bias);
    matrix(p + "attn.c_attn.weight", {E, 3 * E}, WeightLayout::InOut, &L.attn_c_attn);
    vector(p + "attn.c_attn.bias", 3 * E, &L.attn_c_attn_bias);
    matrix(p + "attn.c_proj.weight", {E, E}, WeightLayout::InOut, &L.attn_c_proj);
    vector(p + "attn.c_proj.bias", E, &L.attn_c_proj_bias);
    vector(p + "ln_2.weight", E, &L.ln_2_weight);
    vector(p + "ln_2.bias", E, &L.ln_2_bias);
    matrix(p + "mlp.c_fc.weight", {E, I}, WeightLayout::InOut, &L.mlp_c_fc);
    vector(p + "mlp.c_fc.bias", I, &L.mlp_c_fc_bias);
    matrix(p + "mlp.c_proj.weight", {I, E}, WeightLayout::InOut, &L.mlp_c_proj);
    vector(p + "mlp.c_proj.bias", E, &L.mlp_c_proj_bias);
  }
  vector("ln_f.weight", E, &w.ln_f_weight);
  vector("ln_f.bias", E, &w.ln_f_bias);

  // In place when every matrix stays as stored (and is aligned for its type); else all of them
  // go into one new buffer and the file is freed.
  bool in_place = true;
  for (const MatrixPlan& m : matrices) in_place = in_place && m.to == m.src.type && m.src.aligned();
  store.matrix_type_ = weight_type_name(matrices.front().to);  // wte's
  for (const MatrixPlan& m : matrices) {
    if (m.matmul && m.to != matrices.front().to) store.matrix_type_ = "mixed";
  }

  size_t converted = 0;
  if (!in_place) {
    for (MatrixPlan& m : matrices) {
      m.offset = converted;
      converted += align16(stored_bytes(m.to, m.K, m.N));
    }
    store.converted_.reset(static_cast<uint8_t*>(std::malloc(std::max<size_t>(converted, 1))));
    if (!store.converted_) {
      throw std::length_error("GPT2: cannot allocate " + std::to_string(converted) + " bytes for the weights as " +
                              weight_format_name(format));
    }
  }
  for (MatrixPlan& m : matrices) {
    uint8_t* at = nullptr;
    if (in_place) {
      at = const_cast<uint8_t*>(m.src.bytes);
    } else {
      at = store.converted_.get() + m.offset;
      convert(m, at);
    }
    *m.dst = WeightMatrix{m.to, m.layout, m.K, m.N, at, nullptr};
    if (m.to == WeightType::Q8)
      m.dst->scales = reinterpret_cast<const float*>(at + Q8Layout::of(m.K, m.N).data_bytes());
    if (m.to == WeightType::F16) {
      // finite (the kernels' widening does not special-case inf and NaN); subnormals to zero
      // (weights.hpp): in the file's buffer or the converted one, both ours
      const std::string what = "GPT2: tensor \"" + m.src.name + "\"";
      store.flushed_ += prepare_f16_weights(reinterpret_cast<uint16_t*>(at), size_t(m.K * m.N), what.c_str());
    }
    store.bytes_.matrices += m.dst->bytes();
  }

  // 1-D parameters: float32 in place when the file is kept and they are aligned float32; else widened
  size_t widened = 0;
  for (const VectorPlan& v : vectors) {
    if (!(in_place && v.src.type == WeightType::F32 && v.src.aligned())) widened += v.src.count;
  }
  store.vectors_.resize(widened);
  size_t at = 0;
  for (const VectorPlan& v : vectors) {
    if (in_place && v.src.type == WeightType::F32 && v.src.aligned()) {
      *v.dst = reinterpret_cast<const float*>(v.src.bytes);
      continue;
    }
    for (size_t i = 0; i < v.src.count; ++i) store.vectors_[at + i] = element(v.src, v.src.bytes, i);
    *v.dst = store.vectors_.data() + at;
    at += v.src.count;
  }
  store.bytes_.vectors = widened * 4;
  store.bytes_.converted = converted;
  if (in_place) {
    store.file_ = std::move(file);
    store.bytes_.file = size;
  }  // else `file` is freed on return: nothing reads it any more
  return store;
}

}  // namespace qkv
