#include "model/llama.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "attention.hpp"
#include "matmul/matmul.hpp"
#include "model/decoder_checks.hpp"
#include "model/generate.hpp"
#include "model/layers.hpp"

namespace qkv {

// ----------------------------------------------------------------------------- load

Llama::Llama(LlamaConfig config, LlamaWeightStore store)
    : config_(std::move(config)), store_(std::move(store)), inv_freq_(config_.rope_inv_freq()) {
  if (!config_.local_rope.empty()) inv_freq_local_ = config_.rope_inv_freq(true);
}

Llama Llama::load(std::string_view config_json, MallocBytes file, size_t size, WeightFormat format) {
  LlamaConfig config = LlamaConfig::from_json(config_json);
  LlamaWeightStore store = LlamaWeightStore::load(config, std::move(file), size, format);
  return Llama(std::move(config), std::move(store));
}

Llama Llama::load(std::string_view config_json, const uint8_t* bytes, size_t size, WeightFormat format) {
  MallocBytes copy(static_cast<uint8_t*>(std::malloc(std::max<size_t>(size, 1))));
  if (!copy) throw std::length_error("Llama::load: cannot allocate " + std::to_string(size) + " bytes");
  if (size) std::memcpy(copy.get(), bytes, size);
  return load(config_json, std::move(copy), size, format);
}

// ----------------------------------------------------------------------------- building blocks

namespace {

// out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w, rows r < n (the sum of squares in double);
// the rows split over the threads
void rmsnorm(float* out, const float* x, const float* w, int64_t n, int64_t E, double eps, int threads) {
  for_rows(n, E, threads, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * E;
      double ss = 0.0;
      for (int64_t i = 0; i < E; ++i) ss += double(xr[i]) * double(xr[i]);
      const float inv = float(1.0 / std::sqrt(ss / double(E) + eps));
      for (int64_t i = 0; i < E; ++i) out[r * E + i] = w[i] * (xr[i] * inv);
    }
  });
}

// Rotates every head of rows x [L, heads, D] in place, row t by cos/sin [L, D/2] (HF's
// rotate_half: element i pairs with i + D/2):
//   x'[i]       = x[i] cos - x[i + D/2] sin
//   x'[i + D/2] = x[i + D/2] cos + x[i] sin
// (rows split over the threads)
void rope(float* x, int64_t L, int64_t heads, int64_t D, const float* cos, const float* sin, int threads) {
  const int64_t half = D / 2;
  for_rows(L, heads * D, threads, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* c = cos + t * half;
      const float* s = sin + t * half;
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x + (t * heads + h) * D;
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          v[i] = a * c[i] - b * s[i];
          v[i + half] = b * c[i] + a * s[i];
        }
      }
    }
  });
}

// dst [heads, L, D] from src [L, heads, D] (rows t split over the threads)
void split_heads(float* dst, const float* src, int64_t L, int64_t heads, int64_t D, int threads) {
  for_rows(L, heads * D, threads, [&](int64_t t0, int64_t t1) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = t0; t < t1; ++t) {
        const float* s = src + (t * heads + h) * D;
        std::copy(s, s + D, dst + (h * L + t) * D);
      }
    }
  });
}

// dst [L, heads, D] from src [heads, L, D] (rows t split over the threads)
void merge_heads(float* dst, const float* src, int64_t L, int64_t heads, int64_t D, int threads) {
  for_rows(L, heads * D, threads, [&](int64_t t0, int64_t t1) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = t0; t < t1; ++t) {
        const float* s = src + (h * L + t) * D;
        std::copy(s, s + D, dst + (t * heads + h) * D);
      }
    }
  });
}

// x [n, E] += y [n, E], the residual add (rows split over the threads)
void add_rows(float* x, const float* y, int64_t n, int64_t E, int threads) {
  for_rows(n, E, threads, [&](int64_t r0, int64_t r1) { add_in_place(x + r0 * E, y + r0 * E, (r1 - r0) * E); });
}

