// 4-bit weights (Q4, matmul/weights.hpp): the quantizer's rule and error bound, the layout's
// padding, and the kernels (matrix-vector and matrix products) against plain loops over the
// dequantized values. test_matmul.cpp runs Q4 through the shared shape, thread and
// matmul_many cases beside the other weight types.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"
#include "testing.hpp"

using qkv::Q4Layout;
using qkv::WeightLayout;
using qkv::WeightMatrix;
using qkv::WeightType;
namespace halves = qkv::halves;

namespace {

struct Q4 {
  std::vector<uint8_t> data;
  std::vector<uint16_t> scales;
  WeightMatrix w;
};

Q4 quantize(const std::vector<float>& v, WeightLayout layout, int64_t K, int64_t N) {
  Q4 q;
  const Q4Layout l = Q4Layout::of(K, N);
  q.data.assign(l.data_bytes(), 0xA5);  // overwritten whole
  q.scales.assign(l.scale_count(), 0x5633);
  qkv::quantize_q4(WeightMatrix{WeightType::F32, layout, K, N, v.data(), nullptr}, q.data.data(), q.scales.data());
  q.w = WeightMatrix{WeightType::Q4, layout, K, N, q.data.data(), q.scales.data()};
  return q;
}

}  // namespace

TEST_CASE("quantize_q4: ggml's q4_0 rule, |w - d q| <= |d| / 2 (|d| at the clamped +8), padding, read_column") {
  std::mt19937 rng(4);
  for (WeightLayout layout : {WeightLayout::InOut, WeightLayout::OutIn}) {
    const int64_t K = 77, N = 21;  // K: two full blocks and a padded one; N: one full set of 16 and a padded one
    std::vector<float> v = qkv::testing::normal(K * N, rng, 0.2f);
    const auto at = [&](int64_t k, int64_t n) -> float& {
      return v[size_t(layout == WeightLayout::InOut ? k * N + n : n * K + k)];
    };
    for (int64_t k = 0; k < K; ++k) at(k, 3) = 0.0f;      // column 3: zeros
    at(5, 7) = 1.0f, at(6, 7) = -1.0f;                    // block 0 of column 7: +max then -max (clamped to 7)
    for (int64_t k = 32; k < 64; ++k) at(k, 9) *= 1e-4f;  // a tiny block: |d| = 2^-14
    const Q4 q = quantize(v, layout, K, N);
    const Q4Layout l = Q4Layout::of(K, N);
    CHECK(l.sets == 2);
    CHECK(l.blocks == 3);
    CHECK(q.w.bytes() == size_t(2 * 3 * (256 + 32)));  // 0.5625 bytes per padded weight
    int clamped = 0;
    for (int64_t n = 0; n < N; ++n) {
      std::vector<float> col(static_cast<size_t>(K));
      qkv::read_column(q.w, n, col.data());
      for (int64_t b = 0; b < 3; ++b) {
        float m = 0.0f;
        for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k)
          if (std::fabs(at(k, n)) > std::fabs(m)) m = at(k, n);
        const float d = halves::f16_to_f32(q.scales[size_t((n / 16 * 3 + b) * 16 + n % 16)]);
        if (m == 0.0f) {
          CHECK(d == 0.0f);
        } else if (std::fabs(m) < 8 * 6.103515625e-05f) {
          CHECK(d == std::copysign(6.103515625e-05f, -m));  // the smallest normal half, no subnormal
        } else {
          CHECK(d == halves::f16_to_f32(halves::f32_to_f16(m / -8.0f)));
        }
        for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k) {
          const float w = at(k, n), r = col[size_t(k)];
          CHECK(r == qkv::weight_at(q.w, k, n));
          const float qv = d != 0.0f ? r / d : 0.0f;  // the stored integer
          CHECK(qv == std::nearbyint(qv));
          CHECK((qv >= -8.0f && qv <= 7.0f));
          if (w / d > 7.5f) {  // m's opposite sign beyond 7.5 |d|: clamped to 7
            ++clamped;
            CHECK(qv == 7.0f);
            CHECK(std::fabs(w - r) <= std::fabs(d) * 1.001f);
          } else {
            CHECK(std::fabs(w - r) <= std::fabs(d) / 2 * (1 + 1e-6f));
          }
        }
      }
      if (n == 3) CHECK(std::all_of(col.begin(), col.end(), [](float c) { return c == 0.0f; }));
    }
    CHECK(clamped >= 1);  // column 7's -1.0
    // padding: columns 21..31 and rows 77..95 hold nibble 8 (q = 0)
    for (int64_t k = 0; k < 96; ++k)
      for (int64_t n = 0; n < 32; ++n)
        if (k >= K || n >= N) {
          WeightMatrix padded = q.w;
          padded.K = 96, padded.N = 32;  // the same layout, read past the real sizes
          CHECK(qkv::weight_at(padded, k, n) == 0.0f);
        }
  }
}

