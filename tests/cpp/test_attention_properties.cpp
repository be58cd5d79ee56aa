// Properties that hold for any correct attention, checked on both kernels.
#include <doctest/doctest.h>

#include <limits>
#include <numeric>

#include "attention.hpp"
#include "diagnostics.hpp"
#include "testing.hpp"

using namespace qkv;

namespace {

using Kernel = void (*)(const AttentionShape&, const float*, const float*, const float*, const AttentionOptions&,
                        float*, float*);
const Kernel kKernels[] = {attention_reference, attention};
const char* const kKernelNames[] = {"reference", "fast"};

AttentionShape shape(int64_t B, int64_t H, int64_t Hkv, int64_t Lq, int64_t Lk, int64_t D, int64_t Dv) {
  return AttentionShape{B, H, Hkv, Lq, Lk, D, Dv};
}

}  // namespace

TEST_CASE("weights rows sum to 1, or are all 0 when nothing is visible") {
  std::mt19937 rng(1);
  const AttentionShape s = shape(2, 4, 2, 33, 50, 16, 8);
  auto q = testing::normal(2 * 4 * 33 * 16, rng), k = testing::normal(2 * 2 * 50 * 16, rng),
       v = testing::normal(2 * 2 * 50 * 8, rng);
  std::vector<uint8_t> allow(33 * 50);
  for (auto& a : allow) a = rng() % 3 != 0;
  std::fill(allow.begin() + 5 * 50, allow.begin() + 6 * 50, 0);  // row 5 sees nothing
  AttentionOptions o;
  o.bool_mask = {allow.data(), {1, 1, 33, 50}};
  o.causal = true;
  o.window = 20;
  for (int kk = 0; kk < 2; ++kk) {
    INFO(kKernelNames[kk]);
    std::vector<float> out(2 * 4 * 33 * 8), w(2 * 4 * 33 * 50);
    kKernels[kk](s, q.data(), k.data(), v.data(), o, out.data(), w.data());
    CHECK(max_row_sum_error(w.data(), 2 * 4 * 33, 50) <= 1e-5f);
    for (int64_t bh = 0; bh < 8; ++bh) {
      const float* row5 = &w[(bh * 33 + 5) * 50];
      CHECK(std::all_of(row5, row5 + 50, [](float x) { return x == 0.0f; }));
      const float* out5 = &out[(bh * 33 + 5) * 8];
      CHECK(std::all_of(out5, out5 + 8, [](float x) { return x == 0.0f; }));
    }
    // keys hidden by causal, window or the mask get exactly 0
    for (int64_t i = 0; i < 33; ++i)
      for (int64_t j = 0; j < 50; ++j) {
        const bool visible = j <= i + 17 && j > i + 17 - 20 && allow[i * 50 + j];
        if (!visible) CHECK(w[i * 50 + j] == 0.0f);
      }
  }
}

TEST_CASE("each output lies within [min v, max v] over the keys its row may see") {
  std::mt19937 rng(2);
  const AttentionShape s = shape(1, 2, 1, 40, 40, 8, 6);
  auto q = testing::normal(2 * 40 * 8, rng, 3.0f), k = testing::normal(40 * 8, rng), v = testing::normal(40 * 6, rng);
  AttentionOptions o;
  o.causal = true;
  o.window = 9;
  for (int kk = 0; kk < 2; ++kk) {
    std::vector<float> out(2 * 40 * 6);
    kKernels[kk](s, q.data(), k.data(), v.data(), o, out.data(), nullptr);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < 40; ++i)
        for (int64_t e = 0; e < 6; ++e) {
          float lo = INFINITY, hi = -INFINITY;
          for (int64_t j = std::max<int64_t>(0, i - 8); j <= i; ++j) {
            lo = std::min(lo, v[j * 6 + e]);
            hi = std::max(hi, v[j * 6 + e]);
          }
          const float x = out[(h * 40 + i) * 6 + e];
          CHECK(x >= lo - 1e-6f);
          CHECK(x <= hi + 1e-6f);
        }
  }
}

TEST_CASE("permuting keys and values together leaves the output unchanged") {
  std::mt19937 rng(3);
  const AttentionShape s = shape(1, 3, 3, 20, 70, 24, 24);
  auto q = testing::normal(3 * 20 * 24, rng), k = testing::normal(3 * 70 * 24, rng),
       v = testing::normal(3 * 70 * 24, rng);
  std::vector<int> perm(70);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<float> kp(k.size()), vp(v.size());
  for (int h = 0; h < 3; ++h)
    for (int j = 0; j < 70; ++j)
      for (int d = 0; d < 24; ++d) {
        kp[(h * 70 + j) * 24 + d] = k[(h * 70 + perm[j]) * 24 + d];
        vp[(h * 70 + j) * 24 + d] = v[(h * 70 + perm[j]) * 24 + d];
      }
  for (int kk = 0; kk < 2; ++kk) {
    std::vector<float> a(3 * 20 * 24), b(a.size());
    kKernels[kk](s, q.data(), k.data(), v.data(), AttentionOptions{}, a.data(), nullptr);
    kKernels[kk](s, q.data(), kp.data(), vp.data(), AttentionOptions{}, b.data(), nullptr);
    CHECK(testing::max_abs_diff(a, b) <= 2e-6f);
  }
}

TEST_CASE("a larger scale never raises row entropy on the same scores") {
  std::mt19937 rng(4);
  const AttentionShape s = shape(1, 1, 1, 30, 45, 16, 4);
  auto q = testing::normal(30 * 16, rng), k = testing::normal(45 * 16, rng), v = testing::normal(45 * 4, rng);
  for (int kk = 0; kk < 2; ++kk) {
    std::vector<float> previous;
    for (float scale : {0.0f, 0.05f, 0.1f, 0.25f, 0.5f, 1.0f, 2.0f, 4.0f}) {
      AttentionOptions o;
      o.scale = scale;
      std::vector<float> out(30 * 4), w(30 * 45), entropy(30);
      kKernels[kk](s, q.data(), k.data(), v.data(), o, out.data(), w.data());
      row_entropy(w.data(), 30, 45, entropy.data());
      if (scale == 0.0f) {
        for (float h : entropy) CHECK(h == doctest::Approx(std::log(45.0f)).epsilon(1e-5));  // uniform
      }
      for (size_t r = 0; r < previous.size(); ++r) CHECK(entropy[r] <= previous[r] + 1e-5f);
      previous = entropy;
    }
  }
}

TEST_CASE("diagnostics: entropy and row sums") {
  const float w[] = {0.5f, 0.5f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.2f, 0.2f, 0.5f};
  float h[4];
  row_entropy(w, 4, 3, h);
  CHECK(h[0] == doctest::Approx(std::log(2.0f)));
  CHECK(h[1] == 0.0f);
  CHECK(h[2] == 0.0f);
  CHECK(max_row_sum_error(w, 3, 3) == 0.0f);  // the all-zero row is allowed
  CHECK(max_row_sum_error(w, 4, 3) == doctest::Approx(0.1f));
}
