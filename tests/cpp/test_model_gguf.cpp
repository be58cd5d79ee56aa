// The GGUF reader (header, metadata, tensor infos, every kind of damage), the block formats
// (Q8_0 / Q4_0 repacked into qkv's layouts without loss, the K-quants dequantized by their
// definitions) and a GPT-2 read from a GGUF file as from its safetensors twin.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "matmul/halves.hpp"
#include "matmul/weights.hpp"
#include "model/decoder_stream.hpp"
#include "model/gguf.hpp"
#include "model/gguf_blocks.hpp"
#include "model/gguf_model.hpp"
#include "model/gpt2.hpp"
#include "test_model_util.hpp"

using namespace qkv;
using namespace qkv::model_testing;

namespace {

// A GGUF file written field by field (little-endian), for good and damaged headers alike.
struct Writer {
  std::vector<uint8_t> b;
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(uint8_t(v >> (8 * i)));
  }
  void str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  void head(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    u32(version);
    u64(tensors);
    u64(kvs);
  }
  void kv_u32(const std::string& k, uint32_t v) {
    str(k);
    u32(4);
    u32(v);
  }
  void kv_f32(const std::string& k, float v) {
    str(k);
    u32(6);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    u32(bits);
  }
  void kv_str(const std::string& k, const std::string& v) {
    str(k);
    u32(8);
    str(v);
  }
  void tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name);
    u32(uint32_t(ne.size()));
    for (uint64_t d : ne) u64(d);
    u32(type);
    u64(offset);
  }
  void pad(size_t alignment = 32) {
    while (b.size() % alignment) b.push_back(0);
  }
};

std::string gguf_error(const std::vector<uint8_t>& bytes) {
  return error_of([&] { gguf::File::parse(bytes.data(), bytes.size()); });
}

// One F32 tensor [2, 3] and a little metadata.
std::vector<uint8_t> small_file() {
  Writer w;
  w.head(1, 3);
  w.kv_str("general.architecture", "llama");
  w.kv_u32("llama.block_count", 2);
  w.str("tokenizer.ggml.tokens");
  w.u32(9);
  w.u32(8);
  w.u64(2);
  w.str("a");
  w.str("bc");
  w.tensor("x.weight", {3, 2}, 0, 0);
  w.pad();
  for (int i = 0; i < 6; ++i) {
    const float v = float(i) + 0.5f;
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    w.u32(bits);
  }
  return w.b;
}

uint16_t half(float v) { return halves::f32_to_f16(v); }

}  // namespace

TEST_CASE("gguf: a small file reads back") {
  const std::vector<uint8_t> bytes = small_file();
  const gguf::File f = gguf::File::parse(bytes.data(), bytes.size());
  CHECK(f.version() == 3);
  CHECK(f.string("general.architecture") == "llama");
  CHECK(f.integer("llama.block_count") == 2);
  const gguf::Value* toks = f.find("tokenizer.ggml.tokens");
  REQUIRE(toks);
  CHECK(toks->strings == std::vector<std::string>{"a", "bc"});
  REQUIRE(f.tensors().size() == 1);
  const gguf::TensorInfo& t = f.tensors()[0];
  CHECK(t.shape() == std::vector<int64_t>{2, 3});
  CHECK(t.bytes == 24);
  CHECK(f.data_offset() % 32 == 0);
  float v;
  std::memcpy(&v, f.bytes(t) + 20, 4);
  CHECK(v == 5.5f);
  CHECK(gguf::is_gguf(bytes.data(), bytes.size()));
}

