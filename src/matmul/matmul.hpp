// Dense layers over weights in any WeightType: y[M, N] = x[M, K] W + bias.
//
//  M == 1 (decoding one token): a matrix-vector product that streams W once, at memory speed
//    (gemv.cpp). M > 1 (prefill): a blocked matrix product over W packed, a block at a time,
//    into float panels that stay in cache (gemm.cpp).
//  Threads split the output columns (and a decode, the two parts of a float InOut matrix's rows:
//    inout_split); every output element gets the same operations in any split, so the results
//    do not depend on the thread count.
//  Weights are widened (F16, BF16) or dequantized (Q8) inside the kernels; x, bias and y are
//    float32. Q8 and Q4 quantize x to int16 per row and block of 32 (error <= 2^-16 of the
//    block's largest |x|) and multiply in integers, in the matrix-vector products (gemv_q8.cpp,
//    gemv_q4.cpp) and the matrix products (gemm_q8.cpp, gemm_q4.cpp) alike; detail::gemm
//    dequantizes W and multiplies in float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "matmul/weights.hpp"

namespace qkv {

// x [M, K] row-major, bias [N] or nullptr, y [M, N] (overwritten; must not alias x).
void matmul(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int threads = 1);

// One of several products of the same x: y [M, w->N] = x [M, K] W (+ bias [N] or nullptr).
struct MatmulOutput {
  const WeightMatrix* w = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
};

// Several matmul() calls on one x (Llama's q/k/v projections, its gate and up projections):
// the same bits as separate calls, in any thread count. Every W must have the same K; no y may
// alias x or another y. Decoding (M == 1) prepares x once per weight type and splits all the
// outputs' columns over the threads in one parallel_for (one dispatch instead of one per matrix);
// M > 1 does the same for each run of consecutive 8-bit or 4-bit outputs (x rounded once, their
// tiles in one parallel_for) and runs the float matrix products one after another.
void matmul_many(const MatmulOutput* outputs, size_t count, const float* x, int64_t M, int threads = 1);
inline void matmul_many(std::initializer_list<MatmulOutput> outputs, const float* x, int64_t M, int threads = 1) {
  matmul_many(outputs.begin(), outputs.size(), x, M, threads);
}

// The same as plain loops over weight_at(), accumulating in double: the ground truth.
void matmul_reference(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y);

// The relaxed-SIMD builds' int8 dot product for 4-bit weights (gemv_q4.cpp): off until the JS
// loader, having checked that this engine computes i32x4.relaxed_dot_i8x16_i7x16_add_s as the
// spec says, turns it on right after the module loads (a no-op in the other builds). While on,
// the 4-bit products round x to int8 instead of int16 per block of 32, in decode and prefill
// alike. Set before any product runs, never after.
void set_relaxed_int8_dot(bool on);
bool relaxed_int8_dot();

namespace detail {
// The two kernels behind matmul(), callable directly (tests and benchmarks run both on any M).
void gemv(const WeightMatrix& w, const float* x, const float* bias, float* y, int threads);
void gemm(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int threads);
// Q8 only: x quantized to int16 per row and block of 32, int8 x int16 dot products (gemm_q8.cpp).
// matmul() takes it for Q8 with M > 1; matmul_many takes gemm_q8_many for its outputs (one K), x
// quantized once and their columns in one parallel_for.
void gemm_q8_many(const MatmulOutput* outputs, size_t count, const float* x, int64_t M, int threads);
inline void gemm_q8(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int threads) {
  const MatmulOutput one{&w, bias, y};
  gemm_q8_many(&one, 1, x, M, threads);
}
// Q4 only: the same integer product over each tile's nibbles unpacked to int8 (gemm_q4.cpp).
// matmul() and matmul_many take it (gemm_q4_many) for Q4 with M > 1, as gemm_q8 for Q8.
void gemm_q4_many(const MatmulOutput* outputs, size_t count, const float* x, int64_t M, int threads);
inline void gemm_q4(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int threads) {
  const MatmulOutput one{&w, bias, y};
  gemm_q4_many(&one, 1, x, M, threads);
}
// y_i = x W_i + bias_i for every output, x prepared once, all columns in one parallel_for.
void gemv_many(const MatmulOutput* outputs, size_t count, const float* x, int threads);

// Where a float matrix stored InOut [K, N] (F32, F16, BF16) splits its rows: each y element is
// (bias + the products of rows [0, ks) in k order) + (the products of rows [ks, K) in k order,
// from zero), in the matrix-vector product and the matrix product alike, so that a decoded row
// keeps the bits the matrix product gives it. Two threads then decode one InOut matrix by
// halves of its rows, each streaming whole rows of W: split by columns, each read half-rows
// (GPT-2's layers from memory, wasm, 2 threads: 22.2 -> 26.8 GB/s). ks = K (no split) for the
// other types and layouts, and for K < 16; else the first half of K rounded down to 8 rows.
inline int64_t inout_split(const WeightMatrix& w) {
  const bool float_inout = w.layout == WeightLayout::InOut &&
                           (w.type == WeightType::F32 || w.type == WeightType::F16 || w.type == WeightType::BF16);
  return float_inout && w.K >= 16 ? w.K / 16 * 8 : w.K;
}
}  // namespace detail

}  // namespace qkv
