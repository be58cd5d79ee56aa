// The matrix product's tile and block sizes (gemm.cpp's comment says how they were chosen), and
// the packing of W into float panels (gemm_pack.cpp). Internal to src/matmul.
#pragma once

#include <cstdint>
#include <vector>

#include "matmul/halves.hpp"
#include "matmul/weights.hpp"
#include "simd.hpp"

namespace qkv::detail {

#ifndef QKV_NO_SIMD
using V = halves::F4;
#else
using V = float;
#endif
constexpr int kW = simd::lanes<V>;
#if defined(QKV_RELAXED_SIMD) && !defined(QKV_GEMM_MR) && !defined(QKV_GEMM_NV)
#define QKV_GEMM_MR 6  // fused madd needs no product registers: 12 accumulators fit (gemm.cpp)
#define QKV_GEMM_NV 2
#endif
#ifndef QKV_GEMM_MR
#define QKV_GEMM_MR 2
#endif
#ifndef QKV_GEMM_NV
#define QKV_GEMM_NV 4
#endif
constexpr int kMR = QKV_GEMM_MR;  // rows of a micro-tile
constexpr int kNV = QKV_GEMM_NV;  // vectors of a micro-tile
constexpr int kNR = kNV * kW;     // columns of a micro-tile and of a packed panel (16 in wasm)
constexpr int64_t kKC = 256;      // rows of W per packed block
constexpr int64_t kNC = 768;      // columns per work item (its packed block: 768 KB)

// Packs W[k0 : k1, j0 : j1] into panels [ceil((j1 - j0) / kNR)][k1 - k0][kNR], zero-padded:
// F32 copied, F16 / BF16 widened (F16 times 2^112, exact), Q8 and Q4 dequantized, each weight
// once. `line`: the caller's scratch, reused from call to call.
void pack_w(const WeightMatrix& w, int64_t k0, int64_t k1, int64_t j0, int64_t j1, float* panels,
            std::vector<float>& line);

}  // namespace qkv::detail
