#include "model/seq2seq.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "attention.hpp"
#include "matmul/matmul.hpp"
#include "model/layers.hpp"
#include "model/tensor_feed.hpp"

namespace qkv {

// ----------------------------------------------------------------------------- small layers

namespace {

// y [M, N] = x [M, K] W^T + b for an nn.Linear weight W [N, K] held as float32
void linear_out_in(const std::vector<float>& W, int64_t K, int64_t N, const float* x, int64_t M, const float* b,
                   float* y, int threads) {
  WeightMatrix w;
  w.type = WeightType::F32;
  w.layout = WeightLayout::OutIn;
  w.K = K;
  w.N = N;
  w.data = W.data();
  matmul(w, x, M, b, y, threads);
}

// [L, E] rows -> [H, L, D] heads
void split_heads(const float* x, int64_t L, int64_t H, int64_t D, float* out) {
  for (int64_t t = 0; t < L; ++t) {
    for (int64_t h = 0; h < H; ++h)
      std::copy(x + t * H * D + h * D, x + t * H * D + (h + 1) * D, out + (h * L + t) * D);
  }
}

// [H, L, D] heads -> [L, E] rows
void merge_heads(const float* x, int64_t L, int64_t H, int64_t D, float* out) {
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t t = 0; t < L; ++t) std::copy(x + (h * L + t) * D, x + (h * L + t + 1) * D, out + t * H * D + h * D);
  }
}

void ensure(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// x [L, E] = LN(x + y): BART's post-LN residual
void add_norm(float* x, const float* y, int64_t L, int64_t E, const std::vector<float>& w, const std::vector<float>& b,
              float eps) {
  add_in_place(x, y, L * E);
  layer_norm_rows(x, x, w.data(), b.data(), L, E, eps, NormMath::Double);
}

}  // namespace

// ----------------------------------------------------------------------------- model

Bart::Bart(BartConfig config, BartWeights weights) : config_(config), weights_(std::move(weights)) {
  config_.validate();
  const BartConfig& c = config_;
  const size_t E = size_t(c.d_model), V = size_t(c.vocab_size), P = size_t(c.max_positions + 2);
  auto check = [](const std::string& name, const std::vector<float>& v, size_t want) {
    if (v.size() != want) {
      throw std::invalid_argument("Bart: weight " + name + " holds " + std::to_string(v.size()) +
                                  " floats, the config needs " + std::to_string(want));
    }
  };
  check("shared", weights_.shared, V * E);
  check("final_logits_bias", weights_.final_logits_bias, V);
  check("encoder.embed_positions", weights_.enc_pos, P * E);
  check("decoder.embed_positions", weights_.dec_pos, P * E);
  for (auto* v : {&weights_.enc_ln_emb_w, &weights_.enc_ln_emb_b, &weights_.dec_ln_emb_w, &weights_.dec_ln_emb_b}) {
    check("layernorm_embedding", *v, E);
  }
  auto check_attn = [&](const std::string& p, const BartAttentionWeights& a) {
    for (auto* w : {&a.q_w, &a.k_w, &a.v_w, &a.o_w}) check(p + " projection weight", *w, E * E);
    for (auto* b : {&a.q_b, &a.k_b, &a.v_b, &a.o_b}) check(p + " projection bias", *b, E);
  };
  auto check_layers = [&](const char* stack, const std::vector<BartLayerWeights>& layers, int64_t n, int64_t F,
                          bool decoder) {
    if (int64_t(layers.size()) != n) {
      throw std::invalid_argument(std::string("Bart: ") + std::to_string(layers.size()) + " " + stack +
                                  " layers of weights, the config needs " + std::to_string(n));
    }
    for (const auto& L : layers) {
      const std::string p = std::string(stack) + " layer";
      check_attn(p + " self_attn", L.self_attn);
      check(p + " self_attn_layer_norm", L.self_attn_ln_w, E);
      check(p + " self_attn_layer_norm", L.self_attn_ln_b, E);
      if (decoder) {
        check_attn(p + " encoder_attn", L.cross_attn);
        check(p + " encoder_attn_layer_norm", L.cross_attn_ln_w, E);
        check(p + " encoder_attn_layer_norm", L.cross_attn_ln_b, E);
      }
      check(p + " fc1.weight", L.fc1_w, size_t(F) * E);
      check(p + " fc1.bias", L.fc1_b, size_t(F));
      check(p + " fc2.weight", L.fc2_w, E * size_t(F));
      check(p + " fc2.bias", L.fc2_b, E);
      check(p + " final_layer_norm", L.final_ln_w, E);
      check(p + " final_layer_norm", L.final_ln_b, E);
    }
  };
  check_layers("encoder", weights_.encoder, c.encoder_layers, c.encoder_ffn, false);
  check_layers("decoder", weights_.decoder, c.decoder_layers, c.decoder_ffn, true);
}

