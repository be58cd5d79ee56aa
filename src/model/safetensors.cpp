#include "model/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "model/json.hpp"

namespace qkv::safetensors {

namespace {

struct DTypeEntry {
  const char* name;
  DType dtype;
  int64_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {"BOOL", DType::BOOL, 1}, {"U8", DType::U8, 1},           {"I8", DType::I8, 1},           {"U16", DType::U16, 2},
    {"I16", DType::I16, 2},   {"F16", DType::F16, 2},         {"BF16", DType::BF16, 2},       {"U32", DType::U32, 4},
    {"I32", DType::I32, 4},   {"F32", DType::F32, 4},         {"U64", DType::U64, 8},         {"I64", DType::I64, 8},
    {"F64", DType::F64, 8},   {"F8_E4M3", DType::F8_E4M3, 1}, {"F8_E5M2", DType::F8_E5M2, 1},
};

std::string u64s(uint64_t v) { return std::to_string(v); }

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument("safetensors: " + msg); }

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A JSON integer that must be >= 0 (shape dims and offsets).
uint64_t non_negative(const nlohmann::json& v, const std::string& what) {
  const std::optional<int64_t> i = json::to_int64(v);
  if (!i) bad(what + " must be a non-negative integer");
  if (*i < 0) bad(what + " must be a non-negative integer, got " + std::to_string(*i));
  return static_cast<uint64_t>(*i);
}

}  // namespace

const char* dtype_name(DType d) {
  for (const auto& e : kDTypes) {
    if (e.dtype == d) return e.name;
  }
  switch (d) {
    case DType::Q8_0:
      return "Q8_0";
    case DType::Q4_0:
      return "Q4_0";
    case DType::Q4_K:
      return "Q4_K";
    case DType::Q5_K:
      return "Q5_K";
    case DType::Q6_K:
      return "Q6_K";
    default:
      return "?";
  }
}

