// The Embind boundary for the matmul kernels (src/matmul/): mapping only. The JS tests run
// them on every weight type and layout against a plain loop written in JS
// (tests/js/matmul.test.js): the kernels as the shipped module compiled them.
//
// Arrays travel as byte addresses into the wasm heap; entry points return "" or
// "<kind>|<message>" as in bindings.cpp.
#include <emscripten/bind.h>

#include <cstdint>
#include <string>

#include "guarded.hpp"
#include "matmul/matmul.hpp"

using namespace emscripten;
using qkv::wasm::guarded;
using qkv::wasm::ptr;

namespace {

qkv::WeightType weight_type(const std::string& name) {
  if (name == "F32") return qkv::WeightType::F32;
  if (name == "F16") return qkv::WeightType::F16;
  if (name == "BF16") return qkv::WeightType::BF16;
  if (name == "Q8") return qkv::WeightType::Q8;
  if (name == "Q4") return qkv::WeightType::Q4;
  throw std::invalid_argument("matmul: weight type must be F32, F16, BF16, Q8 or Q4, got '" + name + "'");
}

qkv::WeightLayout weight_layout(const std::string& name) {
  if (name == "InOut") return qkv::WeightLayout::InOut;
  if (name == "OutIn") return qkv::WeightLayout::OutIn;
  if (name == "Panels") return qkv::WeightLayout::Panels;
  throw std::invalid_argument("matmul: layout must be InOut, OutIn or Panels, got '" + name + "'");
}

qkv::WeightMatrix matrix(const std::string& type, const std::string& layout, int K, int N, uintptr_t data,
                         uintptr_t scales) {
  return {weight_type(type), weight_layout(layout), K, N, ptr<const void>(data), ptr<const uint16_t>(scales)};
}

// y [M, N] = x [M, K] W + bias; kernel: "auto" (matmul), "gemv" (row by row), "gemm" (the matrix
// product matmul() takes for M > 1: for Q8 and Q4 the integer one) or "gemm-float" (the float one, any type)
std::string matmul_run(const std::string& type, const std::string& layout, int M, int K, int N, uintptr_t data,
                       uintptr_t scales, uintptr_t x, uintptr_t bias, uintptr_t y, int threads,
                       const std::string& kernel) {
  return guarded([&] {
    const qkv::WeightMatrix w = matrix(type, layout, K, N, data, scales);
    const float* xs = ptr<const float>(x);
    float* ys = ptr<float>(y);
    if (kernel == "gemv") {
      for (int m = 0; m < M; ++m)
        qkv::detail::gemv(w, xs + int64_t(m) * K, ptr<const float>(bias), ys + int64_t(m) * N, threads);
    } else if (kernel == "gemm") {  // the prefill kernel matmul() takes for this type
      if (w.type == qkv::WeightType::Q8) {
        qkv::detail::gemm_q8(w, xs, M, ptr<const float>(bias), ys, threads);
      } else if (w.type == qkv::WeightType::Q4) {
        qkv::detail::gemm_q4(w, xs, M, ptr<const float>(bias), ys, threads);
      } else {
        qkv::detail::gemm(w, xs, M, ptr<const float>(bias), ys, threads);
      }
    } else if (kernel == "gemm-float") {  // 8-bit and 4-bit weights dequantized into the float GEMM
      qkv::detail::gemm(w, xs, M, ptr<const float>(bias), ys, threads);
    } else {
      qkv::matmul(w, xs, M, ptr<const float>(bias), ys, threads);
    }
  });
}

// Quantizes a F32 / F16 / BF16 matrix to Q8 into data (q8DataBytes) and scales (q8ScaleCount halves).
std::string matmul_quantize(const std::string& type, const std::string& layout, int K, int N, uintptr_t src,
                            uintptr_t data, uintptr_t scales) {
  return guarded(
      [&] { qkv::quantize_q8(matrix(type, layout, K, N, src, 0), ptr<int8_t>(data), ptr<uint16_t>(scales)); });
}

// ... to Q4 into data (q4DataBytes) and scales (q4ScaleCount halves).
std::string matmul_quantize_q4(const std::string& type, const std::string& layout, int K, int N, uintptr_t src,
                               uintptr_t data, uintptr_t scales) {
  return guarded(
      [&] { qkv::quantize_q4(matrix(type, layout, K, N, src, 0), ptr<uint8_t>(data), ptr<uint16_t>(scales)); });
}

double q8_data_bytes(int K, int N) { return double(qkv::Q8Layout::of(K, N).data_bytes()); }
double q8_scale_count(int K, int N) { return double(qkv::Q8Layout::of(K, N).scale_count()); }
double q4_data_bytes(int K, int N) { return double(qkv::Q4Layout::of(K, N).data_bytes()); }
double q4_scale_count(int K, int N) { return double(qkv::Q4Layout::of(K, N).scale_count()); }

}  // namespace

EMSCRIPTEN_BINDINGS(qkv_matmul) {
  function("matmulRun", &matmul_run);
  function("matmulQuantize", &matmul_quantize);
  function("q8DataBytes", &q8_data_bytes);
  function("q8ScaleCount", &q8_scale_count);
  function("matmulQuantizeQ4", &matmul_quantize_q4);
  function("q4DataBytes", &q4_data_bytes);
  function("q4ScaleCount", &q4_scale_count);
  function("setRelaxedInt8Dot", &qkv::set_relaxed_int8_dot);
  function("relaxedInt8Dot", &qkv::relaxed_int8_dot);
}
