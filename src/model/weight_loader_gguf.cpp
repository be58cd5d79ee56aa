// WeightLoader's reading of a GGUF file's tensors (model/gguf_model.hpp): block-quantized
// matrices (Q8_0 and Q4_0 repacked as they are into qkv's Q8 / Q4, or dequantized and then
// quantized or converted like a float matrix), the "llama" architecture's q / k rows put back in
// Hugging Face's order, Gemma's norms stored as 1 + w. Each [N, K] matrix is read in strips of
// whole rows (whole heads where rows move), so a streaming load holds one strip at a time.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "matmul/halves.hpp"
#include "model/gguf_blocks.hpp"
#include "model/safetensors.hpp"
#include "model/weight_loader.hpp"

namespace qkv {

namespace {

gguf::TensorType block_type(safetensors::DType d) {
  switch (d) {
    case safetensors::DType::Q8_0:
      return gguf::TensorType::Q8_0;
    case safetensors::DType::Q4_0:
      return gguf::TensorType::Q4_0;
    case safetensors::DType::Q4_K:
      return gguf::TensorType::Q4_K;
    case safetensors::DType::Q5_K:
      return gguf::TensorType::Q5_K;
    default:
      return gguf::TensorType::Q6_K;
  }
}

// Row r of Hugging Face's order within a head of `rope_rows` rows: the stored row it comes from
// (llama.cpp's permute() wrote HF row h * D/2 + i as row 2 i + h).
int64_t stored_row(int64_t r, int64_t rope_rows) {
  if (rope_rows <= 0) return r;
  const int64_t head = r / rope_rows, j = r % rope_rows, half = rope_rows / 2;
  return head * rope_rows + 2 * (j % half) + j / half;
}

}  // namespace

int WeightLoader::Source::stored() const {
  if (block >= 0) return block;
  return int(type == WeightType::F32   ? gguf::TensorType::F32
             : type == WeightType::F16 ? gguf::TensorType::F16
                                       : gguf::TensorType::BF16);
}

size_t WeightLoader::Source::row_bytes(int64_t K) const {
  if (block >= 0) return gguf::row_bytes(gguf::TensorType(block), K);
  return size_t(K) * element_size();
}

void WeightLoader::set_block_source(const safetensors::TensorInfo& t, Source* s) const {
  const gguf::TensorType b = block_type(t.dtype);
  s->block = int(b);
  // what 'auto' holds it as: Q4_0 as qkv's Q4, Q8_0 as Q8, the K-quants converted to Q8
  s->type = b == gguf::TensorType::Q4_0 ? WeightType::Q4 : WeightType::Q8;
  if (t.shape.empty() || t.shape.back() % gguf::block_elements(b) != 0) {
    fail(t.name, "a " + std::string(safetensors::dtype_name(t.dtype)) + " tensor of shape " +
                     safetensors::shape_string(t.shape) + " is not whole blocks along its rows");
  }
}

int64_t WeightLoader::strip_rows(const MatrixPlan& m) {
  constexpr int64_t kStrip = 64;  // 16 Q8 groups, 4 Q4 sets
  return m.src.rope_rows > 0 ? std::lcm(kStrip, m.src.rope_rows) : kStrip;
}

void WeightLoader::decode_rows(const MatrixPlan& m, int64_t row0, int64_t rows, const uint8_t* src, uint8_t* at) const {
  const Source& s = m.src;
  const size_t row = s.row_bytes(m.K);
  // the strip's rows in Hugging Face's order (a copy only when rows move)
  std::vector<uint8_t> ordered;
  if (s.rope_rows > 0) {
    ordered.resize(size_t(rows) * row);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(ordered.data() + size_t(r) * row, src + size_t(stored_row(r, s.rope_rows)) * row, row);
    src = ordered.data();
  }
  const bool q8 = m.to == WeightType::Q8, q4 = m.to == WeightType::Q4;
  const size_t blocks = size_t((m.K + 31) / 32);
  uint8_t* data = at + size_t(row0) * column_bytes(m);
  uint16_t* scales = nullptr;
  if (q8) scales = reinterpret_cast<uint16_t*>(at + Q8Layout::of(m.K, m.N).data_bytes()) + size_t(row0) * blocks;
  if (q4) scales = reinterpret_cast<uint16_t*>(at + Q4Layout::of(m.K, m.N).data_bytes()) + size_t(row0) * blocks;
  try {
    if (q8 && s.block == int(gguf::TensorType::Q8_0)) {
      // as stored: Q8's 16-column strips and Q8_0's rows hold the same blocks (a strip's data
      // and scales consecutive in the whole matrix's layout, as quantize_rows places them)
      const size_t strip_data = Q8Layout::of(m.K, rows).data_bytes();
      std::vector<int8_t> tmp(strip_data);
      gguf::repack_q8_0(src, m.K, rows, tmp.data(), scales);
      std::memcpy(data, tmp.data(), strip_data);
      return;
    }
    if (q4 && s.block == int(gguf::TensorType::Q4_0)) {
      const size_t strip_data = Q4Layout::of(m.K, rows).data_bytes();
      std::vector<uint8_t> tmp(strip_data);
      gguf::repack_q4_0(src, m.K, rows, tmp.data(), scales);
      std::memcpy(data, tmp.data(), strip_data);
      return;
    }
    // else through float32: the rows dequantized (or widened), then as a float source's rows
    std::vector<float> values(size_t(rows * m.K));
    gguf::dequantize_rows(gguf::TensorType(s.stored()), src, m.K, rows, values.data());
    MatrixPlan f = m;
    f.src.type = WeightType::F32;
    f.src.block = -1;
    f.src.rope_rows = 0;
    f.src.bytes = reinterpret_cast<const uint8_t*>(values.data());
    f.src.count = values.size();
    if (q8 || q4) {
      quantize_rows(f, rows, f.src.bytes, data, scales);
    } else {
      f.N = rows;
      convert(f, at + size_t(row0 * m.K) * WeightMatrix{m.to, m.layout, 1, 1}.bytes(), false, size_t(row0 * m.K));
    }
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).rfind(model_, 0) == 0) throw;
    fail(s.name, e.what());
  }
}

void WeightLoader::decode_matrix(const MatrixPlan& m, uint8_t* at) const {
  if (m.layout != WeightLayout::OutIn) throw std::logic_error(model_ + ": internal: a GGUF matrix that is not [N, K]");
  const int64_t strip = strip_rows(m);
  const size_t row = m.src.row_bytes(m.K);
  for (int64_t r = 0; r < m.N; r += strip) {
    const int64_t rows = std::min(strip, m.N - r);
    decode_rows(m, r, rows, m.src.bytes + size_t(r) * row, at);
  }
}

void WeightLoader::read_vector(const Source& v, const uint8_t* bytes, float* out) const {
  std::vector<float> values(v.count);
  gguf::dequantize_rows(gguf::TensorType(v.stored()), bytes, int64_t(v.count), 1, values.data());
  for (size_t i = 0; i < v.count; ++i) {
    // (1 + w) - 1 is exact for |w| <= 1 (Sterbenz), so Gemma's norms come back as stored in HF
    out[i] = values[size_t(stored_row(int64_t(i), v.rope_rows))] - v.stored_plus;
  }
}

}  // namespace qkv
