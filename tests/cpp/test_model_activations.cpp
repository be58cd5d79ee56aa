// The activations' vector loops and their scalar tails against float64 (model/layers.hpp).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "model/layers.hpp"

using namespace qkv;

namespace {

// GPT-2's and Gemma's gelu (PyTorch's approximate='tanh'), in double, written as
// x / (1 + e^(-2u)): the same function as 0.5 x (1 + tanh(u)) without its cancellation for
// x << 0 (where 1 + tanh(u) is ~1e-16 and double's own tanh loses every digit)
double gelu_tanh_ref(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}

}  // namespace

TEST_CASE("gelu_tanh (vector loop and scalar tail) matches float64 within float32's error") {
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.00731f) x.push_back(v);
  x.push_back(0.0f);  // 3285 values: not a multiple of the vector width, so the tail runs too
  std::vector<float> y = x;
  gelu_tanh(y.data(), int64_t(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = gelu_tanh_ref(x[i]);
    CAPTURE(x[i]);
    // float32's rounding of the exponent 2u (relative) is an absolute error |2u| * 6e-8 in it,
    // i.e. a relative one of that size in e^(-2u) and so in the result where x << 0
    const double two_u = 2.0 * std::sqrt(2.0 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i]);
    // beyond exp2's domain (x < -7.66) the result is -0 where the true value is < 5e-19
    const double floor = x[i] < -7.6f ? 5e-19 : 1e-30;
    CHECK(std::fabs(y[i] - want) <= 1e-6 * (1.0 + std::fabs(two_u)) * std::fabs(want) + floor);
    if (x[i] < -7.7f) CHECK(y[i] == 0.0f);
  }
}

TEST_CASE("gelu_tanh at its limits: x for large x, -0 for very negative x, NaN stays NaN") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {1e30f, 50.0f, -50.0f, -1e30f, std::nanf(""), inf, 0.0f, -0.0f};
  std::vector<float> y = x;
  gelu_tanh(y.data(), 4);      // the vector loop
  gelu_tanh(y.data() + 4, 4);  // the vector loop
  std::vector<float> t = x;
  for (size_t i = 0; i < x.size(); ++i) gelu_tanh(t.data() + i, 1);  // the scalar tail
  for (const std::vector<float>* r : {&y, &t}) {
    const std::vector<float>& v = *r;
    CHECK(v[0] == 1e30f);
    CHECK(v[1] == 50.0f);
    CHECK(v[2] == 0.0f);
    CHECK(std::signbit(v[2]));
    CHECK(v[3] == 0.0f);
    CHECK(std::isnan(v[4]));
    CHECK(v[5] == inf);
    CHECK(v[6] == 0.0f);
    CHECK(v[7] == 0.0f);
  }
}