// A Bart being loaded: the header parsed and every tensor planned (each vector sized), then the
// file's bytes fed, each tensor converted into its vector as it completes.
struct Bart::Stream::Build {
  BartConfig config;
  safetensors::File file;
  TensorFeed feed;
  BartWeights weights;
  Build(std::string_view config_json, safetensors::File f)
      : config(BartConfig::from_json(config_json)), file(std::move(f)) {
    weights = BartWeights::from_safetensors(config, file, feed);
    feed.start(file.size(), "Bart");
  }
  Bart finish() {
    feed.finish();
    return Bart(config, std::move(weights));
  }
};

Bart::Stream::Stream(std::string_view config_json, const uint8_t* head, size_t head_size, uint64_t file_size)
    : b_(std::make_unique<Build>(config_json, safetensors::File::parse_header(head, head_size, file_size))) {}
Bart::Stream::~Stream() = default;
void Bart::Stream::feed(const uint8_t* bytes, size_t n) { b_->feed.feed(bytes, n); }
Bart Bart::Stream::finish() { return b_->finish(); }

Bart Bart::load(std::string_view config_json, const uint8_t* bytes, size_t size) {
  Stream::Build b(config_json, safetensors::File::parse(bytes, size));
  b.feed.feed(bytes, size);
  return b.finish();
}

void Bart::check_ids(const char* fn, const char* arg, const int32_t* ids, int64_t L, int64_t pos0) const {
  if (L < 1) throw std::invalid_argument(std::string(fn) + ": " + arg + " is empty (need at least 1 token)");
  if (pos0 + L > config_.max_positions) {
    throw std::length_error(std::string(fn) + ": " + arg + " reaches position " + std::to_string(pos0 + L) + " (" +
                            std::to_string(pos0) + " already + " + std::to_string(L) +
                            " new), past max_position_embeddings = " + std::to_string(config_.max_positions));
  }
  for (int64_t i = 0; i < L; ++i) {
    if (ids[i] < 0 || ids[i] >= config_.vocab_size) {
      throw std::invalid_argument(std::string(fn) + ": " + arg + "[" + std::to_string(i) +
                                  "] = " + std::to_string(ids[i]) + " is out of range [0, " +
                                  std::to_string(config_.vocab_size) + ")");
    }
  }
}

