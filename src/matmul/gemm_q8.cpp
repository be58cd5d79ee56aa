// The matrix product over int8 weights (gemm_int8.hpp) for prefill, M > 1, in integers:
// y[M, N] = x[M, K] W + bias with x quantized to int16 per row and block of 32 and the
// int8 x int16 products summed exactly in int32 by i32x4.dot_i16x8_s (pmaddwd), one block at
// a time; each block's sum then goes into a float accumulator times its two scales. The 8-bit
// prefill (gemm_q8, below) widens each tile of the Q8 matrix into an int16 panel; the 4-bit one
// (gemm_q4.cpp) unpacks each tile of Q4 into one; both then run the same loops and micro-kernel.
//
//  x:  each row, per block of 32 (as the matrix-vector product quantizes its x, gemv_q8.cpp):
//      d = max|x| / 32767, xq = nearest(x / d) clamped to +-32767, so |x - d xq| <= d / 2 =
//      max|x_block| / 65534. Kept in sets of kR rows, [sets][Kp/2 k-pairs][kR rows][2] int16,
//      zeros past K and in the last set's padding rows.
//  W:  panels of a tile's kG groups widened to int16, the groups' k-pairs side by side (a group's
//      k-pair as Q8 stores it: (k, k+1) of column 0, 1, 2, 3), with the scales as floats worth
//      d_w * 2^-112 (gemm_int8.hpp), fetched a tile at a time from the PanelOf the caller gives,
//      into the thread's buffer: the widening and the scales' conversion are done once per tile,
//      where the kernel would redo them for every set of rows.
//  The micro-kernel: kR = 2 rows x kG = 4 groups (16 columns). Per k-pair, kG 16-byte weight
//      loads, kR 4-byte loads of (xq[k], xq[k+1]) splatted to all 4 lanes (v128.load32_splat),
//      kR x kG dot products (each lane: one column's 2 products) and adds: the loads need no
//      ALU, so the dot products and adds are all its arithmetic. The weights and the rows' pairs
//      are each read at one pointer plus constants (2 pointer increments per k-pair, no address
//      arithmetic per load). Per block, each int32 sum goes to float and accumulates sum * (d_w *
//      d_x), the scales' product formed as gemv_q8 forms it (d_w * 2^-112 times d_x * 2^112, held
//      per row and block), so a row's result has the bits the matrix-vector product gives that row.
//  Loops: the thread's groups, kG at a time (their panel, kG * Kp * 8 bytes, in L1 or L2), then
//      all rows, kR at a time (x from L2): each weight is loaded M / kR times, from cache.
// Every y element sums its blocks in k order in any split: the thread count changes no bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "matmul/gemm_int8.hpp"
#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"
#include "matmul/x_int16.hpp"
#include "simd.hpp"
#include "thread_pool.hpp"

#ifndef QKV_NO_SIMD
#include <smmintrin.h>  // SSE4.1: Emscripten lowers these to SIMD128
#endif

