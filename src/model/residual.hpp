// The residual stream of a decoder (GPT-2, the Llama family) during a forward pass, at the
// sites TransformerLens names (docs/residual.md): read (hidden states, named activations, the
// final norm's divisor), written (patches, steering vectors), and a forward that starts at a
// layer from a given stream (what a patching sweep reuses: src/model/patching.hpp).
//
// Sites of block l, in the order the forward meets them (x: the stream [L, d]):
//   resid_pre   x as block l reads it (steering is added here, then a patch applies)
//   attn_out    what the attention sub-block adds to x (after the output projection and its
//               bias; Gemma 3: after post_attention_layernorm)
//   resid_mid   x after that add
//   mlp_out     what the MLP adds to x (Gemma 3: after post_feedforward_layernorm)
//   resid_post  x after that add (= resid_pre of block l + 1)
// At each site a patch (rows of the site replaced) applies first, then the site is recorded.
//
// The buffers describe one whole forward of `length` rows. A call that runs rows
// [pos0, pos0 + L) of it (a chunk through the KV cache) reads and writes those rows.
#pragma once

#include <cstdint>

namespace qkv {

enum class ResidSite : int { ResidPre = 0, AttnOut = 1, ResidMid = 2, MlpOut = 3, ResidPost = 4 };
constexpr int kResidSites = 5;

struct ResidualHooks {
  int64_t layers = 0, d = 0;  // the model's blocks and d_model
  int64_t length = 0;         // rows of the whole forward (0: steering only, every row of any call)

  // records, each [layers, length, d] or null
  float* record[kResidSites] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  float* hidden = nullptr;       // [layers + 1, length, d]: embeddings, each block's output, final norm's output
  float* final_resid = nullptr;  // [length, d]: the stream the final norm reads
  float* final_scale =
      nullptr;                 // [length]: the final norm's divisor (LayerNorm sqrt(var + eps), RMSNorm sqrt(ms + eps))
  float* sub_scale = nullptr;  // [layers, 2, length]: Gemma 3's divisors of the attention and MLP output norms

  // patches: patch_slot [kResidSites * layers] (site-major): -1 or the entry in patch / patch_rows
  const int32_t* patch_slot = nullptr;
  const float* patch = nullptr;         // [patch_count, length, d]
  const uint8_t* patch_rows = nullptr;  // [patch_count, length], nonzero = replace that row
  int64_t patch_count = 0;

  // steering: entry i adds steer_vec[i] (already scaled, [d]) to block steer_layer[i]'s
  // resid_pre, at the rows steer_rows[i] marks ([steer_count, length]) or at every row (null)
  int64_t steer_count = 0;
  const int32_t* steer_layer = nullptr;  // [steer_count]
  const float* steer_vec = nullptr;      // [steer_count, d]
  const uint8_t* steer_rows = nullptr;   // [steer_count, length] or null

  // a forward that starts at block start_layer (>= 0) from start_resid [L, d] (the call's rows)
  // as its resid_pre; blocks before it do not run (their caches are not read or appended).
  // start_att, if not null: that block's attention output [H, L, Dv] (the heads' outputs
  // before the output projection) instead of computing it (no q/k/v, no cache append).
  int32_t start_layer = -1;
  const float* start_resid = nullptr;
  const float* start_att = nullptr;
  // only the last row's logits are read (logits of the last position): the last block computes
  // its rows past attention (output projection, MLP) for the last row only. Takes no record.
  bool last_row_only = false;
  // the last row's logits of readout_count tokens only, into readout [readout_count], from their
  // LM-head rows readout_rows [readout_count, d] (and the soft-cap where the model has one),
  // instead of the LM head over the whole vocabulary (then `logits` is not written)
  int64_t readout_count = 0;
  const float* readout_rows = nullptr;
  float* readout = nullptr;

  // Whether a buffer needs the whole forward's rows (every option but steering at all rows).
  bool has_rows() const;
  // Whether block l runs (false before start_layer).
  bool runs(int64_t l) const { return l >= start_layer; }

  // Throws std::invalid_argument("<fn>: residual hooks: ...") when the shape does not fit the
  // model, a slot or layer is out of range, or (with row-wise options) the call's rows
  // [pos0, pos0 + L) fall outside the forward they describe. Called before any work.
  // all_logits: the call wants every row's logits (then last_row_only is an error).
  void validate(const char* fn, int64_t layers, int64_t d, int64_t pos0, int64_t L, bool all_logits = false) const;

  // At site s of block l, on x [L, d] (rows pos0..): steering (resid_pre), the patch, the record.
  void at(ResidSite s, int64_t l, float* x, int64_t pos0, int64_t L) const;
  // The embeddings x [L, d] (hidden[0]); before block 0's steering.
  void embeddings(const float* x, int64_t pos0, int64_t L) const;
  // Block l's output x [L, d] (hidden[l + 1] for l + 1 < layers).
  void block_output(int64_t l, const float* x, int64_t pos0, int64_t L) const;
  // The final norm's input x [L, d] and divisors (final_resid, final_scale); `layer_norm`: mean
  // removed first (GPT-2) or not (RMSNorm).
  void final_input(const float* x, int64_t pos0, int64_t L, bool layer_norm, double eps) const;
  // The final norm's output xn [L, d] (hidden[layers]).
  void final_output(const float* xn, int64_t pos0, int64_t L) const;
  // The readout of the final norm's last row xn [d]: readout[i] = softcap(xn . readout_rows[i])
  // (cap <= 0: none). Returns whether it was asked (then the LM head is skipped).
  bool read_out(const float* xn, float cap) const;
  // Gemma 3: the divisor of an output norm (which 0 attention, 1 MLP) over y [L, d].
  void output_norm_scale(int64_t l, int which, const float* y, int64_t pos0, int64_t L, double eps) const;
};

// sqrt(var + eps) (layer_norm) or sqrt(mean(x^2) + eps) of one row of d values, in double.
double norm_divisor(const float* x, int64_t d, bool layer_norm, double eps);

}  // namespace qkv