void Bart::encode(const int32_t* ids, int64_t Ls, float* out, float* attentions, const HeadInterventions* iv,
                  float* hidden_states) const {
  const BartConfig& c = config_;
  const int64_t E = c.d_model, H = c.encoder_heads, D = E / H, F = c.encoder_ffn;
  check_ids("Bart::encode", "input ids", ids, Ls, 0);
  if (iv) iv->validate("Bart::encode", c.encoder_layers, H, D, 0, Ls, Ls);
  const KeepHelpersAwake awake(threads_);  // the pool's helpers poll between this forward's jobs
  std::vector<uint8_t> knockout;
  const size_t n = size_t(Ls);
  std::vector<float> xb(n * E), q(n * E), k(n * E), v(n * E), att(n * E), hb(n * F);
  float* x = out;  // x [Ls, E], the residual stream, in the output buffer

  // x[t] = LN_emb(shared[ids[t]] * scale + enc_pos[t + 2])
  const float scale = c.scale_embedding ? std::sqrt(float(E)) : 1.0f;
  for (int64_t t = 0; t < Ls; ++t) {
    const float* te = weights_.shared.data() + int64_t(ids[t]) * E;
    const float* pe = weights_.enc_pos.data() + (t + 2) * E;
    for (int64_t i = 0; i < E; ++i) x[t * E + i] = te[i] * scale + pe[i];
  }
  layer_norm_rows(x, x, weights_.enc_ln_emb_w.data(), weights_.enc_ln_emb_b.data(), Ls, E, c.layer_norm_eps,
                  NormMath::Double);
  if (hidden_states) std::copy_n(x, Ls * E, hidden_states);  // hidden_states[0] [Ls, E]

  AttentionOptions opt;  // bidirectional: every token sees every token (one unpadded input)
  opt.threads = threads_;
  for (int64_t l = 0; l < c.encoder_layers; ++l) {
    const BartLayerWeights& w = weights_.encoder[size_t(l)];
    // q/k/v [Ls, E] = x W^T + b, then heads [H, Ls, D]
    linear_out_in(w.self_attn.q_w, E, E, x, Ls, w.self_attn.q_b.data(), xb.data(), threads_);
    split_heads(xb.data(), Ls, H, D, q.data());
    linear_out_in(w.self_attn.k_w, E, E, x, Ls, w.self_attn.k_b.data(), xb.data(), threads_);
    split_heads(xb.data(), Ls, H, D, k.data());
    linear_out_in(w.self_attn.v_w, E, E, x, Ls, w.self_attn.v_b.data(), xb.data(), threads_);
    split_heads(xb.data(), Ls, H, D, v.data());
    // att [H, Ls, D] = softmax(q k^T / sqrt(D)) v; probabilities [H, Ls, Ls] if asked
    float* probs = attentions ? attentions + l * H * Ls * Ls : nullptr;
    const LayerHooks hooks("Bart::encode", iv, l, 0, Ls, Ls, D);  // nothing when iv is null
    attention(AttentionShape{1, H, H, Ls, Ls, D, D}, q.data(), k.data(), v.data(), hooks.options(opt, knockout),
              att.data(), probs);
    hooks.after(att.data(), probs);
    // x = LN(x + out_proj(att))
    merge_heads(att.data(), Ls, H, D, q.data());
    linear_out_in(w.self_attn.o_w, E, E, q.data(), Ls, w.self_attn.o_b.data(), xb.data(), threads_);
    add_norm(x, xb.data(), Ls, E, w.self_attn_ln_w, w.self_attn_ln_b, c.layer_norm_eps);
    // x = LN(x + fc2(gelu(fc1(x)))), hb [Ls, F]
    linear_out_in(w.fc1_w, E, F, x, Ls, w.fc1_b.data(), hb.data(), threads_);
    gelu_erf_libm(hb.data(), Ls * F);
    linear_out_in(w.fc2_w, F, E, hb.data(), Ls, w.fc2_b.data(), xb.data(), threads_);
    add_norm(x, xb.data(), Ls, E, w.final_ln_w, w.final_ln_b, c.layer_norm_eps);
    if (hidden_states) std::copy_n(x, Ls * E, hidden_states + (l + 1) * Ls * E);  // [l + 1]: layer l's output
  }
}

CrossKV Bart::cross_kv(const float* enc, int64_t Ls) const {
  const BartConfig& c = config_;
  const int64_t E = c.d_model, H = c.decoder_heads, D = E / H;
  if (Ls < 1) throw std::invalid_argument("Bart::cross_kv: the encoder output is empty");
  CrossKV kv;
  kv.length = Ls;
  kv.k.resize(size_t(c.decoder_layers * Ls * E));
  kv.v.resize(kv.k.size());
  std::vector<float> tmp(size_t(Ls * E));
  for (int64_t l = 0; l < c.decoder_layers; ++l) {
    const BartAttentionWeights& a = weights_.decoder[size_t(l)].cross_attn;
    // k/v [H, Ls, D] of layer l = heads(enc [Ls, E] W^T + b)
    linear_out_in(a.k_w, E, E, enc, Ls, a.k_b.data(), tmp.data(), threads_);
    split_heads(tmp.data(), Ls, H, D, kv.k.data() + l * Ls * E);
    linear_out_in(a.v_w, E, E, enc, Ls, a.v_b.data(), tmp.data(), threads_);
    split_heads(tmp.data(), Ls, H, D, kv.v.data() + l * Ls * E);
  }
  return kv;
}

