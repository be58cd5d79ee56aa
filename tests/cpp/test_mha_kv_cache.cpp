// Multi-head attention against a composition of reference pieces, and KV-cache decoding
// against a full causal recompute.
#include <doctest/doctest.h>

#include "attention.hpp"
#include "kv_cache.hpp"
#include "linear.hpp"
#include "mha.hpp"
#include "testing.hpp"

using namespace qkv;

TEST_CASE("linear matches the plain loops in both layouts and odd sizes") {
  std::mt19937 rng(10);
  for (int64_t M : {1, 3, 4, 9}) {
    for (int64_t K : {1, 7, 64}) {
      for (int64_t N : {1, 5, 12, 33, 100}) {
        auto x = testing::normal(M * K, rng), W = testing::normal(K * N, rng), b = testing::normal(N, rng);
        for (WeightLayout layout : {WeightLayout::OutIn, WeightLayout::InOut}) {
          std::vector<float> y(M * N), y_ref(M * N);
          linear(x.data(), M, K, W.data(), N, b.data(), y.data(), layout);
          linear_reference(x.data(), M, K, W.data(), N, b.data(), y_ref.data(), layout);
          CHECK(testing::max_abs_diff(y, y_ref) <= 1e-4f);
        }
      }
    }
  }
}

TEST_CASE("MultiHeadAttention equals in-projection, per-head reference attention, out-projection") {
  std::mt19937 rng(11);
  const int64_t B = 2, Lq = 7, Lk = 9, E = 12, H = 3, hd = 4;
  MhaWeights w{testing::normal(3 * E * E, rng, 0.3f), testing::normal(3 * E, rng), testing::normal(E * E, rng, 0.3f),
               testing::normal(E, rng)};
  const MultiHeadAttention mha(E, H, w);
  auto query = testing::normal(B * Lq * E, rng), key = testing::normal(B * Lk * E, rng),
       value = testing::normal(B * Lk * E, rng);
  std::vector<uint8_t> padding(B * Lk, 0);
  padding[0 * Lk + 8] = padding[1 * Lk + 0] = padding[1 * Lk + 3] = 1;  // true = ignore (PyTorch polarity)
  std::vector<uint8_t> hidden(Lq * Lk, 0);
  hidden[2 * Lk + 4] = 1;

  for (bool average : {true, false}) {
    MhaOptions opt;
    opt.key_padding_mask = padding.data();
    opt.bool_attn_mask = hidden.data();
    opt.average_attn_weights = average;
    opt.threads = 2;
    std::vector<float> out(B * Lq * E), weights(average ? B * Lq * Lk : B * H * Lq * Lk);
    mha.forward(B, Lq, Lk, query.data(), key.data(), value.data(), opt, out.data(), weights.data());

    // the same from reference pieces
    std::vector<float> q(B * Lq * E), k(B * Lk * E), v(B * Lk * E);
    linear_reference(query.data(), B * Lq, E, w.in_proj_weight.data(), E, w.in_proj_bias.data(), q.data(),
                     WeightLayout::OutIn);
    linear_reference(key.data(), B * Lk, E, w.in_proj_weight.data() + E * E, E, w.in_proj_bias.data() + E, k.data(),
                     WeightLayout::OutIn);
    linear_reference(value.data(), B * Lk, E, w.in_proj_weight.data() + 2 * E * E, E, w.in_proj_bias.data() + 2 * E,
                     v.data(), WeightLayout::OutIn);
    std::vector<float> merged(B * Lq * E), want_w(B * H * Lq * Lk);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        std::vector<float> qh(Lq * hd), kh(Lk * hd), vh(Lk * hd), oh(Lq * hd), wh(Lq * Lk);
        for (int64_t i = 0; i < Lq; ++i)
          for (int64_t d = 0; d < hd; ++d) qh[i * hd + d] = q[(b * Lq + i) * E + h * hd + d];
        for (int64_t j = 0; j < Lk; ++j)
          for (int64_t d = 0; d < hd; ++d) {
            kh[j * hd + d] = k[(b * Lk + j) * E + h * hd + d];
            vh[j * hd + d] = v[(b * Lk + j) * E + h * hd + d];
          }
        std::vector<uint8_t> allow(Lq * Lk);
        for (int64_t i = 0; i < Lq; ++i)
          for (int64_t j = 0; j < Lk; ++j) allow[i * Lk + j] = !(padding[b * Lk + j] || hidden[i * Lk + j]);
        const AttentionShape s{1, 1, 1, Lq, Lk, hd, hd};
        AttentionOptions o;
        o.bool_mask = {allow.data(), {1, 1, Lq, Lk}};
        attention_reference(s, qh.data(), kh.data(), vh.data(), o, oh.data(), wh.data());
        for (int64_t i = 0; i < Lq; ++i)
          for (int64_t d = 0; d < hd; ++d) merged[(b * Lq + i) * E + h * hd + d] = oh[i * hd + d];
        std::copy(wh.begin(), wh.end(), want_w.begin() + (b * H + h) * Lq * Lk);
      }
    std::vector<float> want(B * Lq * E);
    linear_reference(merged.data(), B * Lq, E, w.out_proj_weight.data(), E, w.out_proj_bias.data(), want.data(),
                     WeightLayout::OutIn);
    CHECK(testing::max_abs_diff(out, want) <= 2e-5f);
    if (average) {
      std::vector<float> avg(B * Lq * Lk, 0.0f);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t x = 0; x < Lq * Lk; ++x) avg[b * Lq * Lk + x] += want_w[(b * H + h) * Lq * Lk + x] / H;
      CHECK(testing::max_abs_diff(weights, avg) <= 1e-6f);
    } else {
      CHECK(testing::max_abs_diff(weights, want_w) <= 1e-6f);
    }
  }
}

