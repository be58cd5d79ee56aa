// Attention rollout's two kernels (Abnar & Zuidema 2020; the TypeScript API and the definition
// are web/lib/interpret/rollout.ts):
//
//   A'_l = normalize_rows((1 - residual) fuse_h(A_l[h]) + residual I)     rollout_fuse_rows
//   R_l  = A'_l R_{l-1}                                                   rollout_product
//
// Both read and write float32 [L, L] matrices, row-major. The fused rows come in chunks (the
// caller copies rows i0 .. i0 + rows - 1 of each head's map next to each other, so a chunk stays
// in cache while it is fused). Causal attention's matrices are lower triangular, and so is their
// product: only the part on or below the diagonal is computed then, a sixth of a dense product's
// multiply-adds.
#pragma once

#include <cstdint>

namespace qkv {

enum class HeadFusion { Mean, Max, Min };

struct FusedRows {
  bool lower = true;      // every fused weight above the diagonal is exactly 0
  int64_t bad_row = -1;   // the first row holding a negative or non-finite fused weight (or -1)
  float bad_value = 0.f;  // that weight
};

// maps [H][rows][L]: rows i0 .. i0 + rows - 1 of each of the H heads' [L, L] maps.
// out [rows][L]: those rows of A'_l. A row whose fused weights sum to 0 becomes residual * e_i
// normalised (e_i when residual > 0; 0 when residual is 0). Max and min treat NaN as the
// TypeScript path does (a comparison with NaN is false: the NaN is taken). Stops at a bad row
// (out is then incomplete). Throws std::invalid_argument for sizes that do not fit.
FusedRows rollout_fuse_rows(const float* maps, int64_t H, int64_t rows, int64_t L, int64_t i0, HeadFusion fusion,
                            float residual, float* out);

// C [L, L] = A [L, L] B [L, L] (C aliases neither). lower: A and B are lower triangular (their
// zeros above the diagonal are stored), and C is written with zeros there.
void rollout_product(const float* A, const float* B, float* C, int64_t L, bool lower);

}  // namespace qkv
