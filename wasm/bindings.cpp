// The Embind boundary: maps the C++ API of src/ to JavaScript and nothing more.
//
// Conventions (the TypeScript layer in web/lib/ relies on them):
//  - Arrays travel as byte addresses into the wasm heap (JS copies Float32Arrays in with
//    malloc + HEAPF32); 0 means "absent".
//  - Sizes are plain 32-bit ints; call arguments come as one JS object (Embind value_object).
//  - No C++ exception crosses into JS: each entry point catches and returns a string,
//    "" on success, else "<kind>|<message>" with kind invalid_argument, length_error,
//    bad_alloc or error. Factories return null on failure and leave the message in lastError().
//    The JS layer validates every input first, so these are a backstop, not the validation.
#include <emscripten/bind.h>
#include <malloc.h>

#include <array>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention.hpp"
#include "guarded.hpp"
#include "heap_alloc.hpp"
#include "kv_cache.hpp"
#include "mha.hpp"

using namespace emscripten;
using qkv::wasm::guarded;
using qkv::wasm::ptr;

namespace {

using Dims = std::array<int, 4>;

struct AttentionArgs {
  int B = 1, H = 1, Hkv = 1, Lq = 1, Lk = 1, D = 1, Dv = 1;
  uintptr_t query = 0, key = 0, value = 0, output = 0, weights = 0;
  double scale = 0;  // always given: the TypeScript layer resolves the default 1/sqrt(D)
  bool causal = false;
  int window = 0;
  uintptr_t boolMask = 0;
  Dims boolMaskDims{1, 1, 1, 1};
  uintptr_t floatMask = 0;
  Dims floatMaskDims{1, 1, 1, 1};
  int threads = 1;
  bool reference = false;  // run attention_reference (the plain-loop ground truth)
};

struct MhaArgs {
  int batch = 1, lq = 1, lk = 1;
  uintptr_t query = 0, key = 0, value = 0, output = 0, weights = 0;
  uintptr_t keyPaddingMask = 0, boolAttnMask = 0, floatAttnMask = 0;
  bool attnMaskPerHead = false, isCausal = false, needWeights = true, averageAttnWeights = true;
  int threads = 1;
};

qkv::Dims4 dims4(const Dims& d) { return {d[0], d[1], d[2], d[3]}; }

qkv::AttentionShape shape_of(const AttentionArgs& a) {
  qkv::AttentionShape s;
  s.B = a.B, s.H = a.H, s.Hkv = a.Hkv, s.Lq = a.Lq, s.Lk = a.Lk, s.D = a.D, s.Dv = a.Dv;
  return s;
}

qkv::AttentionOptions options_of(const AttentionArgs& a) {
  qkv::AttentionOptions o;
  o.scale = static_cast<float>(a.scale);
  o.causal = a.causal;
  o.window = a.window;
  o.bool_mask = {ptr<const uint8_t>(a.boolMask), dims4(a.boolMaskDims)};
  o.float_mask = {ptr<const float>(a.floatMask), dims4(a.floatMaskDims)};
  o.threads = a.threads;
  return o;
}

std::string last_error;

std::string attention(const AttentionArgs& a) {
  return guarded([&] {
    const auto s = shape_of(a);
    const auto o = options_of(a);
    auto run = a.reference ? &qkv::attention_reference : &qkv::attention;
    run(s, ptr<const float>(a.query), ptr<const float>(a.key), ptr<const float>(a.value), o, ptr<float>(a.output),
        ptr<float>(a.weights));
  });
}

// KVCache
qkv::KVCache* kv_create(int batch, int kv_heads, int capacity, int head_dim, int value_dim) {
  qkv::KVCache* cache = nullptr;
  last_error = guarded([&] { cache = new qkv::KVCache(batch, kv_heads, capacity, head_dim, value_dim); });
  return cache;
}
std::string kv_append(qkv::KVCache& c, uintptr_t key, uintptr_t value, int n) {
  return guarded([&] { c.append(ptr<const float>(key), ptr<const float>(value), n); });
}
std::string kv_attend(const qkv::KVCache& c, const AttentionArgs& a) {
  return guarded([&] {
    c.attend(ptr<const float>(a.query), a.H, a.Lq, options_of(a), ptr<float>(a.output), ptr<float>(a.weights));
  });
}
double kv_length(const qkv::KVCache& c) { return static_cast<double>(c.length()); }
double kv_capacity(const qkv::KVCache& c) { return static_cast<double>(c.capacity()); }
void kv_clear(qkv::KVCache& c) { c.clear(); }

// MultiHeadAttention
std::vector<float> copy(uintptr_t address, int n) {
  if (!address) return {};
  const float* p = ptr<const float>(address);
  return std::vector<float>(p, p + n);
}
qkv::MultiHeadAttention* mha_create(int embed_dim, int num_heads, uintptr_t in_w, uintptr_t in_b, uintptr_t out_w,
                                    uintptr_t out_b) {
  qkv::MultiHeadAttention* mha = nullptr;
  last_error = guarded([&] {
    const int e = embed_dim;
    qkv::MhaWeights w{copy(in_w, 3 * e * e), copy(in_b, 3 * e), copy(out_w, e * e), copy(out_b, e)};
    mha = new qkv::MultiHeadAttention(embed_dim, num_heads, std::move(w));
  });
  return mha;
}
std::string mha_forward(const qkv::MultiHeadAttention& m, const MhaArgs& a) {
  return guarded([&] {
    qkv::MhaOptions o;
    o.key_padding_mask = ptr<const uint8_t>(a.keyPaddingMask);
    o.bool_attn_mask = ptr<const uint8_t>(a.boolAttnMask);
    o.float_attn_mask = ptr<const float>(a.floatAttnMask);
    o.attn_mask_per_head = a.attnMaskPerHead;
    o.is_causal = a.isCausal;
    o.need_weights = a.needWeights;
    o.average_attn_weights = a.averageAttnWeights;
    o.threads = a.threads;
    m.forward(a.batch, a.lq, a.lk, ptr<const float>(a.query), ptr<const float>(a.key), ptr<const float>(a.value), o,
              ptr<float>(a.output), ptr<float>(a.weights));
  });
}

// A heap block of any size up to the 4 GB heap (JS frees it with _free), or 0: HeapScope's
// blocks over 1 GB (a bare _malloc refuses 2 GB and more, see heap_alloc.hpp).
uintptr_t heap_alloc(double bytes) {
  return bytes >= 1 && bytes <= 4294967295.0
             ? reinterpret_cast<uintptr_t>(qkv::wasm::heap_alloc(static_cast<size_t>(bytes)))
             : 0;
}
// Bytes of linear memory now (the heap-growth tests read it).
double heap_bytes() { return static_cast<double>(__builtin_wasm_memory_size(0)) * 65536.0; }
// Bytes malloc has handed out and not had back (the no-leak tests read it).
double heap_in_use() { return static_cast<double>(mallinfo().uordblks); }
std::string get_last_error() { return last_error; }

}  // namespace

