// Small row-wise layers shared by the encoder models (and free for the others to use):
// LayerNorm over the last axis, the exact (erf) GELU, and the residual add.
#pragma once

#include <cstdint>

namespace qkv {

// out[r, :] = (x[r, :] - mean) / sqrt(var + eps) * w + b for rows r < n, each of E values
// (biased variance, as torch; statistics in double). out may equal x.
void layer_norm_rows(float* out, const float* x, const float* w, const float* b, int64_t n, int64_t E, float eps);

// x = 0.5 x (1 + erf(x / sqrt 2)), in place: BERT's "gelu" (torch.nn.functional.gelu).
void gelu_erf(float* x, int64_t n);

// y += x, n values.
void add_in_place(float* y, const float* x, int64_t n);

}  // namespace qkv
