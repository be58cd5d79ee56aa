// Matrix products for prefill: y[M, N] = x[M, K] W + bias, M > 1, blocked and packed.
//
// The loops, after BLIS (Goto's algorithm), sized for one core's caches and 16 vector registers:
//   for each block of <= kNC output columns (a thread's work item):
//     for each block of kKC rows of W (pc):
//       pack W[pc : pc+kc, cols] into float panels of kNR columns, [kc][kNR] each (16 KB: L1),
//         widening F16/BF16 and dequantizing Q8 on the way: each weight is decoded once per
//         call and then used by all M rows;
//       pack x[:, pc : pc+kc] into row blocks of kMR, [kc][kMR] each;
//       for each panel, for each row block: the micro-kernel adds a kMR x kNR tile of
//         products into y, its kMR x kNV accumulators held in registers across the kc rows.
// The micro-kernel is kMR rows x kNV vectors, its multiply-add simd::madd (simd_madd.hpp).
// Plain SIMD build: 2 rows x 4 vectors (16 columns in wasm), 8 chains, 4 loads and 2
// broadcasts per k. Measured in Node 20 (GPT-2-small shapes, M = 32 / 128 / 512, builds
// alternating, CPU time), 2 x 4 against 3 x 3: plain +0-1% / +2-9% / +5-6%. Larger tiles spill
// in V8: TurboFan schedules all loads of a block before its arithmetic, so R x NV keeps
// R*NV + NV + R vectors live (plus the products of a mul + add), and x64 V8 has 15 xmm
// registers to give (2 x 6: 5 accumulators stored and reloaded every k).
// Relaxed SIMD build: 6 rows x 2 vectors (8 columns), 12 fused chains, 2 loads and 6
// broadcasts per k: 12 + 2 + 1 live vectors, as a fused madd needs no product register. In
// Chromium 156 (V8 15), relaxed/plain per M: 6 x 2 1.19 / 1.25-1.28 / 1.27-1.29, 2 x 4
// 1.16-1.20 / 1.19-1.22 / 1.19-1.21; 5 x 2, 3 x 3, 4 x 2 between; 7 x 2, 2 x 5, 2 x 6, 3 x 4,
// 4 x 3 slower. Node 20's V8 11 runs 6 x 2 8-13% slower than 2 x 4 (its relaxed SIMD is behind
// a flag there). Unrolling k by hand puts more loads in one block (7-25% slower in both V8s);
// LLVM's own unrolling keeps an exit test, so a block, per k. README "The relaxed-SIMD build".
// QKV_GEMM_MR / QKV_GEMM_NV override the tile (for such measurements).
// Every y element adds its products in k order in any split, so the thread count changes no bit
// (a float InOut W: in k order within each of its two parts, matmul.hpp's inout_split).
// The tile and block sizes are in gemm_parts.hpp, the packing of W in gemm_pack.cpp.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "matmul/gemm_parts.hpp"
#include "matmul/gemm_q4.hpp"
#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"
#include "simd.hpp"  // and simd_madd.hpp
#include "thread_pool.hpp"

#ifndef QKV_NO_SIMD
#include <smmintrin.h>
#endif

