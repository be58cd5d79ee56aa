// The `int` mode of the matmul benchmark (bench_matmul.cpp's file comment): the integer prefill
// (matmul() for M > 1) of 8-bit against 4-bit weights, and Q4 through the float GEMM, M = 32 and
// 128, GPT-2's four shapes, passes interleaved (Q8, Q4, Q4-float, the order rotated each pass) so
// that other jobs' load falls on all alike: best time per shape, and the Q8 / Q4 ratio of each pass.
#include <algorithm>
#include <cstdio>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "bench_matmul.hpp"
#include "matmul/matmul.hpp"

namespace qkv_bench {

int int_prefill(int threads, const char* out, const char* target, double bw, double peak, std::mt19937& rng) {
  constexpr int kKinds = 3, kPasses = 9;
  const char* kind_names[kKinds] = {"Q8 int", "Q4 int", "Q4 float"};
  const qkv::WeightType kind_types[kKinds] = {qkv::WeightType::Q8, qkv::WeightType::Q4, qkv::WeightType::Q4};
  std::vector<Stored> stacks[kKinds];
  for (int t = 0; t < kKinds; ++t)
    for (const Layer& l : kLayers) stacks[t].push_back(make(kind_types[t], l.K, l.N, rng));
  const size_t shapes = std::size(kLayers);
  std::string json;
  std::printf("\nint8 vs int4 prefill (matmul(), M > 1: integer; Q4 float = detail::gemm), %d passes interleaved\n",
              kPasses);
  std::printf("%-5s %-18s %10s %10s %10s %8s %8s %8s\n", "M", "shape", "Q8 ms", "Q4 ms", "Q4f ms", "Q8/Q4", "min",
              "max");
  for (int64_t M : {32, 128}) {
    std::vector<float> x(size_t(M * 3072)), y(size_t(M * 3072));
    for (auto& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
    // times[kind][pass][shape]
    std::vector<double> times(size_t(kKinds * kPasses * shapes), 0.0);
    for (int pass = 0; pass < kPasses + 1; ++pass) {  // pass 0: warm-up, not kept
      for (int i = 0; i < kKinds; ++i) {
        const int t = (i + pass) % kKinds;  // rotate the order
        for (size_t l = 0; l < shapes; ++l) {
          const qkv::WeightMatrix& w = stacks[t][l].w;
          const auto t0 = Clock::now();
          if (t < 2) {
            qkv::matmul(w, x.data(), M, nullptr, y.data(), threads);
          } else {
            qkv::detail::gemm(w, x.data(), M, nullptr, y.data(), threads);
          }
          if (pass > 0) times[size_t((t * kPasses + pass - 1) * shapes + l)] = seconds_since(t0);
        }
      }
    }
    // per shape and for the whole layer (the four shapes' sum)
    for (size_t l = 0; l <= shapes; ++l) {
      const auto at = [&](int t, int p) {
        if (l < shapes) return times[size_t((t * kPasses + p) * shapes + l)];
        double sum = 0.0;
        for (size_t j = 0; j < shapes; ++j) sum += times[size_t((t * kPasses + p) * shapes + j)];
        return sum;
      };
      double best[kKinds] = {1e30, 1e30, 1e30};
      std::vector<double> ratio;
      for (int p = 0; p < kPasses; ++p) {
        for (int t = 0; t < kKinds; ++t) best[t] = std::min(best[t], at(t, p));
        ratio.push_back(at(0, p) / at(1, p));  // > 1: int4 faster
      }
      std::sort(ratio.begin(), ratio.end());
      double flops = 0.0;  // 2 M K N per product
      for (size_t j = 0; j < shapes; ++j)
        if (l == shapes || j == l) flops += 2.0 * double(M) * double(kLayers[j].K) * double(kLayers[j].N);
      const std::string shape = l < shapes ? std::string(kLayers[l].name) + " " + std::to_string(kLayers[l].K) + "x" +
                                                 std::to_string(kLayers[l].N)
                                           : "all four";
      std::printf("%-5lld %-18s %10.3f %10.3f %10.3f %8.3f %8.3f %8.3f\n", static_cast<long long>(M), shape.c_str(),
                  best[0] * 1e3, best[1] * 1e3, best[2] * 1e3, best[0] / best[1], ratio.front(), ratio.back());
      char line[640];
      std::snprintf(line, sizeof line,
                    "%s    {\"M\": %lld, \"shape\": \"%s\", \"q8_int_ms\": %.4f, \"q4_int_ms\": %.4f, "
                    "\"q4_float_ms\": %.4f, \"q8_int_gflops\": %.3f, \"q4_int_gflops\": %.3f, "
                    "\"q8_over_q4_best\": %.4f, \"q8_over_q4_per_pass\": {\"min\": %.4f, \"median\": %.4f, "
                    "\"max\": %.4f}}",
                    json.empty() ? "" : ",\n", static_cast<long long>(M), shape.c_str(), best[0] * 1e3, best[1] * 1e3,
                    best[2] * 1e3, flops / best[0] / 1e9, flops / best[1] / 1e9, best[0] / best[1], ratio.front(),
                    ratio[ratio.size() / 2], ratio.back());
      json += line;
    }
  }
  if (out) {
    FILE* f = std::fopen(out, "w");
    if (!f) {
      std::perror(out);
      return 1;
    }
    std::fprintf(f,
                 "{\n  \"benchmark\": \"matmul int8 vs int4 prefill\",\n  \"target\": \"%s\",\n  \"threads\": %d,\n"
                 "  \"clock\": \"%s\",\n  \"passes\": %d,\n  \"read_bandwidth_gbs\": %.3f,\n"
                 "  \"mul_add_peak_gflops\": %.3f,\n  \"results\": [\n%s\n  ]\n}\n",
                 target, threads, g_cpu_clock ? "process CPU time" : "wall", kPasses, bw, peak, json.c_str());
    std::fclose(f);
  }
  return 0;
}

}  // namespace qkv_bench
