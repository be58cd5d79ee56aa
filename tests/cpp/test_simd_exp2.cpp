// simd::exp2, the softmax's exponential: its error bound over the range the kernel calls it
// on (scores minus a running max in log2 units, up to the rescaling threshold above it), the
// exact values the online softmax relies on, the batch type against the scalar one, and the
// loops' form (exp2_in_registers) against the plain one.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "simd.hpp"

using namespace qkv;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The arguments of the sweep: evenly spaced points, plus the floats on either side of every
// half-integer in the range (where the rounding to n switches and r reaches +-0.5).
std::vector<float> sweep(float lo, float hi) {
  std::vector<float> xs;
  const int steps = 400000;
  for (int i = 0; i <= steps; ++i) xs.push_back(lo + (hi - lo) * static_cast<float>(i) / steps);
  for (float h = std::ceil(lo) - 0.5f; h <= hi; h += 1.0f) {
    xs.push_back(std::nextafter(h, -kInf));
    xs.push_back(h);
    xs.push_back(std::nextafter(h, kInf));
  }
  return xs;
}

// exp2 on a whole batch at a time (the kernel's path), lane by lane into out.
std::vector<float> exp2_batches(const std::vector<float>& xs) {
  using V = simd::Batch;
  constexpr int W = simd::lanes<V>;
  std::vector<float> padded(xs), out((xs.size() + W - 1) / W * W);
  padded.resize(out.size(), 0.0f);
  for (size_t i = 0; i < out.size(); i += W) simd::store(out.data() + i, simd::exp2(simd::load<V>(padded.data() + i)));
  out.resize(xs.size());
  return out;
}

double relative_error(float got, float x) {
  const double want = std::exp2(static_cast<double>(x));
  return std::fabs(static_cast<double>(got) - want) / want;
}

}  // namespace

TEST_CASE("exp2: relative error below 2.5e-7 from 2^-125 to 2^64, on batches and scalars") {
  const std::vector<float> xs = sweep(-125.0f, 64.0f);
  const std::vector<float> batched = exp2_batches(xs);
  double worst_batch = 0, worst_scalar = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    worst_batch = std::max(worst_batch, relative_error(batched[i], xs[i]));
    worst_scalar = std::max(worst_scalar, relative_error(simd::exp2(xs[i]), xs[i]));
  }
  MESSAGE("exp2 worst relative error: batch " << worst_batch << ", scalar " << worst_scalar);
  CHECK(worst_batch < 2.5e-7);
  CHECK(worst_scalar < 2.5e-7);
}

TEST_CASE("exp2: the values the online softmax relies on") {
  CHECK(simd::exp2(0.0f) == 1.0f);   // a score equal to the running max weighs exactly 1
  CHECK(simd::exp2(-kInf) == 0.0f);  // masked keys weigh exactly 0, never NaN
  CHECK(simd::exp2(-127.0f) == 0.0f);
  CHECK(simd::exp2(-1000.0f) == 0.0f);
  for (int n = -126; n <= 64; ++n) CHECK(simd::exp2(static_cast<float>(n)) == std::ldexp(1.0f, n));
  const std::vector<float> special = {0.0f, -kInf, -127.0f, -3.0e38f, 8.0f};
  const std::vector<float> batched = exp2_batches(special);
  CHECK(batched[0] == 1.0f);
  CHECK(batched[1] == 0.0f);
  CHECK(batched[2] == 0.0f);
  CHECK(batched[3] == 0.0f);
  CHECK(batched[4] == 256.0f);
}

TEST_CASE("exp2: never decreases, so the softmax keeps the order of the scores") {
  const std::vector<float> xs = sweep(-30.0f, 10.0f);
  std::vector<float> sorted(xs);
  std::sort(sorted.begin(), sorted.end());
  const std::vector<float> ys = exp2_batches(sorted);
  size_t violations = 0;
  for (size_t i = 1; i < ys.size(); ++i) violations += ys[i] < ys[i - 1];
  CHECK(violations == 0);
}

TEST_CASE("exp2_in_registers: the same bits as exp2, on batches and scalars") {
  // the kernel's loops use it (constants read once through an opaque pointer); a row's softmax
  // must not depend on which of the two computed it (flash and decode paths give the same bits)
  std::vector<float> xs = sweep(-130.0f, 64.0f);
  xs.insert(xs.end(), {-kInf, -3.0e38f, 0.0f, -0.0f});
  const std::vector<float> batched = exp2_batches(xs);
  using V = simd::Batch;
  constexpr int W = simd::lanes<V>;
  const auto exp2_v = simd::exp2_in_registers<V>();
  const auto exp2_s = simd::exp2_in_registers<float>();
  size_t differ = 0;
  for (size_t i = 0; i + W <= xs.size(); i += W) {
    float out[W];
    simd::store(out, exp2_v(simd::load<V>(xs.data() + i)));
    for (int u = 0; u < W; ++u) differ += out[u] != batched[i + u];
  }
  for (size_t i = 0; i < xs.size(); ++i) differ += exp2_s(xs[i]) != simd::exp2(xs[i]);
  CHECK(differ == 0);
}