void ensure(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// cos / sin [L, D/2] of positions pos0 .. pos0 + L - 1: position p, frequency i -> p * inv_freq[i]
// (in double, rounded once)
void rope_angles(std::vector<float>& cos, std::vector<float>& sin, const std::vector<double>& inv_freq, int64_t pos0,
                 int64_t L) {
  const int64_t half = int64_t(inv_freq.size());
  ensure(cos, size_t(L * half));
  ensure(sin, size_t(L * half));
  for (int64_t t = 0; t < L; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(pos0 + t) * inv_freq[size_t(i)];
      cos[size_t(t * half + i)] = float(std::cos(angle));
      sin[size_t(t * half + i)] = float(std::sin(angle));
    }
  }
}

}  // namespace

// ----------------------------------------------------------------------------- forward

size_t LlamaScratch::bytes() const {
  size_t n = 0;
  for (const auto* b :
       {&x, &xb, &xb2, &q, &k, &v, &qh, &kh, &vh, &att, &hb, &hb2, &cos, &sin, &cos_local, &sin_local}) {
    n += b->capacity() * sizeof(float);
  }
  return n;
}

void Llama::forward(const int32_t* ids, int64_t L, float* logits, float* attentions, float* queries,
                    float* keys) const {
  check_decoder_ids("Llama::forward", ids, L, 0, config_.vocab_size, config_.max_position_embeddings,
                    "max_position_embeddings");
  LlamaScratch scratch;
  run(ids, L, 0, nullptr, scratch, logits, true, attentions, queries, keys);
}

