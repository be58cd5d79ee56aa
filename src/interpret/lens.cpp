#include "interpret/lens.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace qkv {

namespace {

// log sum_v exp(z[v]), in double over float exponentials
double log_sum_exp(const float* z, int64_t V) {
  float max = z[0];
  for (int64_t v = 1; v < V; ++v) max = z[v] > max ? z[v] : max;
  double s = 0.0;
  for (int64_t v = 0; v < V; ++v) s += std::exp(z[v] - max);
  return double(max) + std::log(s);
}

}  // namespace

void lens_statistics(const float* logits, int64_t R, int64_t T, int64_t V, int64_t k, const int32_t* target, int64_t r0,
                     int64_t r1, int32_t* top_ids, float* top_p, float* kl, float* target_p, int32_t* target_rank) {
  if (T < 1 || R < T || R % T != 0 || V < 1 || k < 1 || k > V || r0 < 0 || r1 > R || r0 > r1) {
    throw std::invalid_argument("lens_statistics: R " + std::to_string(R) + ", T " + std::to_string(T) + ", V " +
                                std::to_string(V) + ", k " + std::to_string(k) + ", rows [" + std::to_string(r0) +
                                ", " + std::to_string(r1) + ")");
  }
  const int64_t F = R - T;  // the final rows: [F, R)
  // per position t: the final distribution p_f [V], lse_f and sum_v p_f(v) f(v), made once
  std::vector<double> pf(static_cast<size_t>(V));
  int64_t pf_t = -1;
  double lse_f = 0.0, pff = 0.0;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t t = r % T;
    const float* z = logits + r * V;
    const double lse = log_sum_exp(z, V);
    // KL(final || row) = sum p_f f - lse_f - sum p_f z + lse
    if (r >= F) {
      kl[r] = 0.0f;
    } else {
      if (pf_t != t) {
        const float* f = logits + (F + t) * V;
        lse_f = log_sum_exp(f, V);
        pff = 0.0;
        for (int64_t v = 0; v < V; ++v) {
          pf[size_t(v)] = std::exp(double(f[v]) - lse_f);
          pff += pf[size_t(v)] * f[v];
        }
        pf_t = t;
      }
      double pfz = 0.0;
      for (int64_t v = 0; v < V; ++v) pfz += pf[size_t(v)] * z[v];
      const double d = pff - lse_f - pfz + lse;
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

}  // namespace qkv
