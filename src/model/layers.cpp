#include "model/layers.hpp"

#include <cmath>
#include <limits>

#include "simd.hpp"

namespace qkv {

namespace {

// layer_norm_rows with (x - mean) * (1 / std) formed in T (float or double), then rounded to
// float for the affine step.
template <class T>
void layer_norm_rows_in(float* out, const float* x, const float* w, const float* b, int64_t n, int64_t E, float eps) {
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * E;
    float* o = out + r * E;
    // mean and biased variance of the row, in double
    double mean = 0.0;
    for (int64_t i = 0; i < E; ++i) mean += xr[i];
    mean /= double(E);
    double var = 0.0;
    for (int64_t i = 0; i < E; ++i) {
      const double d = xr[i] - mean;
      var += d * d;
    }
    var /= double(E);
    // o = (x - mean) * inv * w + b
    const T inv = T(1.0 / std::sqrt(var + double(eps)));
    const T m = T(mean);
    for (int64_t i = 0; i < E; ++i) o[i] = float((T(xr[i]) - m) * inv) * w[i] + b[i];
  }
}

}  // namespace

void layer_norm_rows(float* out, const float* x, const float* w, const float* b, int64_t n, int64_t E, float eps,
                     NormMath math) {
  if (math == NormMath::Double) {
    layer_norm_rows_in<double>(out, x, w, b, n, E, eps);
  } else {
    layer_norm_rows_in<float>(out, x, w, b, n, E, eps);
  }
}

void gelu_erf(float* x, int64_t n) {
  int64_t i = 0;
#ifndef QKV_NO_SIMD
  using V = simd::Batch;
  constexpr int64_t W = simd::lanes<V>;
  const V vr2(0.7071067811865476f), half(0.5f), one(1.0f);  // vr2: 1 / sqrt(2)
  for (; i + W <= n; i += W) {
    const V v = V::load_unaligned(x + i);
    (half * v * (one + xsimd::erf(v * vr2))).store_unaligned(x + i);
  }
#endif
  gelu_erf_libm(x + i, n - i);
}

void gelu_erf_libm(float* x, int64_t n) {
  const float r2 = 0.7071067811865476f;  // 1 / sqrt(2)
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * r2));
}

void gelu_tanh(float* x, int64_t n) {
  // 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2 / pi) (x + 0.044715 x^3), with e^(-2u) =
  // 2^t, t = -2 log2(e) u, by simd::exp2 (relative error < 2.5e-7): one exp2 and one division,
  // where tanh costs two exps' worth (its polynomial branch and its exp branch) per vector.
  // exp2's domain ends at t = 64: beyond it (x < -7.66, where the true value is under 5e-19 in
  // magnitude) e^(-2u) is taken as inf and the result is -0, as tanh's 1 + tanh(u) = 0 gave.
  const float k = float(-2.0 * 0.7978845608028654 * 1.4426950408889634);  // -2 sqrt(2 / pi) log2(e)
  int64_t i = 0;
#ifndef QKV_NO_SIMD
  using V = simd::Batch;
  constexpr int64_t W = simd::lanes<V>;
  const V vk(k), va(0.044715f), one(1.0f), top(64.0f), inf(std::numeric_limits<float>::infinity());
  for (; i + W <= n; i += W) {
    const V v = V::load_unaligned(x + i);
    const V t = vk * (v + va * v * v * v);
    const V e = xsimd::select(t > top, inf, simd::exp2(xsimd::min(t, top)));
    (v / (one + e)).store_unaligned(x + i);
  }
#endif
  for (; i < n; ++i) {
    const float v = x[i];
    const float t = k * (v + 0.044715f * v * v * v);
    x[i] = v / (1.0f + (t > 64.0f ? std::numeric_limits<float>::infinity() : std::exp2(t)));
  }
}

void swiglu(float* gate, const float* up, int64_t n) {
  // e^-g = 2^t, t = -log2(e) g, by simd::exp2 (relative error < 2.5e-7), as gelu_tanh forms its
  // exponential. exp2's domain ends at t = 64: beyond it (g < -44.4, where silu(g) is under 3e-18
  // in magnitude) e^-g is taken as inf and the result is -0.
  const float k = float(-1.4426950408889634);  // -log2(e)
  int64_t i = 0;
#ifndef QKV_NO_SIMD
  using V = simd::Batch;
  constexpr int64_t W = simd::lanes<V>;
  const V vk(k), one(1.0f), top(64.0f), inf(std::numeric_limits<float>::infinity());
  for (; i + W <= n; i += W) {
    const V g = V::load_unaligned(gate + i);
    const V t = vk * g;
    const V e = xsimd::select(t > top, inf, simd::exp2(xsimd::min(t, top)));
    (g / (one + e) * V::load_unaligned(up + i)).store_unaligned(gate + i);
  }
#endif
  for (; i < n; ++i) {
    const float t = k * gate[i];
    gate[i] = gate[i] / (1.0f + (t > 64.0f ? std::numeric_limits<float>::infinity() : std::exp2(t))) * up[i];
  }
}

void geglu_tanh(float* gate, const float* up, int64_t n) {
  gelu_tanh(gate, n);
  for (int64_t i = 0; i < n; ++i) gate[i] *= up[i];
}

void softcap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] / cap) * cap;
}

void add_in_place(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace qkv
