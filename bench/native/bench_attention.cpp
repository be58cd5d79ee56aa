// Native benchmark of the attention kernels: reference vs fast, causal or not, 1 and 2
// threads, B=1 H=8 D=64. Prints a table and writes bench/results/native-attention.json.
//
// FLOPs = 4 * B * H * Lq * Lk * D for every row, causal included: a causal run does about
// half that work, so its GFLOP/s is "effective" (the full-matrix count over the time taken)
// and the causal speed-up shows as a higher figure. Peak extra memory is the most heap the
// call held at once beyond its inputs and output (counted by replacing operator new).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "attention.hpp"

namespace {
std::atomic<int64_t> live_bytes{0}, peak_bytes{0};
}

void* operator new(std::size_t n) {
  void* p = std::malloc(n + 16);
  if (!p) throw std::bad_alloc();
  *static_cast<std::size_t*>(p) = n;
  const int64_t now = live_bytes += static_cast<int64_t>(n);
  int64_t peak = peak_bytes.load();
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
  }
  return static_cast<char*>(p) + 16;
}
void operator delete(void* p) noexcept {
  if (!p) return;
  char* base = static_cast<char*>(p) - 16;
  live_bytes -= static_cast<int64_t>(*reinterpret_cast<std::size_t*>(base));
  std::free(base);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }

namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  std::string kernel;
  int64_t L;
  bool causal;
  int threads;
  double ms, gflops;
  int64_t extra_bytes;
};

// Median time of repeated calls (at least 3, until ~0.6 s), and the peak extra heap of one call.
template <class F>
std::pair<double, int64_t> measure(F&& call, double budget_s) {
  const int64_t base = live_bytes.load();
  peak_bytes = base;
  call();  // warm-up, also measures memory
  const int64_t extra = peak_bytes.load() - base;
  std::vector<double> times;
  const auto start = Clock::now();
  while (times.size() < 3 ||
         (std::chrono::duration<double>(Clock::now() - start).count() < budget_s && times.size() < 50)) {
    const auto t0 = Clock::now();
    call();
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], extra};
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out_path = argc > 1 ? argv[1] : "bench/results/native-attention.json";
  const int64_t B = 1, H = 8, D = 64;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<Row> rows;
  std::printf("%-10s %6s %-7s %7s %11s %9s %12s\n", "kernel", "L", "causal", "threads", "median ms", "GFLOP/s",
              "extra bytes");
  for (int64_t L : {128, 512, 2048, 8192}) {
    std::vector<float> q(B * H * L * D), k(q.size()), v(q.size()), out(q.size());
    for (auto* t : {&q, &k, &v})
      for (auto& x : *t) x = normal(rng);
    const qkv::AttentionShape s{B, H, H, L, L, D, D};
    const double flops = 4.0 * B * H * L * L * D;
    for (bool causal : {false, true}) {
      struct Variant {
        const char* name;
        int threads;
      };
      for (Variant var : {Variant{"reference", 1}, Variant{"fast", 1}, Variant{"fast", 2}}) {
        const bool reference = std::string(var.name) == "reference";
        if (reference && L > 2048) continue;  // minutes per call: the ratio at 2048 is the figure
        qkv::AttentionOptions o;
        o.causal = causal;
        o.threads = var.threads;
        auto [ms, extra] = measure(
            [&] {
              if (reference) {
                qkv::attention_reference(s, q.data(), k.data(), v.data(), o, out.data());
              } else {
                qkv::attention(s, q.data(), k.data(), v.data(), o, out.data());
              }
            },
            reference ? 0.1 : 0.6);
        rows.push_back({var.name, L, causal, var.threads, ms, flops / (ms * 1e6), extra});
        const Row& r = rows.back();
        std::printf("%-10s %6lld %-7s %7d %11.3f %9.2f %12lld\n", r.kernel.c_str(), static_cast<long long>(L),
                    causal ? "yes" : "no", r.threads, r.ms, r.gflops, static_cast<long long>(r.extra_bytes));
        std::fflush(stdout);
      }
    }
  }
  auto find = [&](const char* kernel, int64_t L, bool causal, int threads) -> const Row* {
    for (const auto& r : rows)
      if (r.kernel == kernel && r.L == L && r.causal == causal && r.threads == threads) return &r;
    return nullptr;
  };
  const Row *ref = find("reference", 2048, false, 1), *f1 = find("fast", 2048, false, 1),
            *f1c = find("fast", 2048, true, 1), *f2 = find("fast", 2048, false, 2), *big = find("fast", 8192, false, 2);
  const double speedup = ref->ms / f1->ms, causal_gain = f1->ms / f1c->ms, thread_gain = f1->ms / f2->ms;
  std::printf(
      "\nL=2048: fast/reference (1 thread) %.1fx (target >= 8x); causal/non-causal %.2fx (target >= 1.7x); "
      "2 threads/1 thread %.2fx (target >= 1.8x)\nL=8192: peak extra memory %.2f MB with 2 threads "
      "(target <= 4 MB)\n",
      speedup, causal_gain, thread_gain, big->extra_bytes / 1e6);

  std::ofstream json(out_path);
  json << "{\n  \"benchmark\": \"native attention\",\n  \"shape\": {\"B\": 1, \"H\": 8, \"D\": 64},\n"
       << "  \"flops\": \"4*B*H*L*L*D, full matrix also for causal (effective GFLOP/s)\",\n  \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    json << "    {\"kernel\": \"" << r.kernel << "\", \"L\": " << r.L
         << ", \"causal\": " << (r.causal ? "true" : "false") << ", \"threads\": " << r.threads
         << ", \"median_ms\": " << r.ms << ", \"gflops\": " << r.gflops << ", \"extra_bytes\": " << r.extra_bytes << "}"
         << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  json << "  ],\n  \"ratios_at_2048\": {\"fast_over_reference\": " << speedup
       << ", \"causal_over_full\": " << causal_gain << ", \"two_threads_over_one\": " << thread_gain
       << "},\n  \"extra_mb_at_8192\": " << big->extra_bytes / 1e6 << "\n}\n";
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}
