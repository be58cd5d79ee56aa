// The few-query-rows path (src/decode_attention.cpp, Lq <= 3 per head: a decode step) against
// the reference on odd sizes, and against the flash kernel bit for bit: a decoded row equals
// the same row of a prefill (output and weights), on any thread count.
#include <doctest/doctest.h>

#include <cstring>
#include <limits>
#include <sstream>

#include "attention.hpp"
#include "decode_attention.hpp"
#include "testing.hpp"

using namespace qkv;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Tensors {
  std::vector<float> q, k, v;
};

// q [B, H, Lq, D], k/v [B, Hkv, rows, D/Dv] with rows = kv_rows_per_head()
Tensors random_tensors(const AttentionShape& s, std::mt19937& rng) {
  const int64_t rows = s.kv_rows_per_head();
  return {testing::normal(s.B * s.H * s.Lq * s.D, rng), testing::normal(s.B * s.Hkv * rows * s.D, rng),
          testing::normal(s.B * s.Hkv * rows * s.Dv, rng)};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::string describe(const AttentionShape& s, const AttentionOptions& o) {
  std::ostringstream d;
  d << "B=" << s.B << " H=" << s.H << " Hkv=" << s.Hkv << " Lq=" << s.Lq << " Lk=" << s.Lk << " kv_rows=" << s.kv_rows
    << " D=" << s.D << " Dv=" << s.Dv << " causal=" << o.causal << " window=" << o.window << " threads=" << o.threads;
  return d.str();
}

// output and weights of attention() and of the reference; checks the two agree
void check_against_reference(const AttentionShape& s, const AttentionOptions& o, const Tensors& t, float tol) {
  INFO(describe(s, o));
  REQUIRE(detail::few_query_rows(s));
  std::vector<float> out(s.B * s.H * s.Lq * s.Dv, 7.0f), w(s.B * s.H * s.Lq * s.Lk, 7.0f);
  std::vector<float> want_out(out.size()), want_w(w.size());
  attention(s, t.q.data(), t.k.data(), t.v.data(), o, out.data(), w.data());
  attention_reference(s, t.q.data(), t.k.data(), t.v.data(), o, want_out.data(), want_w.data());
  CHECK(testing::all_finite(out));
  CHECK(testing::all_finite(w));
  CHECK(testing::max_abs_diff(out, want_out) <= tol);
  CHECK(testing::max_abs_diff(w, want_w) <= tol);
  // without the weights, the same output
  std::vector<float> out2(out.size());
  attention(s, t.q.data(), t.k.data(), t.v.data(), o, out2.data());
  CHECK(same_bits(out, out2));
}

}  // namespace

TEST_CASE("decode attention: against the reference, odd D, Lk 1..600, GQA, windows, a KV cache's capacity") {
  std::mt19937 rng(2024);
  for (int64_t D : {1, 3, 64, 80, 128}) {
    for (int64_t Lk : {1, 2, 3, 5, 63, 64, 65, 127, 128, 129, 300, 600}) {
      for (auto [H, Hkv] : {std::pair<int64_t, int64_t>{1, 1}, {4, 4}, {9, 3}, {8, 1}, {10, 1}}) {
        for (int64_t Lq : {1, 2, 3}) {
          if (Lq > Lk) continue;
          AttentionShape s{1, H, Hkv, Lq, Lk, D, D};
          if (rng() % 2) s.Dv = int64_t(rng() % 70) + 1;        // another value width
          if (rng() % 2) s.kv_rows = Lk + int64_t(rng() % 50);  // a cache with room left
          if (rng() % 3 == 0) s.B = 2;
          AttentionOptions o;
          o.causal = Lq == 1 ? rng() % 2 == 0 : true;  // decode: causal or not, the query sees every key
          o.window = rng() % 3 == 0 ? int64_t(rng() % 100) + 1 : 0;
          o.threads = int(rng() % 3) + 1;
          o.min_work_per_thread = 0;
          check_against_reference(s, o, random_tensors(s, rng), 2e-6f);
        }
      }
    }
  }
}

