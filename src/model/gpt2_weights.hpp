// GPT-2's weights, held once: read in place from the safetensors buffer in the dtype they came
// in, or converted once on load (to F32, F16 or 8-bit Q8) into one new buffer, after which the
// file's buffer is freed (weight_loader.hpp). F16 matrices get their subnormal halves
// (|w| < 6.1e-5) moved into a list the products add back exactly (matmul/weights.hpp:
// prepare_f16_weights). No transposed
// or widened copies of the matrices: the kernels read GPT-2's Conv1D layout ([in, out]) as it
// is, and the tied LM head reads wte [V, E] directly.
#pragma once

#include <cstdint>
#include <vector>

#include "matmul/weights.hpp"
#include "model/weight_loader.hpp"  // WeightFormat, MallocBytes, WeightBytes

namespace qkv {

struct GPT2Config;
namespace safetensors {
class File;
}

// The Conv1D matrices are InOut [K, N] as the file stores them; on load, for decoding's sake
// (WeightLoader::load), F32, F16 and BF16 ones are rewritten in panels of 16 columns (Panels);
// Q8 and Q4 have layouts of their own (matmul/weights.hpp).
struct GPT2LayerWeights {
  const float *ln_1_weight = nullptr, *ln_1_bias = nullptr;  // [E], [E]
  WeightMatrix attn_c_attn;                                  // [E, 3E] InOut
  const float* attn_c_attn_bias = nullptr;                   // [3E]
  WeightMatrix attn_c_proj;                                  // [E, E] InOut
  const float* attn_c_proj_bias = nullptr;                   // [E]
  const float *ln_2_weight = nullptr, *ln_2_bias = nullptr;  // [E], [E]
  WeightMatrix mlp_c_fc;                                     // [E, I] InOut
  const float* mlp_c_fc_bias = nullptr;                      // [I]
  WeightMatrix mlp_c_proj;                                   // [I, E] InOut
  const float* mlp_c_proj_bias = nullptr;                    // [E]
};

struct GPT2Weights {
  WeightMatrix wte;  // the [V, E] table as a K = E, N = V matrix (OutIn): the LM head; column v = token v's embedding
  WeightMatrix wpe;  // the [P, E] table likewise (K = E, N = P): column p = position p's embedding
  std::vector<GPT2LayerWeights> h;
  const float *ln_f_weight = nullptr, *ln_f_bias = nullptr;  // [E], [E]
};

class GPT2WeightStore {
 public:
  // Reads every tensor GPT-2 needs from a safetensors file held in `file` (size bytes;
  // ownership passes here, and the buffer is freed on error or once nothing reads it).
  // Names as GPT2Model's, with or without the "transformer." prefix; other tensors
  // (attn.bias buffers, lm_head.weight) are ignored. F32 / F16 / BF16 tensors. Throws
  // std::invalid_argument naming the tensor for a missing one, a wrong shape or dtype, F16 or
  // converted weights that are not finite or do not fit the target dtype.
  static GPT2WeightStore load(const GPT2Config& config, MallocBytes file, size_t size, WeightFormat format);

  // load's two halves, for a file that streams in (model/decoder_stream.hpp): plan checks every
  // tensor of `file` (its header may be all that has arrived) and returns the loader that will
  // fill this store's matrices (the store must not move until then); finish takes the buffers
  // that loader's load() or stream gave.
  WeightLoader plan(const GPT2Config& config, const safetensors::File& file, WeightFormat format);
  void finish(const GPT2Config& config, const WeightLoader& loader, WeightBuffers buffers);

  const GPT2Weights& weights() const { return weights_; }
  WeightBytes bytes() const { return buffers_.bytes; }
  // The matmuls' matrices' dtype (wte and the layers'): "F32", "F16", "BF16", "Q8", or "mixed"
  // (a file mixing them, read as stored).
  const char* matrix_type() const { return matrix_type_; }

 private:
  WeightBuffers buffers_;  // the file (when read in place), the converted matrices, widened vectors
  GPT2Weights weights_;
  const char* matrix_type_ = "F32";
};

}  // namespace qkv
