// Edge cases: single rows and keys, infinities, huge scores, and masks of every layout.
#include <doctest/doctest.h>

#include <limits>

#include "attention.hpp"
#include "testing.hpp"

using namespace qkv;

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();

AttentionShape one_head(int64_t Lq, int64_t Lk, int64_t D, int64_t Dv) {
  return AttentionShape{1, 1, 1, Lq, Lk, D, Dv};
}

template <class F>
void both_kernels(F&& check) {
  check(attention_reference, "reference");
  check(attention, "fast");
}
}  // namespace

TEST_CASE("L = 1: one query, one key gives that key's value") {
  const float q[] = {0.3f, -2.0f}, k[] = {1.0f, 4.0f}, v[] = {7.0f, -1.0f, 0.5f};
  both_kernels([&](auto kernel, const char* name) {
    INFO(name);
    float out[3], w[1];
    kernel(one_head(1, 1, 2, 3), q, k, v, AttentionOptions{}, out, w);
    CHECK(w[0] == 1.0f);
    CHECK(out[0] == 7.0f);
    CHECK(out[1] == -1.0f);
    CHECK(out[2] == 0.5f);
  });
}

TEST_CASE("+inf in the float mask takes all the weight, shared between +inf keys, without NaN") {
  const AttentionShape s = one_head(2, 4, 1, 1);
  const float q[] = {1.0f, -1.0f}, k[] = {5.0f, 0.0f, -3.0f, 1.0f}, v[] = {10.0f, 20.0f, 30.0f, 40.0f};
  const float add[] = {0.0f,  kInf,  0.0f, kInf,    // row 0: keys 1 and 3 share the weight
                       -kInf, -kInf, 0.0f, -kInf};  // row 1: only key 2 remains
  AttentionOptions o;
  o.float_mask = {add, {1, 1, 2, 4}};
  both_kernels([&](auto kernel, const char* name) {
    INFO(name);
    float out[2], w[8];
    kernel(s, q, k, v, o, out, w);
    CHECK(w[1] == 0.5f);
    CHECK(w[3] == 0.5f);
    CHECK(w[0] == 0.0f);
    CHECK(out[0] == doctest::Approx(30.0f));
    CHECK(w[6] == 1.0f);
    CHECK(out[1] == 30.0f);
  });
}

TEST_CASE("rows masked to -inf everywhere give 0, not NaN") {
  const AttentionShape s = one_head(3, 5, 2, 2);
  std::mt19937 rng(5);
  auto q = testing::normal(6, rng), k = testing::normal(10, rng), v = testing::normal(10, rng);
  std::vector<float> add(15, 0.0f);
  std::fill(add.begin() + 5, add.begin() + 10, -kInf);  // row 1
  std::vector<uint8_t> allow(15, 1);
  std::fill(allow.begin() + 10, allow.end(), 0);  // row 2
  AttentionOptions o;
  o.float_mask = {add.data(), {1, 1, 3, 5}};
  o.bool_mask = {allow.data(), {1, 1, 3, 5}};
  both_kernels([&](auto kernel, const char* name) {
    INFO(name);
    std::vector<float> out(6, NAN), w(15, NAN);
    kernel(s, q.data(), k.data(), v.data(), o, out.data(), w.data());
    CHECK(testing::all_finite(out));
    CHECK(testing::all_finite(w));
    for (int r : {1, 2}) {
      CHECK(out[r * 2] == 0.0f);
      CHECK(out[r * 2 + 1] == 0.0f);
      for (int j = 0; j < 5; ++j) CHECK(w[r * 5 + j] == 0.0f);
    }
  });
}

