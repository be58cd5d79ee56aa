// Attention for a few query rows per head (a decode step: Lq = 1), vectorised over keys and over
// the value dimension instead of over query rows.
//
// Work is split into items of (batch, kv head, part of its group): up to 4 of the H / Hkv query
// heads that share a kv head (grouped-query attention), with their Lq rows each, `rows` in all,
// read each key tile once (more heads per item would leave a multi-query model's threads idle).
// Per key tile of up to 64 keys:
//   Kt = the tile's keys transposed, (D, 64), 4 x 4 blocks at a time,
//   St = shift + Qs Kt, (rows, 64): the register-blocked micro-kernel of accumulate.hpp,
//        vectorised over keys (each score adds its D products in d order, as the flash kernel's
//        lane does),
//   P  = 2^(St - m) with the online softmax's rescaling (vectorised over keys; the row sums add
//        the keys in order, as the flash kernel's lane does),
//   O  = alpha O + P V, (rows, Dv): the same micro-kernel, vectorised over Dv.
// Every step is the flash kernel's for that row with the same operands in the same order (same
// key tiles, same shift, same exp2 and rescaling decisions), so a row gets the bits it gets in
// src/flash.cpp: a decoded token's attention equals its row of a prefill. The thread count only
// chooses which worker computes an item, so it changes no bit either.
#include "decode_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "accumulate.hpp"
#include "simd.hpp"
#include "thread_pool.hpp"
#include "visibility.hpp"

namespace qkv::detail {
namespace {

using simd::Batch;
using P = std::ptrdiff_t;
constexpr int64_t KT = kKeyTile;
constexpr int64_t kHeadsPerItem = 4;  // query heads of one kv head's group an item computes, at most

// Per-worker scratch, reused across the items a worker computes; each array starts on a
// 64-byte cache line.
class RowsScratch {
 public:
  float* qs;     // (rows, D)   the item's queries times scale * log2(e)
  float* kt;     // (D, KT)     one key tile, transposed
  float* st;     // (rows, KT)  scores of the tile (log2 units) minus each row's reference max
  float* pt;     // (rows, KT)  probabilities of the tile, 2^(score - m)
  float* o;      // (rows, Dv)  unnormalised output
  float* m;      // (rows)      reference max of the scores
  float* l;      // (rows)      running sum of 2^(score - m)
  float* alpha;  // (rows)      rescale factor of this tile, 2^(m_old - m_new)

  RowsScratch(const AttentionShape& s, int64_t rows) : buffer_(floats(s, rows)) {
    const auto misaligned = reinterpret_cast<std::uintptr_t>(buffer_.data()) / sizeof(float) % kAlign;
    float* p = buffer_.data() + (kAlign - misaligned) % kAlign;
    const auto take = [&p](int64_t n) { return std::exchange(p, p + round_up(n)); };
    qs = take(rows * s.D);
    kt = take(s.D * KT);
    st = take(rows * KT);
    pt = take(rows * KT);
    o = take(rows * s.Dv);
    m = take(rows);
    l = take(rows);
    alpha = take(rows);
  }
  RowsScratch(const RowsScratch&) = delete;
  RowsScratch(RowsScratch&&) = default;  // the buffer's storage moves with it

  static int64_t floats(const AttentionShape& s, int64_t rows) {
    return round_up(rows * s.D) + round_up(s.D * KT) + 2 * round_up(rows * KT) + round_up(rows * s.Dv) +
           3 * round_up(rows) + kAlign;
  }

