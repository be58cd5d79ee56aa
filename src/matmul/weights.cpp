#include "matmul/weights.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "matmul/halves.hpp"

namespace qkv {

const char* weight_type_name(WeightType t) {
  switch (t) {
    case WeightType::F32:
      return "F32";
    case WeightType::F16:
      return "F16";
    case WeightType::BF16:
      return "BF16";
    case WeightType::Q8:
      return "Q8";
    case WeightType::Q4:
      return "Q4";
  }
  return "?";
}

Q8Layout Q8Layout::of(int64_t K, int64_t N) { return {(N + 3) / 4, (K + 31) / 32}; }
Q4Layout Q4Layout::of(int64_t K, int64_t N) { return {(N + 15) / 16, (K + 31) / 32}; }

size_t WeightMatrix::bytes() const {
  switch (type) {
    case WeightType::F32:
      return size_t(K) * size_t(N) * 4;
    case WeightType::F16:
    case WeightType::BF16:
      return size_t(K) * size_t(N) * 2;
    case WeightType::Q8:
      return Q8Layout::of(K, N).bytes();
    case WeightType::Q4:
      return Q4Layout::of(K, N).bytes();
  }
  return 0;
}

namespace {

// Index of W[k, n] among the stored elements of a float matrix.
size_t element_index(const WeightMatrix& w, int64_t k, int64_t n) {
  switch (w.layout) {
    case WeightLayout::InOut:
      return size_t(k * w.N + n);
    case WeightLayout::OutIn:
      return size_t(n * w.K + k);
    case WeightLayout::Panels:
      break;
  }
  const int64_t first = n / kPanel * kPanel, width = std::min(kPanel, w.N - first);
  return size_t(first * w.K + k * width + n - first);
}

// Byte offset of W[k, n] in Q8 data, and the index of its block's scale.
size_t q8_offset(const Q8Layout& q, int64_t k, int64_t n) {
  const int64_t g = n / 4, c = n % 4, b = k / 32, p = (k % 32) / 2, parity = k % 2;
  return size_t(((g * q.blocks + b) * 16 + p) * 8 + c * 2 + parity);
}
size_t q8_scale_index(const Q8Layout& q, int64_t k, int64_t n) {
  return size_t((n / 4 * q.blocks + k / 32) * 4 + n % 4);
}

// Q4: the byte holding W[k, n]'s nibble, the nibble's shift in it, and its block's scale index.
size_t q4_byte(const Q4Layout& q, int64_t k, int64_t n, int* shift) {
  const int64_t s = n / 16, g = (n % 16) / 4, c = n % 4, b = k / 32, quad = (k % 32) / 4, i = k % 4;
  *shift = int(g % 2) * 4;  // groups 0 and 2 in the low nibbles, 1 and 3 in the high ones
  return size_t(((s * q.blocks + b) * 8 + quad) * 32 + (g / 2) * 16 + 4 * c + i);
}
size_t q4_scale_index(const Q4Layout& q, int64_t k, int64_t n) {
  return size_t((n / 16 * q.blocks + k / 32) * 16 + n % 16);
}

// The inverse: storage element i of a float matrix is W[*k, *n].
void element_position(const WeightMatrix& w, size_t i, int64_t* k, int64_t* n) {
  const int64_t e = int64_t(i);
  switch (w.layout) {
    case WeightLayout::InOut:
      *k = e / w.N, *n = e % w.N;
      return;
    case WeightLayout::OutIn:
      *n = e / w.K, *k = e % w.K;
      return;
    case WeightLayout::Panels:
      break;
  }
  const int64_t first = e / (kPanel * w.K) * kPanel, width = std::min(kPanel, w.N - first), at = e - first * w.K;
  *k = at / width, *n = first + at % width;
}

bool fix_before(const WeightFix& a, const WeightFix& b) { return a.n != b.n ? a.n < b.n : a.k < b.k; }

}  // namespace

float weight_at(const WeightMatrix& w, int64_t k, int64_t n) {
  switch (w.type) {
    case WeightType::F32: {
      float v;
      std::memcpy(&v, static_cast<const float*>(w.data) + element_index(w, k, n), 4);
      return v;
    }
    case WeightType::F16: {
      const auto* fix =
          std::lower_bound(w.fixes, w.fixes + w.fix_count, WeightFix{int32_t(n), int32_t(k), 0.0f}, fix_before);
      if (fix != w.fixes + w.fix_count && fix->n == n && fix->k == k) return fix->value;
      return halves::f16_to_f32(static_cast<const uint16_t*>(w.data)[element_index(w, k, n)]);
    }
    case WeightType::BF16:
      return halves::bf16_to_f32(static_cast<const uint16_t*>(w.data)[element_index(w, k, n)]);
    case WeightType::Q8: {
      const Q8Layout q = Q8Layout::of(w.K, w.N);
      return halves::f16_to_f32(w.scales[q8_scale_index(q, k, n)]) *
             float(static_cast<const int8_t*>(w.data)[q8_offset(q, k, n)]);
    }
    case WeightType::Q4: {
      const Q4Layout q = Q4Layout::of(w.K, w.N);
      int shift = 0;
      const uint8_t byte = static_cast<const uint8_t*>(w.data)[q4_byte(q, k, n, &shift)];
      return halves::f16_to_f32(w.scales[q4_scale_index(q, k, n)]) * float(int((byte >> shift) & 15) - 8);
    }
  }
  return 0.0f;
}

void read_column(const WeightMatrix& w, int64_t n, float* out) {
  if (w.type == WeightType::F32 && w.layout == WeightLayout::OutIn) {  // a contiguous row of the table
    std::memcpy(out, static_cast<const float*>(w.data) + n * w.K, size_t(w.K) * 4);
    return;
  }
  const WeightMatrix stored{w.type, w.layout, w.K, w.N, w.data, w.scales};  // without the fixes
  for (int64_t k = 0; k < w.K; ++k) out[k] = weight_at(stored, k, n);
  const auto column = std::equal_range(w.fixes, w.fixes + w.fix_count, WeightFix{int32_t(n), 0, 0.0f},
                                       [](const WeightFix& a, const WeightFix& b) { return a.n < b.n; });
  for (const WeightFix* f = column.first; f != column.second; ++f) out[f->k] = f->value;
}

namespace {

// Decodes element i of a float matrix's storage.
template <WeightType T>
float decode(const void* data, size_t i) {
  if constexpr (T == WeightType::F32) {
    float v;
    std::memcpy(&v, static_cast<const float*>(data) + i, 4);
    return v;
  } else if constexpr (T == WeightType::F16) {
    return halves::f16_to_f32(static_cast<const uint16_t*>(data)[i]);
  } else {
    return halves::bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
  }
}

// out[c][k] = W[k, n0 + c] for c < count, k < K; zeros for k in [K, Kp). Reads the storage in
// order (rows of an InOut matrix, columns of an OutIn one).
template <WeightType T>
void gather_columns(const WeightMatrix& w, int64_t n0, int64_t count, int64_t Kp, float* out) {
  for (int64_t c = 0; c < count; ++c) std::fill(out + c * Kp + w.K, out + (c + 1) * Kp, 0.0f);
  if (w.layout == WeightLayout::OutIn) {
    for (int64_t c = 0; c < count; ++c)
      for (int64_t k = 0; k < w.K; ++k) out[c * Kp + k] = decode<T>(w.data, size_t((n0 + c) * w.K + k));
  } else if (w.layout == WeightLayout::Panels) {
    for (int64_t k = 0; k < w.K; ++k)
      for (int64_t c = 0; c < count; ++c) out[c * Kp + k] = decode<T>(w.data, element_index(w, k, n0 + c));
  } else {
    for (int64_t k = 0; k < w.K; ++k)
      for (int64_t c = 0; c < count; ++c) out[c * Kp + k] = decode<T>(w.data, size_t(k * w.N + n0 + c));
  }
}

// One Q8 block: 32 values of one column -> scale and 32 int8 at stride (pairs of 8 bytes).
void quantize_block(const float* v, int8_t* out, int64_t column, uint16_t* scale) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) {
    if (!std::isfinite(v[i])) throw std::invalid_argument("quantize_q8: a weight is " + std::to_string(v[i]));
    amax = std::max(amax, std::fabs(v[i]));
  }
  constexpr float kMinNormalHalf = 6.103515625e-05f;  // 2^-14
  const float want = amax > 0.0f ? std::max(amax / 127.0f, kMinNormalHalf) : 0.0f;
  *scale = halves::f32_to_f16(want);
  if ((*scale & 0x7C00u) == 0x7C00u) {
    throw std::invalid_argument("quantize_q8: a block's largest weight " + std::to_string(amax) +
                                " is beyond what an 8-bit block with a half scale holds (|w| <= 8.3e6)");
  }
  const float d = halves::f16_to_f32(*scale);  // the scale as stored: q = nearest(v / d)
  const float inv = d > 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < 32; ++i) {
    const float r = std::nearbyint(v[i] * inv);
    out[(i / 2) * 8 + column * 2 + i % 2] = int8_t(std::min(127.0f, std::max(-127.0f, r)));
  }
}

