// The logit lens's statistics over its logits (web/lib/interpret/lens.ts): per row the
// log-normaliser, the top k tokens with their probabilities, the target's probability and rank,
// and KL(final || row), where the final rows are the last T of the (layers + 1) x T.
#pragma once

#include <cstdint>

namespace qkv {

// logits [R, V] with R = (layers + 1) * T, rows grouped [layers + 1, T] (the last T: the model's
// own); k >= 1 top tokens per row; target [T] (a token per position) or null. Writes, per row r:
// top_ids / top_p [R, k] (most probable first, ties to the lower id), kl [R] = KL(final ||
// row) in nats (0 in the final rows), and with a target target_p [R] and target_rank [R] (the
// tokens more probable, ties to the lower id). rows [r0, r1) only: a caller may split the work.
// Throws std::invalid_argument for sizes or ids out of range.
void lens_statistics(const float* logits, int64_t R, int64_t T, int64_t V, int64_t k, const int32_t* target, int64_t r0,
                     int64_t r1, int32_t* top_ids, float* top_p, float* kl, float* target_p, int32_t* target_rank);

}  // namespace qkv
