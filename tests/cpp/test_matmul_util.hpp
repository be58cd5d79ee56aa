// Helpers for the matmul tests (test_matmul.cpp, test_matmul_storage.cpp): random weight
// matrices in every stored form, the tolerance of a float product, the layouts of each type.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"
#include "testing.hpp"

namespace qkv::matmul_testing {

// A random weight matrix held in one of the stored forms.
struct Stored {
  std::vector<float> f32;      // K * N values as generated (storage order)
  std::vector<uint16_t> half;  // F16 / BF16 storage
  std::vector<int8_t> q8;
  std::vector<uint8_t> q4;
  std::vector<uint16_t> scales;
  WeightMatrix w;
};

inline Stored make_weights(WeightType type, WeightLayout layout, int64_t K, int64_t N, std::mt19937& rng) {
  Stored s;
  s.f32 = qkv::testing::normal(K * N, rng, 0.5f);
  // a few exact zeros, tiny values (subnormal in F16) and large ones
  for (size_t i = 0; i < s.f32.size(); i += 7) s.f32[i] = 0.0f;
  for (size_t i = 3; i < s.f32.size(); i += 11) s.f32[i] *= 1e-6f;
  for (size_t i = 5; i < s.f32.size(); i += 13) s.f32[i] *= 300.0f;
  s.w.type = type;
  s.w.layout = layout;
  s.w.K = K;
  s.w.N = N;
  if (type == WeightType::F32) {
    s.w.data = s.f32.data();
  } else if (type == WeightType::F16 || type == WeightType::BF16) {
    for (float v : s.f32) s.half.push_back(type == WeightType::F16 ? halves::f32_to_f16(v) : halves::f32_to_bf16(v));
    s.w.data = s.half.data();
  } else if (type == WeightType::Q4) {
    WeightMatrix src{WeightType::F32, layout, K, N, s.f32.data(), nullptr};
    const Q4Layout q = Q4Layout::of(K, N);
    s.q4.resize(q.data_bytes());
    s.scales.resize(q.scale_count());
    quantize_q4(src, s.q4.data(), s.scales.data());
    s.w.data = s.q4.data();
    s.w.scales = s.scales.data();
  } else {
    WeightMatrix src{WeightType::F32, layout, K, N, s.f32.data(), nullptr};
    const Q8Layout q = Q8Layout::of(K, N);
    s.q8.resize(q.data_bytes());
    s.scales.resize(q.scale_count());
    quantize_q8(src, s.q8.data(), s.scales.data());
    s.w.data = s.q8.data();
    s.w.scales = s.scales.data();
  }
  return s;
}

// |y - want| <= tol where tol scales with the sizes of the terms summed
inline void check_close(const std::vector<float>& y, const std::vector<float>& want, const std::vector<float>& x,
                        const WeightMatrix& w, const std::vector<float>& bias, int64_t M, double rel, double x_rel) {
  double worst = 0.0;
  for (int64_t m = 0; m < M; ++m) {
    double xmax = 0.0;
    for (int64_t k = 0; k < w.K; ++k) xmax = std::max(xmax, std::fabs(double(x[size_t(m * w.K + k)])));
    for (int64_t n = 0; n < w.N; ++n) {
      double mag = std::fabs(double(bias[size_t(n)])), wsum = 0.0;
      for (int64_t k = 0; k < w.K; ++k) {
        const double wk = std::fabs(double(weight_at(w, k, n)));
        mag += std::fabs(double(x[size_t(m * w.K + k)])) * wk;
        wsum += wk;
      }
      const double tol = rel * mag + x_rel * wsum * xmax + 1e-30;
      const double err = std::fabs(double(y[size_t(m * w.N + n)]) - double(want[size_t(m * w.N + n)]));
      worst = std::max(worst, err / tol);
      if (!(err <= tol)) {
        FAIL_CHECK("y[" << m << ", " << n << "] = " << y[size_t(m * w.N + n)] << ", want " << want[size_t(m * w.N + n)]
                        << " (tolerance " << tol << ")");
        return;
      }
    }
  }
  CHECK(worst <= 1.0);
}

inline const char* layout_name(WeightLayout l) {
  return l == WeightLayout::InOut ? "InOut" : l == WeightLayout::OutIn ? "OutIn" : "Panels";
}

// The layouts a matrix of this type can be given: Panels is the float types' (Q8 and Q4 have their own)
inline bool panels_ok(WeightType type) { return type != WeightType::Q8 && type != WeightType::Q4; }
inline std::vector<WeightLayout> layouts_of(WeightType type) {
  if (panels_ok(type)) return {WeightLayout::InOut, WeightLayout::OutIn, WeightLayout::Panels};
  return {WeightLayout::InOut, WeightLayout::OutIn};
}

}  // namespace qkv::matmul_testing
