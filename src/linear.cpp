#include "linear.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "accumulate.hpp"

namespace qkv {

void linear(const float* x, int64_t M, int64_t K, const float* W, int64_t N, const float* bias, float* y,
            WeightLayout layout) {
  if (layout == WeightLayout::Panels)
    throw std::invalid_argument("linear: layout Panels is for matmul(), not linear()");
  // y = bias (or 0), then y += x W with W as [K, N]; nn.Linear's [N, K] is transposed first.
  for (int64_t m = 0; m < M; ++m) {
    if (bias) {
      std::copy(bias, bias + N, y + m * N);
    } else {
      std::fill(y + m * N, y + (m + 1) * N, 0.0f);
    }
  }
  std::vector<float> transposed;  // (K, N) when the layout is OutIn
  if (layout == WeightLayout::OutIn) {
    transposed.resize(K * N);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) transposed[k * N + n] = W[n * K + k];
    W = transposed.data();
  }
  detail::accumulate(x, {K, 1}, W, N, M, K, N, y, N);
}

void linear_reference(const float* x, int64_t M, int64_t K, const float* W, int64_t N, const float* bias, float* y,
                      WeightLayout layout) {
  if (layout == WeightLayout::Panels)
    throw std::invalid_argument("linear_reference: layout Panels is for matmul(), not linear()");
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      float acc = bias ? bias[n] : 0.0f;
      for (int64_t k = 0; k < K; ++k) {
        acc += x[m * K + k] * (layout == WeightLayout::OutIn ? W[n * K + k] : W[k * N + n]);
      }
      y[m * N + n] = acc;
    }
  }
}

}  // namespace qkv
