// The batch type the kernels are written over, and the few operations they use.
// Kernels are templates over V: xsimd::batch<float> (SSE/AVX natively, SIMD128 in wasm
// through Emscripten's SSE headers) or plain float when built with QKV_NO_SIMD (the
// scalar baseline). Everything here is a thin, inlined mapping.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#ifndef QKV_NO_SIMD
#include <xsimd/xsimd.hpp>
#endif

// Fully unroll a loop over register-block indices, so the accumulators live in registers
// whatever the optimisation level (GCC and clang both read this pragma).
#define QKV_UNROLL _Pragma("GCC unroll 16")

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
// p = (s == m) ? 1 : exp(s - m): exact at the maximum, and 1 (not NaN) when s == m == +inf.
inline float exp_shifted(float s, float m) { return s == m ? 1.0f : std::exp(s - m); }

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
// exp for the softmax, in plain arithmetic and integer bit operations that lower to wasm
// SIMD128 one to one (xsimd's generic exp goes through SSE rounding/conversion intrinsics
// that Emscripten emulates with several instructions each). Cephes' expf: n = round(x/ln2)
// by the 1.5*2^23 trick, r = x - n ln2 in two parts, a degree-5 polynomial, then 2^n built
// in the exponent bits. Relative error ~1e-7; exactly 0 below -87.3 (and for -inf), where
// float32 underflows anyway. The softmax only calls it on x <= 0.
template <class A>
inline xsimd::batch<float, A> exp(xsimd::batch<float, A> x) {
  using F = xsimd::batch<float, A>;
  using I = xsimd::batch<int32_t, A>;
  const F lowest(-87.3365479f), highest(88.3762589f), magic(12582912.0f);  // magic = 1.5 * 2^23
  const F xc = xsimd::min(xsimd::max(x, lowest), highest);
  const F t = xc * F(1.44269504088896341f) + magic;  // n + magic, n in t's low mantissa bits
  const F n = t - magic;
  F r = xc - n * F(0.693359375f);
  r = r - n * F(-2.12194440e-4f);
  F p(1.9875691500e-4f);
  p = p * r + F(1.3981999507e-3f);
  p = p * r + F(8.3334519073e-3f);
  p = p * r + F(4.1665795894e-2f);
  p = p * r + F(1.6666665459e-1f);
  p = p * r + F(5.0000001201e-1f);
  p = p * (r * r) + r + F(1.0f);
  const I exponent = xsimd::bitwise_cast<I>(t) - xsimd::bitwise_cast<I>(magic) + I(127);
  const F two_n = xsimd::bitwise_cast<F>(exponent << 23);
  return xsimd::select(x < lowest, F(0.0f), p * two_n);
}
template <class A>
inline xsimd::batch<float, A> max(xsimd::batch<float, A> a, xsimd::batch<float, A> b) {
  return xsimd::max(a, b);
}
template <class A>
inline xsimd::batch<float, A> select(xsimd::batch_bool<float, A> c, xsimd::batch<float, A> a,
                                     xsimd::batch<float, A> b) {
  return xsimd::select(c, a, b);
}
template <class A>
inline xsimd::batch<float, A> exp_shifted(xsimd::batch<float, A> s, xsimd::batch<float, A> m) {
  return xsimd::select(s == m, xsimd::batch<float, A>(1.0f), simd::exp(s - m));
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

}  // namespace qkv::simd
