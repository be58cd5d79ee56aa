// Matrix-vector products for decoding: y[N] = x[K] W + bias, one pass over W at memory speed.
//
// Each weight is read once, from a few sequential streams, and used once: the kernels are
// bound by memory bandwidth, so they do little per weight besides widening it.
//  InOut [K, N] (GPT-2's Conv1D): 4 rows of W at a time, y[n] += x[k+r] W[k+r, n] for r = 0..3
//    in order; y (<= a few thousand floats) stays in L1 while the 4 rows stream past. Each y
//    element adds its products in k order after its bias, as the matrix product (gemm.cpp)
//    does: one token decoded gives the bits the same token gets in a prefill.
//  OutIn [N, K] (the tied LM head reads wte [V, E] so): 4 columns at a time, each a dot
//    product of x with one contiguous row of W, 4 lanes per column summed at the end.
//  Q8: groups of 4 columns; x quantized to int16 per 32-block; int16 dot products (pmaddwd /
//    i32x4.dot_i16x8_s) put each column's partial sum in its own lane (weights.hpp).
// Every output column sees the same operations whichever thread and position it falls in
// (thread ranges start on 8-column boundaries), so the bits do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"
#include "simd.hpp"
#include "thread_pool.hpp"

#ifndef QKV_NO_SIMD
#include <smmintrin.h>  // SSE4.1 integer widening and pmaddwd: Emscripten lowers them to SIMD128
#endif

