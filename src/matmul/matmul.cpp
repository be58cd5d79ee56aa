#include "matmul/matmul.hpp"

#include <stdexcept>
#include <string>

namespace qkv {

namespace {

void check(const char* fn, const WeightMatrix& w, const float* x, int64_t M, const float* y) {
  if (w.K < 1 || w.N < 1 || M < 0) {
    throw std::invalid_argument(std::string(fn) + ": shapes x [" + std::to_string(M) + ", " + std::to_string(w.K) +
                                "] and W [" + std::to_string(w.K) + ", " + std::to_string(w.N) + "] must be positive");
  }
  if (w.layout == WeightLayout::Panels && (w.type == WeightType::Q8 || w.type == WeightType::Q4)) {
    throw std::invalid_argument(std::string(fn) + ": W " + weight_type_name(w.type) + " [" + std::to_string(w.K) +
                                ", " + std::to_string(w.N) + "] in Panels: that layout is for F32, F16 and BF16");
  }
  if (!w.data || ((w.type == WeightType::Q8 || w.type == WeightType::Q4) && !w.scales) || (M > 0 && (!x || !y))) {
    throw std::invalid_argument(std::string(fn) + ": null buffer (W " + weight_type_name(w.type) + " [" +
                                std::to_string(w.K) + ", " + std::to_string(w.N) + "], M = " + std::to_string(M) + ")");
  }
}

// M > 1: the integer product for 8-bit and 4-bit weights, the float one for the rest. A run of
// consecutive outputs of one integer type shares x's rounding and one parallel_for.
void prefill(const MatmulOutput* outputs, size_t count, const float* x, int64_t M, int threads) {
  for (size_t i = 0, j; i < count; i = j) {
    const WeightType type = outputs[i].w->type;
    j = i + 1;  // outputs [i, j): a run of one integer type, or one float matrix
    if (type == WeightType::Q8 || type == WeightType::Q4)
      while (j < count && outputs[j].w->type == type) ++j;
    if (type == WeightType::Q8) {
      detail::gemm_q8_many(outputs + i, j - i, x, M, threads);
    } else if (type == WeightType::Q4) {
      detail::gemm_q4_many(outputs + i, j - i, x, M, threads);
    } else {
      detail::gemm(*outputs[i].w, x, M, outputs[i].bias, outputs[i].y, threads);
    }
  }
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int threads) {
  check("matmul", w, x, M, y);
  if (M == 1) {
    detail::gemv(w, x, bias, y, threads);
  } else if (M > 1) {
    const MatmulOutput one{&w, bias, y};
    prefill(&one, 1, x, M, threads);
  }
  add_weight_fixes(w, x, M, y);  // F16 subnormals, which the kernels read as zero
}

void matmul_many(const MatmulOutput* outputs, size_t count, const float* x, int64_t M, int threads) {
  if (count > 0 && !outputs)
    throw std::invalid_argument("matmul_many: null list of " + std::to_string(count) + " outputs");
  for (size_t i = 0; i < count; ++i) {
    const WeightMatrix* w = outputs[i].w;
    if (!w) throw std::invalid_argument("matmul_many: output " + std::to_string(i) + " has no weight matrix");
    check("matmul_many", *w, x, M, outputs[i].y);
    if (w->K != outputs[0].w->K) {
      throw std::invalid_argument("matmul_many: output " + std::to_string(i) + " has W [" + std::to_string(w->K) +
                                  ", " + std::to_string(w->N) + "], output 0 W [" + std::to_string(outputs[0].w->K) +
                                  ", " + std::to_string(outputs[0].w->N) + "]: one x [" + std::to_string(M) +
                                  ", K] needs the same K");
    }
  }
  if (M == 1) {
    detail::gemv_many(outputs, count, x, threads);
  } else if (M > 1) {
    prefill(outputs, count, x, M, threads);
  }
  for (size_t i = 0; i < count; ++i) add_weight_fixes(*outputs[i].w, x, M, outputs[i].y);
}

void matmul_reference(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y) {
  check("matmul_reference", w, x, M, y);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < w.N; ++n) {
      double acc = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < w.K; ++k) acc += double(x[m * w.K + k]) * double(weight_at(w, k, n));
      y[m * w.N + n] = float(acc);
    }
  }
}

}  // namespace qkv
