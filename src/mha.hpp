// Multi-head attention with PyTorch nn.MultiheadAttention's weights and semantics
// (batch_first=True): packed in-projection, out-projection, key_padding_mask and attn_mask
// with PyTorch's polarity (true = ignore), need_weights, average_attn_weights.
#pragma once

#include <cstdint>
#include <vector>

namespace qkv {

struct MhaWeights {
  std::vector<float> in_proj_weight;   // (3E, E): rows [0,E) project q, [E,2E) k, [2E,3E) v
  std::vector<float> in_proj_bias;     // (3E) or empty
  std::vector<float> out_proj_weight;  // (E, E)
  std::vector<float> out_proj_bias;    // (E) or empty
};

struct MhaOptions {
  const uint8_t* key_padding_mask = nullptr;  // (B, Lk), nonzero = ignore this key
  const uint8_t* bool_attn_mask = nullptr;    // (Lq, Lk) or (B*H, Lq, Lk), nonzero = ignore
  const float* float_attn_mask = nullptr;     // (Lq, Lk) or (B*H, Lq, Lk), added to scores
  bool attn_mask_per_head = false;            // attn mask is (B*H, Lq, Lk) rather than (Lq, Lk)
  bool is_causal = false;                     // causal mask, bottom-right aligned as in attention.hpp
  bool need_weights = true;
  bool average_attn_weights = true;
  int threads = 1;
};

class MultiHeadAttention {
 public:
  // Throws std::invalid_argument when embed_dim % num_heads != 0 or a weight has the wrong size.
  MultiHeadAttention(int64_t embed_dim, int64_t num_heads, MhaWeights weights);

  // query (B, Lq, E), key (B, Lk, E), value (B, Lk, E) -> output (B, Lq, E).
  // weights, when options.need_weights and not null: (B, Lq, Lk) averaged over heads,
  // or (B, H, Lq, Lk) when !average_attn_weights.
  void forward(int64_t batch, int64_t lq, int64_t lk, const float* query, const float* key, const float* value,
               const MhaOptions& options, float* output, float* weights = nullptr) const;

  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return num_heads_; }

 private:
  int64_t embed_dim_, num_heads_;
  MhaWeights w_;  // as given, except each E x E weight block stored transposed ([in, out]) once,
                  // so forward runs x W with no per-call transpose (WeightLayout::InOut)
};

}  // namespace qkv