namespace qkv::detail {
namespace {

#ifndef QKV_GEMM_Q8_ROWS
#define QKV_GEMM_Q8_ROWS 2
#endif
#ifndef QKV_GEMM_Q8_GROUPS
#define QKV_GEMM_Q8_GROUPS 4
#endif
constexpr int kR = QKV_GEMM_Q8_ROWS;    // rows of a micro-tile
constexpr int kG = QKV_GEMM_Q8_GROUPS;  // groups of 4 columns of a micro-tile

// x quantized once per call, read by every thread. Rows in sets of kR (the last set padded with
// zero rows), each set's k-pairs side by side, so that the micro-kernel reads a set's kR pairs
// at one pointer: q [sets][Kp/2 k-pairs][kR rows][2], scale and wide [sets][blocks][kR].
struct QuantizedRows {
  int64_t blocks = 0;        // Kp / 32
  std::vector<int16_t> q;    // [sets][Kp/2][kR][2]
  std::vector<float> scale;  // [sets][blocks][kR]: x ~= scale * q (0 for a padding row)
  std::vector<float> wide;   // [sets][blocks][kR]: scale * 2^112
  bool wide_finite = true;   // no inf in `wide` (every |x| < ~2^31)
};

void quantize_rows(const float* x, int64_t M, int64_t K, float limit, QuantizedRows& out, int threads) {
  const int64_t blocks = (K + 31) / 32, Kp = blocks * 32, sets = (M + kR - 1) / kR;
  out.blocks = blocks;
  out.q.resize(size_t(sets * kR * Kp));
  out.scale.resize(size_t(sets * kR * blocks));
  out.wide.resize(size_t(sets * kR * blocks));
  static const float zeros[32] = {};
  // every place written once: the rows, then the last set's padding rows as blocks of zeros;
  // sets [s0, s1) per call, the calls split over the threads
  const auto round_sets = [&](int64_t s0, int64_t s1) {
    bool finite = true;
    for (int64_t m = s0 * kR; m < s1 * kR; ++m) {
      const int64_t set = m / kR, r = m % kR;
      for (int64_t b = 0; b < blocks; ++b) {
        // the block, read in place; the last, short one copied with zeros past K
        const int64_t n = m < M ? std::min<int64_t>(32, K - b * 32) : 32;
        float tail[32];  // zeroed only when used: this loop runs for every row and block
        const float* xb = m < M ? x + m * K + b * 32 : zeros;
        if (n < 32) {
          std::fill(std::copy(xb, xb + n, tail), tail + 32, 0.0f);
          xb = tail;
        }
        int16_t q[32];
        const float d = round_block(xb, limit, q);  // as prepare_q8
        // k-pair p of the block to its place among the set's rows
        int16_t* dst = out.q.data() + ((set * blocks + b) * 16 * kR + r) * 2;
        for (int p = 0; p < 16; ++p) std::memcpy(dst + p * kR * 2, q + 2 * p, 4);
        const size_t at = size_t((set * blocks + b) * kR + r);
        out.scale[at] = d;
        out.wide[at] = d * halves::kF16Scale;
        finite = finite && std::isfinite(out.wide[at]);
      }
    }
    return finite;
  };
  out.wide_finite = round_rows(sets, kR * K, threads, round_sets);
}

// y[m, n] = bias[n] + sum over blocks of sum_b * (d_w * d_x): what each kernel below computes
// for rows [m0, m0 + rows) and groups [g0, g0 + groups), clipped to N
inline void store_tile(const float* acc, int rows, int groups, int64_t m0, int64_t g0, const float* bias, float* y,
                       int64_t N) {
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < groups * 4 && (g0 * 4 + c) < N; ++c) {
      const int64_t n = g0 * 4 + c;
      y[(m0 + r) * N + n] = acc[r * kG * 4 + c] + (bias ? bias[n] : 0.0f);
    }
  }
}

// The plain loop over the row set `set` and the panel's `groups` groups: the scalar build's
// kernel and the SIMD build's where x's folded scales overflow (|x| beyond ~2^31). The same
// operations per element as tile(): int32 block sums, exact, then acc += sum * (d_w * d_x).
__attribute__((noinline)) void tile_plain(const Int16Panel& panel, const QuantizedRows& xq, int groups, int64_t set,
                                          float* acc) {
  const int64_t blocks = xq.blocks;
  for (int r = 0; r < kR; ++r) {
    for (int g = 0; g < groups; ++g) {
      for (int c = 0; c < 4; ++c) {
        float sum_f = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
          int32_t sum = 0;
          for (int p = 0; p < 16; ++p) {
            const int16_t* wp = panel.data + ((b * 16 + p) * groups + g) * 8 + c * 2;
            const int16_t* xp = xq.q.data() + (((set * blocks + b) * 16 + p) * kR + r) * 2;
            sum += int32_t(wp[0]) * xp[0] + int32_t(wp[1]) * xp[1];
          }
          const float dw = panel.scales[(b * groups + g) * 4 + c] * halves::kF16Scale;  // d_w, exactly
          sum_f += float(sum) * (dw * xq.scale[size_t((set * blocks + b) * kR + r)]);
        }
        acc[r * kG * 4 + g * 4 + c] = sum_f;
      }
    }
  }
}

#ifndef QKV_NO_SIMD
inline __m128i splat_pair(const int16_t* p) {  // (p[0], p[1]) in all 4 lanes: v128.load32_splat
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm_set1_epi32(v);
}

