// Every invalid input is rejected before a kernel runs, naming the function, the argument
// and the shapes it got.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention.hpp"
#include "kv_cache.hpp"
#include "mha.hpp"

using namespace qkv;

namespace {

AttentionShape good() { return AttentionShape{1, 4, 2, 3, 5, 8, 6}; }

// Runs both kernels with (s, o); both must throw std::invalid_argument containing every fragment.
void expect_rejected(const AttentionShape& s, const AttentionOptions& o, std::initializer_list<const char*> fragments) {
  std::vector<float> buf(4096, 0.0f);
  for (int kernel = 0; kernel < 2; ++kernel) {
    std::string message;
    try {
      if (kernel == 0) attention_reference(s, buf.data(), buf.data(), buf.data(), o, buf.data(), nullptr);
      else attention(s, buf.data(), buf.data(), buf.data(), o, buf.data(), nullptr);
    } catch (const std::invalid_argument& e) {
      message = e.what();
    }
    INFO("message: " << message);
    REQUIRE(!message.empty());
    CHECK(message.find(kernel == 0 ? "attention_reference:" : "attention:") == 0);
    for (const char* f : fragments) CHECK(message.find(f) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("zero-sized dimensions are errors") {
  for (int64_t AttentionShape::*dim :
       {&AttentionShape::B, &AttentionShape::H, &AttentionShape::Hkv, &AttentionShape::Lq, &AttentionShape::Lk,
        &AttentionShape::D, &AttentionShape::Dv}) {
    AttentionShape s = good();
    s.*dim = 0;
    expect_rejected(s, {}, {"must be >= 1, got 0", "query [", "key [", "value ["});
  }
  AttentionShape s = good();
  s.Lk = 0;
  expect_rejected(s, {}, {"key length Lk must be >= 1", "key [1, 2, 0, 8]"});
}

TEST_CASE("head ratio: H must be a multiple of Hkv") {
  AttentionShape s = good();
  s.H = 3;
  expect_rejected(s, {}, {"query heads H=3 is not a multiple of kv heads Hkv=2", "query [1, 3, 3, 8]"});
}

TEST_CASE("options: scale, window, threads, kv_rows") {
  for (float bad : {-1.0f, NAN, INFINITY}) {
    AttentionOptions o;
    o.scale = bad;
    expect_rejected(good(), o, {"scale must be a finite number >= 0"});
  }
  AttentionOptions o;
  o.window = -2;
  expect_rejected(good(), o, {"window must be >= 0", "got -2"});
  o = {};
  o.threads = 0;
  expect_rejected(good(), o, {"threads must be in [1, 256], got 0"});
  o = {};
  o.min_work_per_thread = -1;
  expect_rejected(good(), o, {"min_work_per_thread must be >= 0, got -1"});
  AttentionShape s = good();
  s.kv_rows = 4;
  expect_rejected(s, {}, {"kv_rows=4 is smaller than Lk=5"});
}

TEST_CASE("masks must broadcast to [B, H, Lq, Lk]") {
  const uint8_t allow[64] = {};
  const float add[64] = {};
  AttentionOptions o;
  o.bool_mask = {allow, {1, 1, 3, 4}};
  expect_rejected(good(), o, {"bool_mask of shape [1, 1, 3, 4] does not broadcast to [B, H, Lq, Lk] = [1, 4, 3, 5]"});
  o = {};
  o.float_mask = {add, {1, 2, 1, 5}};
  expect_rejected(good(), o, {"float_mask of shape [1, 2, 1, 5]", "[1, 4, 3, 5]"});
}

TEST_CASE("KV cache: overflow, empty cache and bad sizes are clear errors") {
  KVCache cache(1, 2, 4, 8, 8);
  std::vector<float> kv(2 * 3 * 8, 0.5f), q(4 * 1 * 8, 0.1f), out(4 * 8);
  CHECK_THROWS_WITH_AS(cache.attend(q.data(), 4, 1, {}, out.data()), doctest::Contains("the cache is empty"),
                       std::invalid_argument);
  cache.append(kv.data(), kv.data(), 3);
  CHECK_THROWS_WITH_AS(cache.append(kv.data(), kv.data(), 2),
                       "KVCache.append: cannot append 2 positions to a cache holding 3 of capacity 4",
                       std::length_error);
  CHECK(cache.length() == 3);  // a failed append changes nothing
  CHECK_THROWS_WITH_AS(cache.attend(q.data(), 3, 1, {}, out.data()), doctest::Contains("not a multiple of kv heads"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(KVCache(1, 0, 4, 8, 8), doctest::Contains("must be >= 1"), std::invalid_argument);
}

TEST_CASE("MultiHeadAttention: embed_dim, weight sizes and lengths are checked") {
  MhaWeights w;
  w.in_proj_weight.assign(3 * 8 * 8, 0.0f);
  w.out_proj_weight.assign(8 * 8, 0.0f);
  CHECK_THROWS_WITH_AS(MultiHeadAttention(8, 3, w),
                       doctest::Contains("embed_dim=8 must be a positive multiple of num_heads=3"),
                       std::invalid_argument);
  MhaWeights bad = w;
  bad.in_proj_bias.assign(5, 0.0f);
  CHECK_THROWS_WITH_AS(MultiHeadAttention(8, 2, bad), "MultiHeadAttention: in_proj_bias has 5 elements, expected 24",
                       std::invalid_argument);
  MultiHeadAttention mha(8, 2, w);
  std::vector<float> x(8), out(8);
  CHECK_THROWS_WITH_AS(mha.forward(1, 1, 0, x.data(), x.data(), x.data(), {}, out.data()), doctest::Contains("Lk=0"),
                       std::invalid_argument);
}
