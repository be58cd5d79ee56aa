// The matmul kernels against this machine's limits, natively or in wasm (bench/matmul/run.sh):
//  - read bandwidth: a SIMD sum over 512 MiB (8 f32x4 accumulators), best of 3 passes;
//  - mul+add peak: 12 independent f32x4 chains acc = acc * a + b (no FMA in wasm SIMD);
//  - GEMV (decode): y = x W over GPT-2-small-shaped layers, as many distinct copies as take
//    >= 600 MB of F32 weights (beyond the last-level cache): GB/s of weights read, and the
//    fraction of the measured bandwidth; per weight type;
//  - GEMV of the tied LM head: wte [50257, 768] read as OutIn (one copy, 154 MB as F32);
//  - GEMV of one n x n matrix (n = 256, 512, 576) from the caches: the kernel's own speed, memory
//    aside, against the bandwidth (issue 27 asks >= 2x on 1 thread);
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
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"
#include "simd.hpp"  // and simd_madd.hpp
#include "thread_pool.hpp"

#ifndef QKV_NO_SIMD
#include <xsimd/xsimd.hpp>
#endif
#ifdef __EMSCRIPTEN__
#include <emscripten.h>
#else
#include <ctime>
#endif

namespace {

// Seconds on the clock this run is timed by: the process's CPU time with 1 thread, else wall.
bool g_cpu_clock = true;
double now_s() {
  if (!g_cpu_clock) return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
#ifdef __EMSCRIPTEN__
  return EM_ASM_DOUBLE({
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
  });
#else
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
#endif
}
struct Clock {
  using time_point = double;
  static double now() { return now_s(); }
};
double seconds_since(double t0) { return now_s() - t0; }

// ------------------------------------------------------------------ machine limits

// V8 runs a wasm function first as baseline (Liftoff) code, which keeps values on the stack,
// and uses optimized (TurboFan) code from a later call on: there is no on-stack replacement.
// So every measured loop below is its own function, called once per pass, and only passes
// after the first few count (a loop inside main() would be measured in baseline code: 2-3x slower).
#define QKV_NOINLINE __attribute__((noinline))

// The sum of n floats read as `streams` interleaved sequential streams (the array's parts).
QKV_NOINLINE float sum_pass(const float* p, size_t n, int streams) {
#ifndef QKV_NO_SIMD
  using F4 = qkv::halves::F4;
  F4 a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f), a4(0.0f), a5(0.0f), a6(0.0f), a7(0.0f);
  if (streams == 1) {
    for (size_t i = 0; i + 32 <= n; i += 32) {
      a0 += F4::load_aligned(p + i), a1 += F4::load_aligned(p + i + 4), a2 += F4::load_aligned(p + i + 8);
      a3 += F4::load_aligned(p + i + 12), a4 += F4::load_aligned(p + i + 16), a5 += F4::load_aligned(p + i + 20);
      a6 += F4::load_aligned(p + i + 24), a7 += F4::load_aligned(p + i + 28);
    }
  } else {  // 4 streams: the array's quarters
    const size_t q = n / 4;
    for (size_t i = 0; i + 8 <= q; i += 8) {
      a0 += F4::load_aligned(p + i), a1 += F4::load_aligned(p + i + 4);
      a2 += F4::load_aligned(p + q + i), a3 += F4::load_aligned(p + q + i + 4);
      a4 += F4::load_aligned(p + 2 * q + i), a5 += F4::load_aligned(p + 2 * q + i + 4);
      a6 += F4::load_aligned(p + 3 * q + i), a7 += F4::load_aligned(p + 3 * q + i + 4);
    }
  }
  return xsimd::hadd(((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)));
#else
  float s[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += p[i + size_t(j)];
  (void)streams;
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
#endif
}

// Read bandwidth: sums over 512 MiB in 4 streams (2 f32x4 accumulators each) and in one. One
// stream leaves the memory system idle part of the time; the kernels read several rows at
// once, so the limit is the better of the two. Best of the passes after warm-up.
struct Bandwidth {
  double one_stream = 0.0, four_streams = 0.0;
  double all_threads = 0.0;  // threads > 1: every thread summing its own part at once (wall time)
};

Bandwidth read_bandwidth_gbs(int threads) {
  const size_t n = (size_t(512) << 20) / 4;  // 512 MiB of floats
  std::vector<float> buf(n, 1.0f);
  for (size_t i = 0; i < n; i += 1024) buf[i] = float(i & 7);
  Bandwidth best;
  float sink = 0.0f;
  for (int i = 0; i < 8; ++i) sink += sum_pass(buf.data(), 1 << 16, i % 2 ? 4 : 1);  // tier up
  for (int pass = 0; pass < 6; ++pass) {
    const int streams = pass % 2 ? 4 : 1;
    const auto t0 = Clock::now();
    sink += sum_pass(buf.data(), n, streams);
    const double gbs = double(n) * 4 / seconds_since(t0) / 1e9;
    double& b = streams == 1 ? best.one_stream : best.four_streams;
    if (pass >= 2) b = std::max(b, gbs);
  }
  // threads > 1: the same 512 MiB cut into one part per thread, each summed in 4 streams at once:
  // what two cores pull together (a decode on 2 threads cannot beat this / one thread's figure)
  for (int pass = 0; threads > 1 && pass < 6; ++pass) {
    std::vector<float> part_sums(size_t(threads), 0.0f);
    const auto t0 = std::chrono::steady_clock::now();
    qkv::parallel_for(threads, threads, [&](int64_t item, int) {
      const size_t part = n / size_t(threads) / 32 * 32;
      part_sums[size_t(item)] = sum_pass(buf.data() + size_t(item) * part, part, 4);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (float v : part_sums) sink += v;
    if (pass >= 2) best.all_threads = std::max(best.all_threads, double(n) * 4 / s / 1e9);
  }
  if (sink == 12345.0f) std::printf(" ");
  return best;
}

// iters x 12 independent chains acc = acc * m + c (f32x4): the mul+add peak (wasm SIMD has no
// FMA); in a relaxed-SIMD build (QKV_RELAXED_SIMD) the chains are simd::madd, f32x4.relaxed_madd:
// the limit of that build's kernels
QKV_NOINLINE float peak_pass(int64_t iters, float mv, float cv) {
#ifndef QKV_NO_SIMD
  using F4 = qkv::halves::F4;
  const F4 m(mv), c(cv);
  F4 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = F4(float(i));
  for (int64_t it = 0; it < iters; ++it) {
    QKV_UNROLL
    for (int i = 0; i < 12; ++i) acc[i] = qkv::simd::madd(acc[i], m, c);
  }
  F4 s(0.0f);
  for (int i = 0; i < 12; ++i) s += acc[i];
  return xsimd::hadd(s);
#else
  float acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = float(i);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = acc[i] * mv + cv;
  float s = 0.0f;
  for (float a : acc) s += a;
  return s;
#endif
}

double mul_add_peak_gflops() {
  volatile float mv = 0.999999f, cv = 1e-7f;  // not compile-time constants
  float sink = 0.0f;
  for (int i = 0; i < 8; ++i) sink += peak_pass(100000, mv, cv);  // tier up
  double best = 0.0;
  const int64_t iters = 20000000;
  for (int pass = 0; pass < 5; ++pass) {
    const auto t0 = Clock::now();
    sink += peak_pass(iters, mv, cv);
#ifndef QKV_NO_SIMD
    const double flops = double(iters) * 12 * 2 * 4;
#else
    const double flops = double(iters) * 12 * 2;
#endif
    if (pass >= 1) best = std::max(best, flops / seconds_since(t0) / 1e9);
  }
  if (sink == 12345.0f) std::printf(" ");
  return best;
}

// ------------------------------------------------------------------ GPT-2-small layers

struct Layer {
  const char* name;
  int64_t K, N;
};
const Layer kLayers[] = {
    {"attn.c_attn", 768, 2304}, {"attn.c_proj", 768, 768}, {"mlp.c_fc", 768, 3072}, {"mlp.c_proj", 3072, 768}};
// SmolLM2-135M's (Llama, nn.Linear [N, K]): q, k, v, o, gate, up, down
const Layer kSmolLayers[] = {{"q_proj", 576, 576},    {"k_proj", 576, 192},     {"v_proj", 576, 192},
                             {"o_proj", 576, 576},    {"gate_proj", 576, 1536}, {"up_proj", 576, 1536},
                             {"down_proj", 1536, 576}};

// One stored matrix (owns its bytes).
struct Stored {
  std::vector<uint8_t> bytes;
  std::vector<uint16_t> scales;
  std::vector<qkv::WeightFix> fixes;  // F16: the subnormal halves, added back by matmul()
  qkv::WeightMatrix w;
};

Stored make(qkv::WeightType type, int64_t K, int64_t N, std::mt19937& rng,
            qkv::WeightLayout layout = qkv::WeightLayout::InOut) {
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

struct Result {
  std::string kind, type, what;
  int64_t M;
  double value, fraction;  // GB/s or GFLOP/s; of bandwidth or peak
};

// `int` mode (file comment): int8 vs int4 integer prefill, interleaved passes. Prints a table and
// writes its own JSON (out, or none).
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

}  // namespace

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
      // kernel's instructions leave (issue 27 asks >= 2x per thread: then a decode is bound by
      // memory on a machine with up to twice this one's bandwidth per core)
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
          std::printf(cache_gbs >= 2 * bw ? " (issue 27: >= 2x, met)\n" : " (issue 27: >= 2x, not met)\n");
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
