#include "model/gguf_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "matmul/halves.hpp"
#include "matmul/weights.hpp"

namespace qkv::gguf {

namespace {

uint16_t u16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }

// An f16 scale of a block, which must be finite.
float scale(const uint8_t* p, TensorType t) {
  const uint16_t h = u16(p);
  if ((h & 0x7C00u) == 0x7C00u) {
    throw std::invalid_argument(std::string("gguf: a ") + tensor_type_name(t) + " block's scale is " +
                                ((h & 0x3FFu) ? "NaN" : "inf"));
  }
  return halves::f16_to_f32(h);
}

// Q4_K / Q5_K: sub-block j's 6-bit scale and min from the 12 packed bytes q
void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void dequantize_q8_0(const uint8_t* b, float* y) {
  const float d = scale(b, TensorType::Q8_0);
  for (int j = 0; j < 32; ++j) y[j] = d * float(int8_t(b[2 + j]));
}

void dequantize_q4_0(const uint8_t* b, float* y) {
  const float d = scale(b, TensorType::Q4_0);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float((b[2 + j] & 0xF) - 8);
    y[j + 16] = d * float((b[2 + j] >> 4) - 8);
  }
}

// Q4_K and Q5_K (qh: Q5_K's high bits, else null)
void dequantize_k4(const uint8_t* b, const uint8_t* qh, const uint8_t* qs, float* y, TensorType t) {
  const float d = scale(b, t), dmin = scale(b + 2, t);
  const uint8_t* scales = b + 4;
  for (int j = 0; j < 4; ++j) {  // 64 weights: sub-blocks 2j (low nibbles) and 2j + 1 (high)
    int sc, m;
    scale_min_k4(2 * j, scales, &sc, &m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    scale_min_k4(2 * j + 1, scales, &sc, &m);
    const float d2 = d * float(sc), m2 = dmin * float(m);
    const uint8_t* q = qs + 32 * j;
    for (int l = 0; l < 32; ++l) {
      const int hi1 = qh && (qh[l] >> (2 * j) & 1) ? 16 : 0, hi2 = qh && (qh[l] >> (2 * j + 1) & 1) ? 16 : 0;
      y[64 * j + l] = d1 * float((q[l] & 0xF) + hi1) - m1;
      y[64 * j + 32 + l] = d2 * float((q[l] >> 4) + hi2) - m2;
    }
  }
}

void dequantize_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = scale(b + 208, TensorType::Q6_K);
  for (int n = 0; n < 2; ++n) {  // halves of 128 weights
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = int((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4)) - 32;
      const int q2 = int((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4)) - 32;
      const int q3 = int((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
      const int q4 = int((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
      y[l] = d * float(sc[is]) * float(q1);
      y[l + 32] = d * float(sc[is + 2]) * float(q2);
      y[l + 64] = d * float(sc[is + 4]) * float(q3);
      y[l + 96] = d * float(sc[is + 6]) * float(q4);
    }
    y += 128, ql += 64, qh += 32, sc += 8;
  }
}

}  // namespace

bool can_dequantize(TensorType t) {
  switch (t) {
    case TensorType::F32:
    case TensorType::F16:
    case TensorType::BF16:
    case TensorType::Q8_0:
    case TensorType::Q4_0:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
    case TensorType::Q6_K:
      return true;
    default:
      return false;
  }
}

size_t row_bytes(TensorType t, int64_t K) { return size_t(K / block_elements(t) * block_bytes(t)); }

void dequantize_rows(TensorType t, const uint8_t* src, int64_t K, int64_t rows, float* out) {
  if (!can_dequantize(t)) {
    throw std::invalid_argument(std::string("gguf: tensor type ") + tensor_type_name(t) +
                                " is not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K are)");
  }
  const size_t n = size_t(K * rows);
  const int64_t be = block_elements(t), bb = block_bytes(t);
  switch (t) {
    case TensorType::F32:
      for (size_t i = 0; i < n; ++i) std::memcpy(out + i, src + 4 * i, 4);
      return;
    case TensorType::F16:
      for (size_t i = 0; i < n; ++i) out[i] = halves::f16_to_f32(u16(src + 2 * i));
      return;
    case TensorType::BF16:
      for (size_t i = 0; i < n; ++i) out[i] = halves::bf16_to_f32(u16(src + 2 * i));
      return;
    default:
      break;
  }
  for (size_t blk = 0; blk < n / size_t(be); ++blk) {
    const uint8_t* b = src + blk * size_t(bb);
    float* y = out + blk * size_t(be);
    switch (t) {
      case TensorType::Q8_0:
        dequantize_q8_0(b, y);
        break;
      case TensorType::Q4_0:
        dequantize_q4_0(b, y);
        break;
      case TensorType::Q4_K:
        dequantize_k4(b, nullptr, b + 16, y, t);
        break;
      case TensorType::Q5_K:
        dequantize_k4(b, b + 16, b + 48, y, t);
        break;
      default:
        dequantize_q6_k(b, y);
        break;
    }
  }
}

void repack_q8_0(const uint8_t* src, int64_t K, int64_t rows, int8_t* data, uint16_t* scales) {
  const Q8Layout q = Q8Layout::of(K, rows);
  std::memset(data, 0, q.data_bytes());
  std::fill(scales, scales + q.scale_count(), uint16_t(0));
  for (int64_t n = 0; n < rows; ++n) {
    const int64_t g = n / 4, c = n % 4;
    for (int64_t b = 0; b < q.blocks; ++b) {
      const uint8_t* blk = src + size_t(n * q.blocks + b) * 34;
      scale(blk, TensorType::Q8_0);  // finite
      scales[(g * q.blocks + b) * 4 + c] = u16(blk);
      int8_t* out = data + (g * q.blocks + b) * 128;
      for (int i = 0; i < 32; ++i) out[(i / 2) * 8 + c * 2 + i % 2] = std::max<int8_t>(int8_t(blk[2 + i]), -127);
    }
  }
}

void repack_q4_0(const uint8_t* src, int64_t K, int64_t rows, uint8_t* data, uint16_t* scales) {
  const Q4Layout q = Q4Layout::of(K, rows);
  std::memset(data, 0x88, q.data_bytes());  // the padding columns' nibbles as quantize_q4 writes them (q = 0)
  std::fill(scales, scales + q.scale_count(), uint16_t(0));
  for (int64_t n = 0; n < rows; ++n) {
    const int64_t s = n / 16, c16 = n % 16, g = c16 / 4, c = c16 % 4;
    for (int64_t b = 0; b < q.blocks; ++b) {
      const uint8_t* blk = src + size_t(n * q.blocks + b) * 18;
      scale(blk, TensorType::Q4_0);
      scales[(s * q.blocks + b) * 16 + c16] = u16(blk);
      uint8_t* set = data + (s * q.blocks + b) * 256;
      for (int i = 0; i < 32; ++i) {
        const int u = i < 16 ? blk[2 + i] & 0xF : blk[2 + i - 16] >> 4;
        uint8_t& byte = set[(i / 4) * 32 + (g / 2) * 16 + 4 * c + i % 4];
        const int shift = (g % 2) * 4;
        byte = uint8_t((byte & ~(0xF << shift)) | u << shift);
      }
    }
  }
}

}  // namespace qkv::gguf