TEST_CASE("decode attention: masks, -inf rows, +inf scores, scale 0") {
  std::mt19937 rng(7);
  const AttentionShape s{2, 6, 2, 2, 150, 16, 24};
  const Tensors t = random_tensors(s, rng);
  // a bool mask per (batch, head, row) with some rows hiding every key
  std::vector<uint8_t> allow(s.B * s.H * s.Lq * s.Lk);
  for (auto& a : allow) a = rng() % 4 != 0;
  std::fill(allow.begin(), allow.begin() + s.Lk, 0);  // (0, 0, 0): nothing visible
  AttentionOptions o;
  o.bool_mask = {allow.data(), {s.B, s.H, s.Lq, s.Lk}};
  check_against_reference(s, o, t, 2e-6f);
  // a float mask broadcast over heads, with -inf and a row of -inf
  std::vector<float> add = testing::normal(s.B * s.Lq * s.Lk, rng);
  for (auto& x : add)
    if (rng() % 6 == 0) x = -kInf;
  std::fill(add.begin() + s.Lk, add.begin() + 2 * s.Lk, -kInf);  // (0, :, 1): nothing visible
  AttentionOptions f;
  f.float_mask = {add.data(), {s.B, 1, s.Lq, s.Lk}};
  f.causal = true;
  check_against_reference(s, f, t, 2e-6f);
  // +inf in the float mask: those keys share the weight
  std::vector<float> plus(s.Lk, 0.0f);
  plus[3] = plus[140] = kInf;
  AttentionOptions pi;
  pi.float_mask = {plus.data(), {1, 1, 1, s.Lk}};
  check_against_reference(s, pi, t, 2e-6f);
  // scale 0: uniform weights over the visible keys
  AttentionOptions zero;
  zero.scale = 0.0f;
  zero.window = 70;
  check_against_reference(s, zero, t, 2e-6f);
  // large scores (the running max moves many times within and across tiles)
  AttentionOptions big;
  big.scale = 4.0f;
  check_against_reference(s, big, t, 1e-5f);
}

TEST_CASE("decode attention: a decoded row is bit for bit the prefill's row (flash kernel), any thread count") {
  std::mt19937 rng(99);
  for (int64_t D : {3, 64, 80}) {
    for (int64_t T : {1, 7, 64, 65, 130, 257}) {
      for (auto [H, Hkv] : {std::pair<int64_t, int64_t>{4, 4}, {9, 3}, {10, 2}}) {
        // the prefill: T rows causal, through the flash kernel
        const AttentionShape pre{1, H, Hkv, T, T, D, D};
        const Tensors t = random_tensors(pre, rng);
        AttentionOptions o;
        o.causal = true;
        o.min_work_per_thread = 0;
        std::vector<float> out(H * T * D), w(H * T * T);
        attention(pre, t.q.data(), t.k.data(), t.v.data(), o, out.data(), w.data());
        // the last Lq rows decoded against the same keys
        for (int64_t Lq : {1, 2, 3}) {
          if (Lq > T || (T <= detail::kFewQueryRows && Lq != T)) continue;
          const AttentionShape dec{1, H, Hkv, Lq, T, D, D};
          std::vector<float> q(H * Lq * D);
          for (int64_t h = 0; h < H; ++h) std::copy_n(&t.q[(h * T + T - Lq) * D], Lq * D, &q[h * Lq * D]);
          for (int threads : {1, 2, 3}) {
            o.threads = threads;
            INFO(describe(dec, o));
            std::vector<float> dout(H * Lq * D), dw(H * Lq * T);
            attention(dec, q.data(), t.k.data(), t.v.data(), o, dout.data(), dw.data());
            std::vector<float> want_out(dout.size()), want_w(dw.size());
            for (int64_t h = 0; h < H; ++h) {
              std::copy_n(&out[(h * T + T - Lq) * D], Lq * D, &want_out[h * Lq * D]);
              std::copy_n(&w[(h * T + T - Lq) * T], Lq * T, &want_w[h * Lq * T]);
            }
            CHECK(same_bits(dout, want_out));
            CHECK(same_bits(dw, want_w));
          }
        }
      }
    }
  }
}