EMSCRIPTEN_BINDINGS(qkv_core) {
  value_array<Dims>("Dims4")
      .element(emscripten::index<0>())
      .element(emscripten::index<1>())
      .element(emscripten::index<2>())
      .element(emscripten::index<3>());

  value_object<AttentionArgs>("AttentionArgs")
      .field("B", &AttentionArgs::B)
      .field("H", &AttentionArgs::H)
      .field("Hkv", &AttentionArgs::Hkv)
      .field("Lq", &AttentionArgs::Lq)
      .field("Lk", &AttentionArgs::Lk)
      .field("D", &AttentionArgs::D)
      .field("Dv", &AttentionArgs::Dv)
      .field("query", &AttentionArgs::query)
      .field("key", &AttentionArgs::key)
      .field("value", &AttentionArgs::value)
      .field("output", &AttentionArgs::output)
      .field("weights", &AttentionArgs::weights)
      .field("scale", &AttentionArgs::scale)
      .field("causal", &AttentionArgs::causal)
      .field("window", &AttentionArgs::window)
      .field("boolMask", &AttentionArgs::boolMask)
      .field("boolMaskDims", &AttentionArgs::boolMaskDims)
      .field("floatMask", &AttentionArgs::floatMask)
      .field("floatMaskDims", &AttentionArgs::floatMaskDims)
      .field("threads", &AttentionArgs::threads)
      .field("reference", &AttentionArgs::reference);

  value_object<MhaArgs>("MhaArgs")
      .field("batch", &MhaArgs::batch)
      .field("lq", &MhaArgs::lq)
      .field("lk", &MhaArgs::lk)
      .field("query", &MhaArgs::query)
      .field("key", &MhaArgs::key)
      .field("value", &MhaArgs::value)
      .field("output", &MhaArgs::output)
      .field("weights", &MhaArgs::weights)
      .field("keyPaddingMask", &MhaArgs::keyPaddingMask)
      .field("boolAttnMask", &MhaArgs::boolAttnMask)
      .field("floatAttnMask", &MhaArgs::floatAttnMask)
      .field("attnMaskPerHead", &MhaArgs::attnMaskPerHead)
      .field("isCausal", &MhaArgs::isCausal)
      .field("needWeights", &MhaArgs::needWeights)
      .field("averageAttnWeights", &MhaArgs::averageAttnWeights)
      .field("threads", &MhaArgs::threads);

  function("attention", &attention);
  function("heapAlloc", &heap_alloc);
  function("heapBytes", &heap_bytes);
  function("heapInUse", &heap_in_use);
  function("lastError", &get_last_error);

  class_<qkv::KVCache>("KVCache")
      .class_function("create", &kv_create, allow_raw_pointers())
      .function("append", &kv_append)
      .function("attend", &kv_attend)
      .function("length", &kv_length)
      .function("capacity", &kv_capacity)
      .function("clear", &kv_clear);

  class_<qkv::MultiHeadAttention>("MultiHeadAttention")
      .class_function("create", &mha_create, allow_raw_pointers())
      .function("forward", &mha_forward);
}
