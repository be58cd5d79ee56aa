// The 4-bit prefill with the relaxed int8 dot (the relaxed-SIMD builds, once the JS loader has
// found that the engine computes i32x4.relaxed_dot_i8x16_i7x16_add_s as the spec says):
// y[M, N] = x[M, K] W + bias for Q4 weights, x rounded to int8 per row and block of 32 as the
// decode rounds it then (prepare_q4, limit 127), one dot instruction per 4 columns, 4 k and row.
//
//  x:  [sets][blocks][8 quads][kR rows][4] int8, a quad's 4 bytes (k = 4q .. 4q + 3) of each
//      row side by side; per row and block 8 * sum(xq) (the nibbles' offset) and d_x * 2^112.
//  W:  a tile is one Q4 set (16 columns), its nibbles unpacked once per call into bytes
//      (0..15, valid 7-bit operands), [blocks][8 quads][4 groups][4 columns][4 k], and its
//      scales widened to d_w * 2^-112 (gemm_int8.hpp's widen_scales).
//  The micro-kernel: kR = 2 rows x 4 groups. Per quad, 4 loads of the tile's bytes, kR 4-byte
//      splats of x and 8 dot-adds (16 multiply-adds each); per block, each int32 sum less
//      8 * sum(xq), to float, times d_w * d_x, into a float accumulator: the exact int32 sums and
//      the float operations gemv_q4.cpp's q4_sets_dot makes, so a row gets the decode's bits.
// The int16 product (gemm_int8) does 2 ops (dot, add) per 8 multiply-adds and an unpack per
// tile into int16; this one 1 per 16.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "matmul/gemm_int8.hpp"
#include "matmul/gemm_q4.hpp"
#include "matmul/gemv_parts.hpp"
#include "matmul/halves.hpp"
#include "matmul/relaxed_dot.hpp"
#include "matmul/x_int16.hpp"
#include "simd.hpp"
#include "thread_pool.hpp"

namespace qkv::detail {

#if defined(QKV_RELAXED_SIMD) && !defined(QKV_NO_SIMD)
namespace {

constexpr int kR = 2;  // rows of a micro-tile (its columns: one set, 16)

// x rounded as prepare_q4 rounds it for the int8 dot, in sets of kR rows (zero rows pad the last)
struct Int8Rows {
  int64_t blocks = 0;
  std::vector<int8_t> q;      // [sets][blocks][8 quads][kR][4]
  std::vector<int32_t> sum8;  // [sets][blocks][kR]: 8 * the block's sum of xq
  std::vector<float> wide;    // [sets][blocks][kR]: d_x * 2^112
  bool wide_finite = true;    // no inf in `wide`
};

void quantize_rows8(const float* x, int64_t M, int64_t K, Int8Rows& out, int threads) {
  const int64_t blocks = (K + 31) / 32, sets = (M + kR - 1) / kR;
  out.blocks = blocks;
  out.q.resize(size_t(sets * blocks * 32 * kR));
  out.sum8.resize(size_t(sets * blocks * kR));
  out.wide.resize(size_t(sets * blocks * kR));
  // sets [s0, s1) per call, the calls split over the threads
  const auto round_sets = [&](int64_t s0, int64_t s1) {
    bool finite = true;
    for (int64_t m = s0 * kR; m < s1 * kR; ++m) {
      const int64_t set = m / kR, r = m % kR;
      for (int64_t b = 0; b < blocks; ++b) {
        float xb[32] = {};  // the block, zeros past K (and for the padding rows)
        if (m < M) std::copy(x + m * K + b * 32, x + m * K + std::min(K, b * 32 + 32), xb);
        int16_t q[32];
        const float d = round_block(xb, q4_x_limit(), q);  // as prepare_q4 (127 while the dot is on)
        int8_t* dst = out.q.data() + (set * blocks + b) * 32 * kR + r * 4;
        int32_t sum = 0;
        for (int i = 0; i < 32; ++i) {
          dst[(i / 4) * kR * 4 + i % 4] = int8_t(q[i]);  // |q| <= 127
          sum += q[i];
        }
        const size_t at = size_t((set * blocks + b) * kR + r);
        out.sum8[at] = 8 * sum;
        out.wide[at] = d * halves::kF16Scale;
        finite = finite && std::isfinite(out.wide[at]);
      }
    }
    return finite;
  };
  out.wide_finite = round_rows(sets, kR * K, threads, round_sets);
}

// set s of w unpacked for the micro-kernel, in the calling thread's buffers: bytes
// [blocks][8 quads][4 groups][16] (group g: half g / 2's low or high nibbles), scales [blocks][16]
void unpack_set(const WeightMatrix& w, int64_t s, int64_t blocks, std::vector<uint8_t>& bytes,
                std::vector<float>& scales) {
  bytes.resize(size_t(blocks * 8 * 64));
  scales.resize(size_t(blocks * 16));
  const uint8_t* data = static_cast<const uint8_t*>(w.data) + s * blocks * 256;
  const __m128i low = _mm_set1_epi8(15);
  for (int64_t quad = 0; quad < blocks * 8; ++quad) {
    for (int h = 0; h < 2; ++h) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + quad * 32 + h * 16));
      uint8_t* out = bytes.data() + quad * 64 + h * 32;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_and_si128(v, low));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), _mm_and_si128(_mm_srli_epi16(v, 4), low));
    }
  }
  widen_scales(w.scales + s * blocks * 16, blocks * 16, scales.data());
}

