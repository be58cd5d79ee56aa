#include "model/gpt2.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>

#include "attention.hpp"
#include "matmul/matmul.hpp"
#include "model/config_json.hpp"
#include "model/decoder_checks.hpp"
#include "model/generate.hpp"
#include "model/layers.hpp"
#include "thread_pool.hpp"

namespace qkv {

// ----------------------------------------------------------------------------- config

namespace {

constexpr char kConfigError[] = "GPT2Config: ";  // what every config error starts with

[[noreturn]] void config_error(const std::string& msg) { throw std::invalid_argument(kConfigError + msg); }

}  // namespace

GPT2Config GPT2Config::from_json(std::string_view text) {
  const ConfigJson r(text, kConfigError);
  if (const nlohmann::json* mt = r.member("model_type"); mt && *mt != "gpt2") {
    config_error("model_type must be \"gpt2\", got " + json_describe(*mt));
  }
  if (const nlohmann::json* af = r.member("activation_function");
      af && *af != "gelu_new" && *af != "gelu_pytorch_tanh") {
    config_error("activation_function must be \"gelu_new\" (GPT-2's tanh GELU), got " + json_describe(*af));
  }
  for (const char* unsupported :
       {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"}) {
    if (const nlohmann::json* v = r.member(unsupported); v && *v == true) {
      config_error(std::string("\"") + unsupported + "\": true is not supported");
    }
  }

  GPT2Config c;
  c.n_layer = r.get_int("n_layer");
  c.n_head = r.get_int("n_head");
  c.n_embd = r.get_int("n_embd");
  c.vocab_size = r.get_int("vocab_size");
  c.n_positions = r.get_int("n_positions", -1);
  if (c.n_positions == -1) c.n_positions = r.get_int("n_ctx", -1);
  if (c.n_positions == -1) config_error("config.json lacks \"n_positions\" (and \"n_ctx\")");
  c.n_inner = r.get_int("n_inner", 0);
  if (r.member("n_inner") && c.n_inner <= 0) {
    config_error("\"n_inner\" must be positive or null, got " + std::to_string(c.n_inner));
  }
  if (const nlohmann::json* eps = r.number("layer_norm_epsilon")) c.layer_norm_epsilon = eps->get<float>();
  c.scale_attn_weights = r.get_bool("scale_attn_weights", c.scale_attn_weights);
  c.validate();
  return c;
}

void GPT2Config::validate() const {
  auto in_range = [](const char* key, int64_t v, int64_t hi) { check_config_range(kConfigError, key, v, hi); };
  in_range("n_layer", n_layer, 1024);
  in_range("n_head", n_head, 1024);
  in_range("n_embd", n_embd, 1 << 16);
  in_range("n_positions", n_positions, 1 << 20);
  in_range("vocab_size", vocab_size, 1 << 24);
  if (n_inner != 0) in_range("n_inner", n_inner, 1 << 18);
  if (n_embd % n_head != 0) {
    config_error("n_embd (" + std::to_string(n_embd) + ") must be divisible by n_head (" + std::to_string(n_head) +
                 ")");
  }
  if (!(layer_norm_epsilon > 0.0f) || !std::isfinite(layer_norm_epsilon)) {
    config_error("\"layer_norm_epsilon\" must be a positive finite number, got " + std::to_string(layer_norm_epsilon));
  }
}

// ----------------------------------------------------------------------------- model

GPT2::GPT2(GPT2Config config, GPT2WeightStore weights) : config_(config), store_(std::move(weights)) {
  config_.validate();
  const GPT2Weights& w = store_.weights();
  if (int64_t(w.h.size()) != config_.n_layer || w.wte.N != config_.vocab_size || w.wte.K != config_.n_embd ||
      w.wpe.N != config_.n_positions) {
    throw std::invalid_argument(
        "GPT2: the weights (" + std::to_string(w.h.size()) + " layers, wte [" + std::to_string(w.wte.N) + ", " +
        std::to_string(w.wte.K) + "]) were loaded for another config (n_layer " + std::to_string(config_.n_layer) +
        ", vocab_size " + std::to_string(config_.vocab_size) + ", n_embd " + std::to_string(config_.n_embd) + ")");
  }
}

GPT2 GPT2::load(std::string_view config_json, const uint8_t* bytes, size_t size, WeightFormat format) {
  GPT2Config config = GPT2Config::from_json(config_json);
  if (bytes == nullptr && size != 0)
    throw std::invalid_argument("GPT2::load: null buffer of " + std::to_string(size) + " bytes");
  MallocBytes copy(static_cast<uint8_t*>(std::malloc(std::max<size_t>(size, 1))));
  if (!copy) throw std::length_error("GPT2::load: cannot allocate " + std::to_string(size) + " bytes for the file");
  if (size) std::memcpy(copy.get(), bytes, size);
  return GPT2(config, GPT2WeightStore::load(config, std::move(copy), size, format));
}

GPT2 GPT2::load(std::string_view config_json, MallocBytes bytes, size_t size, WeightFormat format) {
  GPT2Config config = GPT2Config::from_json(config_json);  // on error, `bytes` is freed on the way out
  return GPT2(config, GPT2WeightStore::load(config, std::move(bytes), size, format));
}

namespace {

void ensure(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

size_t GPT2Scratch::bytes() const {
  size_t n = 0;
  for (const auto* b : {&x, &xb, &xb2, &qkv, &q, &k, &v, &att, &hb}) n += b->capacity() * sizeof(float);
  return n;
}

void GPT2::forward(const int32_t* ids, int64_t L, float* logits, float* attentions, float* queries, float* keys,
                   Logits which) const {
  check_decoder_ids("GPT2::forward", ids, L, 0, config_.vocab_size, config_.n_positions, "n_positions");
  GPT2Scratch scratch;
  run(ids, L, 0, nullptr, scratch, logits, which == Logits::All, attentions, queries, keys);
}

void GPT2::run(const int32_t* ids, int64_t L, int64_t pos0, std::vector<KVCache>* caches, GPT2Scratch& s, float* logits,
               bool all_logits, float* attentions, float* queries, float* keys, const HeadInterventions* iv,
               const ResidualHooks* rh) const {
  const GPT2Config& c = config_;
  const int64_t E = c.n_embd, H = c.n_head, D = c.head_dim(), I = c.inner();
  const int64_t Lk = pos0 + L;  // keys visible to the last query
  check_decoder_ids("GPT2::run", ids, L, pos0, c.vocab_size, c.n_positions, "n_positions");
  check_decoder_caches("GPT2::run", caches, c.n_layer, pos0, L, H, D);
  if (iv) iv->validate("GPT2::run", c.n_layer, H, D, pos0, L, Lk);
  const KeepHelpersAwake awake(threads_);  // the pool's helpers poll between this forward's jobs
  if (rh) rh->validate("GPT2::run", c.n_layer, E, pos0, L, all_logits);
  std::vector<uint8_t> knockout;  // a layer's knockout mask, when it must be sliced (chunks)

  const size_t n = size_t(L);
  ensure(s.x, n * E);        // x   [L, E]   the residual stream
  ensure(s.xb, n * E);       // xb  [L, E]   layernormed input of a sub-block
  ensure(s.xb2, n * E);      // xb2 [L, E]   output of a sub-block, before the residual add
  ensure(s.qkv, n * 3 * E);  // qkv [L, 3E]  c_attn output: q | k | v, each [L, H, D]
  ensure(s.q, n * E);        // q   [H, L, D]
  ensure(s.k, n * E);        // k   [H, L, D]
  ensure(s.v, n * E);        // v   [H, L, D]
  ensure(s.att, n * E);      // att [H, L, D]  attention output per head
  ensure(s.hb, n * I);       // hb  [L, I]   MLP hidden
  float *x = s.x.data(), *xb = s.xb.data(), *xb2 = s.xb2.data(), *qkv = s.qkv.data();
  float *q = s.q.data(), *k = s.k.data(), *v = s.v.data(), *att = s.att.data(), *hb = s.hb.data();

  const GPT2Weights& weights = store_.weights();
  // token embedding + learned position: x[t] = wte[ids[t]] + wpe[pos0 + t] (rows of the tables,
  // widened or dequantized; xb2 [E] holds the position's)
  for (int64_t t = 0; t < L; ++t) {
    read_column(weights.wte, ids[t], x + t * E);
    read_column(weights.wpe, pos0 + t, xb2);
    for (int64_t i = 0; i < E; ++i) x[t * E + i] += xb2[i];
  }
  if (rh) rh->embeddings(x, pos0, L);  // hidden_states[0]

  AttentionOptions opt;
  opt.causal = true;       // query t sees keys j <= pos0 + t (bottom-right aligned)
  opt.threads = threads_;  // attention() uses fewer where the work is small (one decoding step)
  if (!c.scale_attn_weights) opt.scale = 1.0f;

  for (int64_t l = 0; l < c.n_layer; ++l) {
    const GPT2LayerWeights& w = weights.h[size_t(l)];
    if (rh && !rh->runs(l)) continue;  // a forward that starts at a later block
    // a forward that starts here: x [L, E] = the given stream
    const bool start = rh && l == rh->start_layer;
    if (start) std::copy(rh->start_resid, rh->start_resid + n * E, x);
    if (rh) rh->at(ResidSite::ResidPre, l, x, pos0, L);  // steering, patch, record
    float* probs = attentions ? attentions + l * H * L * Lk : nullptr;
    const LayerHooks hooks("GPT2::run", iv, l, pos0, L, Lk, D);  // nothing when iv is null
    if (start && rh->start_att) {
      // att [H, L, D]: this block's attention output as given (no q/k/v, no cache append)
      std::copy(rh->start_att, rh->start_att + n * E, att);
    } else {
      // xb [L, E] = ln_1(x)
      layer_norm_rows(xb, x, w.ln_1_weight, w.ln_1_bias, L, E, c.layer_norm_epsilon);
      // qkv [L, 3E] = xb @ c_attn.weight [E, 3E] + c_attn.bias
      matmul(w.attn_c_attn, xb, L, w.attn_c_attn_bias, qkv, threads_);
      // split heads: q/k/v [H, L, D] from qkv [L, (3, H, D)]
      for (int64_t t = 0; t < L; ++t) {
        for (int64_t h = 0; h < H; ++h) {
          const float* src = qkv + t * 3 * E + h * D;
          std::copy(src, src + D, q + (h * L + t) * D);
          std::copy(src + E, src + E + D, k + (h * L + t) * D);
          std::copy(src + 2 * E, src + 2 * E + D, v + (h * L + t) * D);
        }
      }
      // queries/keys [n_layer, H, L, D] if asked: this layer's q and k [H, L, D] as attention reads them
      // (q unscaled: the kernel applies 1/sqrt(D))
      if (queries) std::copy(q, q + H * L * D, queries + l * H * L * D);
      if (keys) std::copy(k, k + H * L * D, keys + l * H * L * D);
      // att [H, L, D] = softmax(q k^T / sqrt(D), causal) v; probabilities [H, L, Lk] if asked
      if (caches) {
        KVCache& cache = (*caches)[size_t(l)];
        cache.append(k, v, L);  // cache now holds Lk positions [1, H, Lk, D]
        cache.attend(q, H, L, hooks.options(opt, knockout), att, probs);
      } else {
        const AttentionShape shape{1, H, H, L, L, D, D};
        attention(shape, q, k, v, hooks.options(opt, knockout), att, probs);
      }
    }
    hooks.after(att, probs);  // head mask, patching, head outputs
    // the rows the rest of the block computes: rows [r0, L), every row, or in the last block the
    // last one only when only its logits are read (rh->last_row_only); xr = x + r0 * E
    const int64_t r0 = rh && rh->last_row_only && l == c.n_layer - 1 ? L - 1 : 0, Lr = L - r0;
    float* xr = x + r0 * E;
    // merge heads: xb [Lr, E] from att [H, L, D] rows r0..
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t t = r0; t < L; ++t) {
        std::copy(att + (h * L + t) * D, att + (h * L + t + 1) * D, xb + (t - r0) * E + h * D);
      }
    }
    // xb2 [Lr, E] = xb @ attn.c_proj.weight [E, E] + bias
    matmul(w.attn_c_proj, xb, Lr, w.attn_c_proj_bias, xb2, threads_);
    if (rh) rh->at(ResidSite::AttnOut, l, xb2, pos0 + r0, Lr);
    // residual: x += xb2
    for (int64_t i = 0; i < Lr * E; ++i) xr[i] += xb2[i];
    if (rh) rh->at(ResidSite::ResidMid, l, xr, pos0 + r0, Lr);

    // xb [Lr, E] = ln_2(x)
    layer_norm_rows(xb, xr, w.ln_2_weight, w.ln_2_bias, Lr, E, c.layer_norm_epsilon);
    // hb [Lr, I] = gelu(xb @ mlp.c_fc.weight [E, I] + bias)
    matmul(w.mlp_c_fc, xb, Lr, w.mlp_c_fc_bias, hb, threads_);
    gelu_tanh(hb, Lr * I);
    // xb2 [Lr, E] = hb @ mlp.c_proj.weight [I, E] + bias
    matmul(w.mlp_c_proj, hb, Lr, w.mlp_c_proj_bias, xb2, threads_);
    if (rh) rh->at(ResidSite::MlpOut, l, xb2, pos0 + r0, Lr);
    // residual: x += xb2
    for (int64_t i = 0; i < Lr * E; ++i) xr[i] += xb2[i];
    if (rh) rh->at(ResidSite::ResidPost, l, xr, pos0 + r0, Lr);
    if (rh) rh->block_output(l, x, pos0, L);  // hidden_states[l + 1]
  }

  // final layernorm, only the rows whose logits are wanted (every row when the hidden states
  // are asked for): xb [rows, E] = ln_f(x[first..])
  if (rh) rh->final_input(x, pos0, L, true, c.layer_norm_epsilon);  // ln_final.hook_scale
  const int64_t first = all_logits || (rh && rh->hidden) ? 0 : L - 1;
  const int64_t rows = L - first;
  layer_norm_rows(xb, x + first * E, weights.ln_f_weight, weights.ln_f_bias, rows, E, c.layer_norm_epsilon);
  if (rh) rh->final_output(xb, pos0, L);                                     // hidden_states[n_layer]
  if (!all_logits && rows > 1) std::copy(xb + (L - 1) * E, xb + L * E, xb);  // the last row's logits only
  if (rh && rh->read_out(xb, 0.0f)) return;  // a few tokens' logits of the last row, not the LM head
  // logits [L or 1, V] = xb @ wte^T: the tied LM head reads the [V, E] table in place (OutIn)
  matmul(weights.wte, xb, all_logits ? L : 1, nullptr, logits, threads_);
}

void GPT2::unembed(const float* x, int64_t n, float* logits) const {
  const GPT2Weights& w = store_.weights();
  const int64_t E = config_.n_embd;
  // xn [n, E] = ln_f(x), row by row
  std::vector<float> xn(size_t(std::max<int64_t>(n, 0) * E));
  layer_norm_rows(xn.data(), x, w.ln_f_weight, w.ln_f_bias, n, E, config_.layer_norm_epsilon);
  // logits [n, V] = xn @ wte^T: one matrix product over every row
  matmul(w.wte, xn.data(), n, nullptr, logits, threads_);
}

// ----------------------------------------------------------------------------- session

GPT2Session::GPT2Session(const GPT2& model) : model_(model) {}

size_t GPT2Session::cache_bytes() const { return qkv::cache_bytes(caches_); }

void GPT2Session::reserve(int64_t positions) {
  const GPT2Config& c = model_.config();
  reserve_positions(caches_, c.n_layer, c.n_head, c.head_dim(), positions, c.n_positions);
}

void GPT2Session::reset() {
  for (auto& cache : caches_) cache.clear();
  position_ = 0;
}

void GPT2Session::prefill(const int32_t* ids, int64_t L, float* logits, float* attentions, float* queries, float* keys,
                          bool all_logits, const HeadInterventions* iv, const ResidualHooks* rh) {
  if (L >= 1 && position_ + L > model_.config().n_positions) {
    throw std::length_error("GPT2Session: " + std::to_string(position_) + " cached + " + std::to_string(L) +
                            " new tokens exceed n_positions = " + std::to_string(model_.config().n_positions));
  }
  if (L >= 1) reserve(position_ + L);
  model_.run(ids, L, position_, &caches_, scratch_, logits, all_logits, attentions, queries, keys, iv, rh);
  position_ += L;
}

void GPT2Session::step(int32_t id, float* logits, float* attentions, const HeadInterventions* iv,
                       const ResidualHooks* rh) {
  prefill(&id, 1, logits, attentions, nullptr, nullptr, false, iv, rh);
}

// ----------------------------------------------------------------------------- sampling

Rng::Rng(uint64_t seed) {
  // pcg32_srandom(seed, 54): the reference seeding
  inc_ = (uint64_t(54) << 1u) | 1u;
  state_ = 0;
  next_u32();
  state_ += seed;
  next_u32();
}

uint32_t Rng::next_u32() {
  uint64_t old = state_;
  state_ = old * 6364136223846793005ULL + inc_;
  uint32_t xorshifted = uint32_t(((old >> 18u) ^ old) >> 27u);
  uint32_t rot = uint32_t(old >> 59u);
  return (xorshifted >> rot) | (xorshifted << ((32u - rot) & 31u));
}

double Rng::next_double() {
  uint64_t hi = next_u32() >> 5;  // 27 bits
  uint64_t lo = next_u32() >> 6;  // 26 bits
  return double((hi << 26) | lo) * (1.0 / 9007199254740992.0);
}

int32_t argmax(const float* logits, int64_t n) {
  if (n < 1) throw std::invalid_argument("argmax: empty logits");
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return int32_t(best);
}

int32_t sample(const float* logits, int64_t n, const SamplingOptions& o, Rng& rng) {
  if (n < 1) throw std::invalid_argument("sample: empty logits");
  if (!(o.temperature > 0.0f)) return argmax(logits, n);
  if (o.top_k < 0) throw std::invalid_argument("sample: top_k must be >= 0, got " + std::to_string(o.top_k));
  const int64_t k = (o.top_k == 0 || o.top_k > n) ? n : o.top_k;
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  auto before = [logits](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  if (k < n) {
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
  } else {
    std::sort(idx.begin(), idx.end(), before);
  }
  // probabilities of the k candidates: softmax(logit / T), in double
  const double maxl = double(logits[idx[0]]);
  std::vector<double> p(static_cast<size_t>(k));
  double sum = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    p[size_t(i)] = std::exp((double(logits[idx[size_t(i)]]) - maxl) / double(o.temperature));
    sum += p[size_t(i)];
  }
  const double r = rng.next_double() * sum;
  double acc = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    acc += p[size_t(i)];
    if (r < acc) return idx[size_t(i)];
  }
  return idx[size_t(k - 1)];
}

std::vector<int32_t> generate(const GPT2& model, const std::vector<int32_t>& prompt, int64_t n_new,
                              const SamplingOptions& options, uint64_t seed, bool use_cache) {
  const GPT2Config& c = model.config();
  return generate_tokens<GPT2Session>(model, c.vocab_size, c.n_positions, "n_positions", prompt, n_new, options, seed,
                                      use_cache);
}

}  // namespace qkv