TEST_CASE("KV cache: decoding step by step equals a full causal recompute (GQA)") {
  std::mt19937 rng(12);
  const int64_t B = 2, H = 4, Hkv = 2, L = 37, D = 16, Dv = 8;
  auto q = testing::normal(B * H * L * D, rng), k = testing::normal(B * Hkv * L * D, rng),
       v = testing::normal(B * Hkv * L * Dv, rng);
  const AttentionShape s{B, H, Hkv, L, L, D, Dv};
  AttentionOptions causal;
  causal.causal = true;
  std::vector<float> full(B * H * L * Dv);
  attention_reference(s, q.data(), k.data(), v.data(), causal, full.data());

  // room for 8 positions at first, grown (reserve) whenever the next append would not fit: the
  // rows cached so far must move to the wider storage intact
  KVCache cache(B, Hkv, 8, D, Dv);
  std::vector<float> stepwise(full.size());
  // a prefill of 5 positions, then steps of 1 and 3
  for (int64_t t = 0; t < L;) {
    const int64_t n = t == 0 ? 5 : (t % 2 ? 1 : std::min<int64_t>(3, L - t));
    if (t + n > cache.capacity()) cache.reserve(cache.capacity() + 7);
    std::vector<float> kn(B * Hkv * n * D), vn(B * Hkv * n * Dv), qn(B * H * n * D), on(B * H * n * Dv);
    for (int64_t bg = 0; bg < B * Hkv; ++bg)
      for (int64_t i = 0; i < n; ++i) {
        std::copy_n(&k[(bg * L + t + i) * D], D, &kn[(bg * n + i) * D]);
        std::copy_n(&v[(bg * L + t + i) * Dv], Dv, &vn[(bg * n + i) * Dv]);
      }
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t i = 0; i < n; ++i) std::copy_n(&q[(bh * L + t + i) * D], D, &qn[(bh * n + i) * D]);
    cache.append(kn.data(), vn.data(), n);
    cache.attend(qn.data(), H, n, causal, on.data());
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t i = 0; i < n; ++i) std::copy_n(&on[(bh * n + i) * Dv], Dv, &stepwise[(bh * L + t + i) * Dv]);
    t += n;
  }
  CHECK(cache.length() == L);
  CHECK(cache.capacity() == 43);  // 8, then +7 five times
  CHECK(testing::max_abs_diff(stepwise, full) <= 1e-5f);
  cache.reserve(10);  // never shrinks
  CHECK(cache.capacity() == 43);
}