void Llama::run(const int32_t* ids, int64_t L, int64_t pos0, std::vector<KVCache>* caches, LlamaScratch& s,
                float* logits, bool all_logits, float* attentions, float* queries, float* keys,
                const HeadInterventions* iv, const ResidualHooks* rh) const {
  const LlamaConfig& c = config_;
  const LlamaWeights& W = store_.weights();
  const int64_t E = c.hidden_size, H = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim;
  const int64_t I = c.intermediate_size;
  const int64_t Lk = pos0 + L;  // keys visible to the last query
  check_decoder_ids("Llama::run", ids, L, pos0, c.vocab_size, c.max_position_embeddings, "max_position_embeddings");
  check_decoder_caches("Llama::run", caches, c.num_hidden_layers, pos0, L, Hkv, D);
  if (iv) iv->validate("Llama::run", c.num_hidden_layers, H, D, pos0, L, Lk);
  if (rh) rh->validate("Llama::run", c.num_hidden_layers, E, pos0, L, all_logits);
  const KeepHelpersAwake awake(threads_);  // the pool's helpers poll between this forward's jobs
  std::vector<uint8_t> knockout;           // a layer's knockout mask, when it must be sliced (chunks)

  const size_t n = size_t(L);
  ensure(s.x, n * E);                    // x   [L, E]        the residual stream
  ensure(s.xb, n * std::max(E, H * D));  // xb [L, E] normed input of a sub-block; [L, H*D] merged heads
  ensure(s.xb2, n * E);                  // xb2 [L, E]        a sub-block's output before the residual add
  ensure(s.q, n * H * D);                // q   [L, H, D]     q_proj output, rotated in place
  ensure(s.k, n * Hkv * D);              // k   [L, Hkv, D]   k_proj output, rotated in place
  ensure(s.v, n * Hkv * D);              // v   [L, Hkv, D]
  ensure(s.qh, n * H * D);               // qh  [H, L, D]     as attention reads them
  ensure(s.kh, n * Hkv * D);             // kh  [Hkv, L, D]
  ensure(s.vh, n * Hkv * D);             // vh  [Hkv, L, D]
  ensure(s.att, n * H * D);              // att [H, L, D]     attention output per head
  ensure(s.hb, n * I);                   // hb  [L, I]        gate, then silu(gate) * up
  ensure(s.hb2, n * I);                  // hb2 [L, I]        up
  float *x = s.x.data(), *xb = s.xb.data(), *xb2 = s.xb2.data();
  float *q = s.q.data(), *k = s.k.data(), *v = s.v.data(), *qh = s.qh.data(), *kh = s.kh.data(), *vh = s.vh.data();
  float *att = s.att.data(), *hb = s.hb.data(), *hb2 = s.hb2.data();

  // rotary angles cos / sin [L, D/2] of positions pos0 .. pos0 + L - 1 (Gemma 3's local layers: their own)
  rope_angles(s.cos, s.sin, inv_freq_, pos0, L);
  if (!inv_freq_local_.empty()) rope_angles(s.cos_local, s.sin_local, inv_freq_local_, pos0, L);

  // token embedding: x[t] = embed_tokens[ids[t]] (no position embedding: positions are rotations)
  for (int64_t t = 0; t < L; ++t) read_column(W.embed_tokens, ids[t], x + t * E);
  if (c.embed_scaled)  // Gemma 3: times sqrt(E) in embed_tokens' dtype
    for (size_t i = 0; i < n * size_t(E); ++i) x[i] *= W.embed_scale;
  if (rh) rh->embeddings(x, pos0, L);  // hidden_states[0]

  AttentionOptions opt;
  opt.causal = true;       // query t sees keys j <= pos0 + t (bottom-right aligned)
  opt.threads = threads_;  // scale: the default 1 / sqrt(D); Gemma 3: query_pre_attn_scalar^-0.5
  if (c.attn_scale > 0) opt.scale = float(c.attn_scale);

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LlamaLayerWeights& w = W.layers[size_t(l)];
    if (rh && !rh->runs(l)) continue;  // a forward that starts at a later block
    // a forward that starts here: x [L, E] = the given stream
    const bool start = rh && l == rh->start_layer;
    if (start) std::copy(rh->start_resid, rh->start_resid + n * E, x);
    if (rh) rh->at(ResidSite::ResidPre, l, x, pos0, L);  // steering, patch, record
    opt.window = c.window[size_t(l)];                    // 0 = full causal; w: keys j > i + (Lk - Lq) - w
    float* probs = attentions ? attentions + l * H * L * Lk : nullptr;
    const LayerHooks hooks("Llama::run", iv, l, pos0, L, Lk, D);  // nothing when iv is null
    if (start && rh->start_att) {
      // att [H, L, D]: this block's attention output as given (no q/k/v, no cache append)
      std::copy(rh->start_att, rh->start_att + n * H * D, att);
    } else {
      // xb [L, E] = rmsnorm(x) * input_layernorm
      rmsnorm(xb, x, w.input_layernorm, L, E, c.rms_norm_eps, threads_);
      // q [L, H*D], k [L, Hkv*D], v [L, Hkv*D] = xb @ W^T (+ bias: Qwen2, attention_bias), in one
      // call (decoding: xb prepared once, the three matrices' columns split over the threads at once)
      matmul_many({{&w.q_proj, w.q_bias, q}, {&w.k_proj, w.k_bias, k}, {&w.v_proj, w.v_bias, v}}, xb, L, threads_);
      // Qwen3, Gemma 3: RMSNorm over each head's D values of q and k (rows [L*H, D], [L*Hkv, D])
      if (c.qk_norm) {
        rmsnorm(q, q, w.q_norm, L * H, D, c.rms_norm_eps, threads_);
        rmsnorm(k, k, w.k_norm, L * Hkv, D, c.rms_norm_eps, threads_);
      }
      // rotary embedding of q and k, every head, at positions pos0 + t
      const bool local = c.uses_local_rope(l);
      const float* cos = local ? s.cos_local.data() : s.cos.data();
      const float* sin = local ? s.sin_local.data() : s.sin.data();
      rope(q, L, H, D, cos, sin, threads_);
      rope(k, L, Hkv, D, cos, sin, threads_);
      // split heads: qh [H, L, D], kh / vh [Hkv, L, D] (K/V once per kv head: never repeated per query head)
      split_heads(qh, q, L, H, D, threads_);
      split_heads(kh, k, L, Hkv, D, threads_);
      split_heads(vh, v, L, Hkv, D, threads_);
      // queries [n_layer, H, L, D], keys [n_layer, Hkv, L, D] if asked: after rotation, q unscaled
      if (queries) std::copy(qh, qh + H * L * D, queries + l * H * L * D);
      if (keys) std::copy(kh, kh + Hkv * L * D, keys + l * Hkv * L * D);
      // att [H, L, D] = softmax(qh kh^T / sqrt(D), causal, window) vh, query head h reading kv
      // head h / (H / Hkv); probabilities [H, L, Lk] if asked
      if (caches) {
        KVCache& cache = (*caches)[size_t(l)];
        cache.append(kh, vh, L);  // the cache now holds Lk positions [1, Hkv, Lk, D]
        cache.attend(qh, H, L, hooks.options(opt, knockout), att, probs);
      } else {
        const AttentionShape shape{1, H, Hkv, L, L, D, D};
        attention(shape, qh, kh, vh, hooks.options(opt, knockout), att, probs);
      }
    }
    hooks.after(att, probs);  // head mask, patching, head outputs
    // the rows the rest of the block computes: rows [r0, L), every row, or in the last block the
    // last one only when only its logits are read (rh->last_row_only); xr = x + r0 * E
    const int64_t r0 = rh && rh->last_row_only && l == c.num_hidden_layers - 1 ? L - 1 : 0, Lr = L - r0;
    float* xr = x + r0 * E;
    // merge heads: xb [L, H*D] from att [H, L, D]; rows r0.. read on
    merge_heads(xb, att, L, H, D, threads_);
    // xb2 [Lr, E] = xb[r0..] @ o_proj^T (+ bias); residual: x += xb2
    matmul(w.o_proj, xb + r0 * H * D, Lr, w.o_bias, xb2, threads_);
    if (w.attn_output_norm) {  // Gemma 3: post_attention_layernorm on the sub-block's output
      if (rh) rh->output_norm_scale(l, 0, xb2, pos0 + r0, Lr, c.rms_norm_eps);
      rmsnorm(xb2, xb2, w.attn_output_norm, Lr, E, c.rms_norm_eps, threads_);
    }
    if (rh) rh->at(ResidSite::AttnOut, l, xb2, pos0 + r0, Lr);
    add_rows(xr, xb2, Lr, E, threads_);
    if (rh) rh->at(ResidSite::ResidMid, l, xr, pos0 + r0, Lr);

    // xb [Lr, E] = rmsnorm(x) * post_attention_layernorm (Gemma 3: pre_feedforward_layernorm)
    rmsnorm(xb, xr, w.post_attention_layernorm, Lr, E, c.rms_norm_eps, threads_);
    // SwiGLU: hb [Lr, I] = silu(xb @ gate^T) * (xb @ up^T), silu(g) = g / (1 + e^-g); Gemma's GeGLU:
    // gelu_tanh(gate) * up
    matmul_many({{&w.gate_proj, nullptr, hb}, {&w.up_proj, nullptr, hb2}}, xb, Lr, threads_);
    for_rows(Lr, I, threads_, [&](int64_t r0, int64_t r1) {
      if (c.activation == MlpActivation::GeluTanh) {
        geglu_tanh(hb + r0 * I, hb2 + r0 * I, (r1 - r0) * I);
      } else {
        swiglu(hb + r0 * I, hb2 + r0 * I, (r1 - r0) * I);
      }
    });
    // xb2 [Lr, E] = hb @ down^T; residual: x += xb2
    matmul(w.down_proj, hb, Lr, nullptr, xb2, threads_);
    if (w.mlp_output_norm) {  // Gemma 3: post_feedforward_layernorm on the sub-block's output
      if (rh) rh->output_norm_scale(l, 1, xb2, pos0 + r0, Lr, c.rms_norm_eps);
      rmsnorm(xb2, xb2, w.mlp_output_norm, Lr, E, c.rms_norm_eps, threads_);
    }
    if (rh) rh->at(ResidSite::MlpOut, l, xb2, pos0 + r0, Lr);
    add_rows(xr, xb2, Lr, E, threads_);
    if (rh) rh->at(ResidSite::ResidPost, l, xr, pos0 + r0, Lr);
    if (rh) rh->block_output(l, x, pos0, L);  // hidden_states[l + 1]
  }

  // final norm, only the rows whose logits are wanted (every row when the hidden states are
  // asked for): xb [rows, E] = rmsnorm(x[first..]) * norm
  if (rh) rh->final_input(x, pos0, L, false, c.rms_norm_eps);  // ln_final.hook_scale
  const int64_t first = all_logits || (rh && rh->hidden) ? 0 : L - 1;
  const int64_t rows = L - first;
  rmsnorm(xb, x + first * E, W.norm, rows, E, c.rms_norm_eps, threads_);
  if (rh) rh->final_output(xb, pos0, L);                                     // hidden_states[num_hidden_layers]
  if (!all_logits && rows > 1) std::copy(xb + (L - 1) * E, xb + L * E, xb);  // the last row's logits only
  // a few tokens' logits of the last row, not the LM head
  if (rh && rh->read_out(xb, float(c.final_logit_softcapping))) return;
  // logits [L or 1, V] = xb @ lm_head^T (embed_tokens when tied)
  const int64_t out_rows = all_logits ? L : 1;
  matmul(W.lm_head, xb, out_rows, nullptr, logits, threads_);
  if (c.final_logit_softcapping > 0) softcap(logits, out_rows * c.vocab_size, float(c.final_logit_softcapping));
}

