// The ground truth: scaled dot-product attention in plain loops, one query row at a time.
// Every fast path is tested against this file; keep it obvious.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention.hpp"
#include "visibility.hpp"

namespace qkv {

void attention_reference(const AttentionShape& s, const float* query, const float* key, const float* value,
                         const AttentionOptions& o, float* output, float* weights) {
  validate_attention("attention_reference", s, o);
  const float scale = o.scale ? *o.scale : 1.0f / std::sqrt(static_cast<float>(s.D));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int64_t group = s.H / s.Hkv;  // query heads per kv head
  const int64_t kv_rows = s.kv_rows_per_head();
  const detail::MaskRows<uint8_t> bool_mask(o.bool_mask);
  const detail::MaskRows<float> float_mask(o.float_mask);
  std::vector<float> score(s.Lk);   // (Lk) scaled, masked scores of one row
  std::vector<uint8_t> seen(s.Lk);  // (Lk) 1 where the key is visible
  std::vector<double> acc(s.Dv);    // (Dv) output row being summed

  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t g = h / group;  // the kv head this query head reads
      const float* k_head = key + (b * s.Hkv + g) * kv_rows * s.D;
      const float* v_head = value + (b * s.Hkv + g) * kv_rows * s.Dv;
      for (int64_t i = 0; i < s.Lq; ++i) {
        const float* q = query + ((b * s.H + h) * s.Lq + i) * s.D;
        float* out = output + ((b * s.H + h) * s.Lq + i) * s.Dv;
        float* w = weights ? weights + ((b * s.H + h) * s.Lq + i) * s.Lk : nullptr;
        const detail::KeyRange range = detail::visible_keys(s, o, i);
        const uint8_t* allow = bool_mask.row(b, h, i);
        const float* add = float_mask.row(b, h, i);

        // 1. scores s_j = scale * q.k_j + mask_j for the visible keys; max over them
        float m = neg_inf;
        for (int64_t j = 0; j < s.Lk; ++j) {
          seen[j] = j >= range.begin && j < range.end && (!allow || allow[j * bool_mask.k_stride]);
          if (!seen[j]) continue;
          double dot = 0.0;  // the ground truth accumulates in double
          for (int64_t d = 0; d < s.D; ++d) dot += static_cast<double>(q[d]) * k_head[j * s.D + d];
          score[j] = static_cast<float>(scale * dot + (add ? add[j * float_mask.k_stride] : 0.0f));
          if (score[j] > m) m = score[j];
        }
        // 2. p_j = exp(s_j - m) (1 at the max, so +inf scores share the weight), l = sum p
        double l = 0.0;
        for (int64_t j = 0; j < s.Lk; ++j) {
          score[j] = (seen[j] && m != neg_inf) ? (score[j] == m ? 1.0f : std::exp(score[j] - m)) : 0.0f;
          l += score[j];
        }
        // 3. output = sum_j (p_j / l) v_j; a row with nothing visible gives 0
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < s.Lk; ++j) {
          const double p = l > 0.0 ? score[j] / l : 0.0;
          if (w) w[j] = static_cast<float>(p);
          if (p == 0.0) continue;
          for (int64_t e = 0; e < s.Dv; ++e) acc[e] += p * v_head[j * s.Dv + e];
        }
        for (int64_t e = 0; e < s.Dv; ++e) out[e] = static_cast<float>(acc[e]);
      }
    }
  }
}

}  // namespace qkv
