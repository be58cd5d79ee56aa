// Matrix-vector products for decoding: y[N] = x[K] W + bias, one pass over W at memory speed.
// This file: the F32 kernels, the OutIn layout of every float type, and the dispatch (16-bit
// InOut and Panels: gemv_half.cpp; 8-bit: gemv_q8.cpp; 4-bit: gemv_q4.cpp).
//
// Each weight is read once, from a few sequential streams, and used once: the kernels are
// bound by memory bandwidth, so they do little per weight besides widening it.
//  Panels (F32, F16, BF16: every float matrix the decoders' loader holds, weights.hpp): two
//    panels of 16 columns at a time, half the range apart, each a sequential stream of rows (64
//    bytes in F32, 32 in 16-bit), the 32 sums in registers, each column's products added in k
//    order after its bias, as the matrix product (gemm.cpp) adds them: one token decoded gives
//    the bits the same token gets in a prefill.
//  The two stored layouts, as callers hand them in (the encoders' and seq2seq's weights):
//  InOut [K, N] (Conv1D): 8 rows of W at a time,
//    y[n] += x[k+r] W[k+r, n] for r = 0..7 in order; y (<= a few thousand floats) stays in L1
//    while the 8 rows stream past. The rows are summed in two parts (matmul.hpp's inout_split):
//    each y element adds the first part's products in k order after its bias, the second's in
//    k order from zero, then the two, as the matrix product does. Two threads take a part each.
//  OutIn [N, K] (nn.Linear): 8 columns at a time (16 for 16-bit weights), far apart (as many
//    long sequential streams), each a dot product of x with one contiguous row of W, 4 lanes per
//    column summed at the end.
//  Q8: groups of 4 columns, 8 groups side by side, far apart, one group at a time per block; x
//    quantized to int16 per 32-block; int16 dot products (pmaddwd / i32x4.dot_i16x8_s) put each
//    column's partial sum in its own lane (weights.hpp).
// Every multiply-add is simd::madd: a mul then an add (the bits as before), one f32x4.relaxed_madd
// in the relaxed-SIMD builds.
// Every output column sees the same operations whichever thread and position it falls in
// (thread ranges start on 8-column boundaries), so the bits do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "matmul/gemv_parts.hpp"
#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"
#include "matmul/x_int16.hpp"
#include "simd.hpp"
#include "thread_pool.hpp"

#ifndef QKV_NO_SIMD
#include <smmintrin.h>  // SSE4.1 integer widening and pmaddwd: Emscripten lowers them to SIMD128
#endif

// Rows of an F32 [K, N] matrix streamed at a time in decode (gemv_f32_inout); QKV_F32_ROWS
// overrides it (for measurements: on the Zen 5 of docs/benchmarks.md, 16 read 1.2x faster from
// memory and cost 35% in cache)
#ifndef QKV_F32_ROWS
#define QKV_F32_ROWS 8
#endif

