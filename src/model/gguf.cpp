#include "model/gguf.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

namespace qkv::gguf {

namespace {

struct TypeEntry {
  TensorType type;
  const char* name;
  int64_t elements, bytes;  // per block
};

// ggml's type_traits: block size and bytes per block
constexpr TypeEntry kTypes[] = {
    {TensorType::F32, "F32", 1, 4},       {TensorType::F16, "F16", 1, 2},       {TensorType::Q4_0, "Q4_0", 32, 18},
    {TensorType::Q4_1, "Q4_1", 32, 20},   {TensorType::Q5_0, "Q5_0", 32, 22},   {TensorType::Q5_1, "Q5_1", 32, 24},
    {TensorType::Q8_0, "Q8_0", 32, 34},   {TensorType::Q8_1, "Q8_1", 32, 36},   {TensorType::Q2_K, "Q2_K", 256, 84},
    {TensorType::Q3_K, "Q3_K", 256, 110}, {TensorType::Q4_K, "Q4_K", 256, 144}, {TensorType::Q5_K, "Q5_K", 256, 176},
    {TensorType::Q6_K, "Q6_K", 256, 210}, {TensorType::Q8_K, "Q8_K", 256, 292}, {TensorType::I8, "I8", 1, 1},
    {TensorType::I16, "I16", 1, 2},       {TensorType::I32, "I32", 1, 4},       {TensorType::I64, "I64", 1, 8},
    {TensorType::F64, "F64", 1, 8},       {TensorType::BF16, "BF16", 1, 2},
};

const TypeEntry* type_entry(uint32_t t) {
  for (const auto& e : kTypes)
    if (uint32_t(e.type) == t) return &e;
  return nullptr;
}

std::string u64s(uint64_t v) { return std::to_string(v); }

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument("gguf: " + msg); }

// Reads the header from [p, p + available) of a file of `size` bytes.
class Cursor {
 public:
  Cursor(const uint8_t* p, size_t available, uint64_t size) : p_(p), available_(available), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }  // bytes the file holds after pos

  // n more bytes, or an Error naming `what`: the file ends first (truncated), or the bytes
  // given do (Incomplete: the caller reads more)
  const uint8_t* take(uint64_t n, const std::string& what) {
    if (n > left()) {
      bad(what + " needs " + u64s(n) + " bytes at offset " + u64s(pos_) + ", but the file ends after " + u64s(left()) +
          " more (" + u64s(size_) + " bytes): it is truncated or damaged");
    }
    if (pos_ + n > available_) {
      throw Incomplete("gguf: the header continues past the first " + u64s(available_) + " bytes (" + what + ")");
    }
    const uint8_t* q = p_ + pos_;
    pos_ += n;
    return q;
  }
  uint64_t u64(const std::string& what) { return le(take(8, what), 8); }
  uint32_t u32(const std::string& what) { return uint32_t(le(take(4, what), 4)); }
  std::string string(const std::string& what, uint64_t max_bytes) {
    const uint64_t n = u64(what + " (its length)");
    if (n > max_bytes) bad(what + ": a string of " + u64s(n) + " bytes, more than the " + u64s(max_bytes) + " allowed");
    const uint8_t* q = take(n, what);
    return std::string(reinterpret_cast<const char*>(q), size_t(n));
  }
  static uint64_t le(const uint8_t* q, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | q[i];
    return v;
  }

 private:
  const uint8_t* p_;
  uint64_t available_, size_, pos_ = 0;
};

// Bytes of one element of a scalar type (0 for STRING and ARRAY; -1 unknown)
int scalar_bytes(uint32_t t) {
  switch (ValueType(t)) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
      return 8;
    case ValueType::STRING:
    case ValueType::ARRAY:
      return 0;
  }
  return -1;
}

// One scalar of type t (not STRING or ARRAY) into v.i or v.f.
void read_scalar(Cursor& c, ValueType t, const std::string& what, int64_t* i, double* f) {
  const int n = scalar_bytes(uint32_t(t));
  const uint64_t raw = Cursor::le(c.take(uint64_t(n), what), n);
  switch (t) {
    case ValueType::U8:
    case ValueType::U16:
    case ValueType::U32:
      *i = int64_t(raw);
      return;
    case ValueType::BOOL:
      if (raw > 1) bad(what + ": a bool must be 0 or 1, got " + u64s(raw));
      *i = int64_t(raw);
      return;
    case ValueType::I8:
      *i = int8_t(raw);
      return;
    case ValueType::I16:
      *i = int16_t(raw);
      return;
    case ValueType::I32:
      *i = int32_t(raw);
      return;
    case ValueType::U64:
      if (raw > uint64_t(std::numeric_limits<int64_t>::max())) bad(what + ": " + u64s(raw) + " is out of range");
      *i = int64_t(raw);
      return;
    case ValueType::I64:
      *i = int64_t(raw);
      return;
    case ValueType::F32: {
      const uint32_t b = uint32_t(raw);
      float v;
      std::memcpy(&v, &b, 4);
      *f = v;
      return;
    }
    case ValueType::F64:
      std::memcpy(f, &raw, 8);
      return;
    default:
      return;
  }
}

