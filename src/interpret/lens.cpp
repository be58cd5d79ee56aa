#include "interpret/lens.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "simd.hpp"

namespace qkv {

namespace {

// p[v] = exp(z[v] - shift) (float, with xsimd's exp); returns their sum (in double)
double exp_shifted(const float* z, int64_t V, float shift, float* p) {
  int64_t v = 0;
  double sum = 0.0;
#ifndef QKV_NO_SIMD
  using B = simd::Batch;
  constexpr int64_t W = simd::lanes<B>;
  const B s(shift);
  for (; v + W <= V; v += W) xsimd::exp(B::load_unaligned(z + v) - s).store_unaligned(p + v);
  for (int64_t i = 0; i < v; ++i) sum += p[i];
#endif
  for (; v < V; ++v) {
    p[v] = std::exp(z[v] - shift);
    sum += p[v];
  }
  return sum;
}

// log sum_v exp(z[v]); p [V] is scratch
double log_sum_exp(const float* z, int64_t V, float* p) {
  float max = z[0];
  for (int64_t v = 1; v < V; ++v) max = z[v] > max ? z[v] : max;
  return double(max) + std::log(exp_shifted(z, V, max, p));
}

}  // namespace

void lens_statistics(const float* logits, int64_t R, int64_t T, int64_t V, int64_t k, const int32_t* target, int64_t t0,
                     int64_t t1, int32_t* top_ids, float* top_p, float* kl, float* target_p, int32_t* target_rank) {
  if (T < 1 || R < T || R % T != 0 || V < 1 || k < 1 || k > V || t0 < 0 || t1 > T || t0 > t1) {
    throw std::invalid_argument("lens_statistics: R " + std::to_string(R) + ", T " + std::to_string(T) + ", V " +
                                std::to_string(V) + ", k " + std::to_string(k) + ", positions [" + std::to_string(t0) +
                                ", " + std::to_string(t1) + ")");
  }
  const int64_t layers = R / T;  // rows of a position: l * T + t, the last one the model's own
  std::vector<float> p(static_cast<size_t>(V)), pf(static_cast<size_t>(V));
  for (int64_t t = t0; t < t1; ++t) {
    // the final distribution at t: p_f [V], lse_f, and sum_v p_f(v) f(v)
    const float* f = logits + ((layers - 1) * T + t) * V;
    const double lse_f = log_sum_exp(f, V, pf.data());
    const float scale = float(std::exp(double(*std::max_element(f, f + V)) - lse_f));  // p_f = pf * scale
    double pff = 0.0;
    for (int64_t v = 0; v < V; ++v) pff += double(pf[size_t(v)]) * f[v];
    pff *= scale;
    for (int64_t l = 0; l < layers; ++l) {
      const int64_t r = l * T + t;
      const float* z = logits + r * V;
      const double lse = log_sum_exp(z, V, p.data());
      // KL(final || row) = sum p_f f - lse_f - sum p_f z + lse
      if (l == layers - 1) {
        kl[r] = 0.0f;
      } else {
        double pfz = 0.0;
        for (int64_t v = 0; v < V; ++v) pfz += double(pf[size_t(v)]) * z[v];
        const double d = pff - lse_f - pfz * scale + lse;
        kl[r] = float(d > 0.0 ? d : 0.0);
      }
      // top k: insertion into a sorted list of k (most probable first, ties to the lower id)
      int32_t* ids = top_ids + r * k;
      int64_t n = 0;
      for (int64_t v = 0; v < V; ++v) {
        if (n == k && !(z[v] > z[ids[k - 1]])) continue;
        int64_t i = n < k ? n++ : k - 1;
        while (i > 0 && z[ids[i - 1]] < z[v]) {
          ids[i] = ids[i - 1];
          --i;
        }
        ids[i] = int32_t(v);
      }
      for (int64_t i = 0; i < k; ++i) top_p[r * k + i] = float(std::exp(double(z[ids[i]]) - lse));
      if (target) {
        const int32_t id = target[t];
        if (id < 0 || id >= V) {
          throw std::invalid_argument("lens_statistics: target " + std::to_string(id) + " is not in [0, " +
                                      std::to_string(V) + ")");
        }
        int32_t rank = 0;
        for (int64_t v = 0; v < V; ++v) rank += (z[v] > z[id] || (z[v] == z[id] && v < id)) ? 1 : 0;
        target_p[r] = float(std::exp(double(z[id]) - lse));
        target_rank[r] = rank;
      }
    }
  }
}

}  // namespace qkv
