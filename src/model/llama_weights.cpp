#include "model/llama_weights.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "matmul/halves.hpp"
#include "model/safetensors.hpp"

namespace qkv {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

[[noreturn]] void fail(const std::string& tensor, const std::string& msg) {
  throw std::invalid_argument("Llama: tensor \"" + tensor + "\": " + msg);
}

// One tensor of the file, found by name and checked against the shape the config needs.
struct Source {
  std::string name;
  WeightType type = WeightType::F32;
  const uint8_t* bytes = nullptr;  // possibly unaligned
  size_t count = 0;
  size_t element_size() const { return type == WeightType::F32 ? 4 : 2; }
  bool aligned() const { return reinterpret_cast<uintptr_t>(bytes) % element_size() == 0; }
};

Source find(const safetensors::File& f, const std::string& name, const std::vector<int64_t>& want) {
  const safetensors::TensorInfo* t = f.find(name);
  if (!t)
    throw std::invalid_argument("Llama: missing tensor \"" + name + "\" (expected shape " + shape_str(want) + ")");
  if (t->shape != want) {
    throw std::invalid_argument("Llama: tensor \"" + name + "\" has shape " + shape_str(t->shape) +
                                ", but the config needs " + shape_str(want));
  }
  Source s{name};
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
      fail(name, std::string("dtype ") + safetensors::dtype_name(t->dtype) + " is not supported (F32, F16, BF16 are)");
  }
  s.bytes = f.bytes(*t);
  s.count = size_t(t->numel());
  return s;
}

float element(const Source& s, size_t i) {
  if (s.type == WeightType::F32) {
    float v;
    std::memcpy(&v, s.bytes + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, s.bytes + 2 * i, 2);
  return s.type == WeightType::F16 ? halves::f16_to_f32(h) : halves::bf16_to_f32(h);
}

// A matrix: where it comes from and what it becomes.
struct MatrixPlan {
  Source src;
  int64_t K, N;  // OutIn: the file holds [N, K]
  WeightType to;
  WeightMatrix* dst;
  size_t offset = 0;
};

struct VectorPlan {
  Source src;
  const float** dst;
};

size_t held_bytes(WeightType t, int64_t K, int64_t N) { return WeightMatrix{t, WeightLayout::OutIn, K, N}.bytes(); }

// Writes the matrix as m.to at `out`.
void convert(const MatrixPlan& m, uint8_t* out) {
  const Source& s = m.src;
  if (m.to == s.type) {
    std::memcpy(out, s.bytes, s.count * s.element_size());
    return;
  }
  switch (m.to) {
    case WeightType::F32: {
      float* o = reinterpret_cast<float*>(out);
      for (size_t i = 0; i < s.count; ++i) o[i] = element(s, i);
      return;
    }
    case WeightType::F16:
    case WeightType::BF16: {
      uint16_t* o = reinterpret_cast<uint16_t*>(out);
      for (size_t i = 0; i < s.count; ++i) {
        const float v = element(s, i);
        o[i] = m.to == WeightType::F16 ? halves::f32_to_f16(v) : halves::f32_to_bf16(v);
        if (m.to == WeightType::F16 && (o[i] & 0x7C00u) == 0x7C00u) {
          fail(s.name, "element " + std::to_string(i) + " = " + std::to_string(v) +
                           " does not fit in F16 (finite, |value| <= 65504)");
        }
      }
      return;
    }
    case WeightType::Q8: {
      // quantize_q8 reads an aligned source: copy the file's bytes once
      std::vector<uint8_t> aligned(s.bytes, s.bytes + s.count * s.element_size());
      const WeightMatrix view{s.type, WeightLayout::OutIn, m.K, m.N, aligned.data(), nullptr};
      const Q8Layout q = Q8Layout::of(m.K, m.N);
      try {
        quantize_q8(view, reinterpret_cast<int8_t*>(out), reinterpret_cast<float*>(out + q.data_bytes()));
      } catch (const std::invalid_argument& e) {
        fail(s.name, e.what());
      }
      return;
    }
  }
}

}  // namespace

