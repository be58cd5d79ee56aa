// 16-bit floats (IEEE half, bfloat16) widened to float32: one value at a time (exact, the
// reference), and two vectors at a time for the kernels.
//
// The vector widening loads 2W 16-bit values as W 32-bit lanes u (W = 4 in wasm): lane i
// holds element 2i in its low half and element 2i+1 in its high half. Then
//   even = u << 16           element 2i   in the high half (bfloat16: these are its float bits)
//   odd  = u & 0xFFFF0000    element 2i+1 in the high half
// so a load gives the even elements in one vector and the odd ones in another, with no
// shuffles. Kernels either pair them with x split the same way (dot products along K) or
// keep their outputs in that order and put them back in place at the end (rows along N).
//
// IEEE half in the high half of a lane: an arithmetic shift right by 3 moves the exponent
// (5 bits) and mantissa (10) into float32's fields, the sign stays at bit 31 (its copies in
// bits 30..28 are masked off). Read as a float that is value * 2^-112 for every finite
// half, subnormals included (the rebias from 15 to 127); inf and NaN are not special-cased,
// so F16 weights are checked to be finite on load. The 2^112 is folded into the other
// operand by the kernels (two exact power-of-two scalings, 2^56 each, so nothing overflows
// or underflows for |x| < 2^72 and |x w| > 2^-70).
#pragma once

#include <cstdint>
#include <cstring>

#ifndef QKV_NO_SIMD
#include <emmintrin.h>  // _mm_madd_epi16 (pmaddwd; i32x4.dot_i16x8_s in wasm)
#include <smmintrin.h>  // _mm_cvtepu16_epi32 (pmovzxwd; i32x4.extend_low_i16x8_u)

#include <xsimd/xsimd.hpp>
#endif

namespace qkv::halves {

inline float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// 2^112: what placing a half's exponent and mantissa fields in a float's takes off the value
// (the float's exponent bias is 127, the half's 15). The matrix-vector products (gemv.cpp)
// split it, 2^56 (kF16Half) on each side of the product, so that neither side overflows.
constexpr float kF16Half = 72057594037927936.0f;
constexpr float kF16Scale = kF16Half * kF16Half;

// Exact IEEE half -> float (normals, subnormals, zeros, inf, NaN).
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0x1F) return bits_to_float(sign | 0x7F800000u | (man << 13));
  // normal and subnormal alike: the field placement is value * 2^-112, scaled back exactly
  return bits_to_float(sign | (exp << 23) | (man << 13)) * kF16Scale;
}

inline float bf16_to_f32(uint16_t b) { return bits_to_float(uint32_t(b) << 16); }

