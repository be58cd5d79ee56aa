// The residual stream's hooks (src/model/residual.hpp) and the patching sweep
// (src/model/patching.hpp) in C++, on GPT-2 (tests/data/interventions/gpt2, random std 0.2): a
// forward that starts at block l from the recorded resid_pre is the plain forward bit for bit,
// so is one with every record on; a KV cache truncated to t and run on from there gives the
// single call's last row; the sweep's cells without a change are the corrupted metric; misfits
// are std::invalid_argument naming the function.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/gpt2.hpp"
#include "model/patching.hpp"
#include "model/residual.hpp"
#include "test_gpt2_fixture.hpp"
#include "test_model_util.hpp"

using namespace qkv;
using namespace qkv::model_testing;

TEST_CASE("residual: records leave the forward as it was; a forward started at block l from resid_pre is the same") {
  const GPT2 model = load_interventions_gpt2();
  const GPT2Config& c = model.config();
  const int64_t NL = c.n_layer, E = c.n_embd, V = c.vocab_size, L = 9;
  const std::vector<int32_t> ids{3, 14, 15, 92, 65, 35, 89, 79, 32};
  std::vector<float> plain(size_t(L * V)), hooked(size_t(L * V)), started(size_t(L * V));
  GPT2Scratch s;
  model.run(ids.data(), L, 0, nullptr, s, plain.data(), true, nullptr);

  std::vector<float> pre(static_cast<size_t>(NL * L * E)), post(static_cast<size_t>(NL * L * E)),
      hidden(static_cast<size_t>((NL + 1) * L * E)), scale(static_cast<size_t>(L));
  ResidualHooks rh;
  rh.layers = NL, rh.d = E, rh.length = L;
  rh.record[int(ResidSite::ResidPre)] = pre.data();
  rh.record[int(ResidSite::ResidPost)] = post.data();
  rh.hidden = hidden.data();
  rh.final_scale = scale.data();
  model.run(ids.data(), L, 0, nullptr, s, hooked.data(), true, nullptr, nullptr, nullptr, nullptr, &rh);
  CHECK(hooked == plain);
  for (int64_t t = 0; t < L; ++t) CHECK(scale[size_t(t)] > 0.0f);
  // resid_post of block 0 is resid_pre of block 1 and hidden_states[1]
  CHECK(std::equal(post.begin(), post.begin() + L * E, pre.begin() + L * E));
  CHECK(std::equal(post.begin(), post.begin() + L * E, hidden.begin() + L * E));

  ResidualHooks start;
  start.layers = NL, start.d = E;
  start.start_layer = 1;
  start.start_resid = pre.data() + L * E;
  model.run(ids.data(), L, 0, nullptr, s, started.data(), true, nullptr, nullptr, nullptr, nullptr, &start);
  CHECK(started == plain);

  // the last row's logits of two tokens read out of their rows, the last block on its last row only
  std::vector<float> rows(static_cast<size_t>(2 * E)), last(static_cast<size_t>(V));
  read_column(model.weights().wte, 7, rows.data());
  read_column(model.weights().wte, 200, rows.data() + E);
  float two[2] = {0, 0};
  ResidualHooks ro;
  ro.layers = NL, ro.d = E, ro.readout_count = 2, ro.readout_rows = rows.data(), ro.readout = two;
  ro.last_row_only = true;
  model.run(ids.data(), L, 0, nullptr, s, last.data(), false, nullptr, nullptr, nullptr, nullptr, &ro);
  CHECK(two[0] == doctest::Approx(plain[size_t((L - 1) * V + 7)]).epsilon(1e-5));
  CHECK(two[1] == doctest::Approx(plain[size_t((L - 1) * V + 200)]).epsilon(1e-5));
  CHECK_THROWS_WITH_AS(
      model.run(ids.data(), L, 0, nullptr, s, started.data(), true, nullptr, nullptr, nullptr, nullptr, &ro),
      doctest::Contains("every row's were asked"), std::invalid_argument);

  // misfits
  ResidualHooks bad = rh;
  CHECK_THROWS_WITH_AS(bad.validate("GPT2::run", NL + 1, E, 0, L),
                       doctest::Contains("GPT2::run: residual hooks: made for"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(bad.validate("GPT2::run", NL, E, 4, L), doctest::Contains("fall outside the forward"),
                       std::invalid_argument);
  ResidualHooks far;
  far.layers = NL, far.d = E, far.start_layer = int32_t(NL);
  CHECK_THROWS_AS(
      model.run(ids.data(), L, 0, nullptr, s, started.data(), true, nullptr, nullptr, nullptr, nullptr, &far),
      std::invalid_argument);
}

TEST_CASE("residual: a KV cache truncated to t runs on from t; the sweep's unchanged cells give the corrupted metric") {
  const GPT2 model = load_interventions_gpt2();
  const GPT2Config& c = model.config();
  const int64_t V = c.vocab_size, L = 8;
  const std::vector<int32_t> a{5, 17, 29, 41, 53, 65, 77, 89};
  std::vector<int32_t> b = a;
  b[2] = 200;
  // truncate: run b, cut to 2, run a's rows [2, L): a's last row as the single call gives it
  std::vector<KVCache> caches;
  reserve_positions(caches, c.n_layer, c.n_head, c.head_dim(), L, c.n_positions);
  GPT2Scratch s;
  std::vector<float> last(static_cast<size_t>(V)), ref(static_cast<size_t>(V));
  model.run(b.data(), L, 0, &caches, s, last.data(), false, nullptr);
  for (KVCache& k : caches) k.truncate(2);
  model.run(a.data() + 2, L - 2, 2, &caches, s, last.data(), false, nullptr);
  model.run(a.data(), L, 0, nullptr, s, ref.data(), false, nullptr);
  for (int64_t v = 0; v < V; ++v) CHECK(last[size_t(v)] == doctest::Approx(ref[size_t(v)]).epsilon(1e-5));

  // a sweep: patching resid_pre at a position where the runs agree changes nothing
  PatchSweep<GPT2, GPT2Scratch> sweep(model, a.data(), b.data(), L, 7, 9);
  std::vector<float> out(size_t(sweep.cells(SweepKind::ResidPre)));
  sweep.run(SweepKind::ResidPre, 0, sweep.cells(SweepKind::ResidPre), out.data());
  CHECK(out[0] == doctest::Approx(sweep.corrupted_metric()).epsilon(1e-5));  // block 0, position 0
  CHECK(out[2] == doctest::Approx(sweep.clean_metric()).epsilon(1e-5));      // block 0, position 2: all of it
  CHECK_THROWS_WITH_AS(sweep.run(SweepKind::Heads, 0, 99, out.data()), doctest::Contains("activationPatching"),
                       std::invalid_argument);
}