template <WeightType T>
void quantize_q8_as(const WeightMatrix& src, int8_t* data, uint16_t* scales) {
  const Q8Layout q = Q8Layout::of(src.K, src.N);
  const int64_t Kp = q.blocks * 32;
  constexpr int64_t kStrip = 64;  // columns gathered at a time: 16 groups
  std::vector<float> strip(size_t(kStrip * Kp));
  for (int64_t n0 = 0; n0 < q.groups * 4; n0 += kStrip) {
    const int64_t count = std::min(kStrip, src.N - n0);  // real columns in the strip (the rest: zeros)
    std::fill(strip.begin(), strip.end(), 0.0f);
    if (count > 0) gather_columns<T>(src, n0, count, Kp, strip.data());
    for (int64_t g = n0 / 4; g < std::min(q.groups, (n0 + kStrip) / 4); ++g) {
      for (int64_t b = 0; b < q.blocks; ++b) {
        for (int64_t c = 0; c < 4; ++c) {
          const float* v = strip.data() + (g * 4 + c - n0) * Kp + b * 32;
          quantize_block(v, data + (g * q.blocks + b) * 128, c, scales + (g * q.blocks + b) * 4 + c);
        }
      }
    }
  }
}

// One Q4 block: 32 values of one column -> its scale and the 32 nibbles, or'ed into the set's
// zeroed data (`set`: the block's 256 bytes) for column c16 (0..15) of the set.
void quantize_block_q4(const float* v, uint8_t* set, int c16, uint16_t* scale) {
  float m = 0.0f;  // the value of largest magnitude (the first of several)
  for (int i = 0; i < 32; ++i) {
    if (!std::isfinite(v[i])) throw std::invalid_argument("quantize_q4: a weight is " + std::to_string(v[i]));
    if (std::fabs(v[i]) > std::fabs(m)) m = v[i];
  }
  constexpr float kMinNormalHalf = 6.103515625e-05f;  // 2^-14
  const float want = m / -8.0f;
  *scale = halves::f32_to_f16(m == 0.0f ? 0.0f : std::copysign(std::max(std::fabs(want), kMinNormalHalf), want));
  if ((*scale & 0x7C00u) == 0x7C00u) {
    throw std::invalid_argument("quantize_q4: a block's largest weight " + std::to_string(std::fabs(m)) +
                                " is beyond what a 4-bit block with a half scale holds (|w| <= 5.2e5)");
  }
  const float d = halves::f16_to_f32(*scale);  // the scale as stored: q = nearest(v / d)
  const float inv = d != 0.0f ? 1.0f / d : 0.0f;
  const int g = c16 / 4, c = c16 % 4;
  for (int i = 0; i < 32; ++i) {
    const float r = std::min(7.0f, std::max(-8.0f, std::nearbyint(v[i] * inv)));
    const int u = int(r) + 8;
    set[(i / 4) * 32 + (g / 2) * 16 + 4 * c + i % 4] |= uint8_t(u << ((g % 2) * 4));  // weights.hpp's layout
  }
}