namespace qkv::detail {
namespace {

#ifndef QKV_NO_SIMD
using halves::F4;
using halves::I4;
#endif

// x prepared once per call, shared by every thread.
struct GemvInput {
  const float* x = nullptr;
  std::vector<float> scaled;       // F16 InOut: x * 2^56 (the other half of the widening's 2^112)
  std::vector<float> even, odd;    // F16/BF16 OutIn: x[0::2], x[1::2] (F16: * 2^56), padded to K/2 rounded up
  std::vector<int16_t> pairs;      // Q8: [Kp/2][4 copies of (xq[2p], xq[2p+1])]
  std::vector<float> block_scale;  // Q8: [Kp/32] x ~= block_scale[b] * xq
};

float load_f32(const float* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// ------------------------------------------------------------------ F32, InOut [K, N]

// y[n0:n1] = bias + sum_k x[k] W[k, n0:n1]
void gemv_f32_inout(const WeightMatrix& w, const float* x, const float* bias, float* y, int64_t n0, int64_t n1) {
  const int64_t K = w.K, N = w.N;
  const float* W = static_cast<const float*>(w.data);
  for (int64_t n = n0; n < n1; ++n) y[n] = bias ? bias[n] : 0.0f;
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    // 4 rows of W stream past y: y[n] = (((y[n] + x0 w0[n]) + x1 w1[n]) + x2 w2[n]) + x3 w3[n]
    const float *w0 = W + k * N, *w1 = w0 + N, *w2 = w1 + N, *w3 = w2 + N;
    const float x0 = x[k], x1 = x[k + 1], x2 = x[k + 2], x3 = x[k + 3];
    int64_t n = n0;
#ifndef QKV_NO_SIMD
    const F4 v0(x0), v1(x1), v2(x2), v3(x3);
    for (; n + 8 <= n1; n += 8) {
      QKV_UNROLL
      for (int h = 0; h < 8; h += 4) {
        F4 acc = F4::load_unaligned(y + n + h) + v0 * F4::load_unaligned(w0 + n + h);
        acc += v1 * F4::load_unaligned(w1 + n + h);
        acc += v2 * F4::load_unaligned(w2 + n + h);
        acc += v3 * F4::load_unaligned(w3 + n + h);
        acc.store_unaligned(y + n + h);
      }
    }
#endif
    for (; n < n1; ++n) y[n] = (((y[n] + x0 * w0[n]) + x1 * w1[n]) + x2 * w2[n]) + x3 * w3[n];
  }
  for (; k < K; ++k) {
    const float* wk = W + k * N;
    for (int64_t n = n0; n < n1; ++n) y[n] += x[k] * wk[n];
  }
}

// ------------------------------------------------------------------ F16 / BF16, InOut [K, N]

// y[n0:n1] = bias + sum_k x[k] W[k, n0:n1], W 16-bit. Columns in groups of 8: each 16-byte load
// of a row gives the group's even columns in one vector and its odd ones in another
// (halves.hpp); acc keeps them in that order ([even 4][odd 4] per group) until the end.
template <WeightType T>
void gemv_half_inout(const WeightMatrix& w, const GemvInput& in, const float* bias, float* y, int64_t n0, int64_t n1) {
  constexpr bool kF16 = T == WeightType::F16;
  const int64_t K = w.K, N = w.N;
  const uint16_t* W = static_cast<const uint16_t*>(w.data);
  const float* x = in.x;
  thread_local std::vector<float> acc_buffer;
  acc_buffer.resize(size_t(n1 - n0));
  float* acc = acc_buffer.data() - n0;  // acc[n] for n in [n0, n1)
  const auto widen = [](uint16_t h) { return kF16 ? halves::f16_to_f32(h) : halves::bf16_to_f32(h); };
  int64_t grouped = n0;  // columns [n0, grouped) are in groups of 8, [grouped, n1) in natural order
  // F16 groups carry a factor 2^-56 (the widening's), bias included, undone exactly at the end
  const float scale = kF16 ? 1.0f / halves::kF16Half : 1.0f;
#ifndef QKV_NO_SIMD
  grouped = n0 + (n1 - n0) / 8 * 8;
  const float* xs = kF16 ? in.scaled.data() : x;  // F16: x * 2^56
  const auto wide = [](I4 h) { return kF16 ? halves::f16_high_scaled(h) : halves::bf16_high(h); };
#endif
  for (int64_t n = n0; n < grouped; n += 8) {
    for (int64_t i = 0; i < 4; ++i) {
      acc[n + i] = bias ? bias[n + 2 * i] * scale : 0.0f;
      acc[n + 4 + i] = bias ? bias[n + 2 * i + 1] * scale : 0.0f;
    }
  }
  for (int64_t n = grouped; n < n1; ++n) acc[n] = bias ? bias[n] : 0.0f;
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    const uint16_t *w0 = W + k * N, *w1 = w0 + N, *w2 = w1 + N, *w3 = w2 + N;
#ifndef QKV_NO_SIMD
    const F4 v0(xs[k]), v1(xs[k + 1]), v2(xs[k + 2]), v3(xs[k + 3]);
    for (int64_t n = n0; n < grouped; n += 8) {
      const I4 u0 = halves::load_pairs(w0 + n), u1 = halves::load_pairs(w1 + n), u2 = halves::load_pairs(w2 + n),
               u3 = halves::load_pairs(w3 + n);
      F4 even = F4::load_unaligned(acc + n) + v0 * wide(halves::even_high(u0));
      F4 odd = F4::load_unaligned(acc + n + 4) + v0 * wide(halves::odd_high(u0));
      even += v1 * wide(halves::even_high(u1));
      odd += v1 * wide(halves::odd_high(u1));
      even += v2 * wide(halves::even_high(u2));
      odd += v2 * wide(halves::odd_high(u2));
      even += v3 * wide(halves::even_high(u3));
      odd += v3 * wide(halves::odd_high(u3));
      even.store_unaligned(acc + n);
      odd.store_unaligned(acc + n + 4);
    }
#endif
    const float x0 = x[k], x1 = x[k + 1], x2 = x[k + 2], x3 = x[k + 3];
    for (int64_t n = grouped; n < n1; ++n) {
      acc[n] = (((acc[n] + x0 * widen(w0[n])) + x1 * widen(w1[n])) + x2 * widen(w2[n])) + x3 * widen(w3[n]);
    }
  }
  for (; k < K; ++k) {
    const uint16_t* wk = W + k * N;
#ifndef QKV_NO_SIMD
    const F4 vk(xs[k]);
    for (int64_t n = n0; n < grouped; n += 8) {
      const I4 u = halves::load_pairs(wk + n);
      (F4::load_unaligned(acc + n) + vk * wide(halves::even_high(u))).store_unaligned(acc + n);
      (F4::load_unaligned(acc + n + 4) + vk * wide(halves::odd_high(u))).store_unaligned(acc + n + 4);
    }
#endif
    for (int64_t n = grouped; n < n1; ++n) acc[n] += x[k] * widen(wk[n]);
  }
  // back to natural order (F16: undo the 2^-56)
  for (int64_t n = n0; n < grouped; n += 8) {
    for (int64_t i = 0; i < 4; ++i) {
      y[n + 2 * i] = acc[n + i] / scale;
      y[n + 2 * i + 1] = acc[n + 4 + i] / scale;
    }
  }
  for (int64_t n = grouped; n < n1; ++n) y[n] = acc[n];
}

// ------------------------------------------------------------------ F32 / F16 / BF16, OutIn [N, K]

// y[n] = bias[n] + x . W[n, :], one column (a contiguous row of storage) at a time in 4 lanes
template <WeightType T>
float dot_column(const WeightMatrix& w, const GemvInput& in, int64_t n) {
  const int64_t K = w.K;
  const float* x = in.x;
  int64_t k = 0;
  float sum = 0.0f;
  if constexpr (T == WeightType::F32) {
    const float* row = static_cast<const float*>(w.data) + n * K;
#ifndef QKV_NO_SIMD
    F4 a0(0.0f), a1(0.0f);
    for (; k + 8 <= K; k += 8) {
      a0 += F4::load_unaligned(x + k) * F4::load_unaligned(row + k);
      a1 += F4::load_unaligned(x + k + 4) * F4::load_unaligned(row + k + 4);
    }
    sum = xsimd::hadd(a0 + a1);
#endif
    for (; k < K; ++k) sum += x[k] * load_f32(row + k);
  } else {
    constexpr bool kF16 = T == WeightType::F16;
    const uint16_t* row = static_cast<const uint16_t*>(w.data) + n * K;
#ifndef QKV_NO_SIMD
    const auto wide = [](I4 h) { return kF16 ? halves::f16_high_scaled(h) : halves::bf16_high(h); };
    const float *xe = in.even.data(), *xo = in.odd.data();
    F4 ae(0.0f), ao(0.0f);
    for (; k + 8 <= K; k += 8) {
      const I4 u = halves::load_pairs(row + k);
      ae += F4::load_unaligned(xe + k / 2) * wide(halves::even_high(u));
      ao += F4::load_unaligned(xo + k / 2) * wide(halves::odd_high(u));
    }
    sum = xsimd::hadd(ae + ao) * (kF16 ? halves::kF16Half : 1.0f);
#endif
    for (; k < K; ++k) sum += x[k] * (kF16 ? halves::f16_to_f32(row[k]) : halves::bf16_to_f32(row[k]));
  }
  return sum;
}

template <WeightType T>
void gemv_outin(const WeightMatrix& w, const GemvInput& in, const float* bias, float* y, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) y[n] = dot_column<T>(w, in, n) + (bias ? bias[n] : 0.0f);
}