TEST_CASE("gguf: damage is an Error naming what is wrong") {
  std::vector<uint8_t> bytes = small_file();
  std::vector<uint8_t> magic = bytes;
  magic[0] = 'X';
  CHECK(contains(gguf_error(magic), "not a GGUF file"));
  std::vector<uint8_t> version = bytes;
  version[4] = 1;
  CHECK(contains(gguf_error(version), "version 1 is not supported"));
  // every truncation: an Error, never a read past the end
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(n));
    CHECK_MESSAGE(!gguf_error(cut).empty(), "truncated to ", n);
  }
  CHECK(contains(gguf_error({bytes.begin(), bytes.begin() + 100}), "truncated"));

  Writer w;  // an unknown tensor type
  w.head(1, 0);
  w.tensor("t", {32}, 99, 0);
  CHECK(contains(gguf_error(w.b), "tensor \"t\": unknown tensor type 99"));
  Writer o;  // a tensor past the data
  o.head(1, 0);
  o.tensor("t", {32}, 0, 64);
  o.pad();
  o.b.resize(o.b.size() + 128);
  CHECK(contains(gguf_error(o.b), "lies outside the data region"));
  Writer a;  // an absurd array length
  a.head(0, 1);
  a.str("k");
  a.u32(9);
  a.u32(8);
  a.u64(uint64_t(1) << 60);
  CHECK(contains(gguf_error(a.b), "cannot fit"));
  Writer d;  // dimensions whose product overflows
  d.head(1, 0);
  d.tensor("t", {uint64_t(1) << 40, uint64_t(1) << 40}, 0, 0);
  CHECK(contains(gguf_error(d.b), "overflow"));
  Writer k;  // a key twice
  k.head(0, 2);
  k.kv_u32("a", 1);
  k.kv_u32("a", 2);
  CHECK(contains(gguf_error(k.b), "appears twice"));
  Writer al;  // an alignment that is not a power of two
  al.head(0, 1);
  al.kv_u32("general.alignment", 12);
  CHECK(contains(gguf_error(al.b), "general.alignment"));
  Writer q;  // Q8_0 rows that are not whole blocks
  q.head(1, 0);
  q.tensor("t", {20}, 8, 0);
  CHECK(contains(gguf_error(q.b), "not a multiple"));
  Writer many;  // a tensor count no file of this size holds
  many.head(uint64_t(1) << 50, 0);
  CHECK(contains(gguf_error(many.b), "cannot fit"));
}

TEST_CASE("gguf: names the mapping does not know are left out, whatever their shape") {
  Writer w;  // "blk.0.x" (no ".weight"), "blk." and "blk.7" beside the tensors a config needs
  w.head(4, 7);
  w.kv_str("general.architecture", "qwen3");
  for (const char* k : {"qwen3.block_count", "qwen3.embedding_length", "qwen3.attention.head_count",
                        "qwen3.context_length", "qwen3.feed_forward_length"})
    w.kv_u32(k, 1);
  w.kv_u32("qwen3.vocab_size", 1);
  w.tensor("blk.0.x", {32}, 0, 0);
  w.tensor("blk.", {32}, 0, 128);
  w.tensor("blk.7", {32}, 0, 256);
  w.tensor("token_embd.weight", {1, 1}, 0, 384);
  w.pad();
  w.b.resize(w.b.size() + 416);
  const gguf::File f = gguf::File::parse(w.b.data(), w.b.size());
  const safetensors::File index = gguf::hf_index(f);
  REQUIRE(index.tensors().size() == 1);
  CHECK(index.tensors()[0].name == "model.embed_tokens.weight");
}

TEST_CASE("gguf: a header read in parts asks for more, then reads") {
  const std::vector<uint8_t> bytes = small_file();
  CHECK_THROWS_AS(gguf::File::parse_header(bytes.data(), 40, bytes.size()), gguf::Incomplete);
  const gguf::File f = gguf::File::parse_header(bytes.data(), bytes.size() - 24, bytes.size());
  CHECK(f.tensors().size() == 1);
  CHECK(!f.has_bytes());
}

