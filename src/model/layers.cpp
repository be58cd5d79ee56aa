#include "model/layers.hpp"

#include <cmath>

#include "simd.hpp"

namespace qkv {

void layer_norm_rows(float* out, const float* x, const float* w, const float* b, int64_t n, int64_t E, float eps) {
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * E;
    float* o = out + r * E;
    double mean = 0.0;
    for (int64_t i = 0; i < E; ++i) mean += xr[i];
    mean /= double(E);
    double var = 0.0;
    for (int64_t i = 0; i < E; ++i) {
      const double d = xr[i] - mean;
      var += d * d;
    }
    var /= double(E);
    const float inv = float(1.0 / std::sqrt(var + double(eps)));
    const float m = float(mean);
    for (int64_t i = 0; i < E; ++i) o[i] = (xr[i] - m) * inv * w[i] + b[i];
  }
}

void gelu_erf(float* x, int64_t n) {
  const float r2 = 0.7071067811865476f;  // 1 / sqrt(2)
  int64_t i = 0;
#ifndef QKV_NO_SIMD
  // xsimd's erf: a libm call per element would cost about as much as the matmuls in wasm
  using V = simd::Batch;
  constexpr int64_t W = simd::lanes<V>;
  const V vr2(r2), half(0.5f), one(1.0f);
  for (; i + W <= n; i += W) {
    const V v = V::load_unaligned(x + i);
    (half * v * (one + xsimd::erf(v * vr2))).store_unaligned(x + i);
  }
#endif
  for (; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * r2));
}

void add_in_place(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace qkv