// ------------------------------------------------------------------ Q8

// x [K] -> int16 per block of 32 (scale = max|x| / 32767), laid out as the kernel reads it
void prepare_q8(const float* x, int64_t K, GemvInput& in) {
  const Q8Layout q = Q8Layout::of(K, 4);
  const int64_t Kp = q.blocks * 32;
  in.pairs.assign(size_t(Kp / 2 * 8), 0);
  in.block_scale.assign(size_t(q.blocks), 0.0f);
  for (int64_t b = 0; b < q.blocks; ++b) {
    float amax = 0.0f;
    for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k) amax = std::max(amax, std::fabs(x[k]));
    const float d = amax / 32767.0f;
    const float inv = d > 0.0f ? 1.0f / d : 0.0f;
    in.block_scale[size_t(b)] = d;
    for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k) {
      const int16_t v = int16_t(std::min(32767.0f, std::max(-32767.0f, std::nearbyint(x[k] * inv))));
      for (int64_t c = 0; c < 4; ++c) in.pairs[size_t((k / 2) * 8 + c * 2 + k % 2)] = v;
    }
  }
}

// y[4 g0 .. 4 g1) (clipped to N) = bias + x W for the Q8 groups [g0, g1)
void gemv_q8(const WeightMatrix& w, const GemvInput& in, const float* bias, float* y, int64_t g0, int64_t g1) {
  const Q8Layout q = Q8Layout::of(w.K, w.N);
  const int8_t* data = static_cast<const int8_t*>(w.data);
  const int16_t* xp = in.pairs.data();
  const float* sx = in.block_scale.data();
  for (int64_t g = g0; g < g1; ++g) {
    const int8_t* wg = data + g * q.blocks * 128;
    const float* dg = w.scales + g * q.blocks * 4;
    float out[4];
#ifndef QKV_NO_SIMD
    // acc (4 columns) += (sum over the block's 16 k-pairs of int16 products) * d_w * d_x
    F4 acc(0.0f);
    for (int64_t b = 0; b < q.blocks; ++b) {
      const int8_t* wb = wg + b * 128;
      const int16_t* xb = xp + b * 16 * 8;
      __m128i sum = _mm_setzero_si128();
      QKV_UNROLL
      for (int i = 0; i < 8; ++i) {  // 16 bytes = k-pairs 2i and 2i+1 of the 4 columns
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + i * 16));
        const __m128i lo = _mm_cvtepi8_epi16(v), hi = _mm_cvtepi8_epi16(_mm_srli_si128(v, 8));
        const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + (2 * i) * 8));
        const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + (2 * i + 1) * 8));
        sum = _mm_add_epi32(sum, _mm_add_epi32(_mm_madd_epi16(lo, x0), _mm_madd_epi16(hi, x1)));
      }
      acc += F4(_mm_cvtepi32_ps(sum)) * (F4::load_unaligned(dg + b * 4) * F4(sx[b]));
    }
    acc.store_unaligned(out);