// acc[kR][kG * 4] = the tile's sums, as tile_plain: kR rows (one set: its k-pairs at x, its
// folded scales at sx), G groups (the panel at w, [blocks][16][G][8], scales at sw, [blocks][G][4]).
// Both walk forward through one pointer each, so every load's address is that pointer plus a
// constant.
template <int G>
void tile(const int16_t* w, const float* sw, int64_t blocks, const int16_t* x, const float* sx, float* acc) {
  constexpr int R = kR;
  __m128 f[R][G];
  QKV_UNROLL
  for (int r = 0; r < R; ++r) {
    QKV_UNROLL
    for (int g = 0; g < G; ++g) f[r][g] = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    // the block's first k-pair starts its sums (no zeroing, no add)
    __m128i s[R][G];
    {
      __m128i wv[G], xv[R];
      QKV_UNROLL
      for (int g = 0; g < G; ++g) wv[g] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + g * 8));
      QKV_UNROLL
      for (int r = 0; r < R; ++r) xv[r] = splat_pair(x + r * 2);
      QKV_UNROLL
      for (int r = 0; r < R; ++r) {
        QKV_UNROLL
        for (int g = 0; g < G; ++g) s[r][g] = _mm_madd_epi16(wv[g], xv[r]);
      }
    }
    w += G * 8;
    x += R * 2;
    // one k-pair per iteration, not unrolled: V8 schedules a block's loads ahead of its arithmetic,
    // so an unrolled body would hold every load of it live at once (V8 unrolls the loop itself).
    // The pointers go through opaque() so that they stay pointers (simd.hpp): the same code in
    // one process, M = 128, K = 768, N = 2304, 12 passes each: 0.84-0.97x the time, median 0.91
    const int16_t* const block_end = w + 15 * G * 8;
    _Pragma("GCC unroll 1") for (; w < block_end;) {
      __m128i wv[G], xv[R];
      QKV_UNROLL
      for (int g = 0; g < G; ++g) wv[g] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + g * 8));
      QKV_UNROLL
      for (int r = 0; r < R; ++r) xv[r] = splat_pair(x + r * 2);
      QKV_UNROLL
      for (int r = 0; r < R; ++r) {
        QKV_UNROLL
        for (int g = 0; g < G; ++g) s[r][g] = _mm_add_epi32(s[r][g], _mm_madd_epi16(wv[g], xv[r]));
      }
      w += G * 8;
      x += R * 2;
      opaque(w);
      opaque(x);
    }
    QKV_UNROLL
    for (int g = 0; g < G; ++g) {
      const __m128 dw = _mm_loadu_ps(sw + g * 4);  // d_w * 2^-112, with its sign
      QKV_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m128 d = _mm_mul_ps(dw, _mm_set1_ps(sx[r]));
        f[r][g] = _mm_add_ps(f[r][g], _mm_mul_ps(_mm_cvtepi32_ps(s[r][g]), d));
      }
    }
    sw += G * 4;
    sx += R;
  }
  QKV_UNROLL
  for (int r = 0; r < R; ++r) {
    QKV_UNROLL
    for (int g = 0; g < G; ++g) _mm_storeu_ps(acc + r * kG * 4 + g * 4, f[r][g]);
  }
}

// the tile's groups: kG, or fewer at the right edge
template <int G = kG>
void tile_groups(int groups, const int16_t* w, const float* sw, int64_t blocks, const int16_t* x, const float* sx,
                 float* acc) {
  if constexpr (G > 1) {
    if (groups < G) return tile_groups<G - 1>(groups, w, sw, blocks, x, sx, acc);
  }
  tile<G>(w, sw, blocks, x, sx, acc);
}
#endif

// y[:, 4 g0 .. 4 g1) (clipped to N) for all M rows (g0 a multiple of kG)
void gemm_int8_groups(const WeightMatrix& w, PanelOf panel_of, const QuantizedRows& xq, int64_t M, const float* bias,
                      float* y, int64_t g0, int64_t g1) {
  float acc[kR * kG * 4];
  for (int64_t g = g0; g < g1; g += kG) {
    const int groups = int(std::min<int64_t>(kG, g1 - g));
    const Int16Panel panel = panel_of(w, g, groups);  // the tile's weights, used by all M rows from cache
    for (int64_t set = 0; set * kR < M; ++set) {
      const int rows = int(std::min<int64_t>(kR, M - set * kR));  // the rest of the set is padding
#ifndef QKV_NO_SIMD
      if (xq.wide_finite) {
        const int64_t blocks = xq.blocks;
        tile_groups(groups, panel.data, panel.scales, blocks, xq.q.data() + set * kR * blocks * 32,
                    xq.wide.data() + set * kR * blocks, acc);
      } else {
        tile_plain(panel, xq, groups, set, acc);
      }
#else
      tile_plain(panel, xq, groups, set, acc);
#endif
      store_tile(acc, rows, groups, set * kR, g, bias, y, w.N);
    }
  }
}

