// Attention rollout's kernels (src/interpret/rollout.hpp) against plain loops in double: the
// fused rows for each fusion and residual, in chunks; the product, dense and lower triangular,
// at sizes that are and are not a multiple of the register tile; bad weights found by row.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "interpret/rollout.hpp"

using namespace qkv;

namespace {

// H softmax maps [L, L], causal or not; some rows of some heads all zero (a removed head)
std::vector<float> random_maps(int64_t H, int64_t L, bool causal, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.f, 4.f);
  std::vector<float> m(size_t(H * L * L), 0.f);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < L; ++i) {
      float* row = m.data() + (h * L + i) * L;
      if ((h * 7 + i) % 11 == 3) continue;
      const int64_t n = causal ? i + 1 : L;
      double s = 0;
      for (int64_t j = 0; j < n; ++j) s += row[j] = std::exp(u(rng));
      for (int64_t j = 0; j < n; ++j) row[j] = float(row[j] / s);
    }
  return m;
}

// A'[i][j] in double, the definition written out
std::vector<double> fused_reference(const std::vector<float>& m, int64_t H, int64_t L, HeadFusion f, double res) {
  std::vector<double> a(size_t(L * L));
  for (int64_t i = 0; i < L; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < L; ++j) {
      double v = m[size_t(i * L + j)];
      for (int64_t h = 1; h < H; ++h) {
        const double x = m[size_t((h * L + i) * L + j)];
        v = f == HeadFusion::Mean ? v + x : f == HeadFusion::Max ? std::max(v, x) : std::min(v, x);
      }
      if (f == HeadFusion::Mean) v /= double(H);
      a[size_t(i * L + j)] = (1 - res) * v;
      sum += (1 - res) * v;
    }
    a[size_t(i * L + i)] += res;
    sum += res;
    for (int64_t j = 0; j < L; ++j) a[size_t(i * L + j)] /= sum > 0 ? sum : 1;
  }
  return a;
}

// runs rollout_fuse_rows over chunks of `chunk` rows, as the TypeScript side copies them
FusedRows fuse_in_chunks(const std::vector<float>& m, int64_t H, int64_t L, int64_t chunk, HeadFusion f, float res,
                         std::vector<float>& out) {
  out.assign(size_t(L * L), -1.f);
  FusedRows all;
  for (int64_t i0 = 0; i0 < L; i0 += chunk) {
    const int64_t rows = std::min(chunk, L - i0);
    std::vector<float> buf(size_t(H * rows * L));
    for (int64_t h = 0; h < H; ++h)
      std::copy(m.begin() + (h * L + i0) * L, m.begin() + (h * L + i0 + rows) * L, buf.begin() + h * rows * L);
    const FusedRows r = rollout_fuse_rows(buf.data(), H, rows, L, i0, f, res, out.data() + i0 * L);
    if (r.bad_row >= 0) return r;
    all.lower = all.lower && r.lower;
  }
  return all;
}

}  // namespace

TEST_CASE("rollout_fuse_rows: each fusion and residual equals the definition, and finds causal maps") {
  std::mt19937 rng(7);
  for (const bool causal : {true, false})
    for (const int64_t L : {1, 5, 37, 64}) {
      const auto maps = random_maps(6, L, causal, rng);
      for (const HeadFusion f : {HeadFusion::Mean, HeadFusion::Max, HeadFusion::Min})
        for (const float res : {0.f, 0.5f, 0.9f}) {
          std::vector<float> got;
          const FusedRows r = fuse_in_chunks(maps, 6, L, 3, f, res, got);
          const auto want = fused_reference(maps, 6, L, f, res);
          CHECK(r.bad_row == -1);
          CHECK(r.lower == (causal || L == 1));
          double worst = 0;
          for (size_t k = 0; k < want.size(); ++k) worst = std::max(worst, std::fabs(got[k] - want[k]));
          CHECK(worst < 2e-6);
          if (causal)
            for (int64_t i = 0; i < L; ++i)
              for (int64_t j = i + 1; j < L; ++j) REQUIRE(got[size_t(i * L + j)] == 0.f);
        }
    }
}

TEST_CASE("rollout_fuse_rows: the first negative or non-finite fused weight is reported by row") {
  std::mt19937 rng(8);
  const int64_t H = 4, L = 40;
  for (const float bad : {-1.f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    auto maps = random_maps(H, L, true, rng);
    maps[size_t((2 * L + 29) * L + 7)] = bad;  // head 2, row 29, key 7
    maps[size_t((1 * L + 33) * L + 2)] = bad;  // a later row
    std::vector<float> out;
    const FusedRows r = fuse_in_chunks(maps, H, L, 8, HeadFusion::Mean, 0.5f, out);
    CHECK(r.bad_row == 29);
    CHECK(!(r.bad_value >= 0.f && r.bad_value < std::numeric_limits<float>::infinity()));
  }
  // max fusion takes a NaN as the TypeScript path does (it is reported)
  auto maps = random_maps(H, L, false, rng);
  maps[size_t((3 * L + 5) * L + 11)] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> out;
  CHECK(fuse_in_chunks(maps, H, L, 40, HeadFusion::Max, 0.5f, out).bad_row == 5);
  float dummy = 0;
  CHECK_THROWS_AS(rollout_fuse_rows(&dummy, 1, 2, 1, 0, HeadFusion::Mean, 0.5f, &dummy), std::invalid_argument);
  CHECK_THROWS_AS(rollout_fuse_rows(&dummy, 1, 1, 1, 0, HeadFusion::Mean, 1.5f, &dummy), std::invalid_argument);
}

TEST_CASE("rollout_product: dense and lower-triangular products equal the plain loop") {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (const int64_t L : {1, 2, 3, 15, 16, 17, 33, 64, 65, 130, 257, 300}) {
    for (const bool lower : {false, true}) {
      std::vector<float> A(size_t(L * L)), B(size_t(L * L));
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) {
          A[size_t(i * L + j)] = lower && j > i ? 0.f : u(rng);
          B[size_t(i * L + j)] = lower && j > i ? 0.f : u(rng);
        }
      std::vector<float> C(size_t(L * L), std::numeric_limits<float>::quiet_NaN());
      rollout_product(A.data(), B.data(), C.data(), L, lower);
      double worst = 0;
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) {
          double s = 0;
          for (int64_t k = 0; k < L; ++k) s += double(A[size_t(i * L + k)]) * B[size_t(k * L + j)];
          const float c = C[size_t(i * L + j)];
          if (lower && j > i) REQUIRE(c == 0.f);
          worst = std::max(worst, std::fabs(c - s) / std::max(1.0, s));
        }
      INFO("L = " << L << (lower ? " lower" : " dense"));
      CHECK(worst < 1e-6 * double(L));
    }
  }
  CHECK_THROWS_AS(rollout_product(nullptr, nullptr, nullptr, 0, false), std::invalid_argument);
}