LlamaWeightStore LlamaWeightStore::load(const LlamaConfig& c, MallocBytes file, size_t size, WeightFormat format) {
  c.validate();
  const safetensors::File st = safetensors::File::parse(file.get(), size);
  const int64_t E = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t QD = c.num_attention_heads * c.head_dim, KVD = c.num_key_value_heads * c.head_dim;

  LlamaWeightStore store;
  LlamaWeights& w = store.weights_;
  w.layers.resize(size_t(c.num_hidden_layers));
  std::vector<MatrixPlan> matrices;
  std::vector<VectorPlan> vectors;
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
  // nn.Linear weight [out N, in K]
  const auto matrix = [&](const std::string& name, int64_t N, int64_t K, WeightMatrix* dst, bool matmul = true) {
    Source s = find(st, name, {N, K});
    const WeightType to = target(s.type, matmul);
    matrices.push_back({std::move(s), K, N, to, dst});
  };
  const auto vector = [&](const std::string& name, int64_t n, const float** dst) {
    vectors.push_back({find(st, name, {n}), dst});
  };

  // Every tensor is found and checked before anything is converted.
  matrix("model.embed_tokens.weight", V, E, &w.embed_tokens, c.tie_word_embeddings);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LlamaLayerWeights& L = w.layers[size_t(l)];
    vector(p + "input_layernorm.weight", E, &L.input_layernorm);
    matrix(p + "self_attn.q_proj.weight", QD, E, &L.q_proj);
    matrix(p + "self_attn.k_proj.weight", KVD, E, &L.k_proj);
    matrix(p + "self_attn.v_proj.weight", KVD, E, &L.v_proj);
    if (c.qkv_bias) {
      vector(p + "self_attn.q_proj.bias", QD, &L.q_bias);
      vector(p + "self_attn.k_proj.bias", KVD, &L.k_bias);
      vector(p + "self_attn.v_proj.bias", KVD, &L.v_bias);
    }
    matrix(p + "self_attn.o_proj.weight", E, QD, &L.o_proj);
    if (c.o_bias) vector(p + "self_attn.o_proj.bias", E, &L.o_bias);
    vector(p + "post_attention_layernorm.weight", E, &L.post_attention_layernorm);
    matrix(p + "mlp.gate_proj.weight", I, E, &L.gate_proj);
    matrix(p + "mlp.up_proj.weight", I, E, &L.up_proj);
    matrix(p + "mlp.down_proj.weight", E, I, &L.down_proj);
  }
  vector("model.norm.weight", E, &w.norm);
  // tied: lm_head is embed_tokens (a stored lm_head.weight, as some exports write, is ignored)
  if (!c.tie_word_embeddings) matrix("lm_head.weight", V, E, &w.lm_head);

  // In place when every matrix stays as stored (and is aligned for its type); else all of them
  // go into one new buffer and the file is freed.
  bool in_place = true;
  for (const MatrixPlan& m : matrices) in_place = in_place && m.to == m.src.type && m.src.aligned();
  size_t total = 0;
  if (!in_place) {
    for (MatrixPlan& m : matrices) {
      m.offset = total;
      total += (held_bytes(m.to, m.K, m.N) + 15) / 16 * 16;
    }
    store.converted_.resize(total);
  }
  for (MatrixPlan& m : matrices) {
    uint8_t* at = in_place ? const_cast<uint8_t*>(m.src.bytes) : store.converted_.data() + m.offset;
    if (!in_place) convert(m, at);
    *m.dst = WeightMatrix{m.to, WeightLayout::OutIn, m.K, m.N, at, nullptr};
    if (m.to == WeightType::Q8)
      m.dst->scales = reinterpret_cast<const float*>(at + Q8Layout::of(m.K, m.N).data_bytes());
    if (m.to == WeightType::F16) {
      // finite (the kernels' widening does not special-case inf and NaN); subnormals to zero
      // (matmul/weights.hpp: prepare_f16_weights), in the file's buffer or the converted one
      const std::string what = "Llama: tensor \"" + m.src.name + "\"";
      prepare_f16_weights(reinterpret_cast<uint16_t*>(at), size_t(m.K * m.N), what.c_str());
    }
    store.bytes_.matrices += m.dst->bytes();
  }
  if (c.tie_word_embeddings) w.lm_head = w.embed_tokens;

  // the matmuls' dtype, for display: embed_tokens counts only when it is also the LM head
  store.matrix_type_ = weight_type_name(w.lm_head.type);
  for (const MatrixPlan& m : matrices) {
    if (m.dst != &w.embed_tokens && m.to != w.lm_head.type) store.matrix_type_ = "mixed";
  }

  // 1-D parameters: float32 in place when the file is kept and they are aligned float32; else widened
  const auto read_in_place = [&](const Source& src) {
    return in_place && src.type == WeightType::F32 && src.aligned();
  };
  size_t n = 0;
  for (const VectorPlan& v : vectors) n += read_in_place(v.src) ? 0 : v.src.count;
  store.vectors_.resize(n);
  size_t at = 0;
  for (const VectorPlan& v : vectors) {
    if (read_in_place(v.src)) {
      *v.dst = reinterpret_cast<const float*>(v.src.bytes);
      continue;
    }
    for (size_t i = 0; i < v.src.count; ++i) store.vectors_[at + i] = element(v.src, i);
    *v.dst = store.vectors_.data() + at;
    at += v.src.count;
  }
  store.bytes_.vectors = n * 4;
  store.bytes_.converted = total;
  if (in_place) {
    store.file_ = std::move(file);
    store.bytes_.file = size;
  }  // else `file` is freed on return: nothing reads it any more
  return store;
}

}  // namespace qkv