TEST_CASE("quantize_q4: non-finite weights and scales beyond a half are errors naming the function") {
  std::vector<float> v(32 * 4, 0.5f);
  std::vector<uint8_t> data(Q4Layout::of(32, 4).data_bytes());
  std::vector<uint16_t> scales(Q4Layout::of(32, 4).scale_count());
  v[7] = NAN;
  CHECK_THROWS_WITH_AS(qkv::quantize_q4(WeightMatrix{WeightType::F32, WeightLayout::InOut, 32, 4, v.data(), nullptr},
                                        data.data(), scales.data()),
                       "quantize_q4: a weight is nan", std::invalid_argument);
  v[7] = 1e6f;
  CHECK_THROWS_WITH_AS(
      qkv::quantize_q4(WeightMatrix{WeightType::F32, WeightLayout::InOut, 32, 4, v.data(), nullptr}, data.data(),
                       scales.data()),
      "quantize_q4: a block's largest weight 1000000.000000 is beyond what a 4-bit block with a half scale holds "
      "(|w| <= 5.2e5)",
      std::invalid_argument);
}

TEST_CASE(
    "Q4 kernels == plain loops over the dequantized values (gemv, gemm_q4 within x's int16 rounding, gemm within "
    "float's)") {
  std::mt19937 rng(44);
  struct Shape {
    int64_t M, K, N;
  };
  // N across sets of 16, the 4 far-apart streams (64 columns), 8-column thread ranges; K across blocks
  const Shape shapes[] = {{1, 32, 16}, {1, 31, 5}, {3, 64, 72}, {1, 576, 1536}, {2, 300, 257}, {5, 257, 1100}};
  for (const Shape& s : shapes) {
    CAPTURE(s.M);
    CAPTURE(s.K);
    CAPTURE(s.N);
    const std::vector<float> v = qkv::testing::normal(s.K * s.N, rng, 0.2f);
    const Q4 q = quantize(v, WeightLayout::OutIn, s.K, s.N);
    // the dequantized matrix as F32: what every Q4 product must equal
    std::vector<float> deq(size_t(s.K * s.N));
    for (int64_t n = 0; n < s.N; ++n) qkv::read_column(q.w, n, deq.data() + n * s.K);
    const WeightMatrix f{WeightType::F32, WeightLayout::OutIn, s.K, s.N, deq.data(), nullptr};
    const std::vector<float> x = qkv::testing::normal(s.M * s.K, rng), bias = qkv::testing::normal(s.N, rng);
    std::vector<float> want(size_t(s.M * s.N)), y(want.size(), NAN), yv(want.size(), NAN), yq(want.size(), NAN);
    qkv::matmul_reference(f, x.data(), s.M, bias.data(), want.data());
    qkv::detail::gemm(q.w, x.data(), s.M, bias.data(), y.data(), 1);
    for (int64_t m = 0; m < s.M; ++m) qkv::detail::gemv(q.w, x.data() + m * s.K, bias.data(), yv.data() + m * s.N, 1);
    qkv::detail::gemm_q4(q.w, x.data(), s.M, bias.data(), yq.data(), 1);  // the integer prefill
    double worst_gemm = 0.0, worst_gemv = 0.0, worst_gemm_q4 = 0.0;
    for (int64_t m = 0; m < s.M; ++m) {
      double xmax = 0.0;
      for (int64_t k = 0; k < s.K; ++k) xmax = std::max(xmax, std::fabs(double(x[size_t(m * s.K + k)])));
      for (int64_t n = 0; n < s.N; ++n) {
        double mag = std::fabs(bias[size_t(n)]), wsum = 0.0;
        for (int64_t k = 0; k < s.K; ++k) {
          mag += std::fabs(x[size_t(m * s.K + k)] * deq[size_t(n * s.K + k)]);
          wsum += std::fabs(deq[size_t(n * s.K + k)]);
        }
        const size_t i = size_t(m * s.N + n);
        const double tol_gemm = (2e-6 * std::sqrt(double(s.K)) + 1e-6) * mag + 1e-30;
        const double tol_gemv = tol_gemm + wsum * xmax / 65534;  // xq = nearest(x / (max|x| / 32767))
        worst_gemm = std::max(worst_gemm, std::fabs(y[i] - want[i]) / tol_gemm);
        worst_gemv = std::max(worst_gemv, std::fabs(yv[i] - want[i]) / tol_gemv);
        worst_gemm_q4 = std::max(worst_gemm_q4, std::fabs(yq[i] - want[i]) / tol_gemv);
      }
    }
    CHECK(worst_gemm <= 1.0);
    CHECK(worst_gemv <= 1.0);
    CHECK(worst_gemm_q4 <= 1.0);
    CHECK(yq == yv);  // the same x rounding, int32 sums and scale products: each row's decode bits
    for (int threads : {2, 3}) {
      std::vector<float> yt(want.size(), NAN);
      qkv::matmul(q.w, x.data(), s.M, bias.data(), yt.data(), threads);
      CHECK(yt == (s.M == 1 ? yv : yq));
    }
  }
}