 private:
  static constexpr int64_t kAlign = 64 / sizeof(float);
  static int64_t round_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
  std::vector<float> buffer_;
};

// kt[d, jj] = k[jj, d] for jj < n, d < D (k's rows are D apart, kt's rows KT apart).
void transpose_keys(const float* k, int64_t n, int64_t D, float* kt) {
  int64_t jj = 0;
#if !defined(QKV_NO_SIMD) && XSIMD_WITH_SSE2
  // 4 keys x 4 elements at a time: interleave pairs of keys, then pairs of the interleaved
  // halves (as doubles), giving 4 elements' 4-key columns
  using F = xsimd::batch<float, xsimd::sse2>;
  using D2 = xsimd::batch<double, xsimd::sse2>;
  for (; jj + 4 <= n; jj += 4) {
    const float* k0 = k + jj * D;
    int64_t d = 0;
    for (; d + 4 <= D; d += 4) {
      const F r0 = F::load_unaligned(k0 + d), r1 = F::load_unaligned(k0 + D + d);
      const F r2 = F::load_unaligned(k0 + 2 * D + d), r3 = F::load_unaligned(k0 + 3 * D + d);
      const D2 t0 = xsimd::bitwise_cast<D2>(xsimd::zip_lo(r0, r1));  // k0[d] k1[d] k0[d+1] k1[d+1]
      const D2 t1 = xsimd::bitwise_cast<D2>(xsimd::zip_hi(r0, r1));  // k0[d+2] k1[d+2] k0[d+3] k1[d+3]
      const D2 t2 = xsimd::bitwise_cast<D2>(xsimd::zip_lo(r2, r3));
      const D2 t3 = xsimd::bitwise_cast<D2>(xsimd::zip_hi(r2, r3));
      float* col = kt + d * KT + jj;
      xsimd::bitwise_cast<F>(xsimd::zip_lo(t0, t2)).store_unaligned(col);
      xsimd::bitwise_cast<F>(xsimd::zip_hi(t0, t2)).store_unaligned(col + KT);
      xsimd::bitwise_cast<F>(xsimd::zip_lo(t1, t3)).store_unaligned(col + 2 * KT);
      xsimd::bitwise_cast<F>(xsimd::zip_hi(t1, t3)).store_unaligned(col + 3 * KT);
    }
    for (; d < D; ++d)
      for (int64_t u = 0; u < 4; ++u) kt[d * KT + jj + u] = k0[u * D + d];
  }
#endif
  for (; jj < n; ++jj)
    for (int64_t d = 0; d < D; ++d) kt[d * KT + jj] = k[jj * D + d];
}

// The largest of x[0 : n) (-inf for none): a vector of partial maxima, then its lanes and the tail.
float max_of(const float* x, int64_t n) {
  constexpr int W = simd::lanes<Batch>;
  Batch part = simd::splat<Batch>(kNegInf);
  int64_t j = 0;
  for (; j + W <= n; j += W) part = simd::max(part, simd::load<Batch>(x + j));
  float best = kNegInf;
  alignas(64) float lanes[W];
  simd::store(lanes, part);
  for (int u = 0; u < W; ++u) best = std::max(best, lanes[u]);
  for (; j < n; ++j) best = std::max(best, x[j]);
  return best;
}

// p[j] = 2^(x[j] - d) for j < n; returns the sum of p added in key order (the flash kernel's
// order for one row).
float exp2_sum(const float* x, float d, int64_t n, float* p) {
  constexpr int W = simd::lanes<Batch>;
  const Batch dv = simd::splat<Batch>(d);
  const auto exp2 = simd::exp2_in_registers<Batch>();
  int64_t j = 0;
  for (; j + W <= n; j += W) simd::store(p + j, exp2(simd::load<Batch>(x + j) - dv));
  for (; j < n; ++j) p[j] = simd::exp2(x[j] - d);
  float sum = 0.0f;
  for (j = 0; j < n; ++j) sum += p[j];
  return sum;
}

// Online softmax over one key tile for one row: x[0 : n) = score - m_sub (m_sub = the row's
// reference max where finite, else 0), -inf where hidden. Writes p = 2^(score - m) and moves m
// where the tile needs it; updates l; returns alpha = 2^(m_old - m_new), which rescales o.
// The flash kernel's softmax_rows for one row, step for step.
float softmax_row(const float* x, float* p, int64_t n, float& m, float& l) {
  const float m_old = m;
  const bool finite = std::isfinite(m_old);
  const float m_sub = finite ? m_old : 0.0f;
  const float x_max = max_of(x, n);
  if (finite) {
    // p = 2^x; done unless the tile's max exceeds the reference by more than the threshold
    const float sum = exp2_sum(x, 0.0f, n, p);
    if (!(x_max > kRescaleThreshold)) {
      l = l + sum;
      return 1.0f;
    }
  }
  // the new reference: the tile's max where it exceeds the old one by more than the threshold
  // (always where the row had seen nothing and now sees a key: m_old = -inf)
  const float tile_max = x_max + m_sub;
  const bool moves = tile_max > m_old + kRescaleThreshold || (m_old == kNegInf && x_max != kNegInf);
  const float m_new = moves ? tile_max : m_old;
  float sum = 0.0f;
  if (m_new != -kNegInf) {
    sum = exp2_sum(x, moves ? x_max : 0.0f, n, p);  // x - d = score - m_new (exactly 0 at the max)
  } else {
    // a +inf score: the +inf keys share the weight
    for (int64_t j = 0; j < n; ++j) {
      const float score = x[j] + m_sub;
      p[j] = score == m_new ? 1.0f : simd::exp2(score - m_new);
      sum += p[j];
    }
  }
  const float a = m_old == m_new ? 1.0f : simd::exp2(m_old - m_new);
  l = l * a + sum;
  m = m_new;
  return a;
}

// wr[j] = 2^(wr[j] - m) * inv_l for j < n: a row's weights from its scores (log2 units) once
// its reference max m (finite or +inf) and sum are final; 1 * inv_l where wr[j] == m (not NaN
// for +inf == +inf). Vectorised over keys; each element as the flash kernel computes it.
void normalise_weights(float* wr, int64_t n, float m, float inv_l) {
  constexpr int W = simd::lanes<Batch>;
  const Batch mv = simd::splat<Batch>(m), scale = simd::splat<Batch>(inv_l), one = simd::splat<Batch>(1.0f);
  const auto exp2 = simd::exp2_in_registers<Batch>();
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    const Batch x = simd::load<Batch>(wr + j);
    simd::store(wr + j, simd::select(x == mv, one, exp2(x - mv)) * scale);
  }
  for (; j < n; ++j) wr[j] = (wr[j] == m ? 1.0f : simd::exp2(wr[j] - m)) * inv_l;
}

struct RowsCall {
  const AttentionShape& s;
  const AttentionOptions& o;
  const float *query, *key, *value;
  float *output, *weights;
  float scale;
  int64_t group;  // query heads per kv head (H / Hkv)
  int64_t heads;  // query heads per item: min(group, kHeadsPerItem); the group's last part may have fewer
  int64_t parts;  // items per kv head
  MaskRows<uint8_t> allow;
  MaskRows<float> add;

