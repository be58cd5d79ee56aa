#include "model/patching.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/decoder_checks.hpp"
#include "model/interventions.hpp"
#include "model/residual.hpp"

namespace qkv {

namespace {

constexpr char kFn[] = "activationPatching";

}  // namespace

template <class Model, class Scratch>
PatchSweep<Model, Scratch>::PatchSweep(const Model& model, const int32_t* clean, const int32_t* corrupted, int64_t T,
                                       int32_t correct, int32_t wrong)
    : model_(model), d_(decoder_dims(model)), T_(T), correct_(correct), wrong_(wrong) {
  const int64_t NL = d_.layers, H = d_.heads, D = d_.head_dim, E = d_.d;
  check_decoder_ids(kFn, clean, T, 0, d_.vocab, d_.positions, "the context");
  check_decoder_ids(kFn, corrupted, T, 0, d_.vocab, d_.positions, "the context");
  for (int32_t tok : {correct, wrong}) {
    if (tok < 0 || tok >= d_.vocab) {
      throw std::invalid_argument(std::string(kFn) + ": answer token " + std::to_string(tok) + " is not in [0, " +
                                  std::to_string(d_.vocab) + ")");
    }
  }
  corrupted_ids_.assign(corrupted, corrupted + T);
  const size_t site = size_t(NL * T * E), hs = size_t(NL * H * T * D);
  clean_pre_.resize(site), clean_attn_.resize(site), clean_mlp_.resize(site), clean_heads_.resize(hs);
  corr_pre_.resize(site), corr_heads_.resize(hs);
  logits_.resize(size_t(d_.vocab));
  start_resid_.resize(size_t(T * E)), start_att_.resize(size_t(H * T * D));
  patch_slot_.assign(size_t(kResidSites * NL), -1);
  patch_rows_.assign(size_t(T), 0);

  HeadInterventions iv;
  iv.layers = NL, iv.heads = H, iv.length = T, iv.keys = T, iv.value_dim = D;
  ResidualHooks rh;
  rh.layers = NL, rh.d = E, rh.length = T;
  // the clean run: resid_pre, attn_out, mlp_out [NL, T, E], the heads' outputs [NL, H, T, D]
  iv.outputs = clean_heads_.data();
  rh.record[int(ResidSite::ResidPre)] = clean_pre_.data();
  rh.record[int(ResidSite::AttnOut)] = clean_attn_.data();
  rh.record[int(ResidSite::MlpOut)] = clean_mlp_.data();
  answer_rows_.resize(size_t(2 * E));
  unembedding_row(model_, correct, answer_rows_.data());
  unembedding_row(model_, wrong, answer_rows_.data() + E);
  set_readout(rh);
  model_.run(clean, T, 0, nullptr, scratch_, logits_.data(), false, nullptr, nullptr, nullptr, &iv, &rh);
  m_clean_ = metric();
  // the corrupted run, through KV caches that keep its keys and values: resid_pre, heads' outputs
  iv.outputs = corr_heads_.data();
  rh.record[int(ResidSite::ResidPre)] = corr_pre_.data();
  rh.record[int(ResidSite::AttnOut)] = rh.record[int(ResidSite::MlpOut)] = nullptr;
  reserve_positions(caches_, NL, d_.kv_heads, D, T, d_.positions);
  model_.run(corrupted, T, 0, &caches_, scratch_, logits_.data(), false, nullptr, nullptr, nullptr, &iv, &rh);
  m_corrupted_ = metric();
}

template <class Model, class Scratch>
void PatchSweep<Model, Scratch>::set_readout(ResidualHooks& rh) {
  rh.readout_count = 2;
  rh.readout_rows = answer_rows_.data();
  rh.readout = readout_;
}

template <class Model, class Scratch>
int64_t PatchSweep<Model, Scratch>::cells(SweepKind kind) const {
  switch (kind) {
    case SweepKind::Heads:
      return d_.layers * d_.heads;
    case SweepKind::HeadPositions:
      return d_.layers * d_.heads * T_;
    default:
      return d_.layers * T_;
  }
}

template <class Model, class Scratch>
float PatchSweep<Model, Scratch>::patched(int64_t l, int64_t t, ResidualHooks& rh) {
  rh.layers = d_.layers, rh.d = d_.d, rh.length = T_;
  rh.last_row_only = true;  // the metric reads the last position's logits only
  set_readout(rh);
  rh.start_layer = int32_t(l);
  rh.start_resid = start_resid_.data();
  if (t == 0) {  // every row: no cache
    model_.run(corrupted_ids_.data(), T_, 0, nullptr, scratch_, logits_.data(), false, nullptr, nullptr, nullptr,
               nullptr, &rh);
  } else {  // rows [t, T): the keys and values of positions < t from the corrupted run's caches
    for (KVCache& c : caches_) c.truncate(t);
    model_.run(corrupted_ids_.data() + t, T_ - t, t, &caches_, scratch_, logits_.data(), false, nullptr, nullptr,
               nullptr, nullptr, &rh);
  }
  return metric();
}

template <class Model, class Scratch>
void PatchSweep<Model, Scratch>::run(SweepKind kind, int64_t begin, int64_t end, float* out) {
  const int64_t NL = d_.layers, H = d_.heads, D = d_.head_dim, E = d_.d, T = T_;
  if (begin < 0 || end > cells(kind) || begin > end) {
    throw std::invalid_argument(std::string(kFn) + ": cells [" + std::to_string(begin) + ", " + std::to_string(end) +
                                ") of " + std::to_string(cells(kind)));
  }
  for (int64_t e = begin; e < end; ++e) {
    ResidualHooks rh;
    if (kind == SweepKind::Heads) {
      // cell (l, h): block l's attention output is the corrupted one with head h's rows clean
      const int64_t l = e / H, h = e % H;
      const float* pre = corr_pre_.data() + l * T * E;
      std::copy(pre, pre + T * E, start_resid_.begin());
      const float* att = corr_heads_.data() + l * H * T * D;
      std::copy(att, att + H * T * D, start_att_.begin());
      const float* clean = clean_heads_.data() + (l * H + h) * T * D;
      std::copy(clean, clean + T * D, start_att_.begin() + h * T * D);
      rh.start_att = start_att_.data();
      out[l * H + h] = patched(l, 0, rh);
      continue;
    }
    // position sweeps: t from T - 1 down to 0, then the layer (and head)
    const int64_t per_t = kind == SweepKind::HeadPositions ? NL * H : NL;
    const int64_t t = T - 1 - e / per_t, rest = e % per_t;
    const int64_t l = kind == SweepKind::HeadPositions ? rest / H : rest;
    const int64_t R = T - t;  // rows [t, T)
    // start_resid [R, E]: the corrupted resid_pre of block l, rows t..
    const float* pre = corr_pre_.data() + (l * T + t) * E;
    std::copy(pre, pre + R * E, start_resid_.begin());
    // start_att [H, R, D]: the corrupted heads' outputs of block l, rows t.. (not for resid_pre)
    if (kind != SweepKind::ResidPre) {
      for (int64_t hh = 0; hh < H; ++hh) {
        const float* att = corr_heads_.data() + ((l * H + hh) * T + t) * D;
        std::copy(att, att + R * D, start_att_.begin() + hh * R * D);
      }
      rh.start_att = start_att_.data();
    }
    std::fill(patch_slot_.begin(), patch_slot_.end(), -1);
    std::fill(patch_rows_.begin(), patch_rows_.end(), 0);
    patch_rows_[size_t(t)] = 1;
    int64_t at = l * T + t;  // where the value goes in out [NL, T]
    switch (kind) {
      case SweepKind::HeadPositions: {
        const int64_t h = rest % H;
        const float* clean = clean_heads_.data() + ((l * H + h) * T + t) * D;
        std::copy(clean, clean + D, start_att_.begin() + h * R * D);  // head h's row t
        at = (l * H + h) * T + t;
        break;
      }
      case SweepKind::ResidPre: {
        const float* clean = clean_pre_.data() + (l * T + t) * E;
        std::copy(clean, clean + E, start_resid_.begin());  // row t
        break;
      }
      case SweepKind::AttnOut:
      case SweepKind::MlpOut: {
        const bool attn = kind == SweepKind::AttnOut;
        const ResidSite s = attn ? ResidSite::AttnOut : ResidSite::MlpOut;
        patch_slot_[size_t(int(s) * NL + l)] = 0;
        rh.patch_slot = patch_slot_.data();
        rh.patch = (attn ? clean_attn_ : clean_mlp_).data() + l * T * E;  // [1, T, E]: row t is read
        rh.patch_rows = patch_rows_.data();
        rh.patch_count = 1;
        break;
      }
      default:
        break;
    }
    out[at] = patched(l, t, rh);
  }
}

template class PatchSweep<GPT2, GPT2Scratch>;
template class PatchSweep<Llama, LlamaScratch>;

}  // namespace qkv
