// WeightLoader's streaming load (weight_loader.hpp: begin_stream / feed / finish): the file's
// bytes fed in order, gathered unit by unit (TensorFeed), each tensor converted as it completes.
#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "model/safetensors.hpp"
#include "model/tensor_feed.hpp"
#include "model/weight_loader.hpp"

namespace qkv {

namespace {
size_t align16(size_t n) { return (n + 15) / 16 * 16; }
}  // namespace

namespace {
constexpr int64_t kStripRows = 64;  // rows of an [N, K] matrix converted at once: 16 Q8 groups, 4 Q4 sets, 4 panels
}  // namespace

struct WeightLoader::Stream {
  WeightBuffers out;
  Placing placing;
  TensorFeed feed;  // the file's bytes, gathered unit by unit
  std::vector<size_t> vector_at;
  size_t converted = 0;  // the converted buffer's size
};

void WeightLoader::StreamDeleter::operator()(Stream* s) const { delete s; }

bool WeightLoader::streams() const {
  if (in_place()) return false;
  // each tensor read once (a tensor planned twice is read from a whole file)
  std::vector<uint64_t> begins;
  for (const MatrixPlan& m : matrices_) begins.push_back(m.src.offset);
  for (const VectorPlan& v : vectors_) begins.push_back(v.src.offset);
  std::sort(begins.begin(), begins.end());
  return std::adjacent_find(begins.begin(), begins.end()) == begins.end();
}

void WeightLoader::begin_stream() {
  if (!streams()) {
    throw std::logic_error(
        model_ + (in_place() ? ": this load reads the file in place: it cannot stream"
                             : ": a tensor is planned twice, so its bytes are needed twice: it cannot stream"));
  }
  stream_.reset(new Stream());
  Stream& s = *stream_;
  // the converted matrices one after another, 16-byte aligned, as load() places them
  for (MatrixPlan& m : matrices_) {
    m.offset = s.converted;
    s.converted += align16(WeightMatrix{m.to, m.layout, m.K, m.N}.bytes());
  }
  s.out.converted.reset(static_cast<uint8_t*>(std::malloc(std::max<size_t>(s.converted, 1))));
  if (!s.out.converted) {
    throw std::length_error(model_ + ": cannot allocate " + std::to_string(s.converted) + " bytes for the weights as " +
                            weight_format_name(format_));
  }
  size_t widened = 0;
  for (const VectorPlan& v : vectors_) {
    s.vector_at.push_back(widened);
    widened += v.src.count;
  }
  s.out.vectors.resize(widened);
  s.out.bytes.vectors = widened * 4;
  // the units: [N, K] matrices 64 rows at a time, the rest whole
  const auto unit = [&](uint64_t begin, uint64_t end, Unit u) {
    s.feed.add(begin, end, [this, u](const uint8_t* bytes) { convert_unit(u, bytes); });
  };
  for (size_t i = 0; i < matrices_.size(); ++i) {
    const MatrixPlan& m = matrices_[i];
    const uint64_t row = m.src.row_bytes(m.K);
    if (m.layout == WeightLayout::OutIn && m.K > 0 && m.N > 0) {
      const int64_t strip = m.src.decodes() ? strip_rows(m) : kStripRows;
      for (int64_t r = 0; r < m.N; r += strip) {
        const int64_t rows = std::min(strip, m.N - r);
        unit(m.src.offset + uint64_t(r) * row, m.src.offset + uint64_t(r + rows) * row, {i, false, r, rows});
      }
    } else {
      unit(m.src.offset, m.src.offset + uint64_t(m.N) * row, {i, false});
    }
  }
  for (size_t j = 0; j < vectors_.size(); ++j) {
    const Source& v = vectors_[j].src;
    unit(v.offset, v.offset + v.row_bytes(int64_t(v.count)), {j, true});
  }
  s.feed.start(file_.size(), model_);
}

void WeightLoader::feed(const uint8_t* bytes, size_t n) {
  if (!stream_) throw std::logic_error(model_ + ": feed before begin_stream or after finish");
  stream_->feed.feed(bytes, n);
}

void WeightLoader::convert_unit(const Unit& u, const uint8_t* bytes) {
  Stream& s = *stream_;
  if (u.vector) {
    const VectorPlan& v = vectors_[u.plan];
    float* out = s.out.vectors.data() + s.vector_at[u.plan];
    read_vector(v.src, bytes, out);
    *v.dst = out;
    return;
  }
  const MatrixPlan& m = matrices_[u.plan];
  uint8_t* at = s.out.converted.get() + m.offset;
  MatrixPlan part = m;  // the unit's rows, read from `bytes`
  part.src.bytes = bytes;
  if (m.src.decodes()) {
    if (u.rows > 0) {
      decode_rows(m, u.row0, u.rows, bytes, at);
    } else {
      decode_matrix(part, at);
    }
    if (u.rows > 0 && u.row0 + u.rows < m.N) return;  // more rows to come
  } else if (u.rows == 0) {
    convert(part, at);
  } else {
    part.N = u.rows;
    part.src.count = size_t(u.rows * m.K);
    if (m.to == WeightType::Q8 || m.to == WeightType::Q4) {
      // a strip of whole columns: its groups (sets) and their scales are consecutive in the
      // whole matrix's layout, as quantize_in_place places them
      const size_t data_bytes =
          m.to == WeightType::Q8 ? Q8Layout::of(m.K, m.N).data_bytes() : Q4Layout::of(m.K, m.N).data_bytes();
      quantize_rows(m, u.rows, bytes, at + size_t(u.row0) * column_bytes(m),
                    reinterpret_cast<uint16_t*>(at + data_bytes) + size_t(u.row0) * size_t((m.K + 31) / 32));
    } else {  // rows of [N, K] as m.to, where they lie in the whole matrix (panels come when it is whole)
      convert(part, at + size_t(u.row0 * m.K) * WeightMatrix{m.to, m.layout, 1, 1}.bytes(), false,
              size_t(u.row0 * m.K));
    }
    if (u.row0 + u.rows < m.N) return;  // more rows to come
  }
  place(m, at, s.out, s.placing, true);
}

WeightBuffers WeightLoader::finish() {
  if (!stream_) throw std::logic_error(model_ + ": finish before begin_stream or twice");
  Stream& s = *stream_;
  s.feed.finish();
  for (const Placing::FixRange& f : s.placing.fixed) {
    f.matrix->fixes = f.count ? s.out.fixes.data() + f.first : nullptr;
    f.matrix->fix_count = f.count;
  }
  s.out.bytes.converted = s.converted;
  WeightBuffers out = std::move(s.out);
  stream_.reset();
  return out;
}

}  // namespace qkv
