// Measures over a decoder's residual stream that read it out through the unembedding
// (docs/residual.md): direct logit attribution, and the shape both measures and the patching
// sweep (model/patching.hpp) need to know of either family.
#pragma once

#include <cstdint>
#include <vector>

#include "model/gpt2.hpp"
#include "model/llama.hpp"

namespace qkv {

// A decoder's sizes, for either family.
struct DecoderDims {
  int64_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0, d = 0, vocab = 0, positions = 0;
};
DecoderDims decoder_dims(const GPT2& m);
DecoderDims decoder_dims(const Llama& m);

// Row `id` of the LM head (the unembedding of token id) into out [d].
void unembedding_row(const GPT2& m, int32_t id, float* out);
void unembedding_row(const Llama& m, int32_t id, float* out);

// Which parts a model's attribution has beside the embedding, the heads and the MLPs.
struct AttributionLayout {
  bool pos_embed = false;   // GPT-2's learned positions
  bool attn_bias = false;   // the output projection's bias
  bool final_bias = false;  // the final norm's bias (LayerNorm)
  int64_t count = 0;        // parts in all
};
AttributionLayout attribution_layout(const GPT2& m);
AttributionLayout attribution_layout(const Llama& m);

// Direct logit attribution at row `position` of ids [L]: the final residual there is a sum of
// parts, each passed through the final norm with its divisor frozen at the forward's (and, in
// Gemma 3, through the attention's and the MLP's output norms with theirs frozen) and dotted
// with lm_head row token_a (minus row token_b when token_b >= 0). parts [layout.count], in the
// order: embed, pos_embed?, then per layer: each head (its output through its slice of the
// output projection), attn_bias?, mlp; then final_bias?. They sum to the forward's logit (or
// logit difference) before Gemma's soft-cap. Returns that forward's value (Gemma: before the
// cap, the final norm's output row dotted with the unembedding direction).
// Throws std::invalid_argument naming `fn` for a position or token out of range.
float attribute(const GPT2& m, const int32_t* ids, int64_t L, int64_t position, int32_t token_a, int32_t token_b,
                float* parts);
float attribute(const Llama& m, const int32_t* ids, int64_t L, int64_t position, int32_t token_a, int32_t token_b,
                float* parts);

}  // namespace qkv
