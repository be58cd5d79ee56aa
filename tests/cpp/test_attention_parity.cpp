// The fast kernel against the reference over a seeded random grid of shapes, masks,
// causal/window settings, GQA/MQA and thread counts. Tolerance: 1e-5 max abs on N(0,1).
#include <doctest/doctest.h>

#include <limits>
#include <sstream>

#include "attention.hpp"
#include "testing.hpp"

using namespace qkv;

namespace {

struct Case {
  AttentionShape s;
  AttentionOptions o;
  std::vector<float> q, k, v, float_mask;
  std::vector<uint8_t> bool_mask;
  std::string describe() const {
    std::ostringstream d;
    d << "B=" << s.B << " H=" << s.H << " Hkv=" << s.Hkv << " Lq=" << s.Lq << " Lk=" << s.Lk << " D=" << s.D
      << " Dv=" << s.Dv << " causal=" << o.causal << " window=" << o.window << " bool=" << (o.bool_mask.data != nullptr)
      << " float=" << (o.float_mask.data != nullptr) << " threads=" << o.threads
      << " scale=" << (o.scale ? std::to_string(*o.scale) : "default");
    return d.str();
  }
};

template <class T>
T pick(std::mt19937& rng, std::initializer_list<T> values) {
  std::uniform_int_distribution<size_t> d(0, values.size() - 1);
  return *(values.begin() + d(rng));
}

Dims4 broadcast_dims(std::mt19937& rng, const AttentionShape& s) {
  Dims4 dims{s.B, s.H, s.Lq, s.Lk};
  for (auto& d : dims)
    if (rng() % 2) d = 1;
  return dims;
}

Case random_case(std::mt19937& rng, int mask_kind) {
  Case c;
  auto& s = c.s;
  s.B = pick<int64_t>(rng, {1, 1, 2, 3});
  s.Hkv = pick<int64_t>(rng, {1, 2, 3});
  s.H = s.Hkv * pick<int64_t>(rng, {1, 1, 2, 4});  // MHA, GQA and (Hkv = 1) MQA
  s.Lq = pick<int64_t>(rng, {1, 3, 17, 37, 65, 129});
  s.Lk = pick<int64_t>(rng, {1, 3, 17, 37, 65, 129});
  if (rng() % 3 == 0) s.Lk = s.Lq;
  s.D = pick<int64_t>(rng, {1, 3, 4, 17, 32, 64, 65, 129});
  s.Dv = rng() % 2 ? s.D : pick<int64_t>(rng, {1, 5, 16, 37, 64});
  c.o.causal = rng() % 2;
  c.o.window = rng() % 3 == 0 ? pick<int64_t>(rng, {1, 2, 7, 40}) : 0;
  c.o.threads = pick<int>(rng, {1, 2, 3, 8});
  c.o.min_work_per_thread = 0;  // use them all, however small the problem
  // explicit scales that keep the scores O(1), the regime the 1e-5 tolerance is for
  if (rng() % 4 == 0) c.o.scale = pick<float>(rng, {0.0f, 0.05f, 0.3f});
  c.q = testing::normal(s.B * s.H * s.Lq * s.D, rng);
  c.k = testing::normal(s.B * s.Hkv * s.Lk * s.D, rng);
  c.v = testing::normal(s.B * s.Hkv * s.Lk * s.Dv, rng);
  if (mask_kind & 1) {  // bool: ~80% allowed
    const Dims4 d = broadcast_dims(rng, s);
    c.bool_mask.resize(d[0] * d[1] * d[2] * d[3]);
    for (auto& x : c.bool_mask) x = rng() % 5 != 0;
    c.o.bool_mask = {c.bool_mask.data(), d};
  }
  if (mask_kind & 2) {  // float: N(0,1) with some -inf
    const Dims4 d = broadcast_dims(rng, s);
    c.float_mask = testing::normal(d[0] * d[1] * d[2] * d[3], rng);
    for (auto& x : c.float_mask)
      if (rng() % 7 == 0) x = -std::numeric_limits<float>::infinity();
    c.o.float_mask = {c.float_mask.data(), d};
  }
  return c;
}

void check_against_reference(const Case& c) {
  const auto& s = c.s;
  std::vector<float> out_ref(s.B * s.H * s.Lq * s.Dv), w_ref(s.B * s.H * s.Lq * s.Lk);
  std::vector<float> out(out_ref.size(), NAN), w(w_ref.size(), NAN), out_no_w(out_ref.size(), NAN);
  attention_reference(s, c.q.data(), c.k.data(), c.v.data(), c.o, out_ref.data(), w_ref.data());
  attention(s, c.q.data(), c.k.data(), c.v.data(), c.o, out.data(), w.data());
  attention(s, c.q.data(), c.k.data(), c.v.data(), c.o, out_no_w.data());
  INFO(c.describe());
  REQUIRE(testing::all_finite(out_ref));
  CHECK(testing::max_abs_diff(out, out_ref) <= 1e-5f);
  CHECK(testing::max_abs_diff(w, w_ref) <= 1e-5f);
  CHECK(testing::max_abs_diff(out_no_w, out) == 0.0f);  // asking for weights changes nothing
}

}  // namespace

TEST_CASE("fast kernel matches the reference over a seeded random grid") {
  std::mt19937 rng(20261129);
  for (int mask_kind = 0; mask_kind < 4; ++mask_kind) {  // none, bool, float, both
    for (int n = 0; n < 60; ++n) check_against_reference(random_case(rng, mask_kind));
  }
}

TEST_CASE("fast kernel: long causal cross-attention with Lq < Lk, windows and GQA") {
  std::mt19937 rng(7);
  for (int64_t lq : {1, 5, 48, 100}) {
    for (int64_t window : {0, 1, 50, 300}) {
      Case c = random_case(rng, 0);
      c.s.B = 1;
      c.s.Hkv = 2;
      c.s.H = 4;
      c.s.Lq = lq;
      c.s.Lk = 300;
      c.s.D = 64;
      c.s.Dv = 64;
      c.o.causal = true;
      c.o.window = window;
      c.q = testing::normal(c.s.B * c.s.H * c.s.Lq * c.s.D, rng);
      c.k = testing::normal(c.s.B * c.s.Hkv * c.s.Lk * c.s.D, rng);
      c.v = testing::normal(c.s.B * c.s.Hkv * c.s.Lk * c.s.Dv, rng);
      check_against_reference(c);
    }
  }
}

TEST_CASE("fast kernel gives the same bits in any thread count") {
  std::mt19937 rng(99);
  for (int n = 0; n < 10; ++n) {
    Case c = random_case(rng, n % 4);
    std::vector<float> first, out(c.s.B * c.s.H * c.s.Lq * c.s.Dv);
    for (int threads : {1, 2, 5}) {
      c.o.threads = threads;
      attention(c.s, c.q.data(), c.k.data(), c.v.data(), c.o, out.data());
      if (first.empty()) first = out;
      INFO(c.describe());
      CHECK(testing::max_abs_diff(out, first) == 0.0f);
    }
  }
}