TEST_CASE("gguf: Q8_0 and Q4_0 repack into qkv's Q8 / Q4 without loss") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t K = 64, N = 37;
  std::vector<uint8_t> q8(size_t(N * K / 32 * 34)), q4(size_t(N * K / 32 * 18));
  for (auto& x : q8) x = uint8_t(byte(rng));
  for (auto& x : q4) x = uint8_t(byte(rng));
  for (size_t blk = 0; blk < q8.size() / 34; ++blk) {  // finite scales, quants in -127..127
    const uint16_t h = half(0.01f * float(blk % 13 + 1));
    q8[blk * 34] = uint8_t(h), q8[blk * 34 + 1] = uint8_t(h >> 8);
    for (int i = 0; i < 32; ++i)
      if (q8[blk * 34 + 2 + size_t(i)] == 0x80) q8[blk * 34 + 2 + size_t(i)] = 0;
  }
  for (size_t blk = 0; blk < q4.size() / 18; ++blk) {
    const uint16_t h = half(-0.02f * float(blk % 7 + 1));
    q4[blk * 18] = uint8_t(h), q4[blk * 18 + 1] = uint8_t(h >> 8);
  }
  std::vector<float> want8(size_t(N * K)), want4(size_t(N * K));
  gguf::dequantize_rows(gguf::TensorType::Q8_0, q8.data(), K, N, want8.data());
  gguf::dequantize_rows(gguf::TensorType::Q4_0, q4.data(), K, N, want4.data());
  const Q8Layout l8 = Q8Layout::of(K, N);
  const Q4Layout l4 = Q4Layout::of(K, N);
  std::vector<int8_t> d8(l8.data_bytes());
  std::vector<uint8_t> d4(l4.data_bytes());
  std::vector<uint16_t> s8(l8.scale_count()), s4(l4.scale_count());
  gguf::repack_q8_0(q8.data(), K, N, d8.data(), s8.data());
  gguf::repack_q4_0(q4.data(), K, N, d4.data(), s4.data());
  const WeightMatrix m8{WeightType::Q8, WeightLayout::OutIn, K, N, d8.data(), s8.data()};
  const WeightMatrix m4{WeightType::Q4, WeightLayout::OutIn, K, N, d4.data(), s4.data()};
  int wrong = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      wrong += weight_at(m8, k, n) != want8[size_t(n * K + k)];
      wrong += weight_at(m4, k, n) != want4[size_t(n * K + k)];
    }
  }
  CHECK(wrong == 0);
  // Q4_0's nibble order: weight j < 16 low nibble of byte j, weight j + 16 its high nibble
  CHECK(want4[1] == halves::f16_to_f32(s4[0]) * float((q4[3] & 0xF) - 8));
  CHECK(want4[17] == halves::f16_to_f32(s4[0]) * float((q4[3] >> 4) - 8));
}

TEST_CASE("gguf: K-quant blocks dequantize by their definitions") {
  // Q4_K: d = 0.5, dmin = 0.25; sub-block 0 scale 3 min 1, sub-block 1 scale 2 min 5 (6 bits each)
  std::vector<uint8_t> b(144, 0);
  const uint16_t d = half(0.5f), dmin = half(0.25f);
  b[0] = uint8_t(d), b[1] = uint8_t(d >> 8), b[2] = uint8_t(dmin), b[3] = uint8_t(dmin >> 8);
  b[4 + 0] = 3, b[4 + 4] = 1;  // scales[j], mins at scales[j + 4] for j < 4
  b[4 + 1] = 2, b[4 + 5] = 5;
  b[16 + 0] = 0x7A;  // weight 0 (low nibble 10), weight 32 (high nibble 7)
  std::vector<float> y(256);
  gguf::dequantize_rows(gguf::TensorType::Q4_K, b.data(), 256, 1, y.data());
  CHECK(y[0] == 0.5f * 3 * 10 - 0.25f * 1);
  CHECK(y[32] == 0.5f * 2 * 7 - 0.25f * 5);
  CHECK(y[1] == -0.25f);
  // Q5_K: the same plus a 5th bit from qh (bit 0 of qh[0]: weight 0)
  std::vector<uint8_t> c(176, 0);
  std::memcpy(c.data(), b.data(), 16);
  c[16] = 1;
  c[48] = 0x7A;
  gguf::dequantize_rows(gguf::TensorType::Q5_K, c.data(), 256, 1, y.data());
  CHECK(y[0] == 0.5f * 3 * 26 - 0.25f * 1);
  CHECK(y[32] == 0.5f * 2 * 7 - 0.25f * 5);
  // Q6_K: d = 0.5, scale of sub-block 0 = -3; weight 0 = ql low nibble 5 + qh bits 2 -> 37 - 32 = 5
  std::vector<uint8_t> e(210, 0);
  e[0] = 5;
  e[128] = 2;
  e[192] = uint8_t(int8_t(-3));
  e[208] = uint8_t(d), e[209] = uint8_t(d >> 8);
  gguf::dequantize_rows(gguf::TensorType::Q6_K, e.data(), 256, 1, y.data());
  CHECK(y[0] == 0.5f * -3 * 5);
  CHECK(y[1] == 0.5f * -3 * -32);
  // an inf scale is an Error
  e[209] = 0x7C, e[208] = 0;
  CHECK(contains(error_of([&] { gguf::dequantize_rows(gguf::TensorType::Q6_K, e.data(), 256, 1, y.data()); }),
                 "scale is inf"));
}