// The inverse of f16_to_f32 for finite values, rounding to nearest even (for tests and the
// 'f16' load option). Values beyond the half range become +-inf.
inline uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7FFFFFFFu;
  if (x >= 0x7F800000u) return uint16_t(sign | 0x7C00u | (x > 0x7F800000u ? 0x200u : 0u));  // inf / NaN
  if (x >= 0x477FF000u) return uint16_t(sign | 0x7C00u);                                    // rounds past 65504
  if (x < 0x38800000u) {  // below the smallest normal half (2^-14): a subnormal half or zero
    const float scaled = bits_to_float(x) * 16777216.0f;  // value / 2^-24: the subnormal's integer mantissa
    const float r = scaled + 12582912.0f - 12582912.0f;   // round to nearest even (1.5 * 2^23 trick)
    return uint16_t(sign | uint32_t(r));
  }
  const uint32_t rounded = x + 0xFFFu + ((x >> 13) & 1u);  // round the 13 dropped mantissa bits, ties to even
  return uint16_t(sign | ((rounded - (112u << 23)) >> 13));
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((x >> 16) | 0x40u);  // NaN stays NaN
  return uint16_t((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

#ifndef QKV_NO_SIMD
// The kernels' vector: four floats, SIMD128 in wasm (xsimd's SSE code lowered by
// Emscripten) and SSE natively, so native tests run the layouts and orders wasm runs.
using Arch = xsimd::sse4_2;
using F4 = xsimd::batch<float, Arch>;
using I4 = xsimd::batch<int32_t, Arch>;
constexpr int kLanes = 4;

// 8 16-bit values at p -> their lanes (see the top of this file)
inline I4 load_pairs(const uint16_t* p) { return I4::load_unaligned(reinterpret_cast<const int32_t*>(p)); }
inline I4 even_high(I4 u) { return u << 16; }
inline I4 odd_high(I4 u) { return u & I4(int32_t(0xFFFF0000u)); }

// bfloat16 in the high half: exactly its float
inline F4 bf16_high(I4 h) { return xsimd::bitwise_cast<F4>(h); }
// IEEE half in the high half: value * 2^-112 (finite values)
inline F4 f16_high_scaled(I4 h) { return xsimd::bitwise_cast<F4>((h >> 3) & I4(int32_t(0x8FFFFFFFu))); }

// A load's even / odd elements widened, in the fewest ops. F16 even: one multiply-add of 16-bit
// pairs (pmaddwd / i32x4.dot_i16x8_s) by (2^13, 0) widens the low half with its sign and shifts it
// into place at once: the element, sign-extended, times 2^13 is f16_high_scaled's (u << 16) >> 3
// before the mask (its sign copies in bits 31..28), and the odd neighbour is multiplied by 0 (2
// ops, where u << 16, >> 3, & took 3). The F16 GEMV is bound by its vector ops, 8 per 8 halves now,
// 9 before (bench/matmul's in-cache row, 576 x 576: 14.8-15.0 -> 16.4-17.0 GB/s; the model's F16
// decode 1.75x -> 1.95x our F32, with gemv.cpp's part_stride). F16 odd needs no separate clearing
// of the low half, since the shifted low half lands in bits 12..0 and one mask clears them with the
// sign's copies (2 ops, not 3: (u >> 3) & 0x8FFFE000 == f16_high_scaled(odd_high(u))). Both checked
// bit for bit over all halves and neighbours in tests/cpp/test_matmul.cpp. bfloat16 one op each.
// F16 results carry the 2^-112.
inline I4 f16_even_placed(I4 u) { return I4(_mm_madd_epi16(u, _mm_set1_epi32(1 << 13))); }
template <bool kF16>
inline F4 wide_even(I4 u) {
  return kF16 ? xsimd::bitwise_cast<F4>(f16_even_placed(u) & I4(int32_t(0x8FFFFFFFu))) : bf16_high(even_high(u));
}
template <bool kF16>
inline F4 wide_odd(I4 u) {
  return kF16 ? xsimd::bitwise_cast<F4>((u >> 3) & I4(int32_t(0x8FFFE000u))) : bf16_high(odd_high(u));
}

// 4 non-negative IEEE halves at p (Q8's block scales) -> their floats times 2^-112: zero-extended
// to 32-bit lanes and shifted into float32's fields (as above; with no sign to place, one shift
// does it). Exact and normal for normal halves, zero for zero (the Q8 quantizer stores no
// subnormal scale, which would widen into a subnormal float: slow on x86).
inline F4 positive_halves_low(const uint16_t* p) {
  const __m128i h = _mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return xsimd::bitwise_cast<F4>(I4(_mm_slli_epi32(h, 13)));
}
// ... and exactly their floats
inline F4 positive_halves(const uint16_t* p) { return positive_halves_low(p) * F4(kF16Scale); }
// 4 IEEE halves at p of any sign (Q4's block scales; Q8's too in the integer matrix product)
// -> their floats times 2^-112: placed in the lanes' high 16 bits, shifted right by 3 with the
// sign (its copies in bits 30..28, then masked off). Exact and normal for normal halves.
inline F4 halves_low(const uint16_t* p) {
  const __m128i h = _mm_unpacklo_epi16(_mm_setzero_si128(), _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return F4(_mm_castsi128_ps(_mm_and_si128(_mm_srai_epi32(h, 3), _mm_set1_epi32(int32_t(0x8FFFFFFFu)))));
}
#endif

}  // namespace qkv::halves
