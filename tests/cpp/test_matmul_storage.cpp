// The matmul weights' stored forms (matmul/weights.hpp): panels of 16 columns made in place from
// [K, N] and [N, K], weight_at and read_column over them; Q8 quantization (its layout, error
// bound, scales); F16 weights readied for the kernels (inf and NaN refused, subnormals moved to
// fixes). The kernels over these forms: test_matmul.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"
#include "model/safetensors.hpp"
#include "test_matmul_util.hpp"
#include "testing.hpp"

using namespace qkv;
using namespace qkv::matmul_testing;

TEST_CASE("to_panels: [K, N] and [N, K] -> panels of 16 in place, F32 and 16-bit; weight_at, read_column") {
  std::vector<float> scratch;  // one buffer per element size for every matrix, as the loader does
  std::vector<uint16_t> half_scratch;
  std::mt19937 rng(16);
  for (WeightType type : {WeightType::F32, WeightType::F16, WeightType::BF16}) {
    for (const auto& [K, N] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {3, 15}, {2, 16}, {5, 17}, {33, 40}, {7, 1}, {64, 95}, {9, 257}}) {
      for (WeightLayout from : {WeightLayout::InOut, WeightLayout::OutIn}) {
        CAPTURE(weight_type_name(type));
        CAPTURE(K);
        CAPTURE(N);
        CAPTURE(layout_name(from));
        const Stored original = make_weights(type, from, K, N, rng);
        Stored moved = original;
        void* data = nullptr;
        if (type == WeightType::F32) {
          to_panels(moved.f32.data(), K, N, from, scratch);
          data = moved.f32.data();
        } else {
          to_panels(moved.half.data(), K, N, from, half_scratch);
          data = moved.half.data();
        }
        const WeightMatrix before{type, from, K, N, original.w.data, nullptr};
        const WeightMatrix after{type, WeightLayout::Panels, K, N, data, nullptr};
        bool same = true;
        for (int64_t k = 0; k < K; ++k)
          for (int64_t n = 0; n < N; ++n) same = same && weight_at(after, k, n) == weight_at(before, k, n);
        CHECK(same);
        // the layout itself: column n of a whole panel at (n / 16) 16 K + k 16 + n % 16, the last
        // panel's at its start + k (N % 16) + n % 16
        const int64_t n = N - 1, first = n / 16 * 16, width = std::min<int64_t>(16, N - first);
        const size_t at = size_t(first * K + (K - 1) * width + n - first);
        const float stored = type == WeightType::F32   ? moved.f32[at]
                             : type == WeightType::F16 ? halves::f16_to_f32(moved.half[at])
                                                       : halves::bf16_to_f32(moved.half[at]);
        CHECK(stored == weight_at(before, K - 1, n));
        std::vector<float> column(static_cast<size_t>(K)), want(static_cast<size_t>(K));
        read_column(after, n, column.data());
        read_column(before, n, want.data());
        CHECK(column == want);
      }
    }
  }
  std::vector<int8_t> q(128, 0);
  std::vector<uint16_t> scales(4, 0);
  const WeightMatrix q8{WeightType::Q8, WeightLayout::Panels, 4, 4, q.data(), scales.data()};
  std::vector<float> x(4, 1.0f), y(4);
  CHECK_THROWS_WITH_AS(matmul(q8, x.data(), 1, nullptr, y.data()),
                       "matmul: W Q8 [4, 4] in Panels: that layout is for F32, F16 and BF16", std::invalid_argument);
}

