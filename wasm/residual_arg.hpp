// qkv::ResidualHooks as it crosses the Embind boundary: a plain object of numbers (byte
// addresses into the wasm heap, 0 = absent), registered once as the value_object
// "ResidualHooks" (bindings_residual.cpp). Mapping only: web/lib/model/residual.ts builds it,
// src/model/residual.hpp says what each field holds.
#pragma once

#include <cstdint>

#include "guarded.hpp"
#include "model/residual.hpp"

namespace qkv::wasm {

struct ResidualArg {
  int layers = 0, d = 0, length = 0;
  uintptr_t residPre = 0, attnOut = 0, residMid = 0, mlpOut = 0, residPost = 0;
  uintptr_t hidden = 0, finalResid = 0, finalScale = 0, subScale = 0;
  uintptr_t patchSlot = 0, patch = 0, patchRows = 0;
  int patchCount = 0;
  int steerCount = 0;
  uintptr_t steerLayer = 0, steerVec = 0, steerRows = 0;

  bool empty() const {
    return !residPre && !attnOut && !residMid && !mlpOut && !residPost && !hidden && !finalResid && !finalScale &&
           !subScale && !patchSlot && !steerCount;
  }

  ResidualHooks get() const {
    ResidualHooks r;
    r.layers = layers, r.d = d, r.length = length;
    const uintptr_t rec[kResidSites] = {residPre, attnOut, residMid, mlpOut, residPost};
    for (int s = 0; s < kResidSites; ++s) r.record[s] = ptr<float>(rec[s]);
    r.hidden = ptr<float>(hidden);
    r.final_resid = ptr<float>(finalResid);
    r.final_scale = ptr<float>(finalScale);
    r.sub_scale = ptr<float>(subScale);
    r.patch_slot = ptr<const int32_t>(patchSlot);
    r.patch = ptr<const float>(patch);
    r.patch_rows = ptr<const uint8_t>(patchRows);
    r.patch_count = patchCount;
    r.steer_count = steerCount;
    r.steer_layer = ptr<const int32_t>(steerLayer);
    r.steer_vec = ptr<const float>(steerVec);
    r.steer_rows = ptr<const uint8_t>(steerRows);
    return r;
  }
};

// The residual hooks of one call: `held` converted, and null when the argument sets nothing.
struct Residual {
  ResidualHooks held;
  const ResidualHooks* ptr = nullptr;
  explicit Residual(const ResidualArg& a) : held(a.get()), ptr(a.empty() ? nullptr : &held) {}
};

}  // namespace qkv::wasm
