#include "model/interventions.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace qkv {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

[[noreturn]] void fail(const char* fn, const std::string& msg) {
  throw std::invalid_argument(std::string(fn) + ": interventions: " + msg);
}

}  // namespace

void HeadInterventions::validate(const char* fn, int64_t L, int64_t H, int64_t Dv, int64_t pos0, int64_t rows,
                                 int64_t Lk) const {
  if (layers != L || heads != H) {
    fail(fn,
         "made for " + str(layers) + " layers x " + str(heads) + " heads, the stack has " + str(L) + " x " + str(H));
  }
  if (!has_rows()) return;
  if (length < 1 || keys < 1) fail(fn, "length " + str(length) + " and keys " + str(keys) + " must be >= 1");
  if (pos0 < 0 || pos0 + rows > length || Lk > keys) {
    fail(fn, "rows [" + str(pos0) + ", " + str(pos0 + rows) + ") over " + str(Lk) +
                 " keys fall outside the forward they were made for (" + str(length) + " rows, " + str(keys) +
                 " keys)");
  }
  auto check_slots = [&](const int32_t* slot, int64_t count, const char* what) {
    for (int64_t l = 0; l < layers; ++l) {
      if (slot[l] < -1 || slot[l] >= count) {
        fail(fn, std::string(what) + " slot of layer " + str(l) + " is " + str(slot[l]) + ", not in [-1, " +
                     str(count) + ")");
      }
    }
  };
  if (block_slot) {
    if (!allow) fail(fn, "knockout slots without masks");
    if (block_heads != 1 && block_heads != heads) {
      fail(fn, "knockout masks cover " + str(block_heads) + " heads (need 1 or " + str(heads) + ")");
    }
    check_slots(block_slot, block_count, "knockout");
  }
  if ((outputs || patch_slot) && value_dim != Dv) {
    fail(fn, "head outputs of " + str(value_dim) + " values per row, the heads have " + str(Dv));
  }
  if (patch_slot) {
    if (!patch || !patch_rows) fail(fn, "patch slots without values or rows");
    check_slots(patch_slot, patch_count, "patch");
  }
}

LayerHooks::LayerHooks(const char* fn, const HeadInterventions* iv, int64_t layer, int64_t pos0, int64_t L, int64_t Lk,
                       int64_t Dv)
    : iv_(iv), layer_(layer), pos0_(pos0), L_(L), Lk_(Lk), Dv_(Dv) {
  if (!iv || !iv->has_rows()) return;
  if (pos0 < 0 || pos0 + L > iv->length || Lk > iv->keys) {
    fail(fn, "rows [" + str(pos0) + ", " + str(pos0 + L) + ") over " + str(Lk) +
                 " keys fall outside the forward they were made for (" + str(iv->length) + " rows, " + str(iv->keys) +
                 " keys)");
  }
}

AttentionOptions LayerHooks::options(const AttentionOptions& base, std::vector<uint8_t>& scratch) const {
  const int32_t slot = iv_ && iv_->block_slot ? iv_->block_slot[layer_] : -1;
  if (slot < 0) return base;
  const int64_t Hb = iv_->block_heads, N = iv_->length, K = iv_->keys;
  const uint8_t* src = iv_->allow + int64_t(slot) * Hb * N * K;  // [Hb, N, K]
  AttentionOptions o = base;
  const MaskView<uint8_t> had = base.bool_mask;
  if (!had.data && pos0_ == 0 && L_ == N && Lk_ == K) {
    o.bool_mask = MaskView<uint8_t>{src, {1, Hb, L_, Lk_}};  // the whole mask, read in place
    return o;
  }
  if (had.data && had.dims[0] != 1) {
    throw std::invalid_argument("LayerHooks: knockout needs batch 1, the mask has batch " + str(had.dims[0]));
  }
  // rows pos0.. of the forward's mask, keys [0, Lk), AND the mask `base` had (broadcast)
  const int64_t Hm = had.data ? std::max(Hb, had.dims[1]) : Hb;
  scratch.resize(size_t(Hm * L_ * Lk_));
  for (int64_t h = 0; h < Hm; ++h) {
    const uint8_t* s = src + (Hb == 1 ? 0 : h) * N * K;
    for (int64_t i = 0; i < L_; ++i) {
      const uint8_t* row = s + (pos0_ + i) * K;
      uint8_t* dst = scratch.data() + (h * L_ + i) * Lk_;
      std::copy(row, row + Lk_, dst);
      if (!had.data) continue;
      const Dims4& d = had.dims;
      const uint8_t* m = had.data + ((d[1] == 1 ? 0 : h) * d[2] + (d[2] == 1 ? 0 : i)) * d[3];
      for (int64_t j = 0; j < Lk_; ++j) dst[j] = uint8_t(dst[j] && m[d[3] == 1 ? 0 : j]);
    }
  }
  o.bool_mask = MaskView<uint8_t>{scratch.data(), {1, Hm, L_, Lk_}};
  return o;
}

void LayerHooks::after(float* out, float* probs) const {
  if (!iv_) return;
  const int64_t H = iv_->heads, N = iv_->length, L = L_, Lk = Lk_, Dv = Dv_;
  if (iv_->head_scale) {
    for (int64_t h = 0; h < H; ++h) {
      const float m = iv_->head_scale[layer_ * H + h];
      if (m == 1.0f) continue;  // exact: a mask of ones changes nothing, bit for bit
      // the output (m p) v is m (p v): the head's output scaled, no second pass over the keys
      for (float* o = out + h * L * Dv; o != out + (h + 1) * L * Dv; ++o) *o *= m;
      if (probs) {
        for (float* p = probs + h * L * Lk; p != probs + (h + 1) * L * Lk; ++p) *p *= m;
      }
    }
  }
  const int32_t slot = iv_->patch_slot ? iv_->patch_slot[layer_] : -1;
  if (slot >= 0) {
    for (int64_t h = 0; h < H; ++h) {
      const uint8_t* rows = iv_->patch_rows + (int64_t(slot) * H + h) * N + pos0_;
      const float* vals = iv_->patch + ((int64_t(slot) * H + h) * N + pos0_) * Dv;
      for (int64_t t = 0; t < L; ++t) {
        if (rows[t]) std::copy(vals + t * Dv, vals + (t + 1) * Dv, out + (h * L + t) * Dv);
      }
    }
  }
  if (iv_->outputs) {  // what enters the output projection: after the scale and the patch
    for (int64_t h = 0; h < H; ++h) {
      std::copy(out + h * L * Dv, out + (h + 1) * L * Dv, iv_->outputs + ((layer_ * H + h) * N + pos0_) * Dv);
    }
  }
}

}  // namespace qkv