TEST_CASE("quantize_q8: layout, error bound, zeros and read_column") {
  std::mt19937 rng(3);
  for (WeightLayout layout : {WeightLayout::InOut, WeightLayout::OutIn}) {
    const int64_t K = 45, N = 6;  // K: one full block and a padded one; N: one full group and a padded one
    std::vector<float> v = qkv::testing::normal(K * N, rng);
    for (int64_t k = 0; k < K; ++k)
      v[size_t(layout == WeightLayout::InOut ? k * N + 5 : 5 * K + k)] = 0.0f;  // column 5: zeros
    WeightMatrix src{WeightType::F32, layout, K, N, v.data(), nullptr};
    const Q8Layout q = Q8Layout::of(K, N);
    CHECK(q.groups == 2);
    CHECK(q.blocks == 2);
    std::vector<int8_t> data(q.data_bytes(), 99);
    std::vector<uint16_t> scales(q.scale_count(), uint16_t(0x5633));  // 99 as a half
    quantize_q8(src, data.data(), scales.data());
    WeightMatrix w{WeightType::Q8, layout, K, N, data.data(), scales.data()};
    CHECK(w.bytes() == q.data_bytes() + 2 * q.scale_count());
    for (int64_t n = 0; n < N; ++n) {
      std::vector<float> col(static_cast<size_t>(K));
      read_column(w, n, col.data());
      for (int64_t b = 0; b < 2; ++b) {
        float amax = 0.0f;
        for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k)
          amax = std::max(amax, std::fabs(weight_at(src, k, n)));
        // the scale: amax / 127 rounded to a half (relative error <= 2^-11)
        CHECK(halves::f16_to_f32(scales[size_t((n / 4 * 2 + b) * 4 + n % 4)]) ==
              doctest::Approx(amax / 127.0f).epsilon(4.9e-4));
        for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k) {
          CHECK(col[size_t(k)] == weight_at(w, k, n));
          CHECK(std::fabs(col[size_t(k)] - weight_at(src, k, n)) <= amax / 254.0f * (1.0f + 1.0f / 2048));
        }
      }
      if (n == 5) CHECK(std::all_of(col.begin(), col.end(), [](float c) { return c == 0.0f; }));
    }
    // padding: columns 6, 7 and rows 45..63 are zeros
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t p = 0; p < 16; ++p)
        for (int64_t c = 0; c < 4; ++c)
          for (int64_t par = 0; par < 2; ++par) {
            const int64_t k = b * 32 + p * 2 + par, n = 4 + c;
            if (k >= K || n >= N) CHECK(data[size_t(((1 * 2 + b) * 16 + p) * 8 + c * 2 + par)] == 0);
          }
  }
}

TEST_CASE("quantize_q8: scales are normal halves; tiny blocks keep a 2^-15 error, huge ones are an error") {
  const int64_t K = 32, N = 4;
  std::vector<float> v(size_t(K * N));
  for (int64_t i = 0; i < K * N; ++i) v[size_t(i)] = float((i * 37) % 19 - 9);  // -9 .. 9
  for (int64_t k = 0; k < K; ++k) {
    v[size_t(k * N + 1)] *= 1e-7f;  // column 1: |w| <= 9e-7, amax / 127 a subnormal half
    v[size_t(k * N + 2)] = 0.0f;    // column 2: zeros
  }
  WeightMatrix src{WeightType::F32, WeightLayout::InOut, K, N, v.data(), nullptr};
  const Q8Layout q = Q8Layout::of(K, N);
  std::vector<int8_t> data(q.data_bytes());
  std::vector<uint16_t> scales(q.scale_count());
  quantize_q8(src, data.data(), scales.data());
  CHECK(scales[1] == 0x0400);  // 2^-14, the smallest normal half
  CHECK(scales[2] == 0);
  WeightMatrix w{WeightType::Q8, WeightLayout::InOut, K, N, data.data(), scales.data()};
  for (int64_t k = 0; k < K; ++k) {
    CHECK(std::fabs(weight_at(w, k, 1) - weight_at(src, k, 1)) <= 0x1p-15f);
    CHECK(weight_at(w, k, 2) == 0.0f);
  }
  // the kernels widen the scales as weight_at does: products through the GEMV (M = 1) and the
  // GEMM (M = 5, packing) against sum_k x[k] * weight_at, for x of ones and for x with a value
  // beyond ~2^31 in a block (the kernels' x scale times 2^112 would overflow there, so they take
  // the plain scales)
  const auto check_products = [&](float big, double epsilon) {
    for (int64_t M : {1, 5}) {
      std::vector<float> xm(size_t(M * K), 1.0f), ym(size_t(M * N));
      xm[size_t((M - 1) * K + 7)] = big;
      matmul(w, xm.data(), M, nullptr, ym.data(), 1);
      for (int64_t n = 0; n < N; ++n) {
        float ref = 0.0f;
        for (int64_t k = 0; k < K; ++k) ref += xm[size_t((M - 1) * K + k)] * weight_at(w, k, n);
        CHECK(std::isfinite(ym[size_t((M - 1) * N + n)]));
        CHECK(ym[size_t((M - 1) * N + n)] == doctest::Approx(ref).epsilon(epsilon));
      }
    }
  };
  check_products(1.0f, 1e-4);
  check_products(3e10f, 1e-3);
  v[5 * N + 3] = 1e7f;  // a scale beyond the half range
  CHECK_THROWS_WITH_AS(quantize_q8(src, data.data(), scales.data()),
                       "quantize_q8: a block's largest weight 10000000.000000 is beyond what an 8-bit block with a "
                       "half scale holds (|w| <= 8.3e6)",
                       std::invalid_argument);
}

