// Head interventions (src/model/interventions.hpp) in C++: LayerHooks' mask slicing and
// combining, and GPT-2's forward with them (tests/data/interventions/gpt2, random std 0.2):
// a head scale of ones is the plain forward bit for bit, a zero scale zeroes the head's
// weights and outputs, knockout through the KV-cache session in chunks matches the single
// call, and a misfit is an std::invalid_argument naming the function.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/gpt2.hpp"
#include "model/interventions.hpp"
#include "test_gpt2_fixture.hpp"
#include "test_model_util.hpp"

using namespace qkv;
using namespace qkv::model_testing;

TEST_CASE("interventions: LayerHooks slices a chunk's rows of the knockout mask and ANDs a padding mask") {
  // one mask for every head, 3 rows x 3 keys; row 1 blocks key 0, row 2 blocks key 2
  const std::vector<uint8_t> allow{1, 1, 1, 0, 1, 1, 1, 1, 0};
  const std::vector<int32_t> slot{0};
  HeadInterventions iv;
  iv.layers = 1, iv.heads = 2, iv.length = 3, iv.keys = 3, iv.value_dim = 4;
  iv.block_slot = slot.data(), iv.allow = allow.data(), iv.block_count = 1, iv.block_heads = 1;
  iv.validate("test", 1, 2, 4, 0, 3, 3);
  std::vector<uint8_t> scratch;
  AttentionOptions base;
  // the whole forward: read in place
  const AttentionOptions whole = LayerHooks("test", &iv, 0, 0, 3, 3, 4).options(base, scratch);
  CHECK(whole.bool_mask.data == allow.data());
  // rows [1, 3) over keys [0, 2) (a chunk at pos0 = 1 of a causal forward), with a padding mask on key 1
  const std::vector<uint8_t> pad{1, 0, 1};
  base.bool_mask = MaskView<uint8_t>{pad.data(), {1, 1, 1, 3}};
  const AttentionOptions chunk = LayerHooks("test", &iv, 0, 1, 2, 2, 4).options(base, scratch);
  REQUIRE(chunk.bool_mask.data == scratch.data());
  CHECK(chunk.bool_mask.dims == Dims4{1, 1, 2, 2});
  CHECK(scratch == std::vector<uint8_t>{0, 0, 1, 0});
  // outside the forward it was made for
  CHECK_THROWS_AS(LayerHooks("test", &iv, 0, 2, 2, 4, 4), std::invalid_argument);
  // a stack of another shape
  CHECK_THROWS_WITH_AS(iv.validate("GPT2::run", 2, 2, 4, 0, 3, 3),
                       doctest::Contains("GPT2::run: interventions: made for 1 layers"), std::invalid_argument);
}

TEST_CASE("interventions: GPT-2 forward with a head scale, knockout through the session in chunks") {
  const GPT2 model = load_interventions_gpt2();
  const GPT2Config& c = model.config();
  const int64_t NL = c.n_layer, H = c.n_head, D = c.head_dim(), V = c.vocab_size, L = 9;
  std::vector<int32_t> ids(L);
  for (int64_t i = 0; i < L; ++i) ids[size_t(i)] = int32_t(5 + i * 11 % 200);
  std::vector<float> logits(L * V), att(NL * H * L * L), logits2(L * V), att2(NL * H * L * L);
  GPT2Scratch s;
  model.run(ids.data(), L, 0, nullptr, s, logits.data(), true, att.data());

  // ones: bit for bit
  std::vector<float> ones(NL * H, 1.0f);
  HeadInterventions iv;
  iv.layers = NL, iv.heads = H, iv.head_scale = ones.data();
  model.run(ids.data(), L, 0, nullptr, s, logits2.data(), true, att2.data(), nullptr, nullptr, &iv);
  CHECK(logits2 == logits);
  CHECK(att2 == att);

  // head 1 of layer 0 scaled by 0, and row L-1 of layer 1 loses keys 0..2 in every head; head outputs out
  std::vector<float> scale = ones;
  scale[1] = 0.0f;
  std::vector<uint8_t> allow(L * L, 1);
  for (int64_t k = 0; k < 3; ++k) allow[size_t((L - 1) * L + k)] = 0;
  const std::vector<int32_t> slot{-1, 0};
  std::vector<float> outs(NL * H * L * D);
  iv.length = L, iv.keys = L, iv.value_dim = D, iv.head_scale = scale.data();
  iv.block_slot = slot.data(), iv.allow = allow.data(), iv.block_count = 1, iv.block_heads = 1;
  iv.outputs = outs.data();
  model.run(ids.data(), L, 0, nullptr, s, logits2.data(), true, att2.data(), nullptr, nullptr, &iv);
  for (int64_t i = 0; i < L * L; ++i) REQUIRE(att2[size_t(1 * L * L + i)] == 0.0f);
  for (int64_t i = 0; i < L * D; ++i) REQUIRE(outs[size_t(1 * L * D + i)] == 0.0f);
  const float* row = att2.data() + ((1 * H + 2) * L + (L - 1)) * L;  // layer 1, head 2, last row
  double sum = 0;
  for (int64_t k = 0; k < L; ++k) sum += row[k];
  CHECK(row[0] == 0.0f);
  CHECK(row[2] == 0.0f);
  CHECK(std::fabs(sum - 1.0) < 1e-5);
  CHECK(logits2 != logits);

  // the same through the session, 4 + 5 tokens: the rows of the single call
  GPT2Session session(model);
  std::vector<float> outs2(outs.size()), chunk_logits(5 * V), chunk_att(NL * H * 5 * L);
  iv.outputs = outs2.data();
  session.prefill(ids.data(), 4, chunk_logits.data(), nullptr, nullptr, nullptr, true, &iv);
  session.prefill(ids.data() + 4, 5, chunk_logits.data(), chunk_att.data(), nullptr, nullptr, true, &iv);
  float worst = 0;
  for (int64_t i = 0; i < 5 * V; ++i)
    worst = std::max(worst, std::fabs(chunk_logits[size_t(i)] - logits2[size_t(4 * V + i)]));
  for (size_t i = 0; i < outs.size(); ++i) worst = std::max(worst, std::fabs(outs2[i] - outs[i]));
  CHECK(worst < 1e-5f);
  // the second chunk's last row of layer 1, head 2 [Lk = 9]
  const float* crow = chunk_att.data() + ((1 * H + 2) * 5 + 4) * L;
  for (int64_t k = 0; k < L; ++k) CHECK(std::fabs(crow[k] - row[k]) < 1e-6f);
  // a chunk past the forward the interventions describe
  CHECK_THROWS_AS(session.prefill(ids.data(), 1, chunk_logits.data(), nullptr, nullptr, nullptr, true, &iv),
                  std::invalid_argument);
  CHECK(session.position() == 9);  // checked before any work: the caches are as they were
}