  void run_item(int64_t item, RowsScratch& w) const;
};

void RowsCall::run_item(int64_t item, RowsScratch& w) const {
  const int64_t b = item / (s.Hkv * parts), g = item / parts % s.Hkv, part = item % parts;
  const int64_t h0 = g * group + part * heads;                        // the item's query heads: h0 ..
  const int64_t rows = std::min(heads, group - part * heads) * s.Lq;  // .. h0 + rows / Lq
  const int64_t kv_rows = s.kv_rows_per_head();
  const float* k_head = key + (b * s.Hkv + g) * kv_rows * s.D;     // (Lk, D)
  const float* v_head = value + (b * s.Hkv + g) * kv_rows * s.Dv;  // (Lk, Dv)
  // row r of the item is query row i = r % Lq of head h0 + r / Lq: the item's rows are adjacent
  // in query, output and weights
  const int64_t first_row = (b * s.H + h0) * s.Lq;
  const float* q_rows = query + first_row * s.D;                   // (rows, D)
  float* out_rows = output + first_row * s.Dv;                     // (rows, Dv)
  float* w_rows = weights ? weights + first_row * s.Lk : nullptr;  // (rows, Lk)

  // 1. Qs = scale * log2(e) * Q (scores in log2 units); m = -inf, l = 0, o = 0; weights -inf
  const float q_scale = scale * kLog2e;
  for (int64_t x = 0; x < rows * s.D; ++x) w.qs[x] = q_scale * q_rows[x];
  std::fill(w.m, w.m + rows, kNegInf);
  std::fill(w.l, w.l + rows, 0.0f);
  std::fill(w.o, w.o + rows * s.Dv, 0.0f);
  if (w_rows) std::fill(w_rows, w_rows + rows * s.Lk, kNegInf);

  // 2. the key tiles any row may see: the flash kernel's tiles (its first query tile starts at
  //    row 0, and Lq < 64)
  const KeyRange first = visible_keys(s, o, 0);
  const KeyRange last = visible_keys(s, o, s.Lq - 1);
  for (int64_t j0 = first.begin; j0 < last.end; j0 += KT) {
    const int64_t n = std::min(KT, last.end - j0);
    // 2a. St = shift + Qs Kt: shift = -m where the row has a reference max, else 0
    transpose_keys(k_head + j0 * s.D, n, s.D, w.kt);
    for (int64_t r = 0; r < rows; ++r) {
      const float shift = std::isfinite(w.m[r]) ? -w.m[r] : 0.0f;
      std::fill(w.st + r * KT, w.st + r * KT + n, shift);
    }
    accumulate(w.qs, P(s.D), Fixed<1>(), w.kt, Fixed<KT>(), rows, s.D, n, w.st, KT);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % s.Lq, h = h0 + r / s.Lq;
      float* st = w.st + r * KT;  // this row's scores
      // 2b. masks: keys outside the row's range or hidden by the bool mask become -inf; the
      //     float mask is added
      const KeyRange range = visible_keys(s, o, i);
      const int64_t lo = std::clamp<int64_t>(range.begin - j0, 0, n);
      const int64_t hi = std::clamp<int64_t>(range.end - j0, lo, n);
      std::fill(st, st + lo, kNegInf);
      std::fill(st + hi, st + n, kNegInf);
      const uint8_t* allow_row = allow.row(b, h, i);
      const float* add_row = add.row(b, h, i);
      for (int64_t jj = lo; jj < hi && (allow_row || add_row); ++jj) {
        const int64_t j = j0 + jj;
        if (allow_row && !allow_row[j * allow.k_stride]) {
          st[jj] = kNegInf;
        } else if (add_row) {
          st[jj] += kLog2e * add_row[j * add.k_stride];
        }
      }
      if (w_rows) {
        const float shift = std::isfinite(w.m[r]) ? -w.m[r] : 0.0f;
        for (int64_t jj = 0; jj < n; ++jj) w_rows[r * s.Lk + j0 + jj] = st[jj] - shift;
      }
      // 2c. online softmax of the row's tile
      w.alpha[r] = softmax_row(st, w.pt + r * KT, n, w.m[r], w.l[r]);
      // 2d. o = alpha * o (before P V is added below)
      if (w.alpha[r] == 1.0f) continue;
      constexpr int W = simd::lanes<Batch>;
      const Batch a = simd::splat<Batch>(w.alpha[r]);
      float* o_row = w.o + r * s.Dv;
      int64_t e = 0;
      for (; e + W <= s.Dv; e += W) simd::store(o_row + e, simd::load<Batch>(o_row + e) * a);
      for (; e < s.Dv; ++e) o_row[e] *= w.alpha[r];
    }
    //     o += P V: P's rows are KT apart, its keys adjacent; V's rows are Dv apart
    accumulate(w.pt, Fixed<KT>(), Fixed<1>(), v_head + j0 * s.Dv, P(s.Dv), rows, n, s.Dv, w.o, s.Dv);
  }

