// Loading a decoder's weights from its safetensors file: the part GPT-2's and the Llama
// family's stores share (gpt2_weights.cpp and llama_weights.cpp list the tensors). Every tensor
// is found by name and checked against the shape the config needs (F32, F16 or BF16) before
// anything is allocated. Then the matrices are read in place from the file's buffer when every
// one stays in its stored dtype and is aligned for it; else all of them are converted (to F32,
// F16, BF16, Q8 or Q4), from a whole file (load) into its own buffer or a new one, or as the
// file streams in (begin_stream / feed / finish), never holding it. F16 matrices are readied for the
// kernels either way (finite, subnormals moved to the matrix's fixes: matmul/weights.hpp, prepare_f16_weights),
// and every float matrix a matmul reads is rewritten in panels of 16 columns where it lies (WeightLayout::Panels).
// 1-D parameters are read in place (aligned float32 in a kept file) or widened to float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "matmul/weights.hpp"

namespace qkv {

namespace safetensors {
class File;
struct TensorInfo;
}  // namespace safetensors

// How the matrices are held: as stored in the file, or converted on load. Int8 / Int4 apply to the
// matrices the matmuls read; a table that is only gathered from (GPT-2's wpe, an untied
// embed_tokens) keeps its stored dtype there. 1-D parameters (biases, norms) are always float32.
enum class WeightFormat { Auto, F32, F16, Int8, Int4 };

// "auto" | "f32" | "f16" | "int8" | "int4"; throws std::invalid_argument naming the value otherwise.
WeightFormat parse_weight_format(std::string_view name);
const char* weight_format_name(WeightFormat f);

// Bytes from malloc whose ownership passes to the loader (released with std::free).
struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using MallocBytes = std::unique_ptr<uint8_t, FreeDeleter>;

// Where the weights' bytes are (GPT-2's and the Llama family's stores alike).
struct WeightBytes {
  size_t file = 0;       // the safetensors buffer, when the weights are read in place from it (else freed: 0)
  size_t matrices = 0;   // the matrices and embedding tables as held (in the file or the converted buffer)
  size_t vectors = 0;    // 1-D parameters widened to float32 (the rest are read in place)
  size_t converted = 0;  // the buffer converted matrices live in (0 when read in place; the file's
                         // size when converted into the file's own buffer)
};

// The buffers a loaded model's weights point into.
struct WeightBuffers {
  MallocBytes file;            // the safetensors bytes, kept while tensors are read from them in place
  MallocBytes converted;       // the converted matrices, at 16-byte aligned offsets (null when in place;
                               // the file's own buffer when they fit where their sources were)
  std::vector<float> vectors;  // 1-D parameters widened to float32
  WeightBytes bytes;
  // F16 weights below 2^-14 in magnitude, stored as zero (prepare_f16_weights): 12 bytes each,
  // ~0.1-0.3% of the weights, not counted in `bytes`
  std::vector<WeightFix> fixes;
};

class WeightLoader {
 public:
  // model: how errors name the model ("GPT2" -> "GPT2: missing tensor ..."); prefix: put before
  // every name looked up ("transformer." or ""); unsupported_dtype: what the error for a tensor
  // of another dtype says after "dtype <name>" (kept by pointer: a literal).
  WeightLoader(const safetensors::File& file, const char* model, std::string prefix, const char* unsupported_dtype,
               WeightFormat format);

  // Plans the matrix `name` of `shape` ([K, N] for InOut, [N, K] for OutIn) into *dst; matmul:
  // read by a matmul (else only gathered from: Int8 leaves it in its stored dtype).
  void matrix(const std::string& name, const std::vector<int64_t>& shape, WeightLayout layout, WeightMatrix* dst,
              bool matmul = true);
  // Plans the 1-D parameter `name` of n floats into *dst.
  void vector(const std::string& name, int64_t n, const float** dst);

  // Holds every planned tensor and points each dst at it; `file` (size bytes, the buffer the
  // safetensors::File reads) is kept in the result when the matrices are read in place from it.
  WeightBuffers load(MallocBytes file, size_t size);

  // The other way in, for a file that streams (its File parsed from the header alone,
  // safetensors::File::parse_header): the bytes are fed in order, chunk by chunk, and each
  // tensor is converted as it completes, so the file is never held whole; only the converted
  // weights and one unit of scratch are (a vector, a [K, N] matrix, or 64 rows of an [N, K]
  // one). For a load that converts (streams() is true); one that reads every matrix in place
  // needs the whole file (load). The result is load()'s, bit for bit.
  bool streams() const;
  void begin_stream();
  void feed(const uint8_t* bytes, size_t n);  // the file's next n bytes (the header's too)
  WeightBuffers finish();                     // throws when fewer bytes than the file's arrived

  // After load(): the dtype of the matrices the matmuls read ("F32", "F16", "BF16", "Q8", "Q4"), or
  // "mixed" when one of them differs from the LM head's.
  const char* matmul_type(const WeightMatrix& lm_head) const;

