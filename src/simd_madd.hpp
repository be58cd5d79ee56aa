// madd(a, b, c) = a * b + c: the one multiply-add every micro-kernel is made of.
// Normally a plain multiply then add (what `a * b + c` always compiled to; natively the compiler
// may contract it into an FMA, in wasm it stays two roundings). Built with
// QKV_RELAXED_SIMD (the wasm `simd-relaxed` variants, -mrelaxed-simd) it is one
// f32x4.relaxed_madd, which the engine may fuse (one rounding) or not, per hardware.
//
// LLVM 14 (Debian's Emscripten 3.1.6) only has the pre-standard __builtin_wasm_fma_f32x4,
// which emits opcode 0xfd 0xaf 0x01; tools/wasm/relax-fma.mjs rewrites it after the link to
// f32x4.relaxed_madd (0xfd 0x85 0x02). Engines compute that as a * b + c with the operands in
// the order pushed, but LLVM 14 believes the old fma meant a + b * c: were it to fold
// constants through the builtin it would fold them wrongly. So the builtin lives here only,
// in one function, and every call has run-time values for a and b (loads, accumulators, exp2's
// r), so nothing can fold; a constant c (exp2's coefficients) is only an operand in its slot.
// tests/cpp/relaxed-exp2.sh runs exp2's error-bound test in a relaxed wasm build.
// Included by simd.hpp (exp2 is made of it); includes nothing of qkv's.
#pragma once

#ifndef QKV_NO_SIMD
#include <xsimd/xsimd.hpp>
#endif

#if defined(QKV_RELAXED_SIMD) && !defined(__wasm_relaxed_simd__)
#error "QKV_RELAXED_SIMD needs -mrelaxed-simd (a wasm build)"
#endif

namespace qkv::simd {

inline float madd(float a, float b, float c) { return a * b + c; }

#ifndef QKV_NO_SIMD
template <class A>
inline xsimd::batch<float, A> madd(xsimd::batch<float, A> a, xsimd::batch<float, A> b, xsimd::batch<float, A> c) {
#ifdef QKV_RELAXED_SIMD
  using F = xsimd::batch<float, A>;
  using R = typename F::register_type;  // Emscripten's __m128: float __attribute__((vector_size(16)))
  const R r = __builtin_wasm_fma_f32x4(static_cast<R>(a), static_cast<R>(b), static_cast<R>(c));
  return F(r);
#else
  return a * b + c;
#endif
}
#endif

}  // namespace qkv::simd