namespace qkv::detail {
namespace {

#ifndef QKV_NO_SIMD
using halves::F4;
using halves::I4;
#endif

float load_f32(const float* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// ------------------------------------------------------------------ F32, InOut [K, N]

#ifndef QKV_NO_SIMD
// y[columns] += rows r < R of W (starting at w, N apart) times xs[r], in row order; columns in
// runs of 8 from y up to end. Pointers, not 64-bit indices (wasm32 pays for i64 arithmetic).
template <int R>
void f32_rows(const float* w, int64_t N, const float* xs, float* y, float* end) {
  F4 v[R];
  const float* p[R];
  QKV_UNROLL
  for (int r = 0; r < R; ++r) v[r] = F4(xs[r]), p[r] = w + r * N;
  for (; y < end; y += 8) {
    F4 lo = F4::load_unaligned(y), hi = F4::load_unaligned(y + 4);
    QKV_UNROLL
    for (int r = 0; r < R; ++r) {
      lo = simd::madd(v[r], F4::load_unaligned(p[r]), lo);
      hi = simd::madd(v[r], F4::load_unaligned(p[r] + 4), hi);
      p[r] += 8;
    }
    lo.store_unaligned(y);
    hi.store_unaligned(y + 4);
  }
}
#endif

// y[n0:n1] = bias + sum_k x[k] W[k, n0:n1]: 8 rows of W stream past y at a time (8 reads in
// flight keep the memory system busier than 4: 10% here), each y element adding its products
// in k order
void gemv_f32_inout(const WeightMatrix& w, const float* x, const float* bias, float* y, int64_t n0, int64_t n1) {
  const int64_t K = w.K, N = w.N;
  const float* W = static_cast<const float*>(w.data);
  for (int64_t n = n0; n < n1; ++n) y[n] = bias ? bias[n] : 0.0f;
  int64_t vectors_end = n0;
#ifndef QKV_NO_SIMD
  vectors_end = n0 + (n1 - n0) / 8 * 8;
  int64_t k = 0;
  for (; k + QKV_F32_ROWS <= K; k += QKV_F32_ROWS)
    f32_rows<QKV_F32_ROWS>(W + k * N + n0, N, x + k, y + n0, y + vectors_end);
  for (; k < K; ++k) f32_rows<1>(W + k * N + n0, N, x + k, y + n0, y + vectors_end);
#endif
  for (int64_t n = vectors_end; n < n1; ++n) {
    for (int64_t k = 0; k < K; ++k) y[n] += x[k] * W[k * N + n];
  }
}

// ------------------------------------------------------------------ F32, Panels

#ifndef QKV_NO_SIMD
// y[s][0 : 4V] = y[s] + sum_k x[k] W[k, ...] for S runs of 4V columns, run s from p[s], its rows
// `width` floats apart (a panel's): S sequential streams, S * V sums held in registers, each
// column's products added in k order
template <int S, int V>
void f32_panel_runs(const float* const* p, int64_t width, int64_t K, const float* x, float* const* y) {
  F4 acc[S][V];
  const float* q[S];
  QKV_UNROLL
  for (int s = 0; s < S; ++s) {
    q[s] = p[s];
    QKV_UNROLL
    for (int v = 0; v < V; ++v) acc[s][v] = F4::load_unaligned(y[s] + 4 * v);
  }
  for (const float* end = x + K; x < end; ++x) {
    const F4 xk(*x);
    QKV_UNROLL
    for (int s = 0; s < S; ++s) {
      QKV_UNROLL
      for (int v = 0; v < V; ++v) acc[s][v] = simd::madd(xk, F4::load_unaligned(q[s] + 4 * v), acc[s][v]);
      q[s] += width;
    }
  }
  QKV_UNROLL
  for (int s = 0; s < S; ++s) {
    QKV_UNROLL
    for (int v = 0; v < V; ++v) acc[s][v].store_unaligned(y[s] + 4 * v);
  }
}
#endif

// y[n0:n1] = bias + sum_k x[k] W[k, n0:n1], W in Panels (weights.hpp), n0 on an 8-column
// boundary, the whole panels as walk_whole_panels goes (GPT-2 small's layers from memory, wasm,
// 1 thread, Zen 5: two panels at a time 34 GB/s where [K, N] read 18 and one panel at a time 28;
// in cache 72 GB/s, one at a time 80). The last panel's N % 16 columns go 4 at a time through a
// zero-padded vector, so every column sees the same multiply-adds as in the matrix product's
// tiles (gemm.cpp): the same bits.
void gemv_f32_panels(const WeightMatrix& w, const float* x, const float* bias, float* y, int64_t n0, int64_t n1) {
  const int64_t K = w.K, N = w.N;
  const float* W = static_cast<const float*>(w.data);
  for (int64_t n = n0; n < n1; ++n) y[n] = bias ? bias[n] : 0.0f;
  int64_t n = n0;
#ifndef QKV_NO_SIMD
  const int64_t whole = N / kPanel * kPanel;  // columns [0, whole) in whole panels
  const auto column = [&](int64_t c) { return W + c / kPanel * kPanel * K + c % kPanel; };  // W[0, c], a whole panel
  n = walk_whole_panels(n, n1, N, [&](auto streams, auto full_panel, const int64_t* columns) {
    constexpr int S = decltype(streams)::value, V = decltype(full_panel)::value ? 4 : 2;
    const float* p[S];
    float* out[S];
    QKV_UNROLL
    for (int s = 0; s < S; ++s) p[s] = column(columns[s]), out[s] = y + columns[s];
    f32_panel_runs<S, V>(p, kPanel, K, x, out);
  });
  // the last panel's columns: [K][N - whole]
  const int64_t width = N - whole;
  for (; n < n1; n += 4) {
    const int64_t count = std::min<int64_t>(4, n1 - n);
    const float* p = W + whole * K + (n - whole);
    float lanes[4] = {};
    std::copy(y + n, y + n + count, lanes);
    F4 acc = F4::load_unaligned(lanes);
    for (int64_t k = 0; k < K; ++k, p += width) {
      std::copy(p, p + count, lanes);
      acc = simd::madd(F4(x[k]), F4::load_unaligned(lanes), acc);
    }
    acc.store_unaligned(lanes);
    std::copy(lanes, lanes + count, y + n);
  }
#endif
  for (; n < n1; ++n) {  // no SIMD: one column at a time, the same operations
    const int64_t first = n / kPanel * kPanel, width = std::min(kPanel, N - first);
    const float* p = W + first * K + (n - first);
    for (int64_t k = 0; k < K; ++k) y[n] = simd::madd(x[k], p[k * width], y[n]);
  }
}

// ------------------------------------------------------------------ F32 / F16 / BF16, OutIn [N, K]

// sum[c] = x . W[n + c * stride, :] for C columns (rows of storage) side by side: C streams of
// weights in flight, each column summed in 4 lanes, in the same order whatever C and stride
template <WeightType T, int C>
void dot_columns(const WeightMatrix& w, const GemvInput& in, int64_t n, int64_t stride, float* sum) {
  const int64_t K = w.K, S = stride * K;  // column c: the row n + c * stride of storage
  const float* x = in.x;
  int64_t k = 0;
  QKV_UNROLL
  for (int c = 0; c < C; ++c) sum[c] = 0.0f;
#ifndef QKV_NO_SIMD
  F4 acc[C];
  QKV_UNROLL
  for (int c = 0; c < C; ++c) acc[c] = F4(0.0f);
#endif
  if constexpr (T == WeightType::F32) {
    const float* row = static_cast<const float*>(w.data) + n * K;
#ifndef QKV_NO_SIMD
    for (; k + 4 <= K; k += 4) {
      const F4 xk = F4::load_unaligned(x + k);
      QKV_UNROLL
      for (int c = 0; c < C; ++c) acc[c] = simd::madd(xk, F4::load_unaligned(row + c * S + k), acc[c]);
    }
    QKV_UNROLL
    for (int c = 0; c < C; ++c) sum[c] = xsimd::hadd(acc[c]);
#endif
    for (; k < K; ++k) {
      QKV_UNROLL
      for (int c = 0; c < C; ++c) sum[c] += x[k] * load_f32(row + c * S + k);
    }
  } else {
    constexpr bool kF16 = T == WeightType::F16;
    const uint16_t* row = static_cast<const uint16_t*>(w.data) + n * K;
#ifndef QKV_NO_SIMD
    const float *xe = in.even.data(), *xo = in.odd.data();
    for (; k + 8 <= K; k += 8) {
      const F4 e = F4::load_unaligned(xe + k / 2), o = F4::load_unaligned(xo + k / 2);
      QKV_UNROLL
      for (int c = 0; c < C; ++c) {
        const I4 u = halves::load_pairs(row + c * S + k);
        acc[c] = simd::madd(e, halves::wide_even<kF16>(u), acc[c]);
        acc[c] = simd::madd(o, halves::wide_odd<kF16>(u), acc[c]);
      }
    }
    QKV_UNROLL
    for (int c = 0; c < C; ++c) sum[c] = xsimd::hadd(acc[c]) * (kF16 ? halves::kF16Half : 1.0f);
#endif
    for (; k < K; ++k) {
      QKV_UNROLL
      for (int c = 0; c < C; ++c) {
        const uint16_t h = row[c * S + k];
        sum[c] += x[k] * (kF16 ? halves::f16_to_f32(h) : halves::bf16_to_f32(h));
      }
    }
  }
}

}  // namespace

int64_t part_stride(int64_t count, int64_t row_bytes, int streams) {
  const int64_t most = count / streams;
  int64_t best = most;
  int best_lines = 0;
  for (int64_t stride = most; stride > 0 && stride > most - 8; --stride) {
    uint64_t lines = 0;  // bit i: some stream starts on line i of its page
    for (int64_t c = 0; c < streams; ++c) lines |= uint64_t(1) << (c * stride * row_bytes % 4096 / 64);
    int n = 0;
    for (; lines; lines &= lines - 1) ++n;
    if (n > best_lines) best = stride, best_lines = n;
    if (2 * n >= streams) break;
  }
  return best;
}

namespace {

// y[n0:n1] = bias + x W, W [N, K]: 8 columns at a time (16 for 16-bit weights), far apart. The
// range is cut into 8 (16) parts and step j takes column j of each, so each stream walks
// through one part's consecutive rows: 8 (16) long sequential reads instead of 8 adjacent rows
// (8 streams of K elements, restarted every step, several in one 4 KiB page), which the
// hardware prefetchers follow far better. The tied LM head (wte [50257, 768], the largest
// matrix of a decode step), from memory, wasm, 1 thread: F32 0.78 -> 1.00, F16 0.46 -> 0.84-0.92
// of the read bandwidth (a 4-stream sum) with 8 parts, 0.96-1.06 with 16 (F16 moves half the
// bytes per multiply-add: twice the streams keep as many bytes in flight). The parts' length
// is part_stride's (not a multiple of 4 KiB apart); the columns left after kParts parts go
// round again, then the last < kParts one at a time. Every column's sum is the same whatever
// part it falls in.
template <WeightType T>
void gemv_outin(const WeightMatrix& w, const GemvInput& in, const float* bias, float* y, int64_t n0, int64_t n1) {
  constexpr int kParts = T == WeightType::F32 ? 8 : 16;
  const int64_t row_bytes = w.K * int64_t(T == WeightType::F32 ? sizeof(float) : sizeof(uint16_t));
  float sum[kParts];
  int64_t n = n0;  // columns [n0, n) done
  while (n1 - n >= kParts) {
    const int64_t part = part_stride(n1 - n, row_bytes, kParts);  // columns per part
    for (int64_t j = 0; j < part; ++j) {
      dot_columns<T, kParts>(w, in, n + j, part, sum);
      for (int c = 0; c < kParts; ++c) y[n + j + c * part] = sum[c];
    }
    n += kParts * part;
  }
  for (; n < n1; ++n) dot_columns<T, 1>(w, in, n, 1, y + n);
  if (bias) {
    for (n = n0; n < n1; ++n) y[n] += bias[n];
  }
}

// ------------------------------------------------------------------ dispatch

void prepare(const WeightMatrix& w, const float* x, GemvInput& in) {
  in.x = x;
  const int64_t K = w.K;
  if (w.type == WeightType::Q8) {
    prepare_q8(x, K, in, kXqLimit16);
  } else if (w.type == WeightType::Q4) {
    prepare_q4(x, K, in);
  } else if (w.type != WeightType::F32) {
    const float s = w.type == WeightType::F16 ? halves::kF16Half : 1.0f;
    if (w.layout != WeightLayout::OutIn) {  // InOut, Panels
      if (w.type == WeightType::F16) {
        in.scaled.resize(size_t(K));
        for (int64_t k = 0; k < K; ++k) in.scaled[size_t(k)] = x[k] * s;
      }
    } else {
      in.even.assign(size_t((K + 1) / 2), 0.0f);
      in.odd.assign(size_t((K + 1) / 2), 0.0f);
      for (int64_t k = 0; k < K; ++k) (k % 2 ? in.odd : in.even)[size_t(k / 2)] = x[k] * s;
    }
  }
}

// y for the columns [n0, n1) (n0 on a unit boundary) over W's rows [k0, k1): one part of a
// float InOut matrix (inout_split), the whole of K for the rest (k0 = 0, k1 = K)
void gemv_columns(const WeightMatrix& w, const GemvInput& in, int64_t k0, int64_t k1, const float* bias, float* y,
                  int64_t n0, int64_t n1) {
  const bool inout = w.layout == WeightLayout::InOut;
  WeightMatrix rows = w;  // W[k0 : k1, :] (InOut: rows of storage)
  rows.K = k1 - k0;
  const size_t element = w.type == WeightType::F32 ? sizeof(float) : sizeof(uint16_t);
  if (inout) rows.data = static_cast<const char*>(w.data) + size_t(k0 * w.N) * element;
  switch (w.type) {
    case WeightType::F32:
      if (w.layout == WeightLayout::Panels) return gemv_f32_panels(w, in.x, bias, y, n0, n1);
      return inout ? gemv_f32_inout(rows, in.x + k0, bias, y, n0, n1)
                   : gemv_outin<WeightType::F32>(w, in, bias, y, n0, n1);
    case WeightType::F16:
      if (w.layout == WeightLayout::Panels) return gemv_half(w, in.x, in.scaled.data(), bias, y, n0, n1);
      return inout ? gemv_half(rows, in.x + k0, in.scaled.data() + k0, bias, y, n0, n1)
                   : gemv_outin<WeightType::F16>(w, in, bias, y, n0, n1);
    case WeightType::BF16:
      if (w.layout == WeightLayout::Panels) return gemv_half(w, in.x, in.x, bias, y, n0, n1);
      return inout ? gemv_half(rows, in.x + k0, in.x + k0, bias, y, n0, n1)
                   : gemv_outin<WeightType::BF16>(w, in, bias, y, n0, n1);
    case WeightType::Q8:
      return gemv_q8(w, in, bias, y, n0 / 4, (n1 + 3) / 4);
    case WeightType::Q4:
      return gemv_q4(w, in, bias, y, n0, n1);
  }
}

}  // namespace

// A thread joins a matrix-vector product for at least 128 KiB of weights (~10 us from memory in
// wasm). The product is bound by memory, not arithmetic, so this floor is in bytes: the
// matmuls' floor of 2^18 multiply-adds kept SmolLM2's 576 x 576 projections (1.3 MB in F32,
// 0.37 MB in Q8) on one thread.
constexpr int64_t kMinGemvBytesPerThread = int64_t(1) << 17;

void gemv(const WeightMatrix& w, const float* x, const float* bias, float* y, int threads) {
  const MatmulOutput one{&w, bias, y};
  gemv_many(&one, 1, x, threads);
}

// Every output's columns, in 8-column units (two Q8 groups; a 16-byte load of a 16-bit row),
// laid end to end and cut into one contiguous range of units per thread: a range may end in
// one matrix and go on in the next. A float InOut matrix split in two parts of its rows
// (inout_split) has its units twice, the first part's then the second's; the second part's sums
// go to a buffer that is added to y once every thread is done. A column's operations do not
// depend on the range it falls in, so the bits are those of separate calls on any thread count.
void gemv_many(const MatmulOutput* outputs, size_t count, const float* x, int threads) {
  constexpr int64_t kUnit = 8;
  // x prepared once per weight type (and, for 16-bit weights, layout). The caller's thread
  // keeps the buffers from call to call; the helpers reach them through these references
  // (naming a thread_local in the lambda would give each helper its own, empty one)
  thread_local std::vector<GemvInput> prepared_buffers;
  thread_local std::vector<const GemvInput*> input_buffer;
  thread_local std::vector<int64_t> first_unit_buffer, split_buffer, second_buffer;
  thread_local std::vector<float> second_sums_buffer;
  std::vector<GemvInput>& prepared = prepared_buffers;
  std::vector<const GemvInput*>& input = input_buffer;   // output i reads *input[i]
  std::vector<int64_t>& first_unit = first_unit_buffer;  // output i: units [first_unit[i], first_unit[i + 1])
  std::vector<int64_t>& split = split_buffer;            // output i: its rows' parts [0, split[i]), [split[i], K)
  std::vector<int64_t>& second = second_buffer;          // output i's second part: second_sums[second[i] ..]
  std::vector<float>& second_sums = second_sums_buffer;
  if (prepared.size() < count) prepared.resize(count);
  input.assign(count, nullptr);
  first_unit.assign(count + 1, 0);
  split.assign(count, 0);
  second.assign(count, 0);
  int64_t second_total = 0;
  int64_t bytes = 0;  // weights read
  for (size_t i = 0; i < count; ++i) {
    const WeightMatrix& w = *outputs[i].w;
    for (size_t j = 0; j < i && !input[i]; ++j) {
      const WeightMatrix& v = *outputs[j].w;
      const bool layout_free = w.type == WeightType::F32 || w.type == WeightType::Q8 || w.type == WeightType::Q4;
      if (v.type == w.type && (layout_free || v.layout == w.layout)) input[i] = input[j];
    }
    if (!input[i]) {
      prepare(w, x, prepared[i]);
      input[i] = &prepared[i];
    }
    split[i] = inout_split(w);
    const int64_t parts = split[i] < w.K ? 2 : 1;
    if (parts == 2) second[i] = second_total, second_total += w.N;
    first_unit[i + 1] = first_unit[i] + parts * ((w.N + kUnit - 1) / kUnit);
    bytes += int64_t(w.bytes());
  }
  second_sums.resize(size_t(second_total));
  const int64_t units = first_unit[count];
  // units [u0, u1) of every output they cross
  const auto run_units = [&](int64_t u0, int64_t u1) {
    for (size_t i = 0; i < count; ++i) {
      const int64_t a = std::max(u0, first_unit[i]), b = std::min(u1, first_unit[i + 1]);
      if (a >= b) continue;
      const WeightMatrix& w = *outputs[i].w;
      const int64_t per_part = (w.N + kUnit - 1) / kUnit;
      for (int64_t part = 0; part * per_part < first_unit[i + 1] - first_unit[i]; ++part) {
        const int64_t lo = std::max(a - first_unit[i], part * per_part) - part * per_part,
                      hi = std::min(b - first_unit[i], (part + 1) * per_part) - part * per_part;
        if (lo >= hi) continue;
        const int64_t n0 = lo * kUnit, n1 = std::min(w.N, hi * kUnit);
        if (part == 0) {
          gemv_columns(w, *input[i], 0, split[i], outputs[i].bias, outputs[i].y, n0, n1);
        } else {
          gemv_columns(w, *input[i], split[i], w.K, nullptr, second_sums.data() + second[i], n0, n1);
        }
      }
    }
  };
  threads = useful_threads(threads, units, bytes, kMinGemvBytesPerThread);
  if (threads <= 1) {
    run_units(0, units);
  } else {
    parallel_for(threads, threads,
                 [&](int64_t item, int) { run_units(units * item / threads, units * (item + 1) / threads); });
  }
  // y = (bias + the first part) + the second part, as the matrix product adds them (gemm.cpp)
  for (size_t i = 0; i < count; ++i) {
    if (split[i] == outputs[i].w->K) continue;
    const float* t = second_sums.data() + second[i];
    float* y = outputs[i].y;
    for (int64_t n = 0; n < outputs[i].w->N; ++n) y[n] += t[n];
  }
}

}  // namespace qkv::detail
