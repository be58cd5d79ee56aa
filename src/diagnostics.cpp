#include "diagnostics.hpp"

#include <algorithm>
#include <cmath>

namespace qkv {

void row_entropy(const float* weights, int64_t rows, int64_t lk, float* entropy) {
  for (int64_t r = 0; r < rows; ++r) {
    double h = 0.0;
    for (int64_t j = 0; j < lk; ++j) {
      const double p = weights[r * lk + j];
      if (p > 0.0) h -= p * std::log(p);
    }
    entropy[r] = static_cast<float>(h);
  }
}

float max_row_sum_error(const float* weights, int64_t rows, int64_t lk) {
  double worst = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    bool all_zero = true;
    for (int64_t j = 0; j < lk; ++j) {
      sum += weights[r * lk + j];
      all_zero = all_zero && weights[r * lk + j] == 0.0f;
    }
    if (!all_zero) worst = std::max(worst, std::fabs(sum - 1.0));
  }
  return static_cast<float>(worst);
}

}  // namespace qkv
