// The BERT-family encoder's forward pass and its masked-LM head (model/bert.hpp); the config and
// the weights' loading are in bert.cpp.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention.hpp"
#include "matmul/matmul.hpp"
#include "model/bert.hpp"
#include "model/layers.hpp"

namespace qkv {

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
                      const HeadInterventions* iv, float* hidden_states) const {
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
  const int64_t N = B * L;                 // rows: every token of every sequence
  const KeepHelpersAwake awake(threads_);  // the pool's helpers poll between this forward's jobs
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
  // hidden_states[0] [B, L, E]: the embeddings' output
  if (hidden_states) std::copy_n(x, N * E, hidden_states);

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
    // hidden_states[l + 1] [B, L, E]: layer l's output
    if (hidden_states) std::copy_n(x, N * E, hidden_states + (l + 1) * N * E);
  }
  if (hidden) std::copy_n(x, N * E, hidden);
  if (logits) head(x, N, t, logits);
}

void Encoder::head(const float* x, int64_t N, float* t, float* logits) const {
  const EncoderConfig& c = config_;
  const EncoderWeights& w = w_;
  // MLM head: t [N, E] = LN(gelu(x Wt^T + bt)); logits [N, V] = t word^T + bias
  matmul(w.head_dense, x, N, w.head_dense_b, t, threads_);
  gelu_erf(t, N * c.hidden);
  layer_norm_rows(t, t, w.head_ln_w, w.head_ln_b, N, c.hidden, c.layer_norm_eps);
  matmul(w.decoder, t, N, w.decoder_b, logits, threads_);
}

void Encoder::mlm_head(const float* x, int64_t N, EncoderScratch& s, float* logits) const {
  if (!has_mlm_head()) {
    throw std::invalid_argument(std::string("Encoder.mlm_head: this ") + config_.name() +
                                " checkpoint has no masked-LM head (no " +
                                (config_.roberta() ? "lm_head.*" : "cls.predictions.*") + " tensors)");
  }
  if (N < 1) throw std::invalid_argument("Encoder.mlm_head: x has " + std::to_string(N) + " rows (need at least 1)");
  if (N > (int64_t(1) << 31) / std::max<int64_t>(config_.vocab_size, config_.hidden)) {
    throw std::length_error("Encoder.mlm_head: " + std::to_string(N) + " rows of logits [" + std::to_string(N) + ", " +
                            std::to_string(config_.vocab_size) + "] exceed 2^31 elements");
  }
  ensure(s.t, size_t(N * config_.hidden));
  head(x, N, s.t.data(), logits);
}

}  // namespace qkv
