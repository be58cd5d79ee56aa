// A linear layer's weight matrix as the matmul kernels read it: in the dtype it came in
// (F32, F16, BF16), in place, in either layout, or quantized to 8 bits (Q8) or 4 bits (Q4) on load.
// Nothing here owns memory: a WeightMatrix points into a buffer someone else holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "linear.hpp"  // WeightLayout: InOut = [K, N] (GPT-2's Conv1D), OutIn = [N, K] (nn.Linear, tied embeddings)

namespace qkv {

enum class WeightType { F32, F16, BF16, Q8, Q4 };

const char* weight_type_name(WeightType t);  // "F32", "F16", "BF16", "Q8", "Q4"

// Q8, 8-bit weights like ggml's q8_0: each output column n is cut into blocks of 32 along K;
// a block keeps 32 int8 values q and one IEEE half scale d, W[k, n] ~= d * q, symmetric,
// d = max|W| / 127 over the block rounded to a half (d = 0 for an all-zero block; at least
// 2^-14, the smallest normal half, so that the kernels' widening never makes a subnormal
// float: a block whose weights are all below 127 * 2^-14 ~= 0.0078 keeps an error below
// 2^-15 per weight instead of d / 2). 1.0625 bytes per weight. K is padded with zeros to
// Kp (a multiple of 32), N to Np (a multiple of 4). Laid out for the SIMD kernels:
//
//   data   [Np/4 groups][Kp/32 blocks][16 k-pairs][4 columns][2] int8
//   scales [Np/4 groups][Kp/32 blocks][4 columns] IEEE half (uint16 bits)
//
// A 16-byte load holds two k-pairs of a group's 4 columns; the int16 dot product of one
// k-pair (8 values, widened) with (x[k], x[k+1]) repeated 4 times (pmaddwd, wasm's
// i32x4.dot_i16x8_s) leaves each column's partial sum in its own lane: no horizontal sums.
struct Q8Layout {
  int64_t groups = 0;  // Np / 4
  int64_t blocks = 0;  // Kp / 32
  static Q8Layout of(int64_t K, int64_t N);
  size_t data_bytes() const { return size_t(groups) * size_t(blocks) * 128; }
  size_t scale_count() const { return size_t(groups) * size_t(blocks) * 4; }
  size_t bytes() const { return data_bytes() + 2 * scale_count(); }
};

// Q4, 4-bit weights like ggml's q4_0: each output column n is cut into blocks of 32 along K;
// a block keeps 32 values q in -8..7 (stored as the nibble u = q + 8) and one IEEE half scale
// d, W[k, n] ~= d * q. As ggml: m = the block's weight of largest magnitude (the first, if
// several), d = m / -8 rounded to a half (so d has the opposite sign of m and m becomes q = -8),
// q = nearest(w / d) (ties to even, against d as stored) clamped to [-8, 7]; |d| >= 2^-14 (as Q8,
// no subnormal scale) or d = 0 for an all-zero block. Error per weight: |w - d q| <= |d| / 2,
// except a weight of m's opposite sign beyond 7.5 |d| (q = 8 clamped to 7): <= |d|.
// 0.5625 bytes per weight. K is padded with zeros to Kp (a multiple of 32), N to Np (a
// multiple of 16). Laid out for the SIMD kernels, 16 columns (4 groups of 4) side by side:
//
//   data   [Np/16 sets][Kp/32 blocks][8 quads][2 halves][16 bytes]
//   scales [Np/16 sets][Kp/32 blocks][16 columns] IEEE half (uint16 bits)
//
// Quad q is k = 4q .. 4q + 3. In half h's 16 bytes, byte 4 c + i holds u at k = 4q + i for
// column c of group 2h (low nibble) and column c of group 2h + 1 (high nibble): the nibbles of
// one column's 4 k side by side, what an int8 dot product over 4-byte runs
// (i32x4.relaxed_dot_i8x16_i7x16_add_s) reads. Read as 8 int16 lanes, lane 2c + e holds k =
// 4q + 2e (its low byte) and 4q + 2e + 1 (its high byte), so masks and shifts of one load give
// 4 vectors of int16 u, column c's pair of k in lanes (2c, 2c + 1): the even k (4q, 4q + 2) and
// the odd k (4q + 1, 4q + 3) of groups 2h and 2h + 1, each meeting its x pair in
// i32x4.dot_i16x8_s (gemv_q4.cpp).
struct Q4Layout {
  int64_t sets = 0;    // Np / 16
  int64_t blocks = 0;  // Kp / 32
  static Q4Layout of(int64_t K, int64_t N);
  size_t data_bytes() const { return size_t(sets) * size_t(blocks) * 256; }
  size_t scale_count() const { return size_t(sets) * size_t(blocks) * 16; }
  size_t bytes() const { return data_bytes() + 2 * scale_count(); }
};

// Panels (WeightLayout::Panels), what the loader makes of every F32, F16 and BF16 matrix a matmul
// reads: the columns in panels of kPanel = 16, each panel's K rows of 16 elements (64 bytes, one
// cache line, as F32; 32 bytes as 16-bit) one after another; the last panel holds the N % 16
// columns left, [K][N % 16]:
//
//   data [ceil(N/16) panels][K][16 (the last: N - 16 * (panels - 1))] elements
//
// Element W[k, n] is at (n / 16) * 16 K + k * width + n % 16, width the panel's. The same K * N
// elements as [K, N] or [N, K], so a matrix is rewritten in place (to_panels). Decoding reads each
// panel from start to end, one sequential stream per panel, its 16 sums held in registers
// (gemv.cpp); the matrix product copies (widens) a panel's rows straight into its packed panels
// (gemm.cpp). Both add each column's products in k order, so a decode gives a prefill's bits.
// [K, N] (8 rows of 9 KB at a time, 8 streams restarted every 8 rows) read at 0.55-0.6 of the
// bandwidth in decode; [N, K] summed each column in 4 lanes, in another order than a prefill.
constexpr int64_t kPanel = 16;

// Rewrites the matrix at p, stored `from` (InOut [K, N] or OutIn [N, K]), as Panels, in place,
// through scratch (resized to one panel, 16 K elements, from OutIn; to the whole matrix from
// InOut: pass the same vector for every matrix so one buffer serves them all).
void to_panels(float* p, int64_t K, int64_t N, WeightLayout from, std::vector<float>& scratch);
void to_panels(uint16_t* p, int64_t K, int64_t N, WeightLayout from, std::vector<uint16_t>& scratch);

// A weight the F16 kernels read as zero (a subnormal half: see prepare_f16_weights) and that
// matmul() and read_column() add back after the product, exactly: W[k, n] = value.
struct WeightFix {
  int32_t n = 0, k = 0;
  float value = 0.0f;
};

// y[M, N] = x[M, K] W[K, N] (+ bias): W as stored.
//  F32 / F16 / BF16: `data` holds K * N little-endian elements, [K, N] (InOut), [N, K] (OutIn)
//    or in Panels (above), 2-byte aligned (4 for F32). F16 weights must be finite: the kernels
//    widen them with integer shifts that do not special-case inf and NaN (see prepare_f16_weights).
//  Q8 / Q4: `data` and `scales` as Q8Layout / Q4Layout above (`layout` is ignored).
struct WeightMatrix {
  WeightType type = WeightType::F32;
  WeightLayout layout = WeightLayout::InOut;
  int64_t K = 0, N = 0;
  const void* data = nullptr;
  const uint16_t* scales = nullptr;  // Q8 / Q4: the block scales (halves), as Q8Layout / Q4Layout say
  const WeightFix* fixes = nullptr;  // F16: the weights stored as zero, sorted by (n, k)
  size_t fix_count = 0;

