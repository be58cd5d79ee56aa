#include "model/llama_weights.hpp"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "matmul/halves.hpp"
#include "model/gguf_model.hpp"
#include "model/safetensors.hpp"

namespace qkv {

namespace {

// Where a checkpoint's decoder tensors are: "model." (and "lm_head.weight"); a gemma3
// (Gemma3ForConditionalGeneration) checkpoint's under "language_model.model." as Google ships
// them, or "model.language_model." as transformers >= 4.52 saves them.
struct TensorNames {
  std::string decoder = "model.", lm_head = "lm_head.weight";
};

TensorNames tensor_names(const LlamaConfig& c, const safetensors::File& st) {
  TensorNames n;
  if (!c.multimodal) return n;
  if (st.find("model.language_model.embed_tokens.weight")) {
    n.decoder = "model.language_model.";
  } else {
    n.decoder = "language_model.model.";
    n.lm_head = "language_model.lm_head.weight";
  }
  return n;
}

// sqrt(E) as Gemma3TextScaledWordEmbedding multiplies by it: embed_scale.to(weight.dtype)
float embed_scale(int64_t E, WeightType held) {
  const float s = float(std::sqrt(double(E)));
  if (held == WeightType::BF16) return halves::bf16_to_f32(halves::f32_to_bf16(s));
  if (held == WeightType::F16) return halves::f16_to_f32(halves::f32_to_f16(s));
  return s;
}

}  // namespace

LlamaWeightStore LlamaWeightStore::load(const LlamaConfig& c, MallocBytes file, size_t size, WeightFormat format) {
  c.validate();
  const safetensors::File st = gguf::open_weights(file.get(), size);
  LlamaWeightStore store;
  WeightLoader loader = store.plan(c, st, format);
  store.finish(c, loader, loader.load(std::move(file), size));
  return store;
}

WeightLoader LlamaWeightStore::plan(const LlamaConfig& c, const safetensors::File& st, WeightFormat format) {
  c.validate();
  WeightLoader loader(st, "Llama", "", " is not supported (F32, F16, BF16 are)", format);
  const TensorNames names = tensor_names(c, st);
  const int64_t E = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t QD = c.num_attention_heads * c.head_dim, KVD = c.num_key_value_heads * c.head_dim;

  LlamaWeights& w = weights_;
  w.layers.resize(size_t(c.num_hidden_layers));
  // nn.Linear weight [out N, in K]
  const auto matrix = [&](const std::string& name, int64_t N, int64_t K, WeightMatrix* dst, bool matmul = true) {
    loader.matrix(name, {N, K}, WeightLayout::OutIn, dst, matmul);
  };

  // Every tensor is found and checked before anything is converted.
  const int64_t D = c.head_dim;
  matrix(names.decoder + "embed_tokens.weight", V, E, &w.embed_tokens, c.tie_word_embeddings);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = names.decoder + "layers." + std::to_string(l) + ".";
    LlamaLayerWeights& L = w.layers[size_t(l)];
    loader.vector(p + "input_layernorm.weight", E, &L.input_layernorm);
    matrix(p + "self_attn.q_proj.weight", QD, E, &L.q_proj);
    matrix(p + "self_attn.k_proj.weight", KVD, E, &L.k_proj);
    matrix(p + "self_attn.v_proj.weight", KVD, E, &L.v_proj);
    if (c.qkv_bias) {
      loader.vector(p + "self_attn.q_proj.bias", QD, &L.q_bias);
      loader.vector(p + "self_attn.k_proj.bias", KVD, &L.k_bias);
      loader.vector(p + "self_attn.v_proj.bias", KVD, &L.v_bias);
    }
    if (c.qk_norm) {
      loader.vector(p + "self_attn.q_norm.weight", D, &L.q_norm);
      loader.vector(p + "self_attn.k_norm.weight", D, &L.k_norm);
    }
    matrix(p + "self_attn.o_proj.weight", E, QD, &L.o_proj);
    if (c.o_bias) loader.vector(p + "self_attn.o_proj.bias", E, &L.o_bias);
    if (c.sandwich_norms) {
      loader.vector(p + "post_attention_layernorm.weight", E, &L.attn_output_norm);
      loader.vector(p + "pre_feedforward_layernorm.weight", E, &L.post_attention_layernorm);
      loader.vector(p + "post_feedforward_layernorm.weight", E, &L.mlp_output_norm);
    } else {
      loader.vector(p + "post_attention_layernorm.weight", E, &L.post_attention_layernorm);
    }
    matrix(p + "mlp.gate_proj.weight", I, E, &L.gate_proj);
    matrix(p + "mlp.up_proj.weight", I, E, &L.up_proj);
    matrix(p + "mlp.down_proj.weight", E, I, &L.down_proj);
  }
  loader.vector(names.decoder + "norm.weight", E, &w.norm);
  // tied: lm_head is embed_tokens (a stored lm_head.weight, as some exports write, is ignored)
  if (!c.tie_word_embeddings) matrix(names.lm_head, V, E, &w.lm_head);

  return loader;
}

void LlamaWeightStore::finish(const LlamaConfig& c, const WeightLoader& loader, WeightBuffers buffers) {
  LlamaWeights& w = weights_;
  buffers_ = std::move(buffers);
  if (c.tie_word_embeddings) w.lm_head = w.embed_tokens;
  if (c.embed_scaled) w.embed_scale = embed_scale(c.hidden_size, w.embed_tokens.type);
  if (c.norm_plus_one) hold_plus_one(c);
  // the matmuls' dtype, for display: embed_tokens counts only when it is also the LM head
  matrix_type_ = loader.matmul_type(w.lm_head);
}

void LlamaWeightStore::hold_plus_one(const LlamaConfig& c) {
  const int64_t E = c.hidden_size, D = c.head_dim;
  std::vector<std::pair<const float**, int64_t>> norms{{&weights_.norm, E}};
  for (LlamaLayerWeights& L : weights_.layers) {
    for (const float** v : {&L.input_layernorm, &L.post_attention_layernorm, &L.attn_output_norm, &L.mlp_output_norm})
      if (*v) norms.push_back({v, E});
    for (const float** v : {&L.q_norm, &L.k_norm})
      if (*v) norms.push_back({v, D});
  }
  size_t total = 0;
  for (const auto& n : norms) total += size_t(n.second);
  plus_one_.resize(total);
  size_t at = 0;
  for (const auto& [v, n] : norms) {
    // Gemma3RMSNorm: output * (1.0 + weight.float()), the sum in float32
    for (int64_t i = 0; i < n; ++i) plus_one_[at + size_t(i)] = 1.0f + (*v)[i];
    *v = plus_one_.data() + at;
    at += size_t(n);
  }
  buffers_.bytes.vectors += total * sizeof(float);
}

}  // namespace qkv