// Q8's panel for groups [g, g + count): the stored int8 values and half scales, widened, the
// groups' k-pairs side by side (gemm_int8.hpp)
Int16Panel q8_panel(const WeightMatrix& w, int64_t g, int count) {
  const int64_t blocks = (w.K + 31) / 32;
  thread_local std::vector<int16_t> data;  // [blocks][16 k-pairs][count][4 columns][2]
  thread_local std::vector<float> scales;  // [blocks][count][4]
  data.resize(size_t(count * blocks * 128));
  scales.resize(size_t(count * blocks * 4));
  const int8_t* q = static_cast<const int8_t*>(w.data) + g * blocks * 128;  // [count][blocks][16][8]
  for (int i = 0; i < count; ++i) {
    widen_int8_pairs(q + i * blocks * 128, blocks * 16, data.data() + i * 8, count * 8);
    for (int64_t b = 0; b < blocks; ++b)
      widen_scales(w.scales + ((g + i) * blocks + b) * 4, 4, scales.data() + (b * count + i) * 4);
  }
  return {data.data(), scales.data()};
}

}  // namespace

void widen_int8_pairs(const int8_t* q, int64_t pairs, int16_t* out, int64_t stride) {
  int64_t p = 0;
#ifndef QKV_NO_SIMD
  for (; p + 2 <= pairs; p += 2) {  // two k-pairs per load
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + p * 8));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + p * stride), _mm_cvtepi8_epi16(v));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (p + 1) * stride), _mm_cvtepi8_epi16(_mm_srli_si128(v, 8)));
  }
#endif
  for (; p < pairs; ++p) {
    for (int e = 0; e < 8; ++e) out[p * stride + e] = q[p * 8 + e];
  }
}

void widen_scales(const uint16_t* h, int64_t n, float* out) {
  int64_t i = 0;
#ifndef QKV_NO_SIMD
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(out + i, halves::halves_low(h + i));
#endif
  // the same value: a normal half (or 0) times 2^-112 is a normal float (or 0), exactly
  for (; i < n; ++i) out[i] = halves::f16_to_f32(h[i]) / halves::kF16Scale;
}

void gemm_int8(const MatmulOutput* outputs, size_t count, const float* x, int64_t M, int threads, PanelOf panel_of,
               float x_limit) {
  if (M <= 0 || count == 0) return;
  const int64_t K = outputs[0].w->K;
  thread_local QuantizedRows mine;
  // the caller's rows, which every worker reads during the parallel_for (a lambda names a
  // thread_local directly, so each worker would read its own, empty, one: capture a reference)
  QuantizedRows& xq = mine;
  quantize_rows(x, M, K, x_limit, xq, threads);
  // every output's tiles of kG groups, end to end
  std::vector<int64_t> ends(count);
  int64_t work = 0;
  for (size_t i = 0; i < count; ++i) {
    const int64_t groups = (outputs[i].w->N + 3) / 4;
    ends[i] = (i ? ends[i - 1] : 0) + (groups + kG - 1) / kG;
    work += M * K * outputs[i].w->N;
  }
  threads = useful_threads(threads, ends.back(), work, kMinWorkPerThread);
  run_tiles(ends.data(), count, threads, [&](size_t i, int64_t t0, int64_t t1) {
    const MatmulOutput& o = outputs[i];
    const int64_t groups = (o.w->N + 3) / 4;
    gemm_int8_groups(*o.w, panel_of, xq, M, o.bias, o.y, t0 * kG, std::min(groups, t1 * kG));
  });
}

void gemm_q8_many(const MatmulOutput* outputs, size_t count, const float* x, int64_t M, int threads) {
  gemm_int8(outputs, count, x, M, threads, q8_panel, kXqLimit16);
}

}  // namespace qkv::detail
