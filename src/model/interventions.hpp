// Interventions on the heads of one attention stack during a forward pass, in the style of
// TransformerLens' hooks and Hugging Face's head_mask: options of the forward, applied where
// each layer's attention probabilities and per-head outputs are made (docs/interventions.md).
//
//   head_scale  multiplies head h's attention probabilities in layer l (HF head_mask: the
//               weights returned are the scaled ones; 0 removes the head)
//   allow       knockout: a bool mask per layer, nonzero = may attend; a blocked key's score
//               is -inf before the softmax, so the row renormalises over the keys left (a row
//               with none left gives weights 0 and output 0, the kernel's rule)
//   outputs     receives every head's output [H, Lq, Dv] per layer (before the output projection)
//   patch       replaces chosen rows of chosen heads' outputs (activation patching)
//
// The buffers describe one whole forward of `length` query rows over `keys` keys. A call that
// runs rows [pos0, pos0 + L) of it (a chunk through the KV cache) reads and writes those rows;
// the models pass pos0 and L (self-attention: keys pos0 + L; cross-attention: all `keys`).
#pragma once

#include <cstdint>
#include <vector>

#include "attention.hpp"

namespace qkv {

struct HeadInterventions {
  int64_t layers = 0, heads = 0;  // the stack's shape
  int64_t length = 0;             // query rows of the whole forward
  int64_t keys = 0;               // keys of the whole forward (self-attention: = length)
  int64_t value_dim = 0;          // Dv of each head's output

  const float* head_scale = nullptr;    // [layers, heads] or null (all 1)
  const int32_t* block_slot = nullptr;  // [layers]: -1, or the layer's mask in `allow`
  const uint8_t* allow = nullptr;       // [block_count, block_heads, length, keys], nonzero = may attend
  int64_t block_count = 0;              // masks in `allow`
  int64_t block_heads = 1;              // 1 (one mask for every head) or heads
  float* outputs = nullptr;             // [layers, heads, length, value_dim] written, or null
  const int32_t* patch_slot = nullptr;  // [layers]: -1, or the layer's entry in `patch`
  const float* patch = nullptr;         // [patch_count, heads, length, value_dim]: the replacements
  const uint8_t* patch_rows = nullptr;  // [patch_count, heads, length]: nonzero = replace that row
  int64_t patch_count = 0;              // entries in `patch`

  // Whether any row-wise option (knockout, outputs, patch) is set: those need the whole
  // forward's shape; a head scale alone works for any call (generation steps).
  bool has_rows() const { return block_slot || outputs || patch_slot; }

  // Throws std::invalid_argument("<fn>: interventions: ...") when the shape does not fit the
  // stack (layers, heads, value_dim), a slot is out of range, or (with row-wise options) the
  // call's rows [pos0, pos0 + L) over Lk keys fall outside the forward they describe. The
  // models call it before any work, so a misfit leaves a KV cache as it was.
  void validate(const char* fn, int64_t layers, int64_t heads, int64_t value_dim, int64_t pos0, int64_t L,
                int64_t Lk) const;
};

// What a model does around one layer's attention call:
//   LayerHooks hooks(fn, iv, layer, pos0, L, Lk, Dv);   // (iv may be null: then nothing happens)
//   attention(..., hooks.options(opt, scratch), out, probs);   // knockout: a bool mask
//   hooks.after(out, probs);                        // scale, record, patch
class LayerHooks {
 public:
  // Rows [pos0, pos0 + L) of the forward, over keys [0, Lk). Throws std::invalid_argument
  // naming fn when they fall outside the forward the interventions describe.
  // Dv: the values per head output row.
  LayerHooks(const char* fn, const HeadInterventions* iv, int64_t layer, int64_t pos0, int64_t L, int64_t Lk,
             int64_t Dv);

  // `base` with this layer's knockout mask as its bool_mask (combined with a mask `base`
  // already has, of batch 1); `scratch` holds it when it must be sliced or combined. `base`
  // as it is when the layer has none.
  AttentionOptions options(const AttentionOptions& base, std::vector<uint8_t>& scratch) const;

  // out [H, L, Dv] (the heads' outputs), probs [H, L, Lk] or null: multiplies each head's by
  // its scale, copies the outputs out, then replaces the patched rows.
  void after(float* out, float* probs) const;

 private:
  const HeadInterventions* iv_;
  int64_t layer_, pos0_, L_, Lk_, Dv_;
};

}  // namespace qkv
