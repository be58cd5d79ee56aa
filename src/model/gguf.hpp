// A reader for GGUF, llama.cpp's model file, over a byte buffer (ggml's docs/gguf.md):
//
//   "GGUF" u32 version (2 or 3) u64 tensor_count u64 metadata_kv_count
//   metadata_kv_count x { string key, u32 value_type, value }
//   tensor_count x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
//   padding to general.alignment (default 32), then the tensor data; offsets count from there
//
// Strings are u64 length + UTF-8 bytes; an array value is u32 element type, u64 count, elements.
// Everything is little-endian. Every count, length, dimension and offset is checked against the
// bytes that remain before anything is allocated or read: damage raises std::invalid_argument
// "gguf: <where>: <what>" naming the key or tensor and the numbers, never a trap or a hang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::gguf {

// Metadata value types (gguf_type).
enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12
};

// The tensor types (ggml_type) this reader knows the block size of. Those the loaders convert:
// F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K; the others are read (their sizes checked) and
// refused by the loaders by name.
enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30
};

const char* tensor_type_name(TensorType t);  // "F32", "Q4_K", ...
// Elements per block and bytes per block of t (1 and the element size for the plain types).
int64_t block_elements(TensorType t);
int64_t block_bytes(TensorType t);

// A metadata value: one number, a bool, a string, or an array of one of them (nested arrays
// are refused). Integers of every width are held in `i` (U64 above 2^63 refused), floats in `f`.
struct Value {
  ValueType type = ValueType::U8;
  ValueType element = ValueType::U8;  // an ARRAY's element type
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::vector<int64_t> ints;         // ARRAY of integers or bools
  std::vector<double> floats;        // ARRAY of F32 / F64
  std::vector<std::string> strings;  // ARRAY of STRING
  size_t count = 0;                  // an ARRAY's length

  bool is_integer() const;  // an integer or bool scalar
  bool is_number() const;   // an integer, bool or float scalar
  double number() const;    // as a double (is_number)
};

struct TensorInfo {
  std::string name;
  TensorType type = TensorType::F32;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous (innermost) dimension
  uint64_t offset = 0;      // from the data region's start
  uint64_t bytes = 0;       // size in the file (whole blocks)
  int64_t numel() const;
  // The shape as numpy / PyTorch write it: ne reversed ([rows, ne0] for a matrix).
  std::vector<int64_t> shape() const;
};

struct Limits {
  uint64_t max_string_bytes = 1u << 20;  // a key, a tensor name, a string value
  int max_dims = 4;                      // GGML_MAX_DIMS
};

// parse_header on bytes that end inside the header: the caller reads more and tries again.
struct Incomplete : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

class File {
 public:
  // Parses and checks a whole GGUF file [data, data + size): the header, and every tensor
  // inside the data region, none overlapping. The bytes are not copied: they must outlive this.
  static File parse(const uint8_t* data, size_t size, const Limits& limits = {});
  // The same checks from the file's first `available` bytes, for a file of `size` bytes that
  // streams in. Throws Incomplete when the header runs past `available` (but not past `size`).
  static File parse_header(const uint8_t* data, size_t available, uint64_t size, const Limits& limits = {});

  uint32_t version() const { return version_; }
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }  // file order
  const Value* find(std::string_view key) const;                                            // nullptr when absent
  const std::vector<TensorInfo>& tensors() const { return tensors_; }                       // file order
  const TensorInfo* find_tensor(std::string_view name) const;
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // where the data region starts in the file
  uint64_t size() const { return size_; }
  bool has_bytes() const { return base_ != nullptr; }
  const uint8_t* base() const { return base_; }  // the file's first byte (null from parse_header)
  const uint8_t* bytes(const TensorInfo& t) const { return base_ + data_offset_ + t.offset; }

  // Typed lookups for what the model mapping reads: throw "gguf: metadata <key>: ..." when
  // the key is absent (the *_or forms give the default) or of another type.
  std::string string(std::string_view key) const;
  int64_t integer(std::string_view key) const;
  int64_t integer_or(std::string_view key, int64_t fallback) const;
  double number_or(std::string_view key, double fallback) const;

 private:
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0, data_offset_ = 0, alignment_ = 32;
  uint32_t version_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<TensorInfo> tensors_;
};

// The first 4 bytes are GGUF's magic (what tells a GGUF file from a safetensors one).
bool is_gguf(const uint8_t* data, size_t size);

}  // namespace qkv::gguf
