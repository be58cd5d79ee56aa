// The BERT-family encoder (bert.hpp): its config read from config.json, and the forward pass.
// Loading the weights (whole or streamed): bert_weights.cpp.
#include "model/bert.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>

#include "attention.hpp"
#include "matmul/matmul.hpp"
#include "model/config_json.hpp"
#include "model/layers.hpp"
#include "model/tensor_feed.hpp"

namespace qkv {

// ----------------------------------------------------------------------------- config

namespace {

constexpr char kConfigError[] = "EncoderConfig: ";  // what every config error starts with

[[noreturn]] void config_error(const std::string& msg) { throw std::invalid_argument(kConfigError + msg); }

}  // namespace

EncoderConfig EncoderConfig::from_json(std::string_view text) {
  const ConfigJson r(text, kConfigError);
  const nlohmann::json* mt = r.member("model_type");
  if (!mt) config_error("config.json lacks \"model_type\" (\"bert\", \"distilbert\", \"roberta\" or \"xlm-roberta\")");
  EncoderConfig c;
  if (*mt == "bert" || *mt == "roberta" || *mt == "xlm-roberta") {
    c.arch = *mt == "bert" ? EncoderArch::Bert : *mt == "roberta" ? EncoderArch::Roberta : EncoderArch::XlmRoberta;
    r.require_string("hidden_act", "gelu");
    r.require_string("position_embedding_type", "absolute");
    if (const nlohmann::json* dec = r.member("is_decoder"); dec && *dec == true) {
      config_error("\"is_decoder\": true is a causal BERT; only encoders are supported");
    }
    c.vocab_size = r.get_int("vocab_size");
    c.hidden = r.get_int("hidden_size");
    c.layers = r.get_int("num_hidden_layers");
    c.heads = r.get_int("num_attention_heads");
    c.intermediate = r.get_int("intermediate_size");
    c.max_positions = r.get_int("max_position_embeddings");
    c.type_vocab_size = r.get_int("type_vocab_size", c.roberta() ? 1 : 2);
    if (const nlohmann::json* eps = r.number("layer_norm_eps")) c.layer_norm_eps = eps->get<float>();
    c.pad_token_id = r.get_int("pad_token_id", c.roberta() ? 1 : 0);
  } else if (*mt == "distilbert") {
    c.arch = EncoderArch::DistilBert;
    r.require_string("activation", "gelu");
    c.vocab_size = r.get_int("vocab_size");
    c.hidden = r.get_int("dim");
    c.layers = r.get_int("n_layers");
    c.heads = r.get_int("n_heads");
    c.intermediate = r.get_int("hidden_dim");
    c.max_positions = r.get_int("max_position_embeddings");
    c.type_vocab_size = 0;
    c.layer_norm_eps = 1e-12f;  // fixed in DistilBERT's code
  } else {
    config_error("model_type must be \"bert\", \"distilbert\", \"roberta\" or \"xlm-roberta\", got " +
                 json_describe(*mt));
  }
  c.validate();
  return c;
}

void EncoderConfig::validate() const {
  auto positive = [](const char* key, int64_t v, int64_t max) { check_config_range(kConfigError, key, v, max); };
  positive("vocab_size", vocab_size, 1 << 20);
  positive("hidden_size", hidden, 1 << 14);
  positive("num_hidden_layers", layers, 256);
  positive("num_attention_heads", heads, 1024);
  positive("intermediate_size", intermediate, 1 << 16);
  positive("max_position_embeddings", max_positions, 1 << 16);
  if (arch != EncoderArch::DistilBert) positive("type_vocab_size", type_vocab_size, 1 << 10);
  if (roberta() && (pad_token_id < 0 || pad_token_id >= vocab_size || pad_token_id + 1 >= max_positions)) {
    config_error("\"pad_token_id\" (RoBERTa's padding_idx) = " + std::to_string(pad_token_id) +
                 " must be a token id below vocab_size = " + std::to_string(vocab_size) +
                 " and below max_position_embeddings - 1 = " + std::to_string(max_positions - 1));
  }
  if (hidden % heads != 0) {
    config_error("hidden size " + std::to_string(hidden) + " is not a multiple of the head count " +
                 std::to_string(heads));
  }
  if (!(layer_norm_eps > 0.0f) || !std::isfinite(layer_norm_eps)) {
    config_error("\"layer_norm_eps\" must be a positive finite number, got " + std::to_string(layer_norm_eps));
  }
}

// ----------------------------------------------------------------------------- forward

namespace {

void ensure(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// [B, L, H, D] (rows of E = H * D) <-> [B, H, L, D], the layout attention() reads
void split_heads(const float* in, float* out, int64_t B, int64_t L, int64_t H, int64_t D) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i)
      for (int64_t h = 0; h < H; ++h) std::copy_n(in + ((b * L + i) * H + h) * D, D, out + ((b * H + h) * L + i) * D);
}
void merge_heads(const float* in, float* out, int64_t B, int64_t L, int64_t H, int64_t D) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) std::copy_n(in + ((b * H + h) * L + i) * D, D, out + ((b * L + i) * H + h) * D);
}

}  // namespace

