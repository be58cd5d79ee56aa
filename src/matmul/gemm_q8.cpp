// The matrix product over int8 weights (gemm_int8.hpp) for prefill, M > 1, in integers:
// y[M, N] = x[M, K] W + bias with x quantized to int16 per row and block of 32 and the
// int8 x int16 products summed exactly in int32 by i32x4.dot_i16x8_s (pmaddwd), one block at
// a time; each block's sum then goes into a float accumulator times its two scales. The 8-bit
// prefill (gemm_q8, below) widens each tile of the Q8 matrix into an int16 panel; the 4-bit one
// (gemm_q4.cpp) unpacks each tile of Q4 into one; both then run the same loops and micro-kernel.
//
//  x:  each row, per block of 32 (as the matrix-vector product quantizes its x, gemv_q8.cpp):
//      d = max|x| / 32767, xq = nearest(x / d) clamped to +-32767, so |x - d xq| <= d / 2 =
//      max|x_block| / 65534. Kept [M][Kp] int16, zeros past K.
//  W:  panels in Q8's layout (a group's 4 columns, its K in blocks of 16 k-pairs, each k-pair
//      (k, k+1) of column 0, 1, 2, 3) widened to int16, with the scales as floats worth
//      d_w * 2^-112 (gemm_int8.hpp), fetched a tile (kG groups) at a time from the PanelOf the
//      caller gives, into the thread's buffer: the widening and the scales' conversion are done
//      once per tile, where the kernel would redo them for every kR rows.
//  The micro-kernel: kR rows x kG groups (4 columns each). Per k-pair, kG 16-byte weight loads,
//      kR 4-byte loads of (xq[k], xq[k+1]) splatted to all 4 lanes (v128.load32_splat), kR x kG
//      dot products (each lane: one column's 2 products) and adds: the loads need no ALU, so
//      the dot products and adds are all its arithmetic (before, kG v128.load8x8_s widened the
//      int8 weights in the loop: 2 of 18 ALU ops per k-pair). Per block, each int32 sum goes to
//      float and accumulates sum * (d_w * d_x), the scales' product formed as gemv_q8 forms it
//      (d_w * 2^-112 times d_x * 2^112, held per row and block), so a row's result has the bits
//      the matrix-vector product gives that row.
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
#define QKV_GEMM_Q8_ROWS 4
#endif
#ifndef QKV_GEMM_Q8_GROUPS
#define QKV_GEMM_Q8_GROUPS 2
#endif
constexpr int kR = QKV_GEMM_Q8_ROWS;    // rows of a micro-tile
constexpr int kG = QKV_GEMM_Q8_GROUPS;  // groups of 4 columns of a micro-tile

// x quantized once per call, read by every thread
struct QuantizedRows {
  int64_t blocks = 0;        // Kp / 32
  std::vector<int16_t> q;    // [M][Kp]
  std::vector<float> scale;  // [M][blocks]: x ~= scale * q
  std::vector<float> wide;   // [M][blocks]: scale * 2^112
  bool wide_finite = true;   // no inf in `wide` (every |x| < ~2^31)
};

void quantize_rows(const float* x, int64_t M, int64_t K, QuantizedRows& out) {
  const int64_t blocks = (K + 31) / 32, Kp = blocks * 32;
  out.blocks = blocks;
  out.q.resize(size_t(M * Kp));
  out.scale.resize(size_t(M * blocks));
  out.wide.resize(size_t(M * blocks));
  out.wide_finite = true;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t b = 0; b < blocks; ++b) {
      // the block, read in place; the last, short one copied with zeros past K
      const int64_t n = std::min<int64_t>(32, K - b * 32);
      float tail[32];  // zeroed only when used: this loop runs for every row and block
      const float* xb = x + m * K + b * 32;
      if (n < 32) {
        std::fill(std::copy(xb, xb + n, tail), tail + 32, 0.0f);
        xb = tail;
      }
      const float d = block_amax(xb) / 32767.0f;
      const float inv = d > 0.0f ? 1.0f / d : 0.0f;
      int16_t* q = out.q.data() + m * Kp + b * 32;
#ifndef QKV_NO_SIMD
      // as prepare_q8 (x_int16.hpp)
      const __m128 vinv = _mm_set1_ps(inv);
      for (int i = 0; i < 32; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), round_to_i16x8(xb + i, vinv));
#else
      for (int i = 0; i < 32; ++i) q[i] = round_to_i16(xb[i], inv);
#endif
      out.scale[size_t(m * blocks + b)] = d;
      out.wide[size_t(m * blocks + b)] = d * halves::kF16Scale;
      out.wide_finite = out.wide_finite && std::isfinite(out.wide[size_t(m * blocks + b)]);
    }
  }
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