TEST_CASE("gguf: a GPT-2 reads from GGUF as from its safetensors twin (whole and streamed)") {
  const TinyConfig c;
  const std::vector<StTensor> tensors = random_gpt2_tensors(c, 5);
  const std::vector<uint8_t> st = build_safetensors(tensors);
  // the GGUF twin: llama.cpp's names, Conv1D matrices stored transposed ([out, in] rows)
  std::vector<std::pair<std::string, std::vector<float>>> data;
  Writer w;
  std::vector<std::vector<uint64_t>> nes;
  std::vector<std::string> names;
  for (const StTensor& t : tensors) {
    std::vector<float> v(t.bytes.size() / 4);
    std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
    std::string name = t.name;
    std::vector<uint64_t> ne(t.shape.rbegin(), t.shape.rend());
    const auto rename = [&](const char* from, const char* to) {
      const size_t at = name.find(from);
      if (at != std::string::npos) name = name.substr(0, at) + to + name.substr(at + std::strlen(from));
    };
    if (name.rfind("h.", 0) == 0) name = "blk." + name.substr(2);
    rename("wte", "token_embd"), rename("wpe", "position_embd"), rename("ln_f", "output_norm");
    rename("ln_1", "attn_norm"), rename("ln_2", "ffn_norm"), rename("attn.c_attn", "attn_qkv");
    rename("attn.c_proj", "attn_output"), rename("mlp.c_fc", "ffn_up"), rename("mlp.c_proj", "ffn_down");
    if (name.rfind("blk.", 0) == 0 && t.shape.size() == 2) {  // transpose [K, N] -> [N, K]
      const int64_t K = t.shape[0], N = t.shape[1];
      std::vector<float> tr(v.size());
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n) tr[size_t(n * K + k)] = v[size_t(k * N + n)];
      v = tr;
      ne = {uint64_t(K), uint64_t(N)};
    }
    names.push_back(name);
    nes.push_back(ne);
    data.push_back({name, v});
  }
  w.head(names.size(), 7);
  w.kv_str("general.architecture", "gpt2");
  w.kv_u32("gpt2.block_count", uint32_t(c.n_layer));
  w.kv_u32("gpt2.embedding_length", uint32_t(c.n_embd));
  w.kv_u32("gpt2.attention.head_count", uint32_t(c.n_head));
  w.kv_u32("gpt2.context_length", uint32_t(c.n_positions));
  w.kv_u32("gpt2.feed_forward_length", uint32_t(4 * c.n_embd));
  w.kv_f32("gpt2.attention.layer_norm_epsilon", 1e-5f);
  uint64_t offset = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    w.tensor(names[i], nes[i], 0, offset);
    offset += (data[i].second.size() * 4 + 31) / 32 * 32;
  }
  w.pad();
  for (const auto& [name, v] : data) {
    const size_t at = w.b.size();
    w.b.resize(at + (v.size() * 4 + 31) / 32 * 32);
    std::memcpy(w.b.data() + at, v.data(), v.size() * 4);
  }
  const gguf::File file = gguf::File::parse(w.b.data(), w.b.size());
  const std::string config = gguf::hf_config_json(file);
  CHECK(contains(config, "\"n_layer\":2"));

  const std::vector<int32_t> ids{3, 1, 4, 1, 5, 9, 2, 6};
  const int64_t L = int64_t(ids.size()), V = c.vocab_size;
  std::vector<float> want(size_t(L * V)), got(size_t(L * V)), streamed(size_t(L * V));
  GPT2::load(c.json(), st.data(), st.size()).forward(ids.data(), L, want.data());
  GPT2::load(config, w.b.data(), w.b.size()).forward(ids.data(), L, got.data());
  CHECK(got == want);  // the same weights, read in place either way: bit for bit
  // streamed in chunks as 'f16' from both files: the same again
  std::vector<float> st16(size_t(L * V));
  GPT2::load(c.json(), st.data(), st.size(), WeightFormat::F16).forward(ids.data(), L, st16.data());
  DecoderStream<GPT2> stream(config, w.b.data(), w.b.size(), w.b.size(), WeightFormat::F16);
  REQUIRE(stream.streams());
  for (size_t at = 0; at < w.b.size(); at += 100) stream.feed(w.b.data() + at, std::min<size_t>(100, w.b.size() - at));
  stream.finish().forward(ids.data(), L, streamed.data());
  CHECK(streamed == st16);
}