Value read_value(Cursor& c, uint32_t type, const std::string& what, const Limits& limits) {
  Value v;
  if (scalar_bytes(type) < 0) bad(what + ": unknown value type " + std::to_string(type));
  v.type = ValueType(type);
  if (v.type == ValueType::STRING) {
    v.s = c.string(what, limits.max_string_bytes);
    return v;
  }
  if (v.type != ValueType::ARRAY) {
    read_scalar(c, v.type, what, &v.i, &v.f);
    return v;
  }
  const uint32_t et = c.u32(what + " (the array's element type)");
  if (scalar_bytes(et) < 0) bad(what + ": unknown array element type " + std::to_string(et));
  if (ValueType(et) == ValueType::ARRAY) bad(what + ": an array of arrays is not supported");
  v.element = ValueType(et);
  const uint64_t n = c.u64(what + " (the array's length)");
  // each element takes at least 1 byte (8 for a string's length): a count the file cannot
  // hold is refused before anything is allocated
  const uint64_t least = v.element == ValueType::STRING ? 8 : uint64_t(scalar_bytes(et));
  if (n > c.left() / least) {
    bad(what + ": an array of " + u64s(n) + " elements cannot fit in the " + u64s(c.left()) +
        " bytes left in the file");
  }
  v.count = size_t(n);
  const std::string each = what + "[]";
  if (v.element == ValueType::STRING) {
    v.strings.reserve(v.count);
    for (uint64_t k = 0; k < n; ++k) v.strings.push_back(c.string(each, limits.max_string_bytes));
  } else if (v.element == ValueType::F32 || v.element == ValueType::F64) {
    v.floats.resize(v.count);
    int64_t unused;
    for (uint64_t k = 0; k < n; ++k) read_scalar(c, v.element, each, &unused, &v.floats[k]);
  } else {
    v.ints.resize(v.count);
    double unused;
    for (uint64_t k = 0; k < n; ++k) read_scalar(c, v.element, each, &v.ints[k], &unused);
  }
  return v;
}

}  // namespace

const char* tensor_type_name(TensorType t) {
  const TypeEntry* e = type_entry(uint32_t(t));
  return e ? e->name : "?";
}
int64_t block_elements(TensorType t) {
  const TypeEntry* e = type_entry(uint32_t(t));
  return e ? e->elements : 0;
}
int64_t block_bytes(TensorType t) {
  const TypeEntry* e = type_entry(uint32_t(t));
  return e ? e->bytes : 0;
}

bool Value::is_integer() const {
  return type != ValueType::F32 && type != ValueType::F64 && type != ValueType::STRING && type != ValueType::ARRAY;
}
bool Value::is_number() const { return type != ValueType::STRING && type != ValueType::ARRAY; }
double Value::number() const { return is_integer() ? double(i) : f; }

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;  // checked against overflow when parsed
  return n;
}

std::vector<int64_t> TensorInfo::shape() const { return std::vector<int64_t>(ne.rbegin(), ne.rend()); }

bool is_gguf(const uint8_t* data, size_t size) { return size >= 4 && std::memcmp(data, "GGUF", 4) == 0; }

File File::parse(const uint8_t* data, size_t size, const Limits& limits) {
  File f = parse_header(data, size, size, limits);
  f.base_ = data;
  return f;
}