int64_t dtype_size(DType d) {
  for (const auto& e : kDTypes) {
    if (e.dtype == d) return e.size;
  }
  return 0;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // checked against overflow in parse()
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

const TensorInfo& expect_shape(const TensorInfo* t, const std::string& name, const std::vector<int64_t>& want,
                               const std::string& model) {
  if (!t) {
    throw std::invalid_argument(model + ": missing tensor \"" + name + "\" (expected shape " + shape_string(want) +
                                ")");
  }
  if (t->shape != want) {
    throw std::invalid_argument(model + ": tensor \"" + t->name + "\" has shape " + shape_string(t->shape) +
                                ", but the config needs " + shape_string(want));
  }
  return *t;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t man = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400) == 0);
      man &= 0x3FF;
      bits = sign | (uint32_t(127 - 15 - e) << 23) | (man << 13);
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);  // inf / nan (payload kept)
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16_to_f32(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

File File::parse(const uint8_t* data, size_t size, const Limits& limits) {
  File f = parse_header(data, size, size, limits);
  f.base_ = data;
  return f;
}

File File::parse_header(const uint8_t* data, size_t available, uint64_t size, const Limits& limits) {
  if (data == nullptr && available != 0) bad("null buffer");
  if (available > size) bad(u64s(available) + " bytes given of a file of " + u64s(size));
  if (size < 8) {
    bad("file is " + u64s(size) + " bytes, too short for the 8-byte header length");
  }
  if (available < 8) bad("the header length's 8 bytes have not arrived (" + u64s(available) + " bytes given)");
  const uint64_t n = read_u64_le(data);
  if (n > size - 8) {
    bad("header length " + u64s(n) + " is longer than the file allows (" + u64s(size) + " bytes, so at most " +
        u64s(size - 8) + " after the 8-byte length)");
  }
  if (n > limits.max_header_bytes) {
    bad("header length " + u64s(n) + " exceeds the limit of " + u64s(limits.max_header_bytes) + " bytes");
  }
  if (n < 2) bad("header length " + u64s(n) + " is too short for a JSON object");
  if (available - 8 < n) {
    bad("header length " + u64s(n) + ": only " + u64s(available - 8) + " bytes of the header given");
  }
  if (data[8] != '{') bad("header does not start with '{'");

  std::string_view text(reinterpret_cast<const char*>(data + 8), static_cast<size_t>(n));
  nlohmann::json root;
  try {
    root = json::parse(text);
  } catch (const std::invalid_argument& e) {
    bad(std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!root.is_object()) bad("header is not a JSON object");

  File f;
  f.size_ = size;
  f.header_bytes_ = n;
  const uint64_t data_size = size - 8 - n;

  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) bad("__metadata__ must be an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) bad("__metadata__[\"" + k + "\"] must be a string");
        f.metadata_.emplace_back(k, v.get<std::string>());
      }
      continue;
    }
    const std::string tn = "tensor \"" + name + "\"";
    if (name.empty()) bad("a tensor has an empty name");
    if (!entry.is_object()) bad(tn + ": entry must be an object with dtype, shape, data_offsets");
    const nlohmann::json* jd = nullptr;
    const nlohmann::json* js = nullptr;
    const nlohmann::json* jo = nullptr;
    for (const auto& [k, v] : entry.items()) {
      if (k == "dtype") {
        jd = &v;
      } else if (k == "shape") {
        js = &v;
      } else if (k == "data_offsets") {
        jo = &v;
      } else {
        bad(tn + ": unknown key \"" + k + "\"");
      }
    }
    if (!jd) bad(tn + ": missing \"dtype\"");
    if (!js) bad(tn + ": missing \"shape\"");
    if (!jo) bad(tn + ": missing \"data_offsets\"");

    TensorInfo t;
    t.name = name;
    if (!jd->is_string()) bad(tn + ": dtype must be a string");
    const std::string& ds = jd->get_ref<const std::string&>();
    bool found = false;
    for (const auto& e : kDTypes) {
      if (ds == e.name) {
        t.dtype = e.dtype;
        found = true;
        break;
      }
    }
    if (!found) bad(tn + ": unknown dtype \"" + ds + "\"");

    if (!js->is_array()) bad(tn + ": shape must be an array of integers");
    const auto& dims = js->get_ref<const nlohmann::json::array_t&>();
    if (dims.size() > size_t(limits.max_rank)) {
      bad(tn + ": shape has rank " + std::to_string(dims.size()) + ", more than " + std::to_string(limits.max_rank));
    }
    uint64_t numel = 1;
    bool overflow = false;
    for (size_t i = 0; i < dims.size(); ++i) {
      uint64_t d = non_negative(dims[i], tn + ": shape[" + std::to_string(i) + "]");
      if (d > uint64_t(INT64_MAX)) overflow = true;
      t.shape.push_back(static_cast<int64_t>(d));
      if (d != 0 && numel > uint64_t(INT64_MAX) / d) overflow = true;
      numel *= d;
    }
    const uint64_t esize = uint64_t(dtype_size(t.dtype));
    if (overflow || (numel != 0 && numel > uint64_t(INT64_MAX) / esize)) {
      bad(tn + ": shape " + shape_string(t.shape) + " is too large");
    }
    if (!jo->is_array() || jo->size() != 2) bad(tn + ": data_offsets must be an array [begin, end]");
    t.begin = non_negative((*jo)[0], tn + ": data_offsets[0]");
    t.end = non_negative((*jo)[1], tn + ": data_offsets[1]");
    if (t.end < t.begin) {
      bad(tn + ": data_offsets [" + u64s(t.begin) + ", " + u64s(t.end) + "] end before begin");
    }
    if (t.end > data_size) {
      bad(tn + ": data_offsets [" + u64s(t.begin) + ", " + u64s(t.end) + "] out of range: the data region holds " +
          u64s(data_size) + " bytes (file " + u64s(size) + " bytes, header " + u64s(n) +
          "): the file is truncated or damaged");
    }
    const uint64_t want = numel * esize;
    if (t.end - t.begin != want) {
      bad(tn + ": dtype " + ds + " and shape " + shape_string(t.shape) + " need " + u64s(want) +
          " bytes, but data_offsets [" + u64s(t.begin) + ", " + u64s(t.end) + "] hold " + u64s(t.end - t.begin));
    }
    f.tensors_.push_back(std::move(t));
  }

  // The tensors must tile the data region: sorted by offset, each starts where the last ended.
  std::stable_sort(f.tensors_.begin(), f.tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  const TensorInfo* prev = nullptr;
  for (const auto& t : f.tensors_) {
    if (t.begin < at) {
      bad("tensor \"" + t.name + "\" data_offsets [" + u64s(t.begin) + ", " + u64s(t.end) + "] overlap tensor \"" +
          prev->name + "\" [" + u64s(prev->begin) + ", " + u64s(prev->end) + "]");
    }
    if (t.begin > at) {
      bad("tensor \"" + t.name + "\" starts at data offset " + u64s(t.begin) + ", leaving a gap of " +
          u64s(t.begin - at) + " bytes after " + (prev ? "tensor \"" + prev->name + "\"" : std::string("the header")) +
          " (which ends at " + u64s(at) + ")");
    }
    at = t.end;
    prev = &t;
  }
  if (at != data_size) {
    bad("the tensors end at data offset " + u64s(at) + " but the data region holds " + u64s(data_size) +
        " bytes (file " + u64s(size) + " bytes, header " + u64s(n) + "): " + u64s(data_size - at) + " trailing bytes");
  }
  return f;
}

File File::index(std::vector<TensorInfo> tensors, uint64_t data_offset, uint64_t size, const uint8_t* base) {
  File f;
  f.tensors_ = std::move(tensors);
  f.data_offset_ = data_offset;
  f.size_ = size;
  f.base_ = base;
  std::stable_sort(f.tensors_.begin(), f.tensors_.end(),
                   [](const TensorInfo& a, const TensorInfo& b) { return a.begin < b.begin; });
  return f;
}

const TensorInfo* File::find(std::string_view name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<float> File::to_f32(const TensorInfo& t) const {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  to_f32(t, out.data());
  return out;
}

void File::to_f32(const TensorInfo& t, float* out) const { safetensors::to_f32(t, bytes(t), out); }

void to_f32(const TensorInfo& t, const uint8_t* p, float* out) {
  const size_t n = static_cast<size_t>(t.numel());
  switch (t.dtype) {
    case DType::F32:
      for (size_t i = 0; i < n; ++i) {
        uint32_t b = uint32_t(p[4 * i]) | uint32_t(p[4 * i + 1]) << 8 | uint32_t(p[4 * i + 2]) << 16 |
                     uint32_t(p[4 * i + 3]) << 24;
        std::memcpy(out + i, &b, 4);
      }
      return;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(uint16_t(p[2 * i] | p[2 * i + 1] << 8));
      return;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(uint16_t(p[2 * i] | p[2 * i + 1] << 8));
      return;
    default:
      bad("tensor \"" + t.name + "\": dtype " + dtype_name(t.dtype) + " cannot be converted to float32 (F32, F16 " +
          "and BF16 can)");
  }
}

}  // namespace qkv::safetensors
