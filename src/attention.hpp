// Scaled dot-product attention: the public C++ contract shared by every kernel.
//
//   scores[b,h,i,j] = scale * <query[b,h,i,:], key[b,g,j,:]> + floatMask[b,h,i,j]
//   weights[b,h,i,:] = softmax over the keys j that query i may see
//   output[b,h,i,:] = sum_j weights[b,h,i,j] * value[b,g,j,:]
// where g = h / (H / Hkv) is the kv head that query head h reads (grouped-query attention).
//
// A key j is visible to query i when the bool mask allows it, and, with `causal`,
// j <= i + (Lk - Lq) (bottom-right aligned), and, with a `window` w > 0,
// j > i + (Lk - Lq) - w. A row with no visible key gives output 0 and weights 0.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "thread_pool.hpp"

namespace qkv {

using Dims4 = std::array<int64_t, 4>;

// Sizes of one call. All tensors are row-major float32:
//   query  [B, H,   Lq, D ]
//   key    [B, Hkv, Lk, D ]   (each kv head holds kv_rows rows; the first Lk are read)
//   value  [B, Hkv, Lk, Dv]   (same row count per head as key)
//   output [B, H,   Lq, Dv]
//   weights[B, H,   Lq, Lk]   (optional)
struct AttentionShape {
  int64_t B = 1, H = 1, Hkv = 1, Lq = 1, Lk = 1, D = 1, Dv = 1;
  int64_t kv_rows = 0;  // rows per kv head in key/value storage; 0 means Lk (a KV cache passes its capacity)

  int64_t kv_rows_per_head() const { return kv_rows > 0 ? kv_rows : Lk; }
};

// A mask laid out row-major with `dims`, broadcast to [B, H, Lq, Lk]: each of its four
// dims is either the full size or 1. data == nullptr means no mask.
template <class T>
struct MaskView {
  const T* data = nullptr;
  Dims4 dims{1, 1, 1, 1};
};

struct AttentionOptions {
  std::optional<float> scale;   // default 1 / sqrt(D)
  bool causal = false;          // j <= i + (Lk - Lq)
  int64_t window = 0;           // > 0: also j > i + (Lk - Lq) - window
  MaskView<uint8_t> bool_mask;  // nonzero = may attend
  MaskView<float> float_mask;   // added to the scaled scores (-inf hides a key)
  int threads = 1;              // worker threads for the fast kernel; results do not depend on it
  // multiply-adds each thread must get for it to be used (waking a thread costs ~10-50 us);
  // 0 = always use `threads` (the tests, to exercise the threaded paths on small problems)
  int64_t min_work_per_thread = kMinWorkPerThread;
};

// Throws std::invalid_argument naming `function`, the argument and the shapes it got.
void validate_attention(const char* function, const AttentionShape& shape, const AttentionOptions& options);

// The ground truth: plain loops, one row at a time. Validates first.
void attention_reference(const AttentionShape& shape, const float* query, const float* key, const float* value,
                         const AttentionOptions& options, float* output, float* weights = nullptr);

// The fast path: xsimd, tiled over keys with an online softmax, masked tiles skipped,
// threaded over (batch, head, query tile). Same semantics as the reference. Validates first.
void attention(const AttentionShape& shape, const float* query, const float* key, const float* value,
               const AttentionOptions& options, float* output, float* weights = nullptr);

// Scratch memory the fast kernel allocates for one call (bytes), weights excluded.
int64_t attention_workspace_bytes(const AttentionShape& shape, const AttentionOptions& options);

}  // namespace qkv
