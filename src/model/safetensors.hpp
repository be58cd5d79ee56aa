// A reader for the safetensors format over a byte buffer (no copies until asked):
//
//   [u64 little-endian N][N bytes of JSON header][data]
//   header: {"name": {"dtype": "F32", "shape": [r, c], "data_offsets": [begin, end]}, ...,
//            "__metadata__": {"key": "value", ...}}    (offsets relative to the data start)
//
// Everything is checked before any tensor is read: the header length against the file,
// the header as strict JSON, each entry's keys, dtype, shape and offsets, the byte size
// against dtype x shape, and the tensors against each other (they must tile the data
// region exactly: no overlap, no gap, nothing past the end or after the last tensor).
// Damage raises std::invalid_argument naming the tensor and the numbers involved.
// Tensors of dtype F32, F16 and BF16 convert to float32; other known dtypes are accepted
// in the file (their sizes are checked) but cannot be converted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qkv::safetensors {

enum class DType {
  BOOL,
  U8,
  I8,
  U16,
  I16,
  F16,
  BF16,
  U32,
  I32,
  F32,
  U64,
  I64,
  F64,
  F8_E4M3,
  F8_E5M2,
  // GGUF's block-quantized types, in a GGUF file's index only (gguf_model.hpp): a safetensors
  // header never names them. dtype_size() is 0 for them (a block is not whole elements).
  Q8_0,
  Q4_0,
  Q4_K,
  Q5_K,
  Q6_K
};

const char* dtype_name(DType d);
int64_t dtype_size(DType d);  // bytes per element

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets relative to the start of the data region
  // A GGUF file's index only (gguf_model.hpp): how the stored bytes differ from the Hugging Face
  // tensor `name` and `shape` describe.
  bool transposed = false;   // a matrix stored as the transpose of `shape` (GPT-2's Conv1D weights)
  int64_t rope_rows = 0;     // > 0: within each run of this many rows (a head), llama.cpp's converter
                             // stored row 2 i + h what is row h * rope_rows / 2 + i (rope interleaved)
  float stored_plus = 0.0f;  // a 1-D tensor stored plus this (Gemma's norms, written as 1 + w)
  int64_t numel() const;
};

struct Limits {
  uint64_t max_header_bytes = 100u << 20;  // 100 MB, as the reference implementation
  int max_rank = 16;
};

class File {
 public:
  // Parses and validates the header of the safetensors bytes [data, data + size). The bytes
  // are not copied: they must outlive this object.
  static File parse(const uint8_t* data, size_t size, const Limits& limits = {});
  // The same checks from the file's first `available` bytes (its 8-byte length and whole JSON
  // header, at least) for a file of `size` bytes whose data has not arrived: a file that streams
  // in (WeightLoader's feed). bytes() and to_f32() are then not for use (has_bytes() is false).
  static File parse_header(const uint8_t* data, size_t available, uint64_t size, const Limits& limits = {});
  // An index of tensors another reader has checked (a GGUF file's, renamed: gguf_model.hpp):
  // `tensors` lie in [data_offset, size) of the file whose bytes are at base (null while it
  // streams in).
  static File index(std::vector<TensorInfo> tensors, uint64_t data_offset, uint64_t size, const uint8_t* base);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in file (offset) order
  const TensorInfo* find(std::string_view name) const;                 // nullptr when absent
  // "__metadata__", sorted by key
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  uint64_t header_bytes() const { return header_bytes_; }
  uint64_t data_offset() const {
    return data_offset_ ? data_offset_ : 8 + header_bytes_;
  }  // where the data region starts

  uint64_t size() const { return size_; }  // the whole file's bytes
  // Where a tensor's bytes start in the file
  uint64_t offset(const TensorInfo& t) const { return data_offset() + t.begin; }
  bool has_bytes() const { return base_ != nullptr; }
  // The raw bytes of a tensor (within the buffer given to parse()).
  const uint8_t* bytes(const TensorInfo& t) const { return base_ + offset(t); }

  // Converts a F32/F16/BF16 tensor to float32 (little-endian in the file). Throws
  // std::invalid_argument for other dtypes, naming the tensor.
  std::vector<float> to_f32(const TensorInfo& t) const;
  void to_f32(const TensorInfo& t, float* out) const;  // out holds numel() floats

 private:
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t header_bytes_ = 0;
  uint64_t data_offset_ = 0;  // an index's (else 8 + header_bytes_)
  std::vector<TensorInfo> tensors_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

// t's values, from its bytes at p (any alignment; the file's, or a copy of them), as float32, as
// File::to_f32 converts them (the same Error for another dtype).
void to_f32(const TensorInfo& t, const uint8_t* p, float* out);

// "[2, 3]"
std::string shape_string(const std::vector<int64_t>& shape);

// t, the lookup of `name` (nullptr when absent), checked against the shape a model's config
// needs: throws std::invalid_argument "<model>: missing tensor "<name>" (expected shape [..])"
// or "<model>: tensor "<t->name>" has shape [..], but the config needs [..]".
const TensorInfo& expect_shape(const TensorInfo* t, const std::string& name, const std::vector<int64_t>& want,
                               const std::string& model);

// IEEE half and bfloat16 to float32 (exact).
float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t b);

}  // namespace qkv::safetensors
