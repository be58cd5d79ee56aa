// qkv::HeadInterventions as it crosses the Embind boundary: a plain object of numbers (byte
// addresses into the wasm heap, 0 = absent), registered once as the value_object
// "HeadInterventions" (bindings_interventions.cpp). Mapping only: web/lib/model/interventions.ts
// builds it, src/model/interventions.hpp says what each field holds.
#pragma once

#include <cstdint>

#include "guarded.hpp"
#include "model/interventions.hpp"

namespace qkv::wasm {

struct InterventionsArg {
  int layers = 0, heads = 0, length = 0, keys = 0, valueDim = 0;
  uintptr_t headScale = 0, blockSlot = 0, allow = 0;
  int blockCount = 0, blockHeads = 1;
  uintptr_t outputs = 0, patchSlot = 0, patch = 0, patchRows = 0;
  int patchCount = 0;

  bool empty() const { return !headScale && !blockSlot && !outputs && !patchSlot; }

  HeadInterventions get() const {
    HeadInterventions iv;
    iv.layers = layers, iv.heads = heads, iv.length = length, iv.keys = keys, iv.value_dim = valueDim;
    iv.head_scale = ptr<const float>(headScale);
    iv.block_slot = ptr<const int32_t>(blockSlot);
    iv.allow = ptr<const uint8_t>(allow);
    iv.block_count = blockCount, iv.block_heads = blockHeads;
    iv.outputs = ptr<float>(outputs);
    iv.patch_slot = ptr<const int32_t>(patchSlot);
    iv.patch = ptr<const float>(patch);
    iv.patch_rows = ptr<const uint8_t>(patchRows);
    iv.patch_count = patchCount;
    return iv;
  }
};

// The interventions of one call: `held` converted, and null when the argument sets nothing.
struct Interventions {
  HeadInterventions held;
  const HeadInterventions* ptr = nullptr;
  explicit Interventions(const InterventionsArg& a) : held(a.get()), ptr(a.empty() ? nullptr : &held) {}
};

}  // namespace qkv::wasm
