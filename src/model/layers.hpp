// Small row-wise layers the models share: LayerNorm over the last axis, the exact (erf) and
// tanh GELUs, the gated MLPs' products, soft-capping, and the residual add.
#pragma once

#include <cstdint>

namespace qkv {

// Where LayerNorm forms (x - mean) / sqrt(var + eps) before the affine step: in float (GPT-2,
// BERT) or in double (BART). The two differ in the last bit, and each model's outputs were
// checked against PyTorch (and are pinned bit for bit) with its own.
enum class NormMath { Float, Double };

// out[r, :] = (x[r, :] - mean) / sqrt(var + eps) * w + b for rows r < n, each of E values
// (biased variance, as torch; statistics in double). out may equal x.
void layer_norm_rows(float* out, const float* x, const float* w, const float* b, int64_t n, int64_t E, float eps,
                     NormMath math = NormMath::Float);

// x = 0.5 x (1 + erf(x / sqrt 2)), in place: BERT's "gelu" (torch.nn.functional.gelu), with
// xsimd's erf (a libm call per element would cost about as much as the matmuls in wasm).
void gelu_erf(float* x, int64_t n);

// The same with libm's erf for every element: BART's (its outputs are pinned to it; xsimd's
// erf differs in the last bit for some inputs). gelu_erf's tail.
void gelu_erf_libm(float* x, int64_t n);

// gate = silu(gate) * up = gate / (1 + e^-gate) * up, in place: Llama's SwiGLU, e^-gate by
// simd::exp2 (libm's exp per element, or xsimd's, whose float-to-int rounding Emscripten emulates
// lane by lane, cost 16 % of a 2-thread SmolLM2 prefill in wasm).
void swiglu(float* gate, const float* up, int64_t n);

// x = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in place: GPT-2's "gelu_new", with
// xsimd's tanh.
void gelu_tanh(float* x, int64_t n);

// gate = gelu_tanh(gate) * up, in place: Gemma's GeGLU (hidden_activation "gelu_pytorch_tanh").
void geglu_tanh(float* gate, const float* up, int64_t n);

// x = cap * tanh(x / cap), in place, in float: Gemma's final_logit_softcapping.
void softcap(float* x, int64_t n, float cap);

// y += x, n values.
void add_in_place(float* y, const float* x, int64_t n);

}  // namespace qkv
