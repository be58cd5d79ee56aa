#include "model/readout.hpp"

#include <stdexcept>
#include <string>

#include "matmul/matmul.hpp"
#include "model/decoder_checks.hpp"
#include "model/interventions.hpp"
#include "model/residual.hpp"

namespace qkv {

DecoderDims decoder_dims(const GPT2& m) {
  const GPT2Config& c = m.config();
  return {c.n_layer, c.n_head, c.n_head, c.head_dim(), c.n_embd, c.vocab_size, c.n_positions};
}

DecoderDims decoder_dims(const Llama& m) {
  const LlamaConfig& c = m.config();
  return {c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,    c.head_dim,
          c.hidden_size,       c.vocab_size,          c.max_position_embeddings};
}

void unembedding_row(const GPT2& m, int32_t id, float* out) { read_column(m.weights().wte, id, out); }
void unembedding_row(const Llama& m, int32_t id, float* out) { read_column(m.weights().lm_head, id, out); }

AttributionLayout attribution_layout(const GPT2& m) {
  AttributionLayout a;
  a.pos_embed = true;
  a.attn_bias = m.weights().h[0].attn_c_proj_bias != nullptr;
  a.final_bias = true;
  const DecoderDims d = decoder_dims(m);
  a.count = 2 + d.layers * (d.heads + (a.attn_bias ? 2 : 1)) + 1;
  return a;
}

AttributionLayout attribution_layout(const Llama& m) {
  AttributionLayout a;
  a.attn_bias = m.weights().layers[0].o_bias != nullptr;
  const DecoderDims d = decoder_dims(m);
  a.count = 1 + d.layers * (d.heads + (a.attn_bias ? 2 : 1));
  return a;
}

namespace {

// What the attribution reads of one layer, either family.
struct LayerReadout {
  const WeightMatrix* o_proj;
  const float* o_bias;     // or null
  const float* attn_norm;  // Gemma 3's attention output norm, or null
};

// What it reads of the model as a whole.
struct ModelReadout {
  DecoderDims dims;
  AttributionLayout layout;
  std::vector<LayerReadout> layers;
  const WeightMatrix* lm_head;
  const WeightMatrix* embed;
  float embed_scale = 1.0f;
  const WeightMatrix* pos = nullptr;  // GPT-2's wpe
  const float* final_w;
  const float* final_b = nullptr;  // LayerNorm's bias
  bool layer_norm = false;
  bool softcapped = false;  // Gemma: the logits are soft-capped after the LM head
  int threads = 1;
};

double dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// `run(iv, rh, logits)` runs the forward with those hooks; the parts as attribute() describes.
template <class Run>
float attribute_with(const ModelReadout& r, const char* fn, const int32_t* ids, int64_t L, int64_t position, int32_t a,
                     int32_t b, float* parts, Run run) {
  const DecoderDims& d = r.dims;
  const int64_t NL = d.layers, H = d.heads, D = d.head_dim, E = d.d, V = d.vocab;
  if (position < 0 || position >= L) {
    throw std::invalid_argument(std::string(fn) + ": position " + std::to_string(position) + " is not in [0, " +
                                std::to_string(L) + ")");
  }
  if (a < 0 || a >= V || b >= V) {
    throw std::invalid_argument(std::string(fn) + ": token " + std::to_string(b >= V ? b : a) + " is not in [0, " +
                                std::to_string(V) + ")");
  }
  // the forward, recording the heads' outputs [NL, H, L, D], the MLPs' outputs [NL, L, E], the
  // final norm's divisors [L] and Gemma's output norms' [NL, 2, L]
  std::vector<float> heads(static_cast<size_t>(NL * H * L * D)), mlp(static_cast<size_t>(NL * L * E)),
      scale(static_cast<size_t>(L)), sub(size_t(NL * 2 * L)), logits(size_t(L * V));
  HeadInterventions iv;
  iv.layers = NL, iv.heads = H, iv.length = L, iv.keys = L, iv.value_dim = D;
  iv.outputs = heads.data();
  ResidualHooks rh;
  rh.layers = NL, rh.d = E, rh.length = L;
  rh.record[int(ResidSite::MlpOut)] = mlp.data();
  rh.final_scale = scale.data();
  rh.sub_scale = sub.data();
  // soft-capped logits: the total is read before the cap, from the final norm's output rows
  std::vector<float> hidden(r.softcapped ? static_cast<size_t>((NL + 1) * L * E) : 0);
  if (r.softcapped) rh.hidden = hidden.data();
  run(iv, rh, logits.data());

  // g [E] = the unembedding direction through the frozen final norm: u * w / scale (LayerNorm:
  // centred, as the mean a part removes from itself is its own); u = lm_head[a] (- lm_head[b])
  const size_t nE = static_cast<size_t>(E);
  std::vector<float> u(nE), ub(nE), g(nE), row(nE);
  read_column(*r.lm_head, a, u.data());
  if (b >= 0) {
    read_column(*r.lm_head, b, ub.data());
    for (int64_t i = 0; i < E; ++i) u[size_t(i)] -= ub[size_t(i)];
  }
  const double s = scale[size_t(position)];
  double mean = 0.0;
  for (int64_t i = 0; i < E; ++i) mean += double(u[size_t(i)]) * r.final_w[i] / s;
  mean = r.layer_norm ? mean / double(E) : 0.0;
  for (int64_t i = 0; i < E; ++i) g[size_t(i)] = float(double(u[size_t(i)]) * r.final_w[i] / s - mean);

  int64_t p = 0;
  // embed: the token's row (Gemma: times its scale), as the forward forms it
  read_column(*r.embed, ids[position], row.data());
  for (float& v : row) v *= r.embed_scale;
  parts[p++] = float(dot(row.data(), g.data(), E));
  if (r.pos) {  // pos_embed: the position's row
    read_column(*r.pos, position, row.data());
    parts[p++] = float(dot(row.data(), g.data(), E));
  }
  // per layer: z [H, H*D] holds head h's output in row h, columns h*D..; y [H, E] = z @ W_O^T:
  // each head through its slice of the output projection, in one product
  std::vector<float> z(size_t(H * H * D), 0.0f), y(size_t(H * E));
  for (int64_t l = 0; l < NL; ++l) {
    const LayerReadout& lr = r.layers[size_t(l)];
    for (int64_t h = 0; h < H; ++h) {
      const float* o = heads.data() + ((l * H + h) * L + position) * D;
      std::copy(o, o + D, z.data() + (h * H + h) * D);
    }
    matmul(*lr.o_proj, z.data(), H, nullptr, y.data(), r.threads);
    // Gemma 3: the attention output norm with its divisor frozen: y / s_a * w_a
    const double sa = sub[size_t((l * 2 + 0) * L + position)];
    auto through_norm = [&](float* v) {
      if (!lr.attn_norm) return;
      for (int64_t i = 0; i < E; ++i) v[i] = float(double(v[i]) / sa * lr.attn_norm[i]);
    };
    for (int64_t h = 0; h < H; ++h) {
      through_norm(y.data() + h * E);
      parts[p++] = float(dot(y.data() + h * E, g.data(), E));
    }
    if (lr.o_bias) {
      std::copy(lr.o_bias, lr.o_bias + E, row.data());
      through_norm(row.data());
      parts[p++] = float(dot(row.data(), g.data(), E));
    }
    // mlp: hook_mlp_out at the position (already through Gemma's output norm)
    parts[p++] = float(dot(mlp.data() + (l * L + position) * E, g.data(), E));
  }
  if (r.final_b) parts[p++] = float(dot(u.data(), r.final_b, E));  // ln_final.bias
  if (r.softcapped) return float(dot(hidden.data() + (NL * L + position) * E, u.data(), E));
  const float* lrow = logits.data() + position * V;
  return b >= 0 ? lrow[a] - lrow[b] : lrow[a];
}

}  // namespace

float attribute(const GPT2& m, const int32_t* ids, int64_t L, int64_t position, int32_t a, int32_t b, float* parts) {
  const GPT2Config& c = m.config();
  check_decoder_ids("attribute", ids, L, 0, c.vocab_size, c.n_positions, "n_positions");
  const GPT2Weights& w = m.weights();
  ModelReadout r;
  r.dims = decoder_dims(m);
  r.layout = attribution_layout(m);
  for (const GPT2LayerWeights& lw : w.h) r.layers.push_back({&lw.attn_c_proj, lw.attn_c_proj_bias, nullptr});
  r.lm_head = &w.wte, r.embed = &w.wte, r.pos = &w.wpe;
  r.final_w = w.ln_f_weight, r.final_b = w.ln_f_bias, r.layer_norm = true, r.threads = m.threads();
  return attribute_with(r, "attribute", ids, L, position, a, b, parts,
                        [&](const HeadInterventions& iv, const ResidualHooks& rh, float* logits) {
                          GPT2Scratch s;
                          m.run(ids, L, 0, nullptr, s, logits, true, nullptr, nullptr, nullptr, &iv, &rh);
                        });
}

float attribute(const Llama& m, const int32_t* ids, int64_t L, int64_t position, int32_t a, int32_t b, float* parts) {
  const LlamaConfig& c = m.config();
  check_decoder_ids("attribute", ids, L, 0, c.vocab_size, c.max_position_embeddings, "max_position_embeddings");
  const LlamaWeights& w = m.weights();
  ModelReadout r;
  r.dims = decoder_dims(m);
  r.layout = attribution_layout(m);
  for (const LlamaLayerWeights& lw : w.layers) r.layers.push_back({&lw.o_proj, lw.o_bias, lw.attn_output_norm});
  r.lm_head = &w.lm_head, r.embed = &w.embed_tokens, r.embed_scale = c.embed_scaled ? w.embed_scale : 1.0f;
  r.final_w = w.norm, r.threads = m.threads();
  r.softcapped = c.final_logit_softcapping > 0;
  return attribute_with(r, "attribute", ids, L, position, a, b, parts,
                        [&](const HeadInterventions& iv, const ResidualHooks& rh, float* logits) {
                          LlamaScratch s;
                          m.run(ids, L, 0, nullptr, s, logits, true, nullptr, nullptr, nullptr, &iv, &rh);
                        });
}

}  // namespace qkv
