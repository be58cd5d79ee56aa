// GGUF's block-quantized tensor types (ggml's block_q8_0, block_q4_0, block_q4_K, block_q5_K,
// block_q6_K), read row by row: dequantized to float32 by the formats' definitions, or (Q8_0,
// Q4_0) repacked without loss into qkv's own Q8 / Q4 layouts (matmul/weights.hpp), which hold
// the same blocks of 32 weights and one IEEE half scale in another order.
//
//   Q8_0  34 bytes / 32 weights: d (f16), q[32] (int8)                     w = d q
//   Q4_0  18 bytes / 32 weights: d (f16), qs[16]; weight j < 16 is the low nibble of qs[j],
//         weight j + 16 its high nibble                                    w = d (u - 8)
//   Q4_K 144 bytes / 256: d, dmin (f16), scales[12] (8 pairs of 6-bit scale and min), qs[128];
//         sub-block s of 32: w = d sc_s u - dmin m_s, u a nibble (low nibbles of 32 bytes for
//         the even sub-block, high for the odd one)
//   Q5_K 176 bytes / 256: as Q4_K plus qh[32]: bit s of qh[l] is the 5th bit of weight l of
//         sub-block s
//   Q6_K 210 bytes / 256: ql[128], qh[64], scales[16] (int8), d (f16); 16 sub-blocks of 16,
//         w = d sc (q - 32), q six bits: 4 from ql, 2 from qh
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/gguf.hpp"

namespace qkv::gguf {

// Whether rows of t can be dequantized (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K).
bool can_dequantize(TensorType t);

// Bytes of one row of K elements of type t (K a multiple of t's block).
size_t row_bytes(TensorType t, int64_t K);

// Dequantizes `rows` rows of K elements of type t at src (any alignment) into out[rows * K].
// Throws std::invalid_argument for a type that cannot be, or a scale that is inf or NaN.
void dequantize_rows(TensorType t, const uint8_t* src, int64_t K, int64_t rows, float* out);

// Repacks `rows` rows of K Q8_0 weights (K % 32 == 0) as a qkv Q8 matrix of K x rows columns
// (Q8Layout::of(K, rows): data_bytes() at data, scale_count() halves at scales; the padding
// columns zero). A quant of -128 (which ggml's quantizer never writes; qkv's kernels take
// -127..127) is read as -127. Throws std::invalid_argument for a scale that is inf or NaN.
void repack_q8_0(const uint8_t* src, int64_t K, int64_t rows, int8_t* data, uint16_t* scales);

// The same from Q4_0 to qkv's Q4 layout (Q4Layout::of(K, rows)); exact.
void repack_q4_0(const uint8_t* src, int64_t K, int64_t rows, uint8_t* data, uint16_t* scales);

}  // namespace qkv::gguf