void Llama::unembed(const float* x, int64_t n, float* logits) const {
  const LlamaConfig& c = config_;
  const int64_t E = c.hidden_size;
  // xn [n, E] = rmsnorm(x) * norm, row by row
  std::vector<float> xn(size_t(std::max<int64_t>(n, 0) * E));
  rmsnorm(xn.data(), x, store_.weights().norm, n, E, c.rms_norm_eps, threads_);
  // logits [n, V] = xn @ lm_head^T: one matrix product over every row
  matmul(store_.weights().lm_head, xn.data(), n, nullptr, logits, threads_);
  if (c.final_logit_softcapping > 0) softcap(logits, n * c.vocab_size, float(c.final_logit_softcapping));
}

// ----------------------------------------------------------------------------- session

LlamaSession::LlamaSession(const Llama& model) : model_(model) {}

void LlamaSession::reserve(int64_t positions) {
  const LlamaConfig& c = model_.config();
  reserve_positions(caches_, c.num_hidden_layers, c.num_key_value_heads, c.head_dim, positions,
                    c.max_position_embeddings);
}

size_t LlamaSession::cache_bytes() const { return qkv::cache_bytes(caches_); }

void LlamaSession::reset() {
  for (auto& cache : caches_) cache.clear();
  position_ = 0;
}

