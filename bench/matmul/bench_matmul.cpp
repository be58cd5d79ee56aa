// The matmul kernels against this machine's limits, natively or in wasm (bench/matmul/run.sh):
//  - read bandwidth: a SIMD sum over 512 MiB (8 f32x4 accumulators), best of 3 passes;
//  - mul+add peak: 12 independent f32x4 chains acc = acc * a + b (no FMA in wasm SIMD);
//  - GEMV (decode): y = x W over GPT-2-small-shaped layers, as many distinct copies as take
//    >= 600 MB of F32 weights (beyond the last-level cache): GB/s of weights read, and the
//    fraction of the measured bandwidth; per weight type;
//  - GEMV of the tied LM head: wte [50257, 768] read as OutIn (one copy, 154 MB as F32);
//  - GEMV of one n x n matrix (n = 256, 512, 576) from the caches: the kernel's own speed, memory
//    aside, against the bandwidth;
//  - threads > 1: the read bandwidth of all threads summing at once, and each GEMV from memory on
//    1 thread too, interleaved with the threaded passes: the 2-thread gain measured in one run;
//  - GEMM (prefill): M = 32 / 128 / 512 rows through the same shapes: GFLOP/s (2 M K N per
//    product), and the fraction of the mul+add peak.
// Times: this machine is shared, so a 1-thread run is timed by the CPU time the process used
// (what the code costs; wall time when other jobs take turns on the cores is not), a threaded
// run by wall time; each figure is the best of several passes.
//  - `int` mode: the integer prefill (matmul() for M > 1) of 8-bit against 4-bit weights
//    (gemm_q8 / gemm_q4), and Q4 through the float GEMM as before it, M = 32 and 128, GPT-2's
//    four shapes, passes interleaved (Q8, Q4, Q4-float, order rotated each pass) so that other
//    jobs' load falls on all alike: best time per shape, and the Q8 / Q4 ratio of each pass.
// Usage: bench_matmul [threads] [out.json | -] [all | limits | gemv | gemm | int] [types, e.g. F16,Q8]
//   [gpt2 | smol: the layer shapes] [InOut | OutIn: their layout, else as the model holds them].
// Prints a table; writes the JSON when asked. `limits`: only the bandwidth and the peak, as
// one line "LIMITS {json}" (for bench/model/gpt2_small.mjs).
// This file: main, the GEMV and GEMM runs and the stored matrices; bench_limits.cpp: the clock,
// the read bandwidth and the mul+add peak; bench_int_prefill.cpp: the `int` mode.
#include "bench_matmul.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"

namespace qkv_bench {

Stored make(qkv::WeightType type, int64_t K, int64_t N, std::mt19937& rng, qkv::WeightLayout layout) {
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> f(size_t(K * N));
  for (auto& v : f) v = dist(rng);
  Stored s;
  s.w = {type, layout, K, N, nullptr, nullptr};
  if (type == qkv::WeightType::F32) {
    s.bytes.resize(f.size() * 4);
    std::memcpy(s.bytes.data(), f.data(), s.bytes.size());
  } else if (type == qkv::WeightType::Q8) {
    const qkv::Q8Layout q = qkv::Q8Layout::of(K, N);
    s.bytes.resize(q.data_bytes());
    s.scales.resize(q.scale_count());
    qkv::WeightMatrix src{qkv::WeightType::F32, layout, K, N, f.data(), nullptr};
    qkv::quantize_q8(src, reinterpret_cast<int8_t*>(s.bytes.data()), s.scales.data());
    s.w.scales = s.scales.data();
  } else if (type == qkv::WeightType::Q4) {
    const qkv::Q4Layout q = qkv::Q4Layout::of(K, N);
    s.bytes.resize(q.data_bytes());
    s.scales.resize(q.scale_count());
    qkv::WeightMatrix src{qkv::WeightType::F32, layout, K, N, f.data(), nullptr};
    qkv::quantize_q4(src, s.bytes.data(), s.scales.data());
    s.w.scales = s.scales.data();
  } else {
    s.bytes.resize(f.size() * 2);
    auto* h = reinterpret_cast<uint16_t*>(s.bytes.data());
    for (size_t i = 0; i < f.size(); ++i)
      h[i] = type == qkv::WeightType::F16 ? qkv::halves::f32_to_f16(f[i]) : qkv::halves::f32_to_bf16(f[i]);
  }
  s.w.data = s.bytes.data();
  if (type == qkv::WeightType::F16) {  // as the model loads them
    qkv::prepare_f16_weights(s.w, "bench", s.fixes);
    s.w.fixes = s.fixes.data();
    s.w.fix_count = s.fixes.size();
  }
  return s;
}

}  // namespace qkv_bench