// The plain loop over rows [m0, m0 + rows) and the panel's `groups` groups: the scalar build's
// kernel and the SIMD build's where x's folded scales overflow (|x| beyond ~2^31). The same
// operations per element as tile(): int32 block sums, exact, then acc += sum * (d_w * d_x).
__attribute__((noinline)) void tile_plain(const Int16Panel& panel, const QuantizedRows& xq, int rows, int groups,
                                          int64_t m0, float* acc) {
  const int64_t blocks = xq.blocks, Kp = blocks * 32;
  for (int r = 0; r < rows; ++r) {
    const int16_t* xr = xq.q.data() + (m0 + r) * Kp;
    for (int g = 0; g < groups; ++g) {
      for (int c = 0; c < 4; ++c) {
        float sum_f = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
          const int16_t* wb = panel.data + (g * blocks + b) * 128;
          int32_t sum = 0;
          for (int p = 0; p < 16; ++p)
            sum += int32_t(wb[p * 8 + c * 2]) * xr[b * 32 + 2 * p] +
                   int32_t(wb[p * 8 + c * 2 + 1]) * xr[b * 32 + 2 * p + 1];
          const float dw = panel.scales[(g * blocks + b) * 4 + c] * halves::kF16Scale;  // d_w, exactly
          sum_f += float(sum) * (dw * xq.scale[size_t((m0 + r) * blocks + b)]);
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

// acc[R][kG * 4] (rows kG * 4 apart) = the tile's sums, as tile_plain: R rows at xq rows m0..,
// G groups at wg (group g at wg + g * blocks * 128), their scales at sg (g * blocks * 4 apart)
template <int R, int G>
void tile(const int16_t* wg, const float* sg, int64_t blocks, const int16_t* xr, const float* sx, float* acc) {
  const int64_t Kp = blocks * 32;
  __m128 f[R][G];
  QKV_UNROLL
  for (int r = 0; r < R; ++r) {
    QKV_UNROLL
    for (int g = 0; g < G; ++g) f[r][g] = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const int16_t* wb = wg + b * 128;
    const int16_t* xb = xr + b * 32;
    // the block's first k-pair starts its sums (no zeroing, no add)
    __m128i s[R][G];
    {
      __m128i wv[G], xv[R];
      QKV_UNROLL
      for (int g = 0; g < G; ++g) wv[g] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + g * blocks * 128));
      QKV_UNROLL
      for (int r = 0; r < R; ++r) xv[r] = splat_pair(xb + r * Kp);
      QKV_UNROLL
      for (int r = 0; r < R; ++r) {
        QKV_UNROLL
        for (int g = 0; g < G; ++g) s[r][g] = _mm_madd_epi16(wv[g], xv[r]);
      }
    }
    // one k-pair per iteration, not unrolled: V8 schedules a block's loads ahead of its arithmetic,
    // so an unrolled body would hold every load of it live at once
    _Pragma("GCC unroll 1") for (int p = 1; p < 16; ++p) {
      __m128i wv[G], xv[R];
      QKV_UNROLL
      for (int g = 0; g < G; ++g)
        wv[g] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + g * blocks * 128 + p * 8));
      QKV_UNROLL
      for (int r = 0; r < R; ++r) xv[r] = splat_pair(xb + r * Kp + 2 * p);
      QKV_UNROLL
      for (int r = 0; r < R; ++r) {
        QKV_UNROLL
        for (int g = 0; g < G; ++g) s[r][g] = _mm_add_epi32(s[r][g], _mm_madd_epi16(wv[g], xv[r]));
      }
    }
    QKV_UNROLL
    for (int g = 0; g < G; ++g) {
      const __m128 dw = _mm_loadu_ps(sg + (g * blocks + b) * 4);  // d_w * 2^-112, with its sign
      QKV_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m128 d = _mm_mul_ps(dw, _mm_set1_ps(sx[r * blocks + b]));
        f[r][g] = _mm_add_ps(f[r][g], _mm_mul_ps(_mm_cvtepi32_ps(s[r][g]), d));
      }
    }
  }
  QKV_UNROLL
  for (int r = 0; r < R; ++r) {
    QKV_UNROLL
    for (int g = 0; g < G; ++g) _mm_storeu_ps(acc + r * kG * 4 + g * 4, f[r][g]);
  }
}

// the tile's rows: kR, or fewer at the bottom edge
template <int G, int R = kR>
void tile_rows(int rows, const int16_t* wg, const float* sg, int64_t blocks, const int16_t* xr, const float* sx,
               float* acc) {
  if constexpr (R > 1) {
    if (rows < R) return tile_rows<G, R - 1>(rows, wg, sg, blocks, xr, sx, acc);
  }
  tile<R, G>(wg, sg, blocks, xr, sx, acc);
}
#endif