namespace qkv::detail {
namespace {

// Where a micro-tile's sums start and end: from c (from_zero false) or from zero; back into c
// (sum_into null) or added to sum_into's tile (rows ld_into apart) as sum_into + acc
struct TileEnds {
  bool from_zero = false;
  float* sum_into = nullptr;
  int64_t ld_into = 0;
};

// c[R][kNR] += a[kc][R] b[kc][kNR] (or as `ends` says): a and b packed, c rows ldc apart
template <int R>
void micro_kernel(const float* a, const float* b, int64_t kc, float* c, int64_t ldc, const TileEnds& ends) {
  V acc[R][kNV];
  QKV_UNROLL
  for (int r = 0; r < R; ++r) {
    QKV_UNROLL
    for (int v = 0; v < kNV; ++v) acc[r][v] = ends.from_zero ? V(0.0f) : simd::load<V>(c + r * ldc + v * kW);
  }
  for (int64_t k = 0; k < kc; ++k, a += R, b += kNR) {
    V bk[kNV];
    QKV_UNROLL
    for (int v = 0; v < kNV; ++v) bk[v] = simd::load<V>(b + v * kW);
    QKV_UNROLL
    for (int r = 0; r < R; ++r) {
      const V ar = simd::splat<V>(a[r]);
      QKV_UNROLL
      for (int v = 0; v < kNV; ++v) acc[r][v] = simd::madd(ar, bk[v], acc[r][v]);
    }
  }
  if (ends.sum_into) {
    QKV_UNROLL
    for (int r = 0; r < R; ++r) {
      float* out = ends.sum_into + r * ends.ld_into;
      QKV_UNROLL
      for (int v = 0; v < kNV; ++v) simd::store(out + v * kW, simd::load<V>(out + v * kW) + acc[r][v]);
    }
    return;
  }
  QKV_UNROLL
  for (int r = 0; r < R; ++r) {
    QKV_UNROLL
    for (int v = 0; v < kNV; ++v) simd::store(c + r * ldc + v * kW, acc[r][v]);
  }
}

// the tile's rows: kMR, or fewer at the bottom edge
template <int R = kMR>
void micro(int rows, const float* a, const float* b, int64_t kc, float* c, int64_t ldc, const TileEnds& ends) {
  if constexpr (R > 1) {
    if (rows < R) return micro<R - 1>(rows, a, b, kc, c, ldc, ends);
  }
  micro_kernel<R>(a, b, kc, c, ldc, ends);
}

// x[:, k0 : k1] -> row blocks of kMR (the last may be shorter), each [k1 - k0][rows]. The wasm
// tiles' blocks go 4 columns at a time: two rows with vector zips, six (the relaxed tile's) with
// a 4 x 4 transpose and a zip; the plain loop with 64-bit indices became emulated i64x2
// multiplies in wasm, ~4% of a 512-row product.
void pack_x(const float* x, int64_t M, int64_t K, int64_t k0, int64_t k1, float* out) {
  const int64_t kc = k1 - k0;
  for (int64_t m0 = 0; m0 < M; m0 += kMR) {
    const int rows = int(std::min<int64_t>(kMR, M - m0));
    const float* src = x + m0 * K + k0;
    float* dst = out + m0 * kc;
    int64_t k = 0;
#ifndef QKV_NO_SIMD
    if (rows == 2) {  // dst = [x0[k] x1[k] x0[k+1] x1[k+1] ...]
      for (; k + kW <= kc; k += kW) {
        const V r0 = simd::load<V>(src + k), r1 = simd::load<V>(src + K + k);
        simd::store(dst + 2 * k, xsimd::zip_lo(r0, r1));
        simd::store(dst + 2 * k + kW, xsimd::zip_hi(r0, r1));
      }
    } else if (rows == 6 && kW == 4) {
      // dst = [x0[k] .. x5[k] x0[k+1] ...]: rows 0-3 transposed 4 x 4, rows 4-5 zipped
      for (; k + 4 <= kc; k += 4) {
        __m128 r0 = _mm_loadu_ps(src + k), r1 = _mm_loadu_ps(src + K + k), r2 = _mm_loadu_ps(src + 2 * K + k),
               r3 = _mm_loadu_ps(src + 3 * K + k);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);  // r_i = x0..3 at k + i
        const __m128 r4 = _mm_loadu_ps(src + 4 * K + k), r5 = _mm_loadu_ps(src + 5 * K + k);
        const __m128 lo = _mm_unpacklo_ps(r4, r5), hi = _mm_unpackhi_ps(r4, r5);  // x4 x5 at k, k+1 | k+2, k+3
        float* d = dst + 6 * k;
        _mm_storeu_ps(d, r0), _mm_storel_pi(reinterpret_cast<__m64*>(d + 4), lo);
        _mm_storeu_ps(d + 6, r1), _mm_storeh_pi(reinterpret_cast<__m64*>(d + 10), lo);
        _mm_storeu_ps(d + 12, r2), _mm_storel_pi(reinterpret_cast<__m64*>(d + 16), hi);
        _mm_storeu_ps(d + 18, r3), _mm_storeh_pi(reinterpret_cast<__m64*>(d + 22), hi);
      }
    }
#endif
    for (; k < kc; ++k) {
      for (int r = 0; r < rows; ++r) dst[k * rows + r] = src[r * K + k];
    }
  }
}

// ------------------------------------------------------------------ one work item

// y[:, j0 : j1] = bias + x W[:, j0 : j1]; a float InOut W in two parts of its rows (inout_split):
// the first added to bias in y, the second summed from zero apart (in `second`, [M][cols], when
// it takes more than one block of rows), its last block's sums then added to y
void gemm_columns(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int64_t j0,
                  int64_t j1) {
  const int64_t K = w.K, N = w.N, cols = j1 - j0, count = (cols + kNR - 1) / kNR, split = inout_split(w);
  thread_local std::vector<float> panels, xs, line, second;
  panels.resize(size_t(count * kKC * kNR));
  xs.resize(size_t(M * std::min(K, kKC)));
  for (int64_t m = 0; m < M; ++m) {
    float* row = y + m * N;
    if (bias) {
      std::copy(bias + j0, bias + j1, row + j0);
    } else {
      std::fill(row + j0, row + j1, 0.0f);
    }
  }
  // out[m * ld + j - j0] += x[m, kb : ke] W[kb : ke, j] for j in [j0, j1), in blocks of about
  // equal length, a multiple of 8 rows of W (Q8's k-pairs, the 16-bit packing's 8) up to kKC.
  // apart: the sums start from zero, and the last block's go to y (y + sums) rather than out
  const auto add_rows = [&](int64_t kb, int64_t ke, float* out, int64_t ld, bool apart) {
    const int64_t blocks = (ke - kb + kKC - 1) / kKC, step = ((ke - kb + blocks - 1) / blocks + 7) / 8 * 8;
    for (int64_t k0 = kb; k0 < ke; k0 += step) {
      const int64_t k1 = std::min(ke, k0 + step), kc = k1 - k0;
      pack_w(w, k0, k1, j0, j1, panels.data(), line);
      pack_x(x, M, K, k0, k1, xs.data());
      for (int64_t p = 0; p < count; ++p) {
        const float* b = panels.data() + p * kc * kNR;
        const int64_t c0 = p * kNR, n = std::min<int64_t>(kNR, cols - c0);
        for (int64_t m0 = 0; m0 < M; m0 += kMR) {
          const int rows = int(std::min<int64_t>(kMR, M - m0));
          const float* a = xs.data() + m0 * kc;
          float* c = out + m0 * ld + c0;
          float* yc = y + m0 * N + j0 + c0;
          TileEnds ends;
          ends.from_zero = apart && k0 == kb;
          if (apart && k1 == ke) ends.sum_into = yc, ends.ld_into = N;
          if (n == kNR) {
            micro(rows, a, b, kc, c, ld, ends);
          } else {  // the last, narrower panel: through a full-width tile
            float tile[kMR * kNR] = {};
            if (!ends.from_zero)
              for (int r = 0; r < rows; ++r) std::copy(c + r * ld, c + r * ld + n, tile + r * kNR);
            micro(rows, a, b, kc, tile, kNR, TileEnds{});
            for (int r = 0; r < rows; ++r) {
              for (int64_t j = 0; j < n; ++j) {
                if (ends.sum_into) {
                  yc[r * N + j] = yc[r * N + j] + tile[r * kNR + j];
                } else {
                  c[r * ld + j] = tile[r * kNR + j];
                }
              }
            }
          }
        }
      }
    }
  };
  add_rows(0, split, y + j0, N, false);
  if (split == K) return;
  if (K - split <= kKC) return add_rows(split, K, y + j0, N, true);  // one block: from zero straight into y
  second.resize(size_t(M * cols));                                   // the blocks before the last sum into it
  add_rows(split, K, second.data(), cols, true);
}

}  // namespace

void gemm(const WeightMatrix& w, const float* x, int64_t M, const float* bias, float* y, int threads) {
  if (M <= 0) return;
  // work items: runs of whole panels, at most kNC columns, and a multiple of the thread count
  const int64_t panels = (w.N + kNR - 1) / kNR;
  threads = useful_threads(threads, panels, M * w.K * w.N, kMinWorkPerThread);
  int64_t items = (panels * kNR + kNC - 1) / kNC;
  if (threads > 1) items = (std::max<int64_t>(items, threads) + threads - 1) / threads * threads;
  items = std::min(items, panels);
  const auto columns = [&](int64_t item, int) {
    const int64_t j0 = std::min(w.N, panels * item / items * kNR);
    const int64_t j1 = std::min(w.N, panels * (item + 1) / items * kNR);
    if (j0 < j1) gemm_columns(w, x, M, bias, y, j0, j1);
  };
  if (threads <= 1) {
    for (int64_t i = 0; i < items; ++i) columns(i, 0);
  } else {
    parallel_for(items, threads, columns);
  }
}

}  // namespace qkv::detail