void Bart::decode(const int32_t* ids, int64_t L, int64_t pos0, std::vector<KVCache>* caches, const CrossKV& cross,
                  BartScratch& s, float* logits, bool all_logits, float* self_attentions, float* cross_attentions,
                  const BartInterventions& iv, float* hidden_states) const {
  const BartConfig& c = config_;
  const int64_t E = c.d_model, H = c.decoder_heads, D = E / H, F = c.decoder_ffn, V = c.vocab_size;
  const int64_t Ls = cross.length, Lk = pos0 + L;
  check_ids("Bart::decode", "decoder input ids", ids, L, pos0);
  if (pos0 < 0) throw std::invalid_argument("Bart::decode: pos0 must be >= 0, got " + std::to_string(pos0));
  if (!caches && pos0 != 0) throw std::invalid_argument("Bart::decode: pos0 must be 0 without KV caches");
  if (Ls < 1 || cross.k.size() != size_t(c.decoder_layers * Ls * E) || cross.v.size() != cross.k.size()) {
    throw std::invalid_argument("Bart::decode: the cross-attention K/V do not fit this model (length " +
                                std::to_string(Ls) + ", " + std::to_string(cross.k.size()) + " keys)");
  }
  if (caches) {
    if (int64_t(caches->size()) != c.decoder_layers) {
      throw std::invalid_argument("Bart::decode: " + std::to_string(caches->size()) + " KV caches, the decoder has " +
                                  std::to_string(c.decoder_layers) + " layers");
    }
    for (const KVCache& cache : *caches) {
      if (cache.length() != pos0 || cache.batch() != 1 || cache.kv_heads() != H || cache.head_dim() != D ||
          cache.value_dim() != D || cache.capacity() < Lk) {
        throw std::invalid_argument("Bart::decode: a KV cache of length " + std::to_string(cache.length()) +
                                    " (capacity " + std::to_string(cache.capacity()) +
                                    ") does not fit pos0 = " + std::to_string(pos0) + ", L = " + std::to_string(L));
      }
    }
  }
  if (iv.decoder) iv.decoder->validate("Bart::decode (decoder self-attention)", c.decoder_layers, H, D, pos0, L, Lk);
  if (iv.cross) iv.cross->validate("Bart::decode (cross-attention)", c.decoder_layers, H, D, pos0, L, Ls);
  const KeepHelpersAwake awake(threads_);  // the pool's helpers poll between this forward's jobs
  std::vector<uint8_t> knockout;
  const size_t n = size_t(L);
  ensure(s.x, n * E);    // x   [L, E]  the residual stream
  ensure(s.xb, n * E);   // xb  [L, E]  a projection's output
  ensure(s.q, n * E);    // q   [H, L, D]
  ensure(s.k, n * E);    // k   [H, L, D] (self-attention)
  ensure(s.v, n * E);    // v   [H, L, D]
  ensure(s.att, n * E);  // att [H, L, D] attention output, then [L, E] merged
  ensure(s.hb, n * F);   // hb  [L, F]  FFN hidden
  float *x = s.x.data(), *xb = s.xb.data(), *q = s.q.data(), *k = s.k.data(), *v = s.v.data(), *att = s.att.data(),
        *hb = s.hb.data();

  // x[t] = LN_emb(shared[ids[t]] * scale + dec_pos[pos0 + t + 2])
  const float scale = c.scale_embedding ? std::sqrt(float(E)) : 1.0f;
  for (int64_t t = 0; t < L; ++t) {
    const float* te = weights_.shared.data() + int64_t(ids[t]) * E;
    const float* pe = weights_.dec_pos.data() + (pos0 + t + 2) * E;
    for (int64_t i = 0; i < E; ++i) x[t * E + i] = te[i] * scale + pe[i];
  }
  layer_norm_rows(x, x, weights_.dec_ln_emb_w.data(), weights_.dec_ln_emb_b.data(), L, E, c.layer_norm_eps,
                  NormMath::Double);
  if (hidden_states) std::copy_n(x, L * E, hidden_states);  // hidden_states[0] [L, E]

  AttentionOptions self_opt;
  self_opt.causal = true;  // query t sees keys j <= pos0 + t (bottom-right aligned)
  self_opt.threads = threads_;
  AttentionOptions cross_opt;  // every decoder query sees every encoder position
  cross_opt.threads = threads_;

  for (int64_t l = 0; l < c.decoder_layers; ++l) {
    const BartLayerWeights& w = weights_.decoder[size_t(l)];

    // --- causal self-attention: q/k/v [H, L, D] from x
    linear_out_in(w.self_attn.q_w, E, E, x, L, w.self_attn.q_b.data(), xb, threads_);
    split_heads(xb, L, H, D, q);
    linear_out_in(w.self_attn.k_w, E, E, x, L, w.self_attn.k_b.data(), xb, threads_);
    split_heads(xb, L, H, D, k);
    linear_out_in(w.self_attn.v_w, E, E, x, L, w.self_attn.v_b.data(), xb, threads_);
    split_heads(xb, L, H, D, v);
    // att [H, L, D]; probabilities [H, L, pos0 + L] if asked
    float* sp = self_attentions ? self_attentions + l * H * L * Lk : nullptr;
    const LayerHooks self_hooks("Bart::decode", iv.decoder, l, pos0, L, Lk, D);  // nothing when null
    if (caches) {
      KVCache& cache = (*caches)[size_t(l)];
      cache.append(k, v, L);  // the cache holds Lk positions [1, H, Lk, D]
      cache.attend(q, H, L, self_hooks.options(self_opt, knockout), att, sp);
    } else {
      attention(AttentionShape{1, H, H, L, L, D, D}, q, k, v, self_hooks.options(self_opt, knockout), att, sp);
    }
    self_hooks.after(att, sp);
    merge_heads(att, L, H, D, q);  // q reused as [L, E]
    linear_out_in(w.self_attn.o_w, E, E, q, L, w.self_attn.o_b.data(), xb, threads_);
    add_norm(x, xb, L, E, w.self_attn_ln_w, w.self_attn_ln_b, c.layer_norm_eps);

    // --- cross-attention: queries [H, L, D] from x, keys/values [H, Ls, D] from CrossKV (computed once)
    linear_out_in(w.cross_attn.q_w, E, E, x, L, w.cross_attn.q_b.data(), xb, threads_);
    split_heads(xb, L, H, D, q);
    float* cp = cross_attentions ? cross_attentions + l * H * L * Ls : nullptr;
    const LayerHooks cross_hooks("Bart::decode", iv.cross, l, pos0, L, Ls, D);
    attention(AttentionShape{1, H, H, L, Ls, D, D}, q, cross.k.data() + l * Ls * E, cross.v.data() + l * Ls * E,
              cross_hooks.options(cross_opt, knockout), att, cp);
    cross_hooks.after(att, cp);
    merge_heads(att, L, H, D, q);
    linear_out_in(w.cross_attn.o_w, E, E, q, L, w.cross_attn.o_b.data(), xb, threads_);
    add_norm(x, xb, L, E, w.cross_attn_ln_w, w.cross_attn_ln_b, c.layer_norm_eps);

    // --- FFN: x = LN(x + fc2(gelu(fc1(x)))), hb [L, F]
    linear_out_in(w.fc1_w, E, F, x, L, w.fc1_b.data(), hb, threads_);
    gelu_erf_libm(hb, L * F);
    linear_out_in(w.fc2_w, F, E, hb, L, w.fc2_b.data(), xb, threads_);
    add_norm(x, xb, L, E, w.final_ln_w, w.final_ln_b, c.layer_norm_eps);
    if (hidden_states) std::copy_n(x, L * E, hidden_states + (l + 1) * L * E);  // [l + 1]: layer l's output
  }

  // logits [rows, V] = x shared^T + final_logits_bias, only the rows asked for
  const int64_t first = all_logits ? 0 : L - 1;
  linear_out_in(weights_.shared, E, V, x + first * E, L - first, weights_.final_logits_bias.data(), logits, threads_);
}