 private:
  // One tensor of the file, found and checked.
  struct Source {
    std::string name;
    WeightType type = WeightType::F32;
    const uint8_t* bytes = nullptr;  // possibly unaligned; null while the file streams in
    uint64_t offset = 0;             // in the file
    size_t count = 0;                // elements
    // A GGUF file's tensors (weight_loader_gguf.cpp): the block type they are stored in (else
    // -1: F32 / F16 / BF16 as `type` says), and what llama.cpp's converter did to them
    // (safetensors::TensorInfo). `type` is then what 'auto' holds: Q8 for Q8_0 and the K-quants,
    // Q4 for Q4_0.
    int block = -1;  // gguf::TensorType
    int64_t rope_rows = 0;
    float stored_plus = 0.0f;
    // read through decode_rows / read_vector rather than as plain elements
    bool decodes() const { return block >= 0 || rope_rows > 0 || stored_plus != 0.0f; }
    size_t row_bytes(int64_t K) const;  // one row of K elements as stored
    int stored() const;                 // the gguf::TensorType its bytes are (F32 / F16 / BF16 too)
    size_t element_size() const { return type == WeightType::F32 ? 4 : 2; }
    bool aligned() const { return reinterpret_cast<uintptr_t>(bytes) % element_size() == 0; }
    // aligned where the file's buffer is (malloc's alignment suffices)
    bool aligned_in_file() const { return offset % element_size() == 0; }
  };

  // A matrix: where it comes from and what it becomes.
  struct MatrixPlan {
    Source src;
    WeightLayout layout;
    int64_t K, N;
    WeightType to;
    WeightMatrix* dst;
    bool matmul;
    size_t offset = 0;  // in the converted buffer
  };
  struct VectorPlan {
    Source src;
    const float** dst;
  };

  // What a placed matrix still needs (place), kept across matrices.
  struct Placing {
    std::vector<float> panel_scratch;
    std::vector<uint16_t> half_panel_scratch;
    struct FixRange {
      WeightMatrix* matrix;
      size_t first, count;
    };
    std::vector<FixRange> fixed;  // F16 matrices' ranges of out.fixes, pointed at once it stops growing
  };
  // A part of the file a streaming load converts at once: a vector, a whole matrix, or rows
  // [row0, row0 + rows) of an [N, K] one (rows > 0).
  struct Unit {
    size_t plan;
    bool vector;
    int64_t row0 = 0, rows = 0;
  };
  struct Stream;  // weight_loader_stream.cpp
  struct StreamDeleter {
    void operator()(Stream* s) const;
  };

  Source find(const std::string& name, const std::vector<int64_t>& want) const;
  void set_block_source(const safetensors::TensorInfo& t, Source* s) const;  // weight_loader_gguf.cpp
  [[noreturn]] void fail(const std::string& tensor, const std::string& msg) const;
  bool in_place() const;  // every matrix stays as stored, aligned
  // Writes m as m.to at out. overlapping: out <= m.src.bytes may overlap the source (and the
  // sources after it): read in order, at most a strip of 64 columns ahead of what is written
  // (the quantized scales are held aside until the matrix is done; a [K, N] source is copied).
  // first: the source's first element's index in the tensor (for messages: m may be rows of it)
  void convert(const MatrixPlan& m, uint8_t* out, bool overlapping = false, size_t first = 0) const;
  void quantize_in_place(const MatrixPlan& m, uint8_t* out) const;
  // Quantizes `rows` rows of m's [N, K] source at src (any alignment): whole columns, their data
  // and scales written at data and scales, as for a matrix of those columns alone.
  void quantize_rows(const MatrixPlan& m, int64_t rows, const uint8_t* src, uint8_t* data, uint16_t* scales) const;
  static size_t column_bytes(const MatrixPlan& m);  // a Q8 / Q4 column's data bytes
  // Points m.dst at the matrix written at `at` (m.to, m.layout), readies F16 weights (their
  // fixes into out.fixes) and rewrites a matmul's float matrix in panels.
  void place(const MatrixPlan& m, uint8_t* at, WeightBuffers& out, Placing& placing, bool converted) const;
  void convert_unit(const Unit& u, const uint8_t* bytes);  // a streaming load's unit, arrived whole
  // The file's buffer can hold every matrix converted, each written at or before its source's
  // start in file order (the converted form no larger), filled into *order (plan indices).
  bool fits_in_file(const uint8_t* file, std::vector<size_t>* order) const;
  void widen_vectors(WeightBuffers& out, bool in_place) const;
  // weight_loader_gguf.cpp: a decoding source's rows [row0, row0 + rows) of the [N, K] matrix m,
  // their bytes at src (whole heads where rope_rows is set), written where they belong in the
  // matrix at `at` as m.to (Q8_0 / Q4_0 repacked as they are when m.to is Q8 / Q4; else
  // dequantized, then quantized or converted like a float source)
  void decode_rows(const MatrixPlan& m, int64_t row0, int64_t rows, const uint8_t* src, uint8_t* at) const;
  void decode_matrix(const MatrixPlan& m, uint8_t* at) const;                 // the whole matrix, strip by strip
  static int64_t strip_rows(const MatrixPlan& m);                             // rows a decoding strip covers
  void read_vector(const Source& v, const uint8_t* bytes, float* out) const;  // as float32, undone

  const safetensors::File& file_;
  std::string model_, prefix_;
  const char* unsupported_dtype_;
  WeightFormat format_;
  std::vector<MatrixPlan> matrices_;
  std::vector<VectorPlan> vectors_;
  std::unique_ptr<Stream, StreamDeleter> stream_;  // between begin_stream and finish
};

}  // namespace qkv
