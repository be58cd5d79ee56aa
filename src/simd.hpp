// The batch type the kernels are written over, and the few operations they use.
// Kernels are templates over V: xsimd::batch<float> (SSE/AVX natively, SIMD128 in wasm
// through Emscripten's SSE headers) or plain float when built with QKV_NO_SIMD (the
// scalar baseline). Everything here is a thin, inlined mapping.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#ifndef QKV_NO_SIMD
#include <xsimd/xsimd.hpp>
#endif

#include "simd_madd.hpp"

// Fully unroll a loop over register-block indices, so the accumulators live in registers
// whatever the optimisation level (GCC and clang both read this pragma).
#define QKV_UNROLL _Pragma("GCC unroll 16")

namespace qkv {
// v unchanged, but what it holds hidden from the optimisers (an empty asm that "changes" it). A
// loop's pointers passed through this at the end of each pass stay pointers bumped by a constant:
// where LLVM knows a loop's trip count it rewrites them as base + counter * stride, and V8 then
// computes that address again before the loads of every pass (4 instructions more per k-pair in
// the 8-bit prefill's micro-kernel, gemm_q8.cpp: 26 -> 30).
template <class T>
inline void opaque(T& v) {
  __asm__("" : "+r"(v));
}
}  // namespace qkv

namespace qkv::simd {

template <class V>
struct Lanes;
template <>
struct Lanes<float> {
  static constexpr int value = 1;
};

inline float load(const float* p, float) { return *p; }
inline void store(float* p, float v) { *p = v; }
inline float splat(float x, float) { return x; }
inline float max(float a, float b) { return std::max(a, b); }
inline float select(bool c, float a, float b) { return c ? a : b; }
inline bool any(bool c) { return c; }
inline bool all(bool c) { return c; }
inline float exponent_from_low_bits(float t) {
  uint32_t bits;
  std::memcpy(&bits, &t, sizeof bits);
  bits <<= 23;
  std::memcpy(&t, &bits, sizeof bits);
  return t;
}

#ifndef QKV_NO_SIMD
using Batch = xsimd::batch<float>;
template <class A>
struct Lanes<xsimd::batch<float, A>> {
  static constexpr int value = static_cast<int>(xsimd::batch<float, A>::size);
};
template <class A>
inline xsimd::batch<float, A> load(const float* p, xsimd::batch<float, A>) {
  return xsimd::batch<float, A>::load_unaligned(p);
}
template <class A>
inline void store(float* p, xsimd::batch<float, A> v) {
  v.store_unaligned(p);
}
template <class A>
inline xsimd::batch<float, A> splat(float x, xsimd::batch<float, A>) {
  return xsimd::batch<float, A>(x);
}
// max(a, b) (either one when a NaN is involved). In wasm this is f32x4.pmax, one instruction
// in V8; xsimd's max is SSE's _mm_max_ps, which Emscripten emulates with a compare and a
// bitselect (4 instructions in V8).
template <class A>
inline xsimd::batch<float, A> max(xsimd::batch<float, A> a, xsimd::batch<float, A> b) {
#if defined(__wasm_simd128__)
  return xsimd::batch<float, A>(__builtin_wasm_pmax_f32x4(a, b));
#else
  return xsimd::max(a, b);
#endif
}
template <class A>
inline xsimd::batch<float, A> select(xsimd::batch_bool<float, A> c, xsimd::batch<float, A> a,
                                     xsimd::batch<float, A> b) {
  return xsimd::select(c, a, b);
}
template <class A>
inline bool any(xsimd::batch_bool<float, A> c) {
  return xsimd::any(c);
}
template <class A>
inline bool all(xsimd::batch_bool<float, A> c) {
  return xsimd::all(c);
}
// The float whose bits are t's shifted left by 23: with t = 1.5 * 2^23 + e, 0 <= e < 256 (an
// integer held in t's low mantissa bits), this is 2^(e - 127).
template <class A>
inline xsimd::batch<float, A> exponent_from_low_bits(xsimd::batch<float, A> t) {
  using I = xsimd::batch<int32_t, A>;
  return xsimd::bitwise_cast<xsimd::batch<float, A>>(xsimd::bitwise_cast<I>(t) << 23);
}
#else
using Batch = float;
#endif

template <class V>
constexpr int lanes = Lanes<V>::value;

// Loads/stores taking the batch type as a template argument: load<V>(p).
template <class V>
inline V load(const float* p) {
  return load(p, V{});
}
template <class V>
inline V splat(float x) {
  return splat(x, V{});
}

// 2^x for the online softmax's arguments, scores minus a reference max in log2 units: x <= 64
// (the max may lag the scores by the rescaling threshold), -inf included.
//   x = max(x, -127); n = round(x), by adding 1.5 * 2^23 + 127: the sum t then holds n + 127,
//   2^n's biased exponent, in its low mantissa bits, and t << 23 (bitwise) is 2^n (+0 for
//   n = -127, so exp2(-inf) = 0 exactly); r = x - n in [-0.5, 0.5] (exact); 2^r by a
//   degree-5 polynomial fitted for relative error (c0 = 1, so exp2(0) = 1 exactly: the max
//   of a row weighs exactly 1).
// Relative error < 2.5e-7 for x in [-125, 64] (tested in tests/cpp); below that the result is
// subnormal or 0, as float32's own 2^x is.
// Its constants: the lower clamp, the rounding constant 1.5 * 2^23 + 127, then c5 .. c0.
alignas(16) inline constexpr float kExp2Constants[8] = {
    -127.0f,          12583039.0f,      1.3264715196e-3f, 9.6715088955e-3f,
    5.5507337367e-2f, 2.4022242143e-1f, 6.9314697763e-1f, 1.0f};
template <class V>
struct Exp2 {
  explicit Exp2(const float* k)
      : lo(splat<V>(k[0])), magic(splat<V>(k[1])), c5(splat<V>(k[2])), c4(splat<V>(k[3])), c3(splat<V>(k[4])),
        c2(splat<V>(k[5])), c1(splat<V>(k[6])), c0(splat<V>(k[7])) {}
  V operator()(V x) const {
    x = max(x, lo);
    const V t = x + magic;
    const V r = x - (t - magic);
    // Horner's scheme (Estrin's, with half the dependent steps and one more multiply, measured
    // the same: the softmax's loop is bound by throughput, not latency); each step is a madd,
    // one f32x4.relaxed_madd in the relaxed builds (a mul and an add elsewhere, as before)
    V p = c5;
    p = madd(p, r, c4);
    p = madd(p, r, c3);
    p = madd(p, r, c2);
    p = madd(p, r, c1);
    p = madd(p, r, c0);
    return p * exponent_from_low_bits(t);
  }
  V lo, magic, c5, c4, c3, c2, c1, c0;
};

template <class V>
inline V exp2(V x) {
  return Exp2<V>(kExp2Constants)(x);  // the loads fold to constants
}

// The same exp2 for a loop, its constants read once, through a pointer the optimisers cannot see
// through, and kept in registers across the loop. As constants, LLVM and Binaryen put a
// v128.const at each use inside the loop, and Chromium 156's V8 builds the 8 of them again (a
// move and a shuffle each) on every fourth pass of its unrolled softmax loop: that loop had
// 8.0-8.3% of the kernel's samples, now 6.6-7.1% (bench/js/jit-profile.mjs, L = 1024).
// Node 20's V8 hoists them itself. Same bits as exp2.
template <class V>
inline Exp2<V> exp2_in_registers() {
  const float* k = kExp2Constants;
  opaque(k);
  return Exp2<V>(k);
}

}  // namespace qkv::simd
