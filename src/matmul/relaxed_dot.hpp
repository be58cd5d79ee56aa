// i32x4.relaxed_dot_i8x16_i7x16_add_s for the relaxed-SIMD builds' 4-bit kernels (gemv_q4.cpp,
// gemm_q4_dot.cpp). Internal to src/matmul; empty outside those builds.
#pragma once

#if defined(QKV_RELAXED_SIMD) && !defined(QKV_NO_SIMD)
#include <smmintrin.h>

namespace qkv::detail {

typedef double RelaxedDotF64x2 __attribute__((vector_size(16)));

// c + the dot products of a's and b's 4-byte runs, lane by lane (a signed, b in 0..127): LLVM 14
// cannot emit i32x4.relaxed_dot_i8x16_i7x16_add_s, so this is __builtin_wasm_fma_f64x2 (the
// pre-standard 0xfd 0xcf, used nowhere else), which tools/wasm/relax-fma.mjs rewrites after the
// link, as it rewrites the float fma. LLVM takes it for a float fma; its operands are never
// constants, so there is nothing to fold.
inline __m128i relaxed_dot(__m128i a, __m128i b, __m128i c) {
  return __m128i(__builtin_wasm_fma_f64x2(RelaxedDotF64x2(a), RelaxedDotF64x2(b), RelaxedDotF64x2(c)));
}

}  // namespace qkv::detail
#endif
