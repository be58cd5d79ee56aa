// The Embind boundary for attention rollout's kernels (src/interpret/rollout.hpp): mapping only.
// web/lib/interpret/rollout-wasm.ts drives them; tests/js/interpret-rollout-flow.test.js checks
// the result against float64 references.
//
// Arrays travel as byte addresses into the wasm heap; entry points return "" or
// "<kind>|<message>" as in bindings.cpp.
#include <emscripten/bind.h>

#include <cstdint>
#include <string>

#include "guarded.hpp"
#include "interpret/lens.hpp"
#include "interpret/rollout.hpp"

using namespace emscripten;
using qkv::wasm::guarded;
using qkv::wasm::ptr;

namespace {

qkv::HeadFusion head_fusion(const std::string& name) {
  if (name == "mean") return qkv::HeadFusion::Mean;
  if (name == "max") return qkv::HeadFusion::Max;
  if (name == "min") return qkv::HeadFusion::Min;
  throw std::invalid_argument("attentionRollout: fusion must be 'mean', 'max' or 'min', got '" + name + "'");
}

// status [3] float32: lower (1 or 0), the first bad row (-1 if none), its fused weight
std::string rollout_fuse_rows(uintptr_t maps, int H, int rows, int L, int i0, const std::string& fusion, float residual,
                              uintptr_t out, uintptr_t status) {
  return guarded([&] {
    const qkv::FusedRows r =
        qkv::rollout_fuse_rows(ptr<const float>(maps), H, rows, L, i0, head_fusion(fusion), residual, ptr<float>(out));
    float* s = ptr<float>(status);
    s[0] = r.lower ? 1.f : 0.f;
    s[1] = float(r.bad_row);
    s[2] = r.bad_value;
  });
}

std::string rollout_product(uintptr_t a, uintptr_t b, uintptr_t c, int L, bool lower) {
  return guarded([&] { qkv::rollout_product(ptr<const float>(a), ptr<const float>(b), ptr<float>(c), L, lower); });
}

// the logit lens's statistics over positions [t0, t1) of logits [R, V] (src/interpret/lens.hpp);
// target 0 = none
std::string lens_statistics(uintptr_t logits, int R, int T, int V, int k, uintptr_t target, int t0, int t1,
                            uintptr_t top_ids, uintptr_t top_p, uintptr_t kl, uintptr_t target_p,
                            uintptr_t target_rank) {
  return guarded([&] {
    qkv::lens_statistics(ptr<const float>(logits), R, T, V, k, ptr<const int32_t>(target), t0, t1,
                         ptr<int32_t>(top_ids), ptr<float>(top_p), ptr<float>(kl), ptr<float>(target_p),
                         ptr<int32_t>(target_rank));
  });
}

}  // namespace

EMSCRIPTEN_BINDINGS(qkv_interpret) {
  function("lensStatistics", &lens_statistics);
  function("rolloutFuseRows", &rollout_fuse_rows);
  function("rolloutProduct", &rollout_product);
}