TEST_CASE("huge scores saturate the softmax without NaN") {
  const AttentionShape s = one_head(2, 3, 2, 1);
  const float q[] = {1e18f, 1e18f, -1e18f, 0.0f}, k[] = {1e19f, 0.0f, 0.0f, 1e19f, -1e19f, -1e19f};
  const float v[] = {1.0f, 2.0f, 3.0f};
  both_kernels([&](auto kernel, const char* name) {
    INFO(name);
    float out[2], w[6];
    kernel(s, q, k, v, AttentionOptions{}, out, w);  // scores overflow to +-inf
    CHECK(testing::all_finite(std::vector<float>(out, out + 2)));
    CHECK(w[0] + w[1] + w[2] == doctest::Approx(1.0f));
    CHECK(w[3] + w[4] + w[5] == doctest::Approx(1.0f));
    CHECK(out[1] == doctest::Approx(3.0f));  // -1e18 * -1e19 = +inf for key 2 only
  });
}

TEST_CASE("large explicit scales: fast kernel within a tolerance relative to the score size") {
  std::mt19937 rng(6);
  AttentionShape s = one_head(65, 129, 65, 16);
  auto q = testing::normal(65 * 65, rng), k = testing::normal(129 * 65, rng), v = testing::normal(129 * 16, rng);
  AttentionOptions o;
  o.scale = 3.0f;  // scores ~ N(0, 24^2): float32 resolves them to ~1e-6 relative
  std::vector<float> a(65 * 16), b(65 * 16);
  attention_reference(s, q.data(), k.data(), v.data(), o, a.data());
  attention(s, q.data(), k.data(), v.data(), o, b.data());
  CHECK(testing::max_abs_diff(a, b) <= 1e-4f);
}

TEST_CASE("masks broadcast along every combination of size-1 dimensions") {
  std::mt19937 rng(8);
  const AttentionShape s{2, 3, 3, 5, 6, 4, 4};
  auto q = testing::normal(2 * 3 * 5 * 4, rng), k = testing::normal(2 * 3 * 6 * 4, rng),
       v = testing::normal(2 * 3 * 6 * 4, rng);
  const Dims4 full{2, 3, 5, 6};
  for (int bits = 0; bits < 16; ++bits) {
    Dims4 dims = full;
    for (int d = 0; d < 4; ++d)
      if (bits & (1 << d)) dims[d] = 1;
    const int64_t n = dims[0] * dims[1] * dims[2] * dims[3];
    std::vector<uint8_t> small(n);
    for (auto& x : small) x = rng() % 4 != 0;
    // the same mask materialised at full size
    std::vector<uint8_t> big(2 * 3 * 5 * 6);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 3; ++h)
        for (int64_t i = 0; i < 5; ++i)
          for (int64_t j = 0; j < 6; ++j) {
            const int64_t at =
                ((std::min(b, dims[0] - 1) * dims[1] + std::min(h, dims[1] - 1)) * dims[2] + std::min(i, dims[2] - 1)) *
                    dims[3] +
                std::min(j, dims[3] - 1);
            big[((b * 3 + h) * 5 + i) * 6 + j] = small[at];
          }
    AttentionOptions broadcast, materialised;
    broadcast.bool_mask = {small.data(), dims};
    materialised.bool_mask = {big.data(), full};
    std::vector<float> a(2 * 3 * 5 * 4), b(a.size());
    attention(s, q.data(), k.data(), v.data(), broadcast, a.data());
    attention_reference(s, q.data(), k.data(), v.data(), materialised, b.data());
    INFO("mask dims bits " << bits);
    CHECK(testing::max_abs_diff(a, b) <= 1e-5f);
  }
}

TEST_CASE("causal is bottom-right aligned: with Lq == Lk it is the usual lower triangle") {
  const AttentionShape s = one_head(4, 6, 1, 1);
  const float q[] = {0, 0, 0, 0}, k[] = {0, 0, 0, 0, 0, 0}, v[] = {1, 2, 3, 4, 5, 6};
  AttentionOptions o;
  o.causal = true;
  both_kernels([&](auto kernel, const char* name) {
    INFO(name);
    float out[4], w[24];
    kernel(s, q, k, v, o, out, w);
    // query i sees keys 0..i+2: uniform weights over them
    for (int i = 0; i < 4; ++i) CHECK(out[i] == doctest::Approx((i + 3) / 2.0 + 0.5));
    CHECK(w[0 * 6 + 3] == 0.0f);
    CHECK(w[0 * 6 + 2] == doctest::Approx(1.0f / 3));
  });
}