inline __m128i splat4(const int8_t* p) {  // p's 4 bytes in every lane (v128.load32_splat)
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm_set1_epi32(v);
}

// acc[kR][16] = the tile's sums for one set of rows: w the unpacked set, sw its scales, x the
// rows' quads ([blocks][8][kR][4]), sum8 and sx their offsets and folded scales ([blocks][kR])
void tile_dot(const uint8_t* w, const float* sw, int64_t blocks, const int8_t* x, const int32_t* sum8, const float* sx,
              float* acc) {
  __m128 f[kR][4];
  QKV_UNROLL
  for (int r = 0; r < kR; ++r) {
    QKV_UNROLL
    for (int g = 0; g < 4; ++g) f[r][g] = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    __m128i s[kR][4];
    QKV_UNROLL
    for (int r = 0; r < kR; ++r) {
      QKV_UNROLL
      for (int g = 0; g < 4; ++g) s[r][g] = _mm_setzero_si128();
    }
    // one quad per iteration, not unrolled (V8 would hold every load of an unrolled body live)
    const uint8_t* const block_end = w + 8 * 64;
    _Pragma("GCC unroll 1") for (; w < block_end;) {
      __m128i wv[4], xv[kR];
      QKV_UNROLL
      for (int g = 0; g < 4; ++g) wv[g] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + g * 16));
      QKV_UNROLL
      for (int r = 0; r < kR; ++r) xv[r] = splat4(x + r * 4);
      QKV_UNROLL
      for (int r = 0; r < kR; ++r) {
        QKV_UNROLL
        for (int g = 0; g < 4; ++g) s[r][g] = relaxed_dot(xv[r], wv[g], s[r][g]);
      }
      w += 64;
      x += kR * 4;
      opaque(w);
      opaque(x);
    }
    QKV_UNROLL
    for (int g = 0; g < 4; ++g) {
      const __m128 dw = _mm_loadu_ps(sw + g * 4);  // d_w * 2^-112, with its sign
      QKV_UNROLL
      for (int r = 0; r < kR; ++r) {
        const __m128 d = _mm_mul_ps(dw, _mm_set1_ps(sx[r]));
        const __m128i sum = _mm_sub_epi32(s[r][g], _mm_set1_epi32(sum8[r]));
        f[r][g] = _mm_add_ps(f[r][g], _mm_mul_ps(_mm_cvtepi32_ps(sum), d));
      }
    }
    sw += 16;
    sx += kR;
    sum8 += kR;
  }
  QKV_UNROLL
  for (int r = 0; r < kR; ++r) {
    QKV_UNROLL
    for (int g = 0; g < 4; ++g) _mm_storeu_ps(acc + r * 16 + g * 4, f[r][g]);
  }
}

// y[:, 16 s0 .. 16 s1) (clipped to N) for all M rows
void sets_dot(const WeightMatrix& w, const Int8Rows& xq, int64_t M, const float* bias, float* y, int64_t s0,
              int64_t s1) {
  thread_local std::vector<uint8_t> bytes;
  thread_local std::vector<float> scales;
  const int64_t blocks = xq.blocks;
  float acc[kR * 16];
  for (int64_t s = s0; s < s1; ++s) {
    unpack_set(w, s, blocks, bytes, scales);  // used by all M rows from cache
    for (int64_t set = 0; set * kR < M; ++set) {
      const int64_t at = set * blocks * kR;
      tile_dot(bytes.data(), scales.data(), blocks, xq.q.data() + at * 32, xq.sum8.data() + at, xq.wide.data() + at,
               acc);
      for (int r = 0; r < kR && set * kR + r < M; ++r) {
        const int64_t m = set * kR + r;
        for (int64_t n = s * 16; n < std::min(w.N, s * 16 + 16); ++n)
          y[m * w.N + n] = acc[r * 16 + (n - s * 16)] + (bias ? bias[n] : 0.0f);
      }
    }
  }
}

}  // namespace

bool gemm_q4_dot(const MatmulOutput* outputs, size_t count, const float* x, int64_t M, int threads) {
  if (M <= 0 || count == 0) return true;
  const int64_t K = outputs[0].w->K;
  thread_local Int8Rows mine;
  Int8Rows& xq = mine;  // read by every worker (see gemm_int8)
  quantize_rows8(x, M, K, xq, threads);
  if (!xq.wide_finite) return false;  // |x| beyond ~2^31: the int16 product's plain loop
  // every output's sets of 16 columns, end to end
  std::vector<int64_t> ends(count);
  int64_t work = 0;
  for (size_t i = 0; i < count; ++i) {
    ends[i] = (i ? ends[i - 1] : 0) + Q4Layout::of(K, outputs[i].w->N).sets;
    work += M * K * outputs[i].w->N;
  }
  threads = useful_threads(threads, ends.back(), work, kMinWorkPerThread);
  run_tiles(ends.data(), count, threads, [&](size_t i, int64_t s0, int64_t s1) {
    sets_dot(*outputs[i].w, xq, M, outputs[i].bias, outputs[i].y, s0, s1);
  });
  return true;
}
#else
bool gemm_q4_dot(const MatmulOutput*, size_t, const float*, int64_t, int) { return false; }
#endif

}  // namespace qkv::detail
