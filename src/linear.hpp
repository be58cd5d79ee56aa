// Dense layers: y = x W^T + b (PyTorch nn.Linear layout) or y = x W + b (GPT-2 Conv1D layout),
// vectorised with xsimd. The building block of multi-head attention and the model.
#pragma once

#include <cstdint>

namespace qkv {

enum class WeightLayout {
  OutIn,   // W is [N, K] (nn.Linear): y[m,n] = sum_k x[m,k] W[n,k]
  InOut,   // W is [K, N] (Conv1D):    y[m,n] = sum_k x[m,k] W[k,n]
  Panels,  // the matmul kernels' own for float weights (matmul/weights.hpp): panels of 16
           // columns, [ceil(N/16)][K][16]; not a layout linear() reads
};

// x [M, K], W per layout (OutIn or InOut), bias [N] or nullptr, y [M, N] (overwritten).
void linear(const float* x, int64_t M, int64_t K, const float* W, int64_t N, const float* bias, float* y,
            WeightLayout layout);

// Plain-loop version of the same, the reference for tests.
void linear_reference(const float* x, int64_t M, int64_t K, const float* W, int64_t N, const float* bias, float* y,
                      WeightLayout layout);

}  // namespace qkv
