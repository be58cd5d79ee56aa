#include "model/llama_weights.hpp"

#include <string>

#include "model/safetensors.hpp"

namespace qkv {

LlamaWeightStore LlamaWeightStore::load(const LlamaConfig& c, MallocBytes file, size_t size, WeightFormat format) {
  c.validate();
  const safetensors::File st = safetensors::File::parse(file.get(), size);
  WeightLoader loader(st, "Llama", "", " is not supported (F32, F16, BF16 are)", format);
  const int64_t E = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t QD = c.num_attention_heads * c.head_dim, KVD = c.num_key_value_heads * c.head_dim;

  LlamaWeightStore store;
  LlamaWeights& w = store.weights_;
  w.layers.resize(size_t(c.num_hidden_layers));
  // nn.Linear weight [out N, in K]
  const auto matrix = [&](const std::string& name, int64_t N, int64_t K, WeightMatrix* dst, bool matmul = true) {
    loader.matrix(name, {N, K}, WeightLayout::OutIn, dst, matmul);
  };

  // Every tensor is found and checked before anything is converted.
  matrix("model.embed_tokens.weight", V, E, &w.embed_tokens, c.tie_word_embeddings);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
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
    matrix(p + "self_attn.o_proj.weight", E, QD, &L.o_proj);
    if (c.o_bias) loader.vector(p + "self_attn.o_proj.bias", E, &L.o_bias);
    loader.vector(p + "post_attention_layernorm.weight", E, &L.post_attention_layernorm);
    matrix(p + "mlp.gate_proj.weight", I, E, &L.gate_proj);
    matrix(p + "mlp.up_proj.weight", I, E, &L.up_proj);
    matrix(p + "mlp.down_proj.weight", E, I, &L.down_proj);
  }
  loader.vector("model.norm.weight", E, &w.norm);
  // tied: lm_head is embed_tokens (a stored lm_head.weight, as some exports write, is ignored)
  if (!c.tie_word_embeddings) matrix("lm_head.weight", V, E, &w.lm_head);

  store.buffers_ = loader.load(std::move(file), size);
  if (c.tie_word_embeddings) w.lm_head = w.embed_tokens;
  // the matmuls' dtype, for display: embed_tokens counts only when it is also the LM head
  store.matrix_type_ = loader.matmul_type(w.lm_head);
  return store;
}

}  // namespace qkv