File File::parse_header(const uint8_t* data, size_t available, uint64_t size, const Limits& limits) {
  available = size_t(std::min<uint64_t>(available, size));
  Cursor c(data, available, size);
  File f;
  f.size_ = size;
  const uint8_t* magic = c.take(4, "the magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) bad("not a GGUF file: the first 4 bytes are not \"GGUF\"");
  f.version_ = c.u32("the version");
  if (f.version_ != 2 && f.version_ != 3) {
    bad("version " + std::to_string(f.version_) + " is not supported (2 and 3 are)");
  }
  const uint64_t n_tensors = c.u64("the tensor count");
  const uint64_t n_kv = c.u64("the metadata count");
  // a key-value takes at least 8 + 4 + 1 bytes, a tensor info 8 + 4 + 4 + 8
  if (n_kv > c.left() / 13) bad(u64s(n_kv) + " metadata entries cannot fit in a file of " + u64s(size) + " bytes");
  if (n_tensors > c.left() / 24) bad(u64s(n_tensors) + " tensors cannot fit in a file of " + u64s(size) + " bytes");

  std::unordered_set<std::string> seen;  // (a linear search per entry would make a crafted header quadratic)
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.string("metadata entry " + u64s(k) + "'s key", limits.max_string_bytes);
    const std::string what = "metadata " + key;
    if (!seen.insert(key).second) bad(what + ": the key appears twice");
    const uint32_t type = c.u32(what + " (its type)");
    f.metadata_.emplace_back(std::move(key), read_value(c, type, what, limits));
  }
  if (const Value* a = f.find("general.alignment")) {
    if (a->type != ValueType::U32 || a->i == 0 || (a->i & (a->i - 1)) != 0) {
      bad("metadata general.alignment must be a u32 power of two, got " +
          (a->is_integer() ? std::to_string(a->i) : std::string("a value of another type")));
    }
    f.alignment_ = uint64_t(a->i);
  }

  f.tensors_.reserve(size_t(n_tensors));
  seen.clear();
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo t;
    t.name = c.string("tensor " + u64s(k) + "'s name", limits.max_string_bytes);
    const std::string what = "tensor \"" + t.name + "\"";
    if (!seen.insert(t.name).second) bad(what + " appears twice");
    const uint32_t dims = c.u32(what + " (its dimension count)");
    if (dims == 0 || dims > uint32_t(limits.max_dims)) {
      bad(what + ": " + std::to_string(dims) + " dimensions (1 to " + std::to_string(limits.max_dims) + " allowed)");
    }
    uint64_t numel = 1;
    for (uint32_t d = 0; d < dims; ++d) {
      const uint64_t ne = c.u64(what + " (its dimensions)");
      if (ne > uint64_t(std::numeric_limits<int64_t>::max()) || (ne != 0 && numel > (uint64_t(1) << 62) / ne)) {
        bad(what + ": dimension " + std::to_string(d) + " = " + u64s(ne) + " makes the element count overflow");
      }
      numel *= ne;
      t.ne.push_back(int64_t(ne));
    }
    const uint32_t type = c.u32(what + " (its type)");
    const TypeEntry* e = type_entry(type);
    if (!e) bad(what + ": unknown tensor type " + std::to_string(type));
    t.type = e->type;
    if (t.ne[0] % e->elements != 0) {
      bad(what + ": type " + e->name + " holds blocks of " + std::to_string(e->elements) +
          " elements, but ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of that");
    }
    t.bytes = numel / uint64_t(e->elements) * uint64_t(e->bytes);
    t.offset = c.u64(what + " (its offset)");
    if (t.offset % f.alignment_ != 0) {
      bad(what + ": offset " + u64s(t.offset) + " is not a multiple of the alignment " + u64s(f.alignment_));
    }
    f.tensors_.push_back(std::move(t));
  }
  // the data region starts at the next multiple of the alignment
  const uint64_t end = c.pos();
  f.data_offset_ = (end + f.alignment_ - 1) / f.alignment_ * f.alignment_;
  if (f.data_offset_ < end || f.data_offset_ > size) {
    if (f.tensors_.empty() && f.data_offset_ > size) {
      f.data_offset_ = size;  // no tensors: the padding may be left off
    } else {
      bad("the data region would start at " + u64s(f.data_offset_) + ", past the file's " + u64s(size) + " bytes");
    }
  }
  const uint64_t data_size = size - f.data_offset_;
  std::vector<const TensorInfo*> order;
  for (const TensorInfo& t : f.tensors_) {
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      bad("tensor \"" + t.name + "\" (" + tensor_type_name(t.type) + ", " + u64s(t.bytes) + " bytes at data offset " +
          u64s(t.offset) + ") lies outside the data region of " + u64s(data_size) + " bytes: the file is truncated " +
          "or damaged");
    }
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& a = *order[k - 1];
    if (order[k]->offset < a.offset + a.bytes) {
      bad("tensor \"" + order[k]->name + "\" at data offset " + u64s(order[k]->offset) + " overlaps tensor \"" +
          a.name + "\" [" + u64s(a.offset) + ", " + u64s(a.offset + a.bytes) + ")");
    }
  }
  return f;
}

const Value* File::find(std::string_view key) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  for (const TensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::string File::string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) bad("metadata " + std::string(key) + " is missing");
  if (v->type != ValueType::STRING) bad("metadata " + std::string(key) + " must be a string");
  return v->s;
}

int64_t File::integer(std::string_view key) const {
  const Value* v = find(key);
  if (!v) bad("metadata " + std::string(key) + " is missing");
  if (!v->is_integer()) bad("metadata " + std::string(key) + " must be an integer");
  return v->i;
}

int64_t File::integer_or(std::string_view key, int64_t fallback) const { return find(key) ? integer(key) : fallback; }

double File::number_or(std::string_view key, double fallback) const {
  const Value* v = find(key);
  if (!v) return fallback;
  if (!v->is_number()) bad("metadata " + std::string(key) + " must be a number");
  return v->number();
}

}  // namespace qkv::gguf