  // 3. output = o / l (0 for a row with nothing visible); weights = 2^(s - m) / l
  for (int64_t r = 0; r < rows; ++r) {
    const float inv_l = w.l[r] > 0.0f ? 1.0f / w.l[r] : 0.0f;
    for (int64_t e = 0; e < s.Dv; ++e) out_rows[r * s.Dv + e] = w.o[r * s.Dv + e] * inv_l;
    if (!w_rows) continue;
    if (w.m[r] == kNegInf) {
      std::fill(w_rows + r * s.Lk, w_rows + (r + 1) * s.Lk, 0.0f);  // nothing visible
      continue;
    }
    normalise_weights(w_rows + r * s.Lk, s.Lk, w.m[r], inv_l);
  }
}

int64_t heads_per_item(const AttentionShape& s) { return std::min(s.H / s.Hkv, kHeadsPerItem); }
int64_t items_of(const AttentionShape& s) {
  const int64_t group = s.H / s.Hkv, heads = heads_per_item(s);
  return s.B * s.Hkv * ((group + heads - 1) / heads);
}

// Worker threads: the work counts every score and output element.
int workers_for_rows(const AttentionShape& s, const AttentionOptions& o) {
  const int64_t work = s.B * s.H * s.Lq * s.Lk * (s.D + s.Dv);
  return useful_threads(o.threads, items_of(s), work, o.min_work_per_thread);
}

}  // namespace

int64_t attention_few_rows_workspace_bytes(const AttentionShape& s, const AttentionOptions& o) {
  return workers_for_rows(s, o) * RowsScratch::floats(s, heads_per_item(s) * s.Lq) *
         static_cast<int64_t>(sizeof(float));
}

void attention_few_rows(const AttentionShape& s, const float* query, const float* key, const float* value,
                        const AttentionOptions& o, float scale, float* output, float* weights) {
  const int64_t group = s.H / s.Hkv, heads = heads_per_item(s);
  const RowsCall call{s,
                      o,
                      query,
                      key,
                      value,
                      output,
                      weights,
                      scale,
                      group,
                      heads,
                      (group + heads - 1) / heads,
                      MaskRows<uint8_t>(o.bool_mask),
                      MaskRows<float>(o.float_mask)};
  const int workers = workers_for_rows(s, o);
  std::vector<RowsScratch> scratch;
  scratch.reserve(workers);
  for (int w = 0; w < workers; ++w) scratch.emplace_back(s, heads * s.Lq);
  parallel_for(items_of(s), workers, [&](int64_t item, int worker) { call.run_item(item, scratch[worker]); });
}

}  // namespace qkv::detail