  size_t bytes() const;  // what the kernels read per pass over W
};

// W[k, n] as a float (widened or dequantized, fixes included): the plain-loop path for
// references and tests.
float weight_at(const WeightMatrix& w, int64_t k, int64_t n);

// out[K] = W[:, n], the weights of output n (an embedding row when W is a tied [V, E] table).
void read_column(const WeightMatrix& w, int64_t n, float* out);

// Quantizes a F32 / F16 / BF16 matrix of any layout to Q8 (data: Q8Layout::data_bytes(),
// scales: scale_count() halves). Rounds to nearest (ties to even), against the scale as
// stored. Throws std::invalid_argument for a weight that is not finite or a block whose
// scale does not fit in a half (|W| > 127 * 65504 ~= 8.3e6).
void quantize_q8(const WeightMatrix& src, int8_t* data, uint16_t* scales);

// Quantizes a F32 / F16 / BF16 matrix of any layout to Q4 (data: Q4Layout::data_bytes(),
// scales: scale_count() halves), by the rule above. Throws std::invalid_argument for a weight
// that is not finite or a block whose scale does not fit in a half (|W| > 8 * 65504 ~= 5.2e5).
void quantize_q4(const WeightMatrix& src, uint8_t* data, uint16_t* scales);

// Readies the F16 matrix w (its data, which must be writable) for the kernels, in place: throws
// std::invalid_argument("<what>: F16 weights hold inf|NaN at element i (of n)") for a value that
// is not finite, and moves each subnormal half (|w| < 2^-14 = 6.1e-5) out of the matrix into
// `fixes` (appended, sorted by (n, k)), storing a zero (with its sign) in its place; returns
// how many. The kernels widen a half into float32 bits worth w * 2^-112 (halves.hpp), which for
// a subnormal half is a subnormal float, and x86 multiplies subnormal floats through a
// microcode assist (~100x slower; wasm cannot switch on flush-to-zero): N(0, 0.02) weights have
// ~0.24% of them, enough to make the F16 matrix-vector kernel 1.7x slower. Flushing them to zero
// alone changed each by up to 6.1e-5: with weights of real size (std 0.2) that made F16 logits
// ~25x less accurate than the same values widened on load. matmul() adds x[k] * value for each
// fix after the kernel (a few multiply-adds per thousand weights), so nothing is lost.
size_t prepare_f16_weights(const WeightMatrix& w, const char* what, std::vector<WeightFix>& fixes);

// y[m, n] += x[m, k] * value for each of w's fixes (what matmul() runs after its kernels).
void add_weight_fixes(const WeightMatrix& w, const float* x, int64_t M, float* y);

}  // namespace qkv
