// The matrix product over int8 weight panels (gemm_int8.hpp) for prefill, M > 1, in integers:
// y[M, N] = x[M, K] W + bias with x quantized to int16 per row and block of 32 and the
// int8 x int16 products summed exactly in int32 by i32x4.dot_i16x8_s (pmaddwd), one block at
// a time; each block's sum then goes into a float accumulator times its two scales. The 8-bit
// prefill (gemm_q8, below) reads the Q8 matrix as its panels; the 4-bit one (gemm_q4.cpp)
// unpacks each tile of Q4 into a panel first, then runs the same loops and micro-kernel.
//
//  x:  each row, per block of 32 (as the matrix-vector product quantizes its x, gemv_q8.cpp):
//      d = max|x| / 32767, xq = nearest(x / d) clamped to +-32767, so |x - d xq| <= d / 2 =
//      max|x_block| / 65534. Kept [M][Kp] int16, zeros past K.
//  W:  int8 panels in Q8's layout (a group's 4 columns, its K in blocks of 16 k-pairs, each
//      k-pair 8 bytes: (k, k+1) of column 0, 1, 2, 3), fetched a tile (kG groups) at a time
//      from the PanelOf the caller gives: Q8's are the matrix as stored, nothing packed.
//  The micro-kernel: kR rows x kG groups (4 columns each). Per k-pair, kG 8-byte weight loads
//      widened to int16 (v128.load8x8_s), kR 4-byte loads of (xq[k], xq[k+1]) splatted to all 4
//      lanes (v128.load32_splat), kR x kG dot products (each lane: one column's 2 products) and
//      adds. Per block, each int32 sum goes to float and accumulates sum * (d_w * d_x), the
//      scales' product formed as gemv_q8 forms it (d_w's half shifted into a float worth
//      d_w * 2^-112 with its sign, d_x * 2^112 held per row and block), so a row's result has
//      the bits the matrix-vector product gives that row.
//  Loops: the thread's groups, kG at a time (their weights, kG * Kp bytes, stay in L1), then
//      all rows, kR at a time (x from L2): each weight is loaded M / kR times, from L1.
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
      float xb[32] = {};
      const int64_t n = std::min<int64_t>(32, K - b * 32);
      std::copy(x + m * K + b * 32, x + m * K + b * 32 + n, xb);
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float d = amax / 32767.0f;
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
__attribute__((noinline)) void tile_plain(const Int8Panel& panel, const QuantizedRows& xq, int rows, int groups,
                                          int64_t m0, float* acc) {
  const int64_t blocks = xq.blocks, Kp = blocks * 32;
  for (int r = 0; r < rows; ++r) {
    const int16_t* xr = xq.q.data() + (m0 + r) * Kp;
    for (int g = 0; g < groups; ++g) {
      for (int c = 0; c < 4; ++c) {
        float sum_f = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
          const int8_t* wb = panel.data + (g * blocks + b) * 128;
          int32_t sum = 0;
          for (int p = 0; p < 16; ++p)
            sum += int32_t(wb[p * 8 + c * 2]) * xr[b * 32 + 2 * p] +
                   int32_t(wb[p * 8 + c * 2 + 1]) * xr[b * 32 + 2 * p + 1];
          const float dw = halves::f16_to_f32(panel.scales[(g * blocks + b) * 4 + c]);
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
void tile(const int8_t* wg, const uint16_t* sg, int64_t blocks, const int16_t* xr, const float* sx, float* acc) {
  const int64_t Kp = blocks * 32;
  __m128 f[R][G];
  QKV_UNROLL
  for (int r = 0; r < R; ++r) {
    QKV_UNROLL
    for (int g = 0; g < G; ++g) f[r][g] = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    __m128i s[R][G];
    QKV_UNROLL
    for (int r = 0; r < R; ++r) {
      QKV_UNROLL
      for (int g = 0; g < G; ++g) s[r][g] = _mm_setzero_si128();
    }
    const int8_t* wb = wg + b * 128;
    const int16_t* xb = xr + b * 32;
    // one k-pair per iteration, not unrolled: V8 schedules a block's loads ahead of its arithmetic,
    // so an unrolled body would hold every load of it live at once
    _Pragma("GCC unroll 1") for (int p = 0; p < 16; ++p) {
      __m128i wv[G], xv[R];
      QKV_UNROLL
      for (int g = 0; g < G; ++g)
        wv[g] = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb + g * blocks * 128 + p * 8)));
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
      const __m128 dw = halves::halves_low(sg + (g * blocks + b) * 4);  // d_w * 2^-112, with its sign
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
void tile_rows(int rows, const int8_t* wg, const uint16_t* sg, int64_t blocks, const int16_t* xr, const float* sx,
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
    const Int8Panel panel = panel_of(w, g, groups);  // the tile's weights, used by all M rows from L1
    for (int64_t m0 = 0; m0 < M; m0 += kR) {
      const int rows = int(std::min<int64_t>(kR, M - m0));
#ifndef QKV_NO_SIMD
      if (xq.wide_finite) {
        const int8_t* wg = panel.data;
        const uint16_t* sg = panel.scales;
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

// Q8's panels: the matrix as stored
Int8Panel q8_panel(const WeightMatrix& w, int64_t g, int /*count*/) {
  const int64_t blocks = (w.K + 31) / 32;
  return {static_cast<const int8_t*>(w.data) + g * blocks * 128, w.scales + g * blocks * 4};
}

}  // namespace

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
