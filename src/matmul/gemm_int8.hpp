// The integer matrix product over int8 weights in Q8's layout (gemm_q8.cpp), shared by the
// 8-bit prefill (Q8's stored panels) and the 4-bit one (gemm_q4.cpp unpacks Q4's nibbles).
// Each tile of weights reaches the micro-kernel widened to int16 with its scales as floats: the
// widening is done once per tile, not once per tile and group of rows. Internal to src/matmul.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "matmul/matmul.hpp"
#include "matmul/weights.hpp"
#include "thread_pool.hpp"

namespace qkv::detail {

// The weights of `count` consecutive groups of 4 columns widened to int16, the groups' k-pairs
// side by side: data [blocks][16 k-pairs][count groups][4 columns][2] (the int8 values exactly;
// a group's k-pair as Q8 stores it), scales [blocks][count][4] (d * 2^-112 with d's sign, what
// halves::halves_low gives for the stored IEEE half; |d| >= 2^-14 or d = 0). The micro-kernel
// then reads one k-pair of the whole tile at one pointer.
struct Int16Panel {
  const int16_t* data = nullptr;
  const float* scales = nullptr;
};

// w's panel for groups [g, g + count) (count: the micro-tile's groups, fewer at the right edge),
// in the calling thread's buffer, valid until that thread's next call
using PanelOf = Int16Panel (*)(const WeightMatrix& w, int64_t g, int count);

// `pairs` k-pairs of int8 values at q (8 each, consecutive) -> int16, k-pair p at out + p * stride;
// n IEEE halves at h -> d * 2^-112 at out (the value halves::halves_low gives, for any n)
void widen_int8_pairs(const int8_t* q, int64_t pairs, int16_t* out, int64_t stride);
void widen_scales(const uint16_t* h, int64_t n, float* out);

// y_i[M, N_i] = x[M, K] W_i + bias_i for each output (one K, one storage type: one PanelOf), x
// rounded to int16 per row and block of 32 once for all of them (|xq| <= x_limit: 32767, or 127
// for Q4 with the relaxed int8 dot), int32 block sums (exact), each block's sum times d_w d_x into
// float accumulators. The outputs' tiles of kG groups of 4 columns are split over the threads in
// one job (run_tiles); the thread count changes no bit.
void gemm_int8(const MatmulOutput* outputs, size_t count, const float* x, int64_t M, int threads, PanelOf panel_of,
               float x_limit);

// Work items a thread gets in a product's job: enough that the threads finish close together
// when one joins late or runs slower, few enough that claiming them costs nothing measurable.
constexpr int64_t kItemsPerThread = 16;

// Runs fn(output, t0, t1) on tiles [t0, t1) of each output, the outputs' tiles laid end to end
// (ends[i]: where output i's tiles end) and split into whole-tile items over `threads` threads.
template <class Fn>
void run_tiles(const int64_t* ends, size_t count, int threads, const Fn& fn) {
  const int64_t tiles = count ? ends[count - 1] : 0;
  const auto range = [&](int64_t a, int64_t b) {
    for (size_t i = 0; i < count; ++i) {
      const int64_t start = i ? ends[i - 1] : 0, t0 = std::max(a, start), t1 = std::min(b, ends[i]);
      if (t0 < t1) fn(i, t0 - start, t1 - start);
    }
  };
  if (threads <= 1) return range(0, tiles);
  const int64_t items = std::min(tiles, int64_t(threads) * kItemsPerThread);
  parallel_for(items, threads, [&](int64_t item, int) { range(tiles * item / items, tiles * (item + 1) / items); });
}

// Runs round(s0, s1) -> bool on the row sets [0, sets) of `width` elements each, split over the
// threads as a model's row-wise steps are (for_rows); true when every call returned true.
template <class Round>
bool round_rows(int64_t sets, int64_t width, int threads, const Round& round) {
  std::atomic<bool> all{true};
  for_rows(sets, width, threads, [&](int64_t s0, int64_t s1) {
    if (!round(s0, s1)) all.store(false, std::memory_order_relaxed);
  });
  return all.load(std::memory_order_relaxed);
}

}  // namespace qkv::detail