void Bart::forward(const int32_t* src, int64_t Ls, const int32_t* tgt, int64_t Lt, float* logits,
                   float* encoder_attentions, float* decoder_attentions, float* cross_attentions,
                   const BartInterventions& iv, float* encoder_hidden_states, float* decoder_hidden_states) const {
  check_ids("Bart::forward", "input ids", src, Ls, 0);
  check_ids("Bart::forward", "decoder input ids", tgt, Lt, 0);
  std::vector<float> enc(size_t(Ls * config_.d_model));
  encode(src, Ls, enc.data(), encoder_attentions, iv.encoder, encoder_hidden_states);
  const CrossKV cross = cross_kv(enc.data(), Ls);
  BartScratch scratch;
  decode(tgt, Lt, 0, nullptr, cross, scratch, logits, true, decoder_attentions, cross_attentions, iv,
         decoder_hidden_states);
}

// ----------------------------------------------------------------------------- generation

BartSession::BartSession(const Bart& model, const int32_t* src, int64_t Ls, float* encoder_attentions,
                         const HeadInterventions* encoder_iv)
    : model_(model) {
  const BartConfig& c = model.config();
  std::vector<float> enc(size_t(std::max<int64_t>(Ls, 0) * c.d_model));
  model.encode(src, Ls, enc.data(), encoder_attentions, encoder_iv);  // validates src
  cross_ = model.cross_kv(enc.data(), Ls);
  const int64_t D = c.d_model / c.decoder_heads;
  caches_.reserve(size_t(c.decoder_layers));
  for (int64_t l = 0; l < c.decoder_layers; ++l) caches_.emplace_back(1, c.decoder_heads, c.max_positions, D, D);
}