// y[:, 4 g0 .. 4 g1) (clipped to N) for all M rows (g0 a multiple of kG)
void gemm_int8_groups(const WeightMatrix& w, PanelOf panel_of, const QuantizedRows& xq, int64_t M, const float* bias,
                      float* y, int64_t g0, int64_t g1) {
  const int64_t blocks = xq.blocks, Kp = blocks * 32;
  float acc[kR * kG * 4];
  for (int64_t g = g0; g < g1; g += kG) {
    const int groups = int(std::min<int64_t>(kG, g1 - g));
    const Int16Panel panel = panel_of(w, g, groups);  // the tile's weights, used by all M rows from cache
    for (int64_t m0 = 0; m0 < M; m0 += kR) {
      const int rows = int(std::min<int64_t>(kR, M - m0));
#ifndef QKV_NO_SIMD
      if (xq.wide_finite) {
        const int16_t* wg = panel.data;
        const float* sg = panel.scales;
        const int16_t* xr = xq.q.data() + m0 * Kp;
        const float* sx = xq.wide.data() + m0 * blocks;
        if (groups == kG) {
          tile_rows<kG>(rows, wg, sg, blocks, xr, sx, acc);
        } else {  // the last groups, one at a time
          for (int i = 0; i < groups; ++i)
            tile_rows<1>(rows, wg + i * blocks * 128, sg + i * blocks * 4, blocks, xr, sx, acc + i * 4);
        }
      } else {
        tile_plain(panel, xq, rows, groups, m0, acc);
      }
#else
      tile_plain(panel, xq, rows, groups, m0, acc);
#endif
      store_tile(acc, rows, groups, m0, g, bias, y, w.N);
    }
  }
}

// Q8's panel for groups [g, g + count): the stored int8 values and half scales, widened
Int16Panel q8_panel(const WeightMatrix& w, int64_t g, int count) {
  const int64_t blocks = (w.K + 31) / 32;
  thread_local std::vector<int16_t> data;  // [count][blocks][16 k-pairs][4 columns][2]
  thread_local std::vector<float> scales;  // [count][blocks][4]
  data.resize(size_t(count * blocks * 128));
  scales.resize(size_t(count * blocks * 4));
  widen_int8(static_cast<const int8_t*>(w.data) + g * blocks * 128, count * blocks * 128, data.data());
  widen_scales(w.scales + g * blocks * 4, count * blocks * 4, scales.data());
  return {data.data(), scales.data()};
}

}  // namespace

void widen_int8(const int8_t* q, int64_t n, int16_t* out) {
  int64_t i = 0;
#ifndef QKV_NO_SIMD
  for (; i + 16 <= n; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_cvtepi8_epi16(v));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 8), _mm_cvtepi8_epi16(_mm_srli_si128(v, 8)));
  }
#endif
  for (; i < n; ++i) out[i] = q[i];
}

void widen_scales(const uint16_t* h, int64_t n, float* out) {
  int64_t i = 0;
#ifndef QKV_NO_SIMD
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(out + i, halves::halves_low(h + i));
#endif
  // the same value: a normal half (or 0) times 2^-112 is a normal float (or 0), exactly
  for (; i < n; ++i) out[i] = halves::f16_to_f32(h[i]) / halves::kF16Scale;
}

void gemm_int8(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int threads,
               PanelOf panel_of) {
  if (M <= 0) return;
  thread_local QuantizedRows mine;
  // the caller's rows, which every worker reads during the parallel_for (a lambda names a
  // thread_local directly, so each worker would read its own, empty, one: capture a reference)
  QuantizedRows& xq = mine;
  quantize_rows(x, M, w.K, xq);
  const int64_t groups = (w.N + 3) / 4, tiles = (groups + kG - 1) / kG;
  threads = useful_threads(threads, tiles, M * w.K * w.N, kMinWorkPerThread);
  if (threads <= 1) return gemm_int8_groups(w, panel_of, xq, M, bias, y, 0, groups);
  // work items: runs of whole tiles, 4 per thread (the parts balance over the threads)
  const int64_t items = std::min<int64_t>(tiles, int64_t(threads) * 4);
  parallel_for(items, threads, [&](int64_t item, int) {
    const int64_t g0 = std::min(groups, tiles * item / items * kG),
                  g1 = std::min(groups, tiles * (item + 1) / items * kG);
    if (g0 < g1) gemm_int8_groups(w, panel_of, xq, M, bias, y, g0, g1);
  });
}

void gemm_q8(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int threads) {
  gemm_int8(w, x, M, bias, y, threads, q8_panel);
}

}  // namespace qkv::detail