template <WeightType T>
void quantize_q4_as(const WeightMatrix& src, uint8_t* data, uint16_t* scales) {
  const Q4Layout q = Q4Layout::of(src.K, src.N);
  const int64_t Kp = q.blocks * 32;
  constexpr int64_t kStrip = 64;  // columns gathered at a time: 4 sets
  std::vector<float> strip(size_t(kStrip * Kp));
  std::fill(data, data + q.data_bytes(), uint8_t(0));
  for (int64_t n0 = 0; n0 < q.sets * 16; n0 += kStrip) {
    const int64_t count = std::min(kStrip, src.N - n0);  // real columns in the strip (the rest: zeros)
    std::fill(strip.begin(), strip.end(), 0.0f);
    if (count > 0) gather_columns<T>(src, n0, count, Kp, strip.data());
    for (int64_t s = n0 / 16; s < std::min(q.sets, (n0 + kStrip) / 16); ++s) {
      for (int64_t b = 0; b < q.blocks; ++b) {
        for (int c = 0; c < 16; ++c) {
          const float* v = strip.data() + (s * 16 + c - n0) * Kp + b * 32;
          quantize_block_q4(v, data + (s * q.blocks + b) * 256, c, scales + (s * q.blocks + b) * 16 + c);
        }
      }
    }
  }
}

}  // namespace