void BartSession::step(int32_t id, float* logits, float* self_attentions, float* cross_attentions,
                       const BartInterventions& iv) {
  if (position_ + 1 > model_.config().max_positions) {
    throw std::length_error("BartSession::step: position " + std::to_string(position_) +
                            " is past max_position_embeddings = " + std::to_string(model_.config().max_positions));
  }
  model_.decode(&id, 1, position_, &caches_, cross_, scratch_, logits, false, self_attentions, cross_attentions, iv);
  ++position_;
}

std::vector<int32_t> generate_seq2seq(const Bart& model, const std::vector<int32_t>& src, int64_t max_new,
                                      const SamplingOptions& options, uint64_t seed, bool use_cache) {
  const BartConfig& c = model.config();
  if (max_new < 0)
    throw std::invalid_argument("generate_seq2seq: max_new must be >= 0, got " + std::to_string(max_new));
  if (max_new > c.max_positions) {
    throw std::length_error("generate_seq2seq: max_new = " + std::to_string(max_new) +
                            " exceeds max_position_embeddings = " + std::to_string(c.max_positions));
  }
  Rng rng(seed);
  std::vector<int32_t> out;
  std::vector<float> logits(size_t(c.vocab_size));
  if (use_cache) {
    BartSession session(model, src.data(), int64_t(src.size()));
    int32_t next = c.decoder_start_token_id;
    for (int64_t i = 0; i < max_new; ++i) {
      session.step(next, logits.data());
      next = sample(logits.data(), c.vocab_size, options, rng);
      out.push_back(next);
      if (next == c.eos_token_id) break;
    }
  } else {
    const int64_t Ls = int64_t(src.size());
    std::vector<float> enc(size_t(Ls * c.d_model));
    model.encode(src.data(), Ls, enc.data());
    const CrossKV cross = model.cross_kv(enc.data(), Ls);
    BartScratch scratch;
    std::vector<int32_t> tgt{c.decoder_start_token_id};
    for (int64_t i = 0; i < max_new; ++i) {
      const int64_t L = int64_t(tgt.size());
      std::vector<float> all(size_t(L * c.vocab_size));
      model.decode(tgt.data(), L, 0, nullptr, cross, scratch, all.data(), true, nullptr, nullptr);
      const int32_t next = sample(all.data() + (L - 1) * c.vocab_size, c.vocab_size, options, rng);
      out.push_back(next);
      tgt.push_back(next);
      if (next == c.eos_token_id) break;
    }
  }
  return out;
}

}  // namespace qkv
