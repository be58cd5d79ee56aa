#include "mha.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "attention.hpp"
#include "linear.hpp"

namespace qkv {
namespace {

void check_size(const char* name, const std::vector<float>& v, int64_t want, bool optional) {
  if ((optional && v.empty()) || static_cast<int64_t>(v.size()) == want) return;
  throw std::invalid_argument(std::string("MultiHeadAttention: ") + name + " has " + std::to_string(v.size()) +
                              " elements, expected " + std::to_string(want));
}

// [B, L, H*hd] -> [B, H, L, hd]
void split_heads(const float* x, int64_t B, int64_t L, int64_t H, int64_t hd, float* out) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h) std::copy_n(x + ((b * L + l) * H + h) * hd, hd, out + ((b * H + h) * L + l) * hd);
}

// [B, H, L, hd] -> [B, L, H*hd]
void merge_heads(const float* x, int64_t B, int64_t L, int64_t H, int64_t hd, float* out) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t l = 0; l < L; ++l) std::copy_n(x + ((b * H + h) * L + l) * hd, hd, out + ((b * L + l) * H + h) * hd);
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(int64_t embed_dim, int64_t num_heads, MhaWeights weights)
    : embed_dim_(embed_dim), num_heads_(num_heads), w_(std::move(weights)) {
  if (embed_dim < 1 || num_heads < 1 || embed_dim % num_heads != 0) {
    throw std::invalid_argument("MultiHeadAttention: embed_dim=" + std::to_string(embed_dim) +
                                " must be a positive multiple of num_heads=" + std::to_string(num_heads));
  }
  const int64_t E = embed_dim;
  check_size("in_proj_weight", w_.in_proj_weight, 3 * E * E, false);
  check_size("in_proj_bias", w_.in_proj_bias, 3 * E, true);
  check_size("out_proj_weight", w_.out_proj_weight, E * E, false);
  check_size("out_proj_bias", w_.out_proj_bias, E, true);
  // [out, in] -> [in, out] for the q, k and v blocks of in_proj_weight and for out_proj_weight
  auto transpose_block = [E](float* block) {
    std::vector<float> t(E * E);
    for (int64_t o = 0; o < E; ++o)
      for (int64_t i = 0; i < E; ++i) t[i * E + o] = block[o * E + i];
    std::copy(t.begin(), t.end(), block);
  };
  for (int part = 0; part < 3; ++part) transpose_block(w_.in_proj_weight.data() + part * E * E);
  transpose_block(w_.out_proj_weight.data());
}

void MultiHeadAttention::forward(int64_t B, int64_t Lq, int64_t Lk, const float* query, const float* key,
                                 const float* value, const MhaOptions& opt, float* output, float* weights) const {
  const int64_t E = embed_dim_, H = num_heads_, hd = E / H;
  if (B < 1 || Lq < 1 || Lk < 1) {
    throw std::invalid_argument("MultiHeadAttention.forward: batch, query length and key length must be >= 1, got B=" +
                                std::to_string(B) + ", Lq=" + std::to_string(Lq) + ", Lk=" + std::to_string(Lk));
  }
  const float* in_bias = w_.in_proj_bias.empty() ? nullptr : w_.in_proj_bias.data();
  auto project = [&](const float* x, int64_t L, int part, std::vector<float>& heads) {
    std::vector<float> flat(B * L * E);  // (B, L, E)
    linear(x, B * L, E, w_.in_proj_weight.data() + part * E * E, E, in_bias ? in_bias + part * E : nullptr, flat.data(),
           WeightLayout::InOut);
    heads.resize(B * L * E);  // (B, H, L, hd)
    split_heads(flat.data(), B, L, H, hd, heads.data());
  };
  std::vector<float> q, k, v;
  project(query, Lq, 0, q);  // 1. q, k, v = in-projections, split into heads
  project(key, Lk, 1, k);
  project(value, Lk, 2, v);

  // 2. masks in SDPA polarity: allow = !key_padding_mask[b, j] && !bool_attn_mask[.., i, j]
  AttentionOptions ao;
  ao.causal = opt.is_causal;
  ao.threads = opt.threads;
  const int64_t mask_heads = opt.attn_mask_per_head ? H : 1;
  std::vector<uint8_t> allow;  // (B or 1, H or 1, Lq, Lk)
  if (opt.key_padding_mask || opt.bool_attn_mask) {
    const int64_t mb = (opt.key_padding_mask || opt.attn_mask_per_head) ? B : 1;
    allow.assign(mb * mask_heads * Lq * Lk, 1);
    for (int64_t b = 0; b < mb; ++b)
      for (int64_t h = 0; h < mask_heads; ++h)
        for (int64_t i = 0; i < Lq; ++i)
          for (int64_t j = 0; j < Lk; ++j) {
            const int64_t bh = opt.attn_mask_per_head ? b * H + h : 0;
            const bool padded = opt.key_padding_mask && opt.key_padding_mask[b * Lk + j];
            const bool hidden = opt.bool_attn_mask && opt.bool_attn_mask[(bh * Lq + i) * Lk + j];
            allow[((b * mask_heads + h) * Lq + i) * Lk + j] = !(padded || hidden);
          }
    ao.bool_mask = {allow.data(), {mb, mask_heads, Lq, Lk}};
  }
  if (opt.float_attn_mask) {
    ao.float_mask = {opt.float_attn_mask, {opt.attn_mask_per_head ? B : 1, mask_heads, Lq, Lk}};
  }

  // 3. attention per head: (B, H, Lq, hd), weights (B, H, Lq, Lk)
  const AttentionShape s{B, H, H, Lq, Lk, hd, hd};
  const bool want_weights = opt.need_weights && weights;
  std::vector<float> heads_out(B * H * Lq * hd);
  std::vector<float> head_weights(want_weights ? B * H * Lq * Lk : 0);
  attention(s, q.data(), k.data(), v.data(), ao, heads_out.data(), want_weights ? head_weights.data() : nullptr);

  // 4. merge heads, out-projection
  std::vector<float> merged(B * Lq * E);  // (B, Lq, E)
  merge_heads(heads_out.data(), B, Lq, H, hd, merged.data());
  linear(merged.data(), B * Lq, E, w_.out_proj_weight.data(), E,
         w_.out_proj_bias.empty() ? nullptr : w_.out_proj_bias.data(), output, WeightLayout::InOut);

  // 5. weights: per head, or averaged over heads
  if (!want_weights) return;
  if (!opt.average_attn_weights) {
    std::copy(head_weights.begin(), head_weights.end(), weights);
    return;
  }
  const int64_t plane = Lq * Lk;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t x = 0; x < plane; ++x) {
      float sum = 0.0f;
      for (int64_t h = 0; h < H; ++h) sum += head_weights[(b * H + h) * plane + x];
      weights[b * plane + x] = sum / static_cast<float>(H);
    }
}

}  // namespace qkv
