#include "model/gpt2_weights.hpp"

#include <string>
#include <utility>

#include "model/gguf_model.hpp"
#include "model/gpt2.hpp"
#include "model/safetensors.hpp"

namespace qkv {

GPT2WeightStore GPT2WeightStore::load(const GPT2Config& c, MallocBytes file, size_t size, WeightFormat format) {
  c.validate();
  const safetensors::File st = gguf::open_weights(file.get(), size);
  GPT2WeightStore store;
  WeightLoader loader = store.plan(c, st, format);
  store.finish(c, loader, loader.load(std::move(file), size));
  return store;
}

WeightLoader GPT2WeightStore::plan(const GPT2Config& c, const safetensors::File& st, WeightFormat format) {
  c.validate();
  // a checkpoint uses the "transformer." prefix (GPT2LMHeadModel) or not (GPT2Model)
  const bool prefixed = st.find("wte.weight") == nullptr && st.find("transformer.wte.weight") != nullptr;
  WeightLoader loader(st, "GPT2", prefixed ? "transformer." : "",
                      " cannot be converted to float32 (F32, F16 and BF16 can)", format);
  const int64_t E = c.n_embd, I = c.inner(), V = c.vocab_size, P = c.n_positions;

  GPT2Weights& w = weights_;
  w.h.resize(size_t(c.n_layer));
  // Every tensor is found and checked before anything is allocated: the tables [V, E] and
  // [P, E] (wpe is only gathered from), the layers' Conv1D matrices [in, out].
  loader.matrix("wte.weight", {V, E}, WeightLayout::OutIn, &w.wte);
  loader.matrix("wpe.weight", {P, E}, WeightLayout::OutIn, &w.wpe, false);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    GPT2LayerWeights& L = w.h[size_t(l)];
    loader.vector(p + "ln_1.weight", E, &L.ln_1_weight);
    loader.vector(p + "ln_1.bias", E, &L.ln_1_bias);
    loader.matrix(p + "attn.c_attn.weight", {E, 3 * E}, WeightLayout::InOut, &L.attn_c_attn);
    loader.vector(p + "attn.c_attn.bias", 3 * E, &L.attn_c_attn_bias);
    loader.matrix(p + "attn.c_proj.weight", {E, E}, WeightLayout::InOut, &L.attn_c_proj);
    loader.vector(p + "attn.c_proj.bias", E, &L.attn_c_proj_bias);
    loader.vector(p + "ln_2.weight", E, &L.ln_2_weight);
    loader.vector(p + "ln_2.bias", E, &L.ln_2_bias);
    loader.matrix(p + "mlp.c_fc.weight", {E, I}, WeightLayout::InOut, &L.mlp_c_fc);
    loader.vector(p + "mlp.c_fc.bias", I, &L.mlp_c_fc_bias);
    loader.matrix(p + "mlp.c_proj.weight", {I, E}, WeightLayout::InOut, &L.mlp_c_proj);
    loader.vector(p + "mlp.c_proj.bias", E, &L.mlp_c_proj_bias);
  }
  loader.vector("ln_f.weight", E, &w.ln_f_weight);
  loader.vector("ln_f.bias", E, &w.ln_f_bias);

  return loader;
}

void GPT2WeightStore::finish(const GPT2Config&, const WeightLoader& loader, WeightBuffers buffers) {
  buffers_ = std::move(buffers);
  matrix_type_ = loader.matmul_type(weights_.wte);  // wte is also the LM head
}

}  // namespace qkv
