#include "model/weight_loader.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "matmul/halves.hpp"
#include "model/safetensors.hpp"

namespace qkv {

WeightFormat parse_weight_format(std::string_view name) {
  if (name == "auto") return WeightFormat::Auto;
  if (name == "f32") return WeightFormat::F32;
  if (name == "f16") return WeightFormat::F16;
  if (name == "int8") return WeightFormat::Int8;
  if (name == "int4") return WeightFormat::Int4;
  throw std::invalid_argument("Model::load: weights must be 'auto', 'f32', 'f16', 'int8' or 'int4', got '" +
                              std::string(name) + "'");
}

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::Auto:
      return "auto";
    case WeightFormat::F32:
      return "f32";
    case WeightFormat::F16:
      return "f16";
    case WeightFormat::Int8:
      return "int8";
    case WeightFormat::Int4:
      return "int4";
  }
  return "?";
}

namespace {

// What a matrix stored as `from` becomes: Int8 and Int4 quantize only the matmuls' matrices.
WeightType target_type(WeightFormat format, WeightType from, bool matmul) {
  switch (format) {
    case WeightFormat::Auto:
      return from;
    case WeightFormat::F32:
      return WeightType::F32;
    case WeightFormat::F16:
      return WeightType::F16;
    case WeightFormat::Int8:
      return matmul ? WeightType::Q8 : from;
    case WeightFormat::Int4:
      return matmul ? WeightType::Q4 : from;
  }
  return from;
}

// Element i of F32 / F16 / BF16 little-endian values at p (any alignment), as a float.
float element(WeightType type, const uint8_t* p, size_t i) {
  if (type == WeightType::F32) {
    float v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return type == WeightType::F16 ? halves::f16_to_f32(h) : halves::bf16_to_f32(h);
}

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

}  // namespace

WeightLoader::WeightLoader(const safetensors::File& file, const char* model, std::string prefix,
                           const char* unsupported_dtype, WeightFormat format)
    : file_(file), model_(model), prefix_(std::move(prefix)), unsupported_dtype_(unsupported_dtype), format_(format) {}

void WeightLoader::fail(const std::string& tensor, const std::string& msg) const {
  throw std::invalid_argument(model_ + ": tensor \"" + tensor + "\": " + msg);
}

WeightLoader::Source WeightLoader::find(const std::string& name, const std::vector<int64_t>& want) const {
  const std::string full = prefix_ + name;
  const safetensors::TensorInfo& t = safetensors::expect_shape(file_.find(full), full, want, model_);
  Source s;
  s.name = full;
  switch (t.dtype) {
    case safetensors::DType::F32:
      s.type = WeightType::F32;
      break;
    case safetensors::DType::F16:
      s.type = WeightType::F16;
      break;
    case safetensors::DType::BF16:
      s.type = WeightType::BF16;
      break;
    case safetensors::DType::Q8_0:
    case safetensors::DType::Q4_0:
    case safetensors::DType::Q4_K:
    case safetensors::DType::Q5_K:
    case safetensors::DType::Q6_K:
      set_block_source(t, &s);
      break;
    default:
      fail(full, std::string("dtype ") + safetensors::dtype_name(t.dtype) + unsupported_dtype_);
  }
  s.offset = file_.offset(t);
  s.bytes = file_.has_bytes() ? file_.bytes(t) : nullptr;
  s.count = size_t(t.numel());
  s.rope_rows = t.rope_rows;
  s.stored_plus = t.stored_plus;
  return s;
}

void WeightLoader::matrix(const std::string& name, const std::vector<int64_t>& shape, WeightLayout layout,
                          WeightMatrix* dst, bool matmul) {
  Source s = find(name, shape);
  // InOut [K, N]; OutIn [N, K]
  const int64_t K = layout == WeightLayout::InOut ? shape[0] : shape[1];
  const int64_t N = layout == WeightLayout::InOut ? shape[1] : shape[0];
  // a GGUF file's transposed matrix: the same K and N, the other layout
  if (const safetensors::TensorInfo* t = file_.find(s.name); t && t->transposed)
    layout = layout == WeightLayout::InOut ? WeightLayout::OutIn : WeightLayout::InOut;
  const WeightType to = target_type(format_, s.type, matmul);
  matrices_.push_back({std::move(s), layout, K, N, to, dst, matmul});
}

void WeightLoader::vector(const std::string& name, int64_t n, const float** dst) {
  Source s = find(name, {n});
  if (s.block >= 0) fail(s.name, "a 1-D tensor must be F32, F16 or BF16, not block-quantized");
  vectors_.push_back({std::move(s), dst});
}

// Writes the matrix as m.to at `out` (m.to's size of K x N bytes).
void WeightLoader::convert(const MatrixPlan& m, uint8_t* out, bool overlapping, size_t first) const {
  const Source& s = m.src;
  if (s.decodes()) return decode_matrix(m, out);
  if (m.to == s.type) {
    std::memmove(out, s.bytes, s.count * s.element_size());
    return;
  }
  if (overlapping && (m.to == WeightType::Q8 || m.to == WeightType::Q4)) return quantize_in_place(m, out);
  switch (m.to) {
    case WeightType::F32: {
      float* o = reinterpret_cast<float*>(out);
      for (size_t i = 0; i < s.count; ++i) o[i] = element(s.type, s.bytes, i);
      return;
    }
    case WeightType::F16:
    case WeightType::BF16: {
      uint16_t* o = reinterpret_cast<uint16_t*>(out);
      for (size_t i = 0; i < s.count; ++i) {
        const float v = element(s.type, s.bytes, i);
        o[i] = m.to == WeightType::F16 ? halves::f32_to_f16(v) : halves::f32_to_bf16(v);
        if (m.to == WeightType::F16 && (o[i] & 0x7C00u) == 0x7C00u) {
          fail(s.name, "element " + std::to_string(first + i) + " = " + std::to_string(v) +
                           " does not fit in F16 (finite, |value| <= 65504)");
        }
      }
      return;
    }
    case WeightType::Q8:
    case WeightType::Q4: {
      // the quantizers read an aligned source: the file's bytes, or a copy when they are not aligned
      std::vector<uint8_t> copy;
      if (!s.aligned()) copy.assign(s.bytes, s.bytes + s.count * s.element_size());
      const WeightMatrix view{s.type, m.layout, m.K, m.N, s.aligned() ? s.bytes : copy.data(), nullptr};
      try {
        if (m.to == WeightType::Q8) {
          const Q8Layout q = Q8Layout::of(m.K, m.N);
          quantize_q8(view, reinterpret_cast<int8_t*>(out), reinterpret_cast<uint16_t*>(out + q.data_bytes()));
        } else {
          const Q4Layout q = Q4Layout::of(m.K, m.N);
          quantize_q4(view, out, reinterpret_cast<uint16_t*>(out + q.data_bytes()));
        }
      } catch (const std::invalid_argument& e) {
        fail(s.name, e.what());
      }
      return;
    }
  }
}

// Quantizes m into `out`, which may overlap its source from below (convert's `overlapping`): an
// [N, K] matrix 64 columns (64 rows of the source) at a time, each strip read whole before its
// data is written, the scales held aside until the end; a [K, N] one from a copy.
void WeightLoader::quantize_rows(const MatrixPlan& m, int64_t rows, const uint8_t* src, uint8_t* data,
                                 uint16_t* scales) const {
  std::vector<uint8_t> copy;  // the quantizers read an aligned source
  if (reinterpret_cast<uintptr_t>(src) % m.src.element_size()) {
    copy.assign(src, src + size_t(rows * m.K) * m.src.element_size());
    src = copy.data();
  }
  const WeightMatrix view{m.src.type, WeightLayout::OutIn, m.K, rows, src, nullptr};
  try {
    m.to == WeightType::Q8 ? quantize_q8(view, reinterpret_cast<int8_t*>(data), scales)
                           : quantize_q4(view, data, scales);
  } catch (const std::invalid_argument& e) {
    fail(m.src.name, e.what());
  }
}

size_t WeightLoader::column_bytes(const MatrixPlan& m) {
  return size_t((m.K + 31) / 32) * (m.to == WeightType::Q8 ? 32 : 16);
}

void WeightLoader::quantize_in_place(const MatrixPlan& m, uint8_t* out) const {
  const Source& s = m.src;
  const bool q8 = m.to == WeightType::Q8;
  const size_t data_bytes = q8 ? Q8Layout::of(m.K, m.N).data_bytes() : Q4Layout::of(m.K, m.N).data_bytes();
  if (m.layout == WeightLayout::InOut) {
    const std::vector<uint8_t> copy(s.bytes, s.bytes + s.count * s.element_size());
    const WeightMatrix src{s.type, m.layout, m.K, m.N, copy.data(), nullptr};
    try {
      q8 ? quantize_q8(src, reinterpret_cast<int8_t*>(out), reinterpret_cast<uint16_t*>(out + data_bytes))
         : quantize_q4(src, out, reinterpret_cast<uint16_t*>(out + data_bytes));
    } catch (const std::invalid_argument& e) {
      fail(s.name, e.what());
    }
    return;
  }
  constexpr int64_t kStrip = 64;                  // columns: 16 Q8 groups, 4 Q4 sets
  const size_t blocks = size_t((m.K + 31) / 32);  // scales per column
  std::vector<uint16_t> scales(q8 ? Q8Layout::of(m.K, m.N).scale_count() : Q4Layout::of(m.K, m.N).scale_count());
  std::vector<uint8_t> data;
  for (int64_t n0 = 0; n0 < m.N; n0 += kStrip) {
    const int64_t count = std::min(kStrip, m.N - n0);
    data.resize(q8 ? Q8Layout::of(m.K, count).data_bytes() : Q4Layout::of(m.K, count).data_bytes());
    // the strip's groups (sets) are consecutive in the whole matrix's layout, as are their
    // scales; its data goes through `data`, as it may overlap the strip's own source
    quantize_rows(m, count, s.bytes + size_t(n0 * m.K) * s.element_size(), data.data(),
                  scales.data() + size_t(n0) * blocks);
    std::memcpy(out + size_t(n0) * column_bytes(m), data.data(), data.size());
  }
  std::memcpy(out + data_bytes, scales.data(), scales.size() * 2);
}

bool WeightLoader::fits_in_file(const uint8_t* file, std::vector<size_t>* order) const {
  order->resize(matrices_.size());
  for (size_t i = 0; i < order->size(); ++i) (*order)[i] = i;
  std::sort(order->begin(), order->end(),
            [&](size_t a, size_t b) { return matrices_[a].src.bytes < matrices_[b].src.bytes; });
  for (const MatrixPlan& m : matrices_)
    if (m.src.decodes()) return false;  // (a GGUF file's: converted into a buffer of their own)
  for (const VectorPlan& v : vectors_)
    if (v.src.decodes()) return false;
  const uint8_t* first = nullptr;  // where the converted matrices start: the first tensor read
  for (const MatrixPlan& m : matrices_) first = !first || m.src.bytes < first ? m.src.bytes : first;
  for (const VectorPlan& v : vectors_) first = !first || v.src.bytes < first ? v.src.bytes : first;
  if (!first) return false;
  size_t cursor = size_t(first - file) / 16 * 16;  // (the header's last bytes, parsed already, may go)
  for (size_t i : *order) {
    const MatrixPlan& m = matrices_[i];
    const size_t at = align16(cursor), from = size_t(m.src.bytes - file);
    const size_t bytes = WeightMatrix{m.to, m.layout, m.K, m.N}.bytes();
    if (at > from || bytes > m.src.count * m.src.element_size()) return false;
    if (m.to != m.src.type && m.to != WeightType::Q8 && m.to != WeightType::Q4 &&
        WeightMatrix{m.to, m.layout, 1, 1}.bytes() > m.src.element_size())
      return false;  // an element-wise conversion must not grow
    // a quantized strip's data must not pass the next strip's source: per column, no more bytes
    const size_t column_bytes = size_t((m.K + 31) / 32) * (m.to == WeightType::Q8 ? 32 : 16);
    if ((m.to == WeightType::Q8 || m.to == WeightType::Q4) && column_bytes > size_t(m.K) * m.src.element_size())
      return false;
    cursor = at + bytes;
  }
  return true;
}

WeightBuffers WeightLoader::load(MallocBytes file, size_t size) {
  WeightBuffers out;
  // In place when every matrix stays as stored (and is aligned for its type); else all of them
  // go into one new buffer and the file is freed.
  const bool in_place = this->in_place();
  // Else, when every matrix's converted form fits where its source was, the file's own buffer
  // takes them, in file order, each written at or before its source's start: nothing but one
  // matrix's scratch (a copied [K, N] source, or a strip) beside the file, so loading an F32
  // file as 'int8', 'int4' or 'f16' peaks no higher than as 'f32'. The 1-D
  // parameters are widened out of it first.
  std::vector<size_t> order;
  const bool into_file = !in_place && file && fits_in_file(file.get(), &order);
  size_t converted = 0;
  Placing placing;
  if (into_file) {
    widen_vectors(out, false);
    size_t cursor =
        size_t(std::min_element(matrices_.begin(), matrices_.end(),
                                [](const MatrixPlan& a, const MatrixPlan& b) { return a.src.bytes < b.src.bytes; })
                   ->src.bytes -
               file.get());
    for (const VectorPlan& v : vectors_) cursor = std::min(cursor, size_t(v.src.bytes - file.get()));
    cursor = cursor / 16 * 16;  // as fits_in_file placed them
    for (size_t i : order) {
      MatrixPlan& m = matrices_[i];
      m.offset = align16(cursor);
      cursor = m.offset + WeightMatrix{m.to, m.layout, m.K, m.N}.bytes();
    }
    converted = size;
  } else if (!in_place) {
    for (MatrixPlan& m : matrices_) {
      m.offset = converted;
      converted += align16(WeightMatrix{m.to, m.layout, m.K, m.N}.bytes());
    }
    out.converted.reset(static_cast<uint8_t*>(std::malloc(std::max<size_t>(converted, 1))));
    if (!out.converted) {
      throw std::length_error(model_ + ": cannot allocate " + std::to_string(converted) + " bytes for the weights as " +
                              weight_format_name(format_));
    }
  }
  if (!into_file) {
    order.resize(matrices_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  }
  for (size_t i : order) {
    MatrixPlan& m = matrices_[i];
    uint8_t* at = in_place    ? const_cast<uint8_t*>(m.src.bytes)
                  : into_file ? file.get() + m.offset
                              : out.converted.get() + m.offset;
    if (!in_place) convert(m, at, into_file);
    place(m, at, out, placing, !in_place);
  }
  for (const Placing::FixRange& f : placing.fixed) {
    f.matrix->fixes = f.count ? out.fixes.data() + f.first : nullptr;
    f.matrix->fix_count = f.count;
  }

  if (!into_file) widen_vectors(out, in_place);
  out.bytes.converted = converted;
  if (into_file) {
    out.converted = std::move(file);  // the converted matrices, where the file was
  } else if (in_place) {
    out.file = std::move(file);
    out.bytes.file = size;
  }  // else `file` is freed on return: nothing reads it any more
  return out;
}

// 1-D parameters: float32 in place when the file is kept (`in_place`) and they are aligned
// float32; else widened into out.vectors.
void WeightLoader::widen_vectors(WeightBuffers& out, bool in_place) const {
  const auto read_in_place = [&](const Source& s) {
    return in_place && s.type == WeightType::F32 && s.aligned() && !s.decodes();
  };
  size_t widened = 0;
  for (const VectorPlan& v : vectors_) widened += read_in_place(v.src) ? 0 : v.src.count;
  out.vectors.resize(widened);
  size_t at = 0;
  for (const VectorPlan& v : vectors_) {
    if (read_in_place(v.src)) {
      *v.dst = reinterpret_cast<const float*>(v.src.bytes);
      continue;
    }
    read_vector(v.src, v.src.bytes, out.vectors.data() + at);
    *v.dst = out.vectors.data() + at;
    at += v.src.count;
  }
  out.bytes.vectors = widened * 4;
}

bool WeightLoader::in_place() const {
  for (const MatrixPlan& m : matrices_)
    if (m.to != m.src.type || !m.src.aligned_in_file() || m.src.decodes()) return false;
  return true;
}

void WeightLoader::place(const MatrixPlan& m, uint8_t* at, WeightBuffers& out, Placing& placing, bool converted) const {
  *m.dst = WeightMatrix{m.to, m.layout, m.K, m.N, at, nullptr};
  if (m.to == WeightType::Q8)
    m.dst->scales = reinterpret_cast<const uint16_t*>(at + Q8Layout::of(m.K, m.N).data_bytes());
  if (m.to == WeightType::Q4)
    m.dst->scales = reinterpret_cast<const uint16_t*>(at + Q4Layout::of(m.K, m.N).data_bytes());
  if (m.to == WeightType::F16) {
    // finite (the kernels' widening does not special-case inf and NaN); subnormals moved to
    // the matrix's fixes, in the file's buffer or the converted one, both ours
    const std::string what = model_ + ": tensor \"" + m.src.name + "\"";
    const size_t first = out.fixes.size();
    placing.fixed.push_back({m.dst, first, prepare_f16_weights(*m.dst, what.c_str(), out.fixes)});
  }
  if (m.matmul && (m.to == WeightType::F32 || m.to == WeightType::F16 || m.to == WeightType::BF16)) {
    // A float matrix, [K, N] or [N, K], is rewritten in panels of 16 columns, in place
    // (matmul/weights.hpp; scratch: one panel from [N, K], the matrix from [K, N], one buffer
    // per element size for all). Decoding reads each panel as one sequential stream: GPT-2
    // small's F32 layers, wasm, 1 thread, 1.9x the [K, N] kernel's bytes per second from
    // memory; every column adds its products in k order as the prefill's do, so a decoded
    // token gets a prefill's bits. (The F16 fixes above were found in the stored layout; they
    // name (n, k), not a position.)
    if (m.to == WeightType::F32) {
      to_panels(reinterpret_cast<float*>(at), m.K, m.N, m.layout, placing.panel_scratch);
    } else {
      to_panels(reinterpret_cast<uint16_t*>(at), m.K, m.N, m.layout, placing.half_panel_scratch);
      // converted: the next matrix's conversion copies its [K, N] source (convert), so this
      // scratch is not kept beside that copy
      if (converted) std::vector<uint16_t>().swap(placing.half_panel_scratch);
    }
    m.dst->layout = WeightLayout::Panels;
  }
  out.bytes.matrices += m.dst->bytes();
}

const char* WeightLoader::matmul_type(const WeightMatrix& lm_head) const {
  for (const MatrixPlan& m : matrices_) {
    if (m.matmul && m.to != lm_head.type) return "mixed";
  }
  return weight_type_name(lm_head.type);
}

}  // namespace qkv