void Encoder::forward(const int32_t* ids, int64_t B, int64_t L, const int32_t* token_types,
                      const uint8_t* attention_mask, EncoderScratch& s, float* logits, float* attentions, float* hidden,
                      const HeadInterventions* iv) const {
  const EncoderConfig& c = config_;
  const int64_t E = c.hidden, H = c.heads, D = c.head_dim(), I = c.intermediate, V = c.vocab_size;
  // ---- check the arguments
  if (B < 1 || L < 1) {
    throw std::invalid_argument("Encoder.forward: ids has shape [" + std::to_string(B) + ", " + std::to_string(L) +
                                "] (need at least 1 sequence of 1 token)");
  }
  if (L > c.max_tokens()) {
    throw std::length_error(
        "Encoder.forward: " + std::to_string(L) + " tokens exceed " +
        (c.roberta() ? "max_position_embeddings - padding_idx - 1 = " : "max_position_embeddings = ") +
        std::to_string(c.max_tokens()));
  }
  if (logits && !has_mlm_head()) {
    throw std::invalid_argument(std::string("Encoder.forward: logits asked of a ") + c.name() +
                                " checkpoint without a masked-LM head (no " +
                                (c.roberta() ? "lm_head.*" : "cls.predictions.*") + " tensors)");
  }
  const int64_t N = B * L;  // rows: every token of every sequence
  for (int64_t i = 0; i < N; ++i) {
    if (ids[i] < 0 || ids[i] >= V) {
      throw std::invalid_argument("Encoder.forward: ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                                  " is out of range [0, " + std::to_string(V) + ")");
    }
    const int32_t t = token_types ? token_types[i] : 0;
    if (t < 0 || t >= std::max<int64_t>(1, c.type_vocab_size)) {
      throw std::invalid_argument("Encoder.forward: tokenTypeIds[" + std::to_string(i) + "] = " + std::to_string(t) +
                                  " is out of range [0, " + std::to_string(std::max<int64_t>(1, c.type_vocab_size)) +
                                  ")" + (c.type_vocab_size ? "" : " (distilbert has no token types)"));
    }
  }
  if (attention_mask) {
    for (int64_t b = 0; b < B; ++b) {
      if (std::none_of(attention_mask + b * L, attention_mask + (b + 1) * L, [](uint8_t m) { return m != 0; })) {
        throw std::invalid_argument("Encoder.forward: attentionMask row " + std::to_string(b) +
                                    " hides every token (each sequence needs at least one 1)");
      }
    }
  }
  if (iv) {
    if (B != 1)
      throw std::invalid_argument("Encoder.forward: interventions need one sequence, got B = " + std::to_string(B));
    iv->validate("Encoder.forward", c.layers, H, D, 0, L, L);
  }
  std::vector<uint8_t> knockout;  // a layer's knockout mask combined with the padding mask
  ensure(s.x, size_t(N * E));
  ensure(s.t, size_t(N * E));
  ensure(s.q, size_t(N * E));
  ensure(s.k, size_t(N * E));
  ensure(s.v, size_t(N * E));
  ensure(s.qh, size_t(N * E));
  ensure(s.kh, size_t(N * E));
  ensure(s.vh, size_t(N * E));
  ensure(s.ctxh, size_t(N * E));
  ensure(s.h, size_t(N * std::max(I, E)));
  float *x = s.x.data(), *t = s.t.data(), *h = s.h.data();
  const EncoderWeights& w = w_;

  // ---- embeddings: x [N, E] = LN(word[id] + position[i] + type[t])
  for (int64_t b = 0; b < B; ++b) {
    int64_t seen = 0;  // RoBERTa: non-pad tokens so far; position pad + seen, pad tokens at pad
    for (int64_t i = 0; i < L; ++i) {
      const int64_t r = b * L + i;
      const float* we = w.word + int64_t(ids[r]) * E;
      int64_t p = i;
      if (c.roberta()) p = ids[r] == c.pad_token_id ? c.pad_token_id : c.pad_token_id + ++seen;
      const float* pe = w.pos + p * E;
      float* xr = x + r * E;
      for (int64_t e = 0; e < E; ++e) xr[e] = we[e] + pe[e];
      if (w.types) add_in_place(xr, w.types + int64_t(token_types ? token_types[r] : 0) * E, E);
    }
  }
  layer_norm_rows(x, x, w.emb_ln_w, w.emb_ln_b, N, E, c.layer_norm_eps);

  // the padding mask as attention()'s bool mask [B, 1, 1, L] (nonzero = may attend), no causal mask
  AttentionShape shape;
  shape.B = B, shape.H = H, shape.Hkv = H, shape.Lq = L, shape.Lk = L, shape.D = D, shape.Dv = D;
  AttentionOptions opt;
  opt.threads = threads_;
  if (attention_mask) {
    s.mask.assign(attention_mask, attention_mask + N);
    opt.bool_mask = MaskView<uint8_t>{s.mask.data(), {B, 1, 1, L}};
  }

  for (int64_t l = 0; l < c.layers; ++l) {
    const EncoderLayerWeights& lw = w.layers[size_t(l)];
    // q, k, v [N, E] = x Wq^T + bq, ...; then [B, H, L, D] for the kernel
    matmul(lw.q, x, N, lw.q_b, s.q.data(), threads_);
    matmul(lw.k, x, N, lw.k_b, s.k.data(), threads_);
    matmul(lw.v, x, N, lw.v_b, s.v.data(), threads_);
    split_heads(s.q.data(), s.qh.data(), B, L, H, D);
    split_heads(s.k.data(), s.kh.data(), B, L, H, D);
    split_heads(s.v.data(), s.vh.data(), B, L, H, D);
    // ctxh [B, H, L, D] = softmax(q k^T / sqrt(D) | mask) v; probabilities [B, H, L, L] into attentions[l]
    float* probs = attentions ? attentions + l * B * H * L * L : nullptr;
    const LayerHooks hooks("Encoder.forward", iv, l, 0, L, L, D);  // nothing when iv is null
    attention(shape, s.qh.data(), s.kh.data(), s.vh.data(), hooks.options(opt, knockout), s.ctxh.data(), probs);
    hooks.after(s.ctxh.data(), probs);                   // head mask, patching, head outputs
    merge_heads(s.ctxh.data(), s.q.data(), B, L, H, D);  // q [N, E] now holds the context
    // x = LN_1(x + ctx Wo^T + bo)
    matmul(lw.o, s.q.data(), N, lw.o_b, t, threads_);
    add_in_place(x, t, N * E);
    layer_norm_rows(x, x, lw.ln1_w, lw.ln1_b, N, E, c.layer_norm_eps);
    // h [N, I] = gelu(x W1^T + b1); x = LN_2(x + h W2^T + b2)
    matmul(lw.ffn1, x, N, lw.ffn1_b, h, threads_);
    gelu_erf(h, N * I);
    matmul(lw.ffn2, h, N, lw.ffn2_b, t, threads_);
    add_in_place(x, t, N * E);
    layer_norm_rows(x, x, lw.ln2_w, lw.ln2_b, N, E, c.layer_norm_eps);
  }
  if (hidden) std::copy_n(x, N * E, hidden);
  if (!logits) return;
  // MLM head: t [N, E] = LN(gelu(x Wt^T + bt)); logits [N, V] = t word^T + bias
  matmul(w.head_dense, x, N, w.head_dense_b, t, threads_);
  gelu_erf(t, N * E);
  layer_norm_rows(t, t, w.head_ln_w, w.head_ln_b, N, E, c.layer_norm_eps);
  matmul(w.decoder, t, N, w.decoder_b, logits, threads_);
}

}  // namespace qkv
