// What the matmul benchmark's files share (bench_matmul.cpp: main, the GEMV and GEMM runs;
// bench_limits.cpp: the clock and this machine's limits; bench_int_prefill.cpp: the `int`
// mode): the clock, the limits, the layer shapes and the stored matrices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "matmul/matmul.hpp"

namespace qkv_bench {

// Seconds on the clock this run is timed by: the process's CPU time with 1 thread (g_cpu_clock
// true), else wall time (bench_limits.cpp).
inline bool g_cpu_clock = true;
double now_s();
struct Clock {
  using time_point = double;
  static double now() { return now_s(); }
};
inline double seconds_since(double t0) { return now_s() - t0; }

// Read bandwidth: sums over 512 MiB in 4 streams (2 f32x4 accumulators each) and in one. One
// stream leaves the memory system idle part of the time; the kernels read several rows at
// once, so the limit is the better of the two. Best of the passes after warm-up.
struct Bandwidth {
  double one_stream = 0.0, four_streams = 0.0;
  double all_threads = 0.0;  // threads > 1: every thread summing its own part at once (wall time)
};
Bandwidth read_bandwidth_gbs(int threads);

// The sum of n floats read as `streams` (1 or 4) interleaved sequential streams (the array's
// parts): a pass of the bandwidth probe, and of the sum over a GEMV's own matrices.
float sum_pass(const float* p, size_t n, int streams);

// The mul+add peak in GFLOP/s: 12 independent f32x4 chains acc = acc * m + c, best pass.
double mul_add_peak_gflops();

// The layer shapes: GPT-2 small's (Conv1D [K, N])
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

// A K x N matrix of `type` in `layout`, weights drawn from N(0, 0.02) by rng (bench_matmul.cpp).
Stored make(qkv::WeightType type, int64_t K, int64_t N, std::mt19937& rng,
            qkv::WeightLayout layout = qkv::WeightLayout::InOut);

// `int` mode (bench_matmul.cpp's file comment): int8 vs int4 integer prefill, interleaved passes.
// Prints a table and writes its own JSON (out, or none); returns main's exit status.
int int_prefill(int threads, const char* out, const char* target, double bw, double peak, std::mt19937& rng);

}  // namespace qkv_bench
