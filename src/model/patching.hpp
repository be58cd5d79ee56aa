// An activation-patching sweep (docs/residual.md): for every cell (a head, a head at a position,
// a site at a position) the corrupted run is repeated with that cell's activation taken from
// the clean run, and the metric m = logit[correct] - logit[wrong] at the last position is read.
//
// What a patch cannot change is not recomputed. A patch in block l leaves blocks < l as the
// corrupted run computed them: the patched run starts at block l from the corrupted
// resid_pre (ResidualHooks::start_layer). In 'heads' block l's attention is the corrupted
// run's for every head (only head h's rows change after it: start_att). A patch at position t
// leaves every position < t unchanged at every layer (the model is causal): the patched run
// covers rows [t, T) only, its keys and values of positions < t read from the corrupted run's
// KV caches (truncated to t; cells run with t descending, so rows < t are never overwritten).
#pragma once

#include <cstdint>
#include <vector>

#include "kv_cache.hpp"
#include "model/readout.hpp"

namespace qkv {

enum class SweepKind : int { Heads = 0, HeadPositions = 1, ResidPre = 2, AttnOut = 3, MlpOut = 4 };

template <class Model, class Scratch>
class PatchSweep {
 public:
  // clean, corrupted: ids [T] each; the metric's tokens correct and wrong. Runs both forwards
  // (recording what the cells read). Throws std::invalid_argument naming "activationPatching".
  PatchSweep(const Model& model, const int32_t* clean, const int32_t* corrupted, int64_t T, int32_t correct,
             int32_t wrong);

  float clean_metric() const { return m_clean_; }
  float corrupted_metric() const { return m_corrupted_; }
  // Cells in a sweep of `kind`: layers x heads ('heads'), x T ('headPositions'), layers x T.
  int64_t cells(SweepKind kind) const;
  // Runs cells [begin, end) in execution order and writes each one's metric m(patched) at its
  // place in out [cells(kind)] (row-major over [layers, heads(, T)] or [layers, T]). Positions
  // run from the last to the first: call with begin = the previous call's end.
  void run(SweepKind kind, int64_t begin, int64_t end, float* out);

 private:
  // m = logit[correct] - logit[wrong] of the last row, as the run with rh = readout_hooks() read it
  // out (the two tokens' LM-head rows only, not the whole vocabulary)
  float metric() const { return readout_[0] - readout_[1]; }
  void set_readout(ResidualHooks& rh);
  // one patched run of rows [t, T) starting at block l (rh set up by the caller)
  float patched(int64_t l, int64_t t, ResidualHooks& rh);

  const Model& model_;
  DecoderDims d_;
  int64_t T_;
  int32_t correct_, wrong_;
  std::vector<int32_t> corrupted_ids_;
  float m_clean_ = 0, m_corrupted_ = 0;
  // records, [NL, T, d]: resid_pre, attn_out, mlp_out of each run; heads' outputs [NL, H, T, D]
  std::vector<float> clean_pre_, clean_attn_, clean_mlp_, clean_heads_;
  std::vector<float> corr_pre_, corr_heads_;
  std::vector<KVCache> caches_;  // the corrupted run's keys and values, per layer
  Scratch scratch_;
  std::vector<float> start_resid_, start_att_, logits_;
  std::vector<float> answer_rows_;  // [2, d]: the LM-head rows of correct and wrong
  float readout_[2] = {0, 0};
  std::vector<int32_t> patch_slot_;
  std::vector<uint8_t> patch_rows_;
};

extern template class PatchSweep<GPT2, GPT2Scratch>;
extern template class PatchSweep<Llama, LlamaScratch>;

}  // namespace qkv