TEST_CASE(
    "matmul: F16 weights readied for the kernels (inf/NaN refused, subnormals moved to fixes); bad shapes are errors") {
  std::vector<uint16_t> h = {0x3C00, 0x7C00, 0x0001};
  std::vector<WeightFix> fixes;
  const auto view = [&](int64_t K, int64_t N, WeightLayout layout) {
    return WeightMatrix{WeightType::F16, layout, K, N, h.data(), nullptr};
  };
  CHECK_THROWS_WITH_AS(prepare_f16_weights(view(1, 3, WeightLayout::InOut), "GPT2: tensor \"x\"", fixes),
                       "GPT2: tensor \"x\": F16 weights hold inf at element 1 (of 3)", std::invalid_argument);
  h[1] = 0xFE00;
  CHECK_THROWS_WITH_AS(prepare_f16_weights(view(1, 3, WeightLayout::InOut), "w", fixes),
                       "w: F16 weights hold NaN at element 1 (of 3)", std::invalid_argument);
  // [2, 3] InOut: 65504, subnormals +-, smallest normal, -0, 0
  h = {0x7BFF, 0x0001, 0x83FF, 0x0400, 0x8000, 0x0000};
  fixes.clear();
  CHECK(prepare_f16_weights(view(2, 3, WeightLayout::InOut), "w", fixes) == 2);
  CHECK(h == std::vector<uint16_t>{0x7BFF, 0x0000, 0x8000, 0x0400, 0x8000, 0x0000});
  REQUIRE(fixes.size() == 2);  // sorted by (n, k): W[0, 1] = 2^-24, W[0, 2] = -1023 * 2^-24
  CHECK((fixes[0].n == 1 && fixes[0].k == 0 && fixes[0].value == 0x1p-24f));
  CHECK((fixes[1].n == 2 && fixes[1].k == 0 && fixes[1].value == -1023 * 0x1p-24f));
  // the same storage read as OutIn [N = 2, K = 3]: element i = n K + k
  h = {0x7BFF, 0x0001, 0x83FF, 0x0400, 0x8000, 0x0000};
  fixes.clear();
  CHECK(prepare_f16_weights(view(3, 2, WeightLayout::OutIn), "w", fixes) == 2);
  CHECK((fixes[0].n == 0 && fixes[0].k == 1 && fixes[1].n == 0 && fixes[1].k == 2));

  float x = 1.0f, y = 0.0f;
  WeightMatrix w{WeightType::F32, WeightLayout::InOut, 0, 1, &x, nullptr};
  CHECK_THROWS_WITH_AS(matmul(w, &x, 1, nullptr, &y), "matmul: shapes x [1, 0] and W [0, 1] must be positive",
                       std::invalid_argument);
  WeightMatrix q{WeightType::Q8, WeightLayout::InOut, 1, 1, &x, nullptr};
  CHECK_THROWS_WITH_AS(matmul(q, &x, 1, nullptr, &y), "matmul: null buffer (W Q8 [1, 1], M = 1)",
                       std::invalid_argument);
}