#else
    for (int c = 0; c < 4; ++c) out[c] = 0.0f;
    for (int64_t b = 0; b < q.blocks; ++b) {
      for (int c = 0; c < 4; ++c) {
        int32_t sum = 0;
        for (int p = 0; p < 16; ++p) {
          const int8_t* wp = wg + b * 128 + p * 8 + c * 2;
          const int16_t* xq = xp + (b * 16 + p) * 8 + c * 2;
          sum += int32_t(wp[0]) * xq[0] + int32_t(wp[1]) * xq[1];
        }
        out[c] += float(sum) * (dg[b * 4 + c] * sx[b]);
      }
    }
#endif
    for (int64_t c = 0; c < 4 && g * 4 + c < w.N; ++c) y[g * 4 + c] = out[c] + (bias ? bias[g * 4 + c] : 0.0f);
  }
}

// ------------------------------------------------------------------ dispatch

void prepare(const WeightMatrix& w, const float* x, GemvInput& in) {
  in.x = x;
  const int64_t K = w.K;
  if (w.type == WeightType::Q8) {
    prepare_q8(x, K, in);
  } else if (w.type != WeightType::F32) {
    const float s = w.type == WeightType::F16 ? halves::kF16Half : 1.0f;
    if (w.layout == WeightLayout::InOut) {
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

// y for the columns [n0, n1) (n0 on a unit boundary)
void gemv_columns(const WeightMatrix& w, const GemvInput& in, const float* bias, float* y, int64_t n0, int64_t n1) {
  const bool inout = w.layout == WeightLayout::InOut;
  switch (w.type) {
    case WeightType::F32:
      return inout ? gemv_f32_inout(w, in.x, bias, y, n0, n1) : gemv_outin<WeightType::F32>(w, in, bias, y, n0, n1);
    case WeightType::F16:
      return inout ? gemv_half_inout<WeightType::F16>(w, in, bias, y, n0, n1)
                   : gemv_outin<WeightType::F16>(w, in, bias, y, n0, n1);
    case WeightType::BF16:
      return inout ? gemv_half_inout<WeightType::BF16>(w, in, bias, y, n0, n1)
                   : gemv_outin<WeightType::BF16>(w, in, bias, y, n0, n1);
    case WeightType::Q8:
      return gemv_q8(w, in, bias, y, n0 / 4, (n1 + 3) / 4);
  }
}

}  // namespace

void gemv(const WeightMatrix& w, const float* x, const float* bias, float* y, int threads) {
  GemvInput in;
  prepare(w, x, in);
  // threads take whole 8-column units (two Q8 groups; a 16-byte load of a 16-bit row)
  constexpr int64_t kUnit = 8;
  const int64_t units = (w.N + kUnit - 1) / kUnit;
  threads = useful_threads(threads, units, w.K * w.N, kMinWorkPerThread);
  if (threads <= 1) {
    gemv_columns(w, in, bias, y, 0, w.N);
    return;
  }
  parallel_for(threads, threads, [&](int64_t item, int) {
    const int64_t n0 = std::min(w.N, units * item / threads * kUnit);
    const int64_t n1 = std::min(w.N, units * (item + 1) / threads * kUnit);
    if (n0 < n1) gemv_columns(w, in, bias, y, n0, n1);
  });
}

}  // namespace qkv::detail