void LlamaSession::prefill(const int32_t* ids, int64_t L, float* logits, float* attentions, float* queries, float* keys,
                           bool all_logits, const HeadInterventions* iv, const ResidualHooks* rh) {
  const int64_t P = model_.config().max_position_embeddings;
  if (L >= 1 && position_ + L > P) {
    throw std::length_error("LlamaSession: " + std::to_string(position_) + " cached + " + std::to_string(L) +
                            " new tokens exceed max_position_embeddings = " + std::to_string(P));
  }
  if (L >= 1) reserve(position_ + L);
  model_.run(ids, L, position_, &caches_, scratch_, logits, all_logits, attentions, queries, keys, iv, rh);
  position_ += L;
}

void LlamaSession::step(int32_t id, float* logits, float* attentions, const HeadInterventions* iv,
                        const ResidualHooks* rh) {
  prefill(&id, 1, logits, attentions, nullptr, nullptr, false, iv, rh);
}

// ----------------------------------------------------------------------------- generation

std::vector<int32_t> generate(const Llama& model, const std::vector<int32_t>& prompt, int64_t n_new,
                              const SamplingOptions& options, uint64_t seed, bool use_cache) {
  const LlamaConfig& c = model.config();
  return generate_tokens<LlamaSession>(model, c.vocab_size, c.max_position_embeddings, "max_position_embeddings",
                                       prompt, n_new, options, seed, use_cache);
}

}  // namespace qkv