namespace {

struct Result {
  std::string kind, type, what;
  int64_t M;
  double value, fraction;  // GB/s or GFLOP/s; of bandwidth or peak
};

}  // namespace

using namespace qkv_bench;

int main(int argc, char** argv) {
  // --relaxed-dot (anywhere): the relaxed build's int8 dot for Q4, as the JS loader turns it on
  // where the engine computes it right (Node 20: only with --no-liftoff)
  bool relaxed_dot = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--relaxed-dot") {
      relaxed_dot = true;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      --i;
    }
  }
  qkv::set_relaxed_int8_dot(relaxed_dot);
  if (relaxed_dot && !qkv::relaxed_int8_dot()) {
    std::fprintf(stderr, "--relaxed-dot: this build has no relaxed int8 dot (only the relaxed-SIMD one)\n");
    return 2;
  }
  const int threads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1;
  g_cpu_clock = threads == 1;
  const char* out = argc > 2 && std::string(argv[2]) != "-" ? argv[2] : nullptr;
  const std::string mode = argc > 3 ? argv[3] : "all";  // all | limits | gemv | gemm
  const bool limits_only = mode == "limits";
#ifdef __EMSCRIPTEN__
  const char* target = "wasm";
#else
  const char* target = "native";
#endif
  std::printf("matmul benchmark (%s, %d thread%s, %s time)\n", target, threads, threads > 1 ? "s" : "",
              g_cpu_clock ? "CPU" : "wall");
  const Bandwidth bws = read_bandwidth_gbs(threads);
  const double bw = std::max(bws.one_stream, bws.four_streams);
  const double peak = mul_add_peak_gflops();
  if (limits_only) {
    std::printf(
        "LIMITS {\"read_bandwidth_gbs\": %.3f, \"read_bandwidth_one_stream_gbs\": %.3f, \"mul_add_peak_gflops\": %.3f, "
        "\"read_bandwidth_all_threads_gbs\": %.3f, \"threads\": %d, \"clock\": \"%s\"}\n",
        bw, bws.one_stream, peak, bws.all_threads, threads, g_cpu_clock ? "process CPU time" : "wall");
    return 0;
  }
  if (mode == "int") {
    std::printf("read bandwidth %.2f GB/s, mul+add peak %.2f GFLOP/s (this run)\n", bw, peak);
    std::mt19937 rng(1);
    return int_prefill(threads, out, target, bw, peak, rng);
  }
  std::printf("read bandwidth (SIMD sum over 512 MiB, 1 thread): %.2f GB/s (4 streams; one stream: %.2f)\n", bw,
              bws.one_stream);
  if (threads > 1)
    std::printf("read bandwidth, %d threads at once (wall):        %.2f GB/s = %.2fx one thread\n", threads,
                bws.all_threads, bws.all_threads / bw);
  std::printf("mul+add peak (12 f32x4 chains, 1 thread):        %.2f GFLOP/s\n", peak);
  std::vector<Result> results;
  std::mt19937 rng(1);

  const qkv::WeightType types[] = {qkv::WeightType::F32, qkv::WeightType::F16, qkv::WeightType::BF16,
                                   qkv::WeightType::Q8, qkv::WeightType::Q4};
  for (qkv::WeightType type : types) {
    const char* tn = qkv::weight_type_name(type);
    if (argc > 4 && std::string(argv[4]).find(tn) == std::string::npos) continue;  // only these types
    // GEMV over copies of the 4 layer shapes totalling >= 600 MB as F32: each call reads its
    // matrix from memory, not from a cache
    // the layers' layout as the model holds them (WeightLoader::load): F32, F16 and BF16 in
    // panels of 16 columns; Q8 and Q4 quantized from GPT-2's [K, N] (its file's) or SmolLM2's
    // (the 5th argument "smol") [N, K]. A 6th argument InOut, OutIn or Panels forces one.
    const bool smol = argc > 5 && std::string(argv[5]) == "smol";
    const bool quantized = type == qkv::WeightType::Q8 || type == qkv::WeightType::Q4;
    const std::string forced = argc > 6 ? argv[6] : "";
    const qkv::WeightLayout layer_layout = forced == "Panels" || (forced.empty() && !quantized)
                                               ? qkv::WeightLayout::Panels
                                           : forced == "OutIn" || (forced.empty() && smol) ? qkv::WeightLayout::OutIn
                                                                                           : qkv::WeightLayout::InOut;
    const std::string layer_what = std::string(smol ? "SmolLM2 layers " : "GPT-2 layers ") +
                                   (layer_layout == qkv::WeightLayout::OutIn   ? "[N, K]"
                                    : layer_layout == qkv::WeightLayout::InOut ? "[K, N]"
                                                                               : "panels");
    std::vector<Layer> layers(std::begin(kLayers), std::end(kLayers));
    if (smol) layers.assign(std::begin(kSmolLayers), std::end(kSmolLayers));
    std::vector<Stored> stack;
    size_t f32_bytes = 0, bytes = 0;
    const size_t want = mode == "gemm" ? 1 : size_t(600) << 20;
    while (f32_bytes < want) {
      for (const Layer& l : layers) {
        stack.push_back(make(type, l.K, l.N, rng, layer_layout));
        f32_bytes += size_t(l.K * l.N * 4);
        bytes += stack.back().w.bytes();
      }
    }
    std::vector<float> x(3072), y(3072);
    for (auto& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
    // best time of a pass over the stack on t threads; a threaded run times 1 and t threads in
    // turn (passes interleaved, so that load from other jobs falls on both alike)
    // Each pass also sums the same matrices' bytes (sum_pass, one stream each, 1 thread): the
    // read rate of this very memory, laid out as the GEMV finds it (many matrices of 2-9 MB),
    // beside the 512 MiB probe's
    double best = 1e30, best_one = 1e30, best_sum = 1e30;
    float sink = 0.0f;
    for (int pass = 0; pass < (mode == "gemm" ? 0 : 6); ++pass) {
      for (int turn = 0; turn < (threads > 1 ? 2 : 1); ++turn) {
        const int t = turn == 0 ? threads : 1;
        const auto t0 = Clock::now();
        for (const Stored& s : stack) qkv::detail::gemv(s.w, x.data(), nullptr, y.data(), t);
        double& b = turn == 0 ? best : best_one;
        if (pass > 0) b = std::min(b, seconds_since(t0));
      }
      const auto t0 = Clock::now();
      for (const Stored& s : stack)
        sink += sum_pass(reinterpret_cast<const float*>(s.bytes.data()), s.bytes.size() / 4, 1);
      if (pass > 0) best_sum = std::min(best_sum, seconds_since(t0));
    }
    if (sink == 12345.0f) std::printf(" ");
    const double gbs = double(bytes) / best / 1e9;
    double stack_bytes = 0;
    for (const Stored& s : stack) stack_bytes += double(s.bytes.size() / 4 / 32 * 32 * 4);
    const double sum_gbs = stack_bytes / best_sum / 1e9;
    if (mode != "gemm") {
      results.push_back({"gemv-same-memory-sum", tn, layer_what + ": a SIMD sum over the same matrices, 1 thread", 1,
                         sum_gbs, sum_gbs / bw});
      std::printf("sum over the same %s matrices: %6.2f GB/s = %.2f of the 512 MiB probe; the GEMV %.2f of it\n", tn,
                  sum_gbs, sum_gbs / bw, gbs / sum_gbs);
    }
    if (mode != "gemm" && threads > 1) {
      const double one = double(bytes) / best_one / 1e9;
      results.push_back(
          {"gemv-one-thread", tn, layer_what + ", weights from memory, 1 thread in the same run", 1, one, one / bw});
      std::printf("gemv %-4s (%s): 1 thread %6.2f GB/s, %d threads %6.2f GB/s = %.2fx\n", tn, layer_what.c_str(), one,
                  threads, gbs, gbs / one);
    }
    if (mode != "gemm") results.push_back({"gemv", tn, layer_what + ", weights from memory", 1, gbs, gbs / bw});
    if (mode != "gemm")
      std::printf("gemv %-4s (%s): %6.2f GB/s of weights = %.2f of the bandwidth; %.2f Gweights/s\n", tn,
                  layer_what.c_str(), gbs, gbs / bw,
                  double(bytes) /
                      double(type == qkv::WeightType::F32  ? 4
                             : type == qkv::WeightType::Q8 ? 1.0625
                             : type == qkv::WeightType::Q4 ? 0.5625
                                                           : 2) /
                      best / 1e9);
    if (mode != "gemm") {
      // the tied LM head: wte [50257, 768] as the model holds it, quantized from [N, K] or in
      // panels (one copy: 154 MB as F32, beyond the caches)
      stack.clear();
      const qkv::WeightLayout head_layout = quantized ? qkv::WeightLayout::OutIn : qkv::WeightLayout::Panels;
      const Stored head = make(type, 768, 50257, rng, head_layout);
      std::vector<float> logits(50257);
      double best_head = 1e30;
      for (int pass = 0; pass < 6; ++pass) {
        const auto t0 = Clock::now();
        qkv::detail::gemv(head.w, x.data(), nullptr, logits.data(), threads);
        if (pass > 0) best_head = std::min(best_head, seconds_since(t0));
      }
      const double head_gbs = double(head.w.bytes()) / best_head / 1e9;
      const char* head_what = head_layout == qkv::WeightLayout::Panels ? "panels" : "OutIn";
      results.push_back({"gemv-lm-head", tn, std::string("LM head [50257, 768] ") + head_what + ", from memory", 1,
                         head_gbs, head_gbs / bw});
      std::printf("gemv %-4s LM head (%s): %6.2f GB/s = %.2f of the bandwidth\n", tn, head_what, head_gbs,
                  head_gbs / bw);
    }
    if (mode != "gemm") {
      // the kernel alone: one n x n matrix (256, 512, and 576: SmolLM2's q_proj, 1.3 MB as F32),
      // in the layers' layout, called over and over from the caches (L2): GB/s of weights when
      // memory is not the limit. Against the read bandwidth, this says how much room the
      // kernel's instructions leave (at >= 2x per thread a decode stays bound by memory on a
      // machine with up to twice this one's bandwidth per core)
      for (const int64_t n : {int64_t(256), int64_t(512), int64_t(576)}) {
        const Stored small = make(type, n, n, rng, layer_layout);
        const int reps = int(200 * (576 * 576) / (n * n));  // ~66 M weights a pass whatever n
        double best_cache = 1e30, best_cache_one = 1e30;    // t threads; 1 thread (threaded runs)
        for (int pass = 0; pass < 6; ++pass) {
          for (int turn = 0; turn < (threads > 1 ? 2 : 1); ++turn) {
            const auto t0 = Clock::now();
            for (int r = 0; r < reps; ++r)
              qkv::detail::gemv(small.w, x.data(), nullptr, y.data(), turn == 0 ? threads : 1);
            double& b = turn == 0 ? best_cache : best_cache_one;
            if (pass > 0) b = std::min(b, seconds_since(t0));
          }
        }
        const double cache_gbs = double(reps) * double(small.w.bytes()) / best_cache / 1e9;
        const std::string what = std::to_string(n) + " x " + std::to_string(n);
        results.push_back({"gemv-cache", tn, what + " " + layer_what.substr(layer_what.size() - 6) + ", in cache", 1,
                           cache_gbs, cache_gbs / bw});
        std::printf("gemv %-4s %s in cache: %6.2f GB/s = %.2fx the bandwidth", tn, what.c_str(), cache_gbs,
                    cache_gbs / bw);
        if (threads == 1) {
          std::printf(cache_gbs >= 2 * bw ? " (>= 2x: memory-bound)\n" : " (< 2x)\n");
        } else {
          // a compute-bound kernel on 2 cores gains ~2x; on 2 hyperthreads of one core, far less
          const double one = double(reps) * double(small.w.bytes()) / best_cache_one / 1e9;
          results.push_back(
              {"gemv-cache-one-thread", tn, what + ", in cache, 1 thread in the same run", 1, one, one / bw});
          std::printf("; 1 thread %.2f GB/s: %.2fx\n", one, cache_gbs / one);
        }
      }
    }
    if (mode == "gemv") continue;
    stack.clear();
    // GEMM: one copy of each shape is enough (compute-bound)
    for (const Layer& l : layers) stack.push_back(make(type, l.K, l.N, rng, layer_layout));

    for (int64_t M : {32, 128, 512}) {
      std::vector<float> xm(size_t(M * 3072), 0.5f), ym(size_t(M * 3072));
      for (auto& v : xm) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
      double flops = 0.0;
      for (const Stored& s : stack) flops += 2.0 * double(M) * double(s.w.K) * double(s.w.N);
      double best_t = 1e30;
      const int reps = M >= 512 ? 3 : 6;
      for (int pass = 0; pass < reps; ++pass) {
        const auto t0 = Clock::now();
        for (const Stored& s : stack) qkv::detail::gemm(s.w, xm.data(), M, nullptr, ym.data(), threads);
        if (pass > 0) best_t = std::min(best_t, seconds_since(t0));
      }
      const double gf = flops / best_t / 1e9;
      results.push_back({"gemm", tn, layer_what, M, gf, gf / peak});
      std::printf("gemm %-4s M=%-4lld: %6.2f GFLOP/s = %.2f of the mul+add peak\n", tn, static_cast<long long>(M), gf,
                  gf / peak);
    }
    std::fflush(stdout);
  }

  if (out) {
    FILE* f = std::fopen(out, "w");
    if (!f) {
      std::perror(out);
      return 1;
    }
    std::fprintf(f,
                 "{\n  \"benchmark\": \"matmul\",\n  \"target\": \"%s\",\n  \"threads\": %d,\n  \"clock\": \"%s\",\n",
                 target, threads, g_cpu_clock ? "process CPU time" : "wall");
    std::fprintf(f, "  \"read_bandwidth_gbs\": %.3f,\n  \"read_bandwidth_one_stream_gbs\": %.3f,\n", bw,
                 bws.one_stream);
    if (threads > 1) std::fprintf(f, "  \"read_bandwidth_all_threads_gbs\": %.3f,\n", bws.all_threads);
    std::fprintf(f, "  \"mul_add_peak_gflops\": %.3f,\n  \"results\": [\n", peak);
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::fprintf(
          f,
          "    {\"kernel\": \"%s\", \"type\": \"%s\", \"what\": \"%s\", \"M\": %lld, \"%s\": %.3f, \"fraction_of_%s\": "
          "%.4f}%s\n",
          r.kind.c_str(), r.type.c_str(), r.what.c_str(), static_cast<long long>(r.M),
          r.kind != "gemm" ? "gbs" : "gflops", r.value, r.kind != "gemm" ? "bandwidth" : "peak", r.fraction,
          i + 1 < results.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
  }
  return 0;
}
