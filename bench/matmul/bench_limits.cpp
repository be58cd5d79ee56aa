// The clock a run is timed by and this machine's limits (bench_matmul.cpp's file comment): the
// read bandwidth (a SIMD sum over 512 MiB) and the mul+add peak (12 independent f32x4 chains).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_matmul.hpp"
#include "matmul/halves.hpp"
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

namespace qkv_bench {

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

// V8 runs a wasm function first as baseline (Liftoff) code, which keeps values on the stack,
// and uses optimized (TurboFan) code from a later call on: there is no on-stack replacement.
// So every measured loop below is its own function, called once per pass, and only passes
// after the first few count (a loop inside main() would be measured in baseline code: 2-3x slower).
#define QKV_NOINLINE __attribute__((noinline))

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

namespace {

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

}  // namespace

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

}  // namespace qkv_bench
