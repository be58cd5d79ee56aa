// Dense layers over weights in any WeightType: y[M, N] = x[M, K] W + bias.
//
//  M == 1 (decoding one token): a matrix-vector product that streams W once, at memory speed
//    (gemv.cpp). M > 1 (prefill): a blocked matrix product over W packed, a block at a time,
//    into float panels that stay in cache (gemm.cpp).
//  Threads split the output columns; every output element is computed by one thread with the
//    same operations in any split, so the results do not depend on the thread count.
//  Weights are widened (F16, BF16) or dequantized (Q8) inside the kernels; x, bias and y are
//    float32. Q8 in the matrix-vector product quantizes x to int16 per block of 32 (relative
//    error <= 2^-16 of the block's largest |x|) and multiplies in integers; the matrix product
//    dequantizes W and multiplies in float.
#pragma once

#include <cstdint>

#include "matmul/weights.hpp"

namespace qkv {

// x [M, K] row-major, bias [N] or nullptr, y [M, N] (overwritten; must not alias x).
void matmul(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int threads = 1);

// The same as plain loops over weight_at(), accumulating in double: the ground truth.
void matmul_reference(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y);

namespace detail {
// The two kernels behind matmul(), callable directly (tests and benchmarks run both on any M).
void gemv(const WeightMatrix& w, const float* x, const float* bias, float* y, int threads);
void gemm(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int threads);
}  // namespace detail

}  // namespace qkv