void quantize_q4(const WeightMatrix& src, uint8_t* data, uint16_t* scales) {
  switch (src.type) {
    case WeightType::F32:
      return quantize_q4_as<WeightType::F32>(src, data, scales);
    case WeightType::F16:
      return quantize_q4_as<WeightType::F16>(src, data, scales);
    case WeightType::BF16:
      return quantize_q4_as<WeightType::BF16>(src, data, scales);
    case WeightType::Q8:
    case WeightType::Q4:
      throw std::invalid_argument(std::string("quantize_q4: the source is already ") + weight_type_name(src.type));
  }
}

void quantize_q8(const WeightMatrix& src, int8_t* data, uint16_t* scales) {
  switch (src.type) {
    case WeightType::F32:
      return quantize_q8_as<WeightType::F32>(src, data, scales);
    case WeightType::F16:
      return quantize_q8_as<WeightType::F16>(src, data, scales);
    case WeightType::BF16:
      return quantize_q8_as<WeightType::BF16>(src, data, scales);
    case WeightType::Q8:
    case WeightType::Q4:
      throw std::invalid_argument(std::string("quantize_q8: the source is already ") + weight_type_name(src.type));
  }
}

size_t prepare_f16_weights(const WeightMatrix& w, const char* what, std::vector<WeightFix>& fixes) {
  uint16_t* p = static_cast<uint16_t*>(const_cast<void*>(w.data));
  const size_t n = size_t(w.K * w.N), first = fixes.size();
  for (size_t i = 0; i < n; ++i) {
    const uint16_t exponent = p[i] & 0x7C00u, mantissa = p[i] & 0x3FFu;
    if (exponent == 0x7C00u) {
      throw std::invalid_argument(std::string(what) + ": F16 weights hold " + (mantissa ? "NaN" : "inf") +
                                  " at element " + std::to_string(i) + " (of " + std::to_string(n) + ")");
    }
    if (exponent == 0 && mantissa != 0) {
      int64_t k = 0, col = 0;
      element_position(w, i, &k, &col);
      fixes.push_back({int32_t(col), int32_t(k), halves::f16_to_f32(p[i])});
      p[i] &= 0x8000u;  // to zero, keeping its sign
    }
  }
  std::sort(fixes.begin() + std::ptrdiff_t(first), fixes.end(), fix_before);
  return fixes.size() - first;
}

void add_weight_fixes(const WeightMatrix& w, const float* x, int64_t M, float* y) {
  for (size_t i = 0; i < w.fix_count; ++i) {
    const WeightFix& f = w.fixes[i];
    for (int64_t m = 0; m < M; ++m) y[m * w.N + f.n] += x[m * w.K + f.k] * f.value;
  }
}

namespace {

template <class T>
void panels_of(T* p, int64_t K, int64_t N, WeightLayout from, std::vector<T>& scratch) {
  if (from == WeightLayout::Panels) return;
  if (from == WeightLayout::InOut) scratch.assign(p, p + K * N);  // the [K, N] original
  for (int64_t n0 = 0; n0 < N; n0 += kPanel) {
    const int64_t width = std::min(kPanel, N - n0);
    T* panel = p + n0 * K;  // [K][width], where rows n0 .. n0 + width of an [N, K] source were
    if (from == WeightLayout::OutIn) {
      scratch.assign(panel, panel + width * K);  // those rows, [width][K]
      for (int64_t k = 0; k < K; ++k)
        for (int64_t c = 0; c < width; ++c) panel[k * width + c] = scratch[size_t(c * K + k)];
    } else {
      for (int64_t k = 0; k < K; ++k)
        std::memcpy(panel + k * width, scratch.data() + k * N + n0, size_t(width) * sizeof(T));
    }
  }
}

}  // namespace

void to_panels(float* p, int64_t K, int64_t N, WeightLayout from, std::vector<float>& scratch) {
  panels_of(p, K, N, from, scratch);
}
void to_panels(uint16_t* p, int64_t K, int64_t N, WeightLayout from, std::vector<uint16_t>& scratch) {
  panels_of(p, K, N, from, scratch);
}

}  // namespace qkv
