// The fast kernel: flash attention on the CPU.
//
// Work is split into items of (batch, head, tile of kQueryTile query rows); each item walks
// the key tiles its rows may see (tiles the causal/window rules hide entirely are never
// touched), keeping per row a reference max m, a running sum l and an unnormalised output
// accumulator o that is rescaled when m moves (the online softmax). Only O(tile) scratch is
// used, never an Lq x Lk matrix (unless the caller asks for the weights).
//
// Scores are kept transposed, St[key, row], so that every step is vectorised without
// transposing keys: St = K Qᵀ broadcasts key elements against rows of the (once per item)
// transposed queries, the softmax runs across query rows a batch at a time, and P V broadcasts
// elements of Pt (the probabilities, laid out as St) against value rows. Both products are the
// register-blocked micro-kernel in accumulate.hpp (2 rows x 4 batches = 8 independent mul+add
// chains; a 64 x 64 tile is whole blocks). Scores are in log2 units, so the softmax's
// exponential is exp2.
// Calls with at most 3 query rows per head (a decode step) take decode_attention.cpp's path,
// vectorised over keys instead, which computes each row with these same steps (same bits).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "accumulate.hpp"
#include "attention.hpp"
#include "decode_attention.hpp"
#include "simd.hpp"
#include "thread_pool.hpp"
#include "visibility.hpp"

namespace qkv {
namespace {

using detail::Fixed;
using detail::kKeyTile;  // keys per tile; it, the constants below and the rescaling rule are
using detail::kLog2e;    // shared with the few-rows path (decode_attention.hpp): a query row
using detail::kNegInf;   // gets the same bits on either path
using detail::kRescaleThreshold;
using simd::Batch;
using P = std::ptrdiff_t;

constexpr int64_t kQueryTile = 64;  // query rows per work item

// The micro-kernel's block (rows x batches) of the two products, St = K Qt and o += P V: any
// shape gives the same bits (each element's sum runs over k in order). Switches for measuring
// (bench/js/attn-shape.mjs). 2 x 4 for both: in Chromium 156 no other shape was clearly
// faster (4x2, 3x3, 1x8, 2x3, 3x2, 5x2, 6x2 and mixes within noise or slower), in Node 20
// the others are 5-16% slower.
#ifndef QKV_ATTN_S_R
#define QKV_ATTN_S_R 2
#endif
#ifndef QKV_ATTN_S_NV
#define QKV_ATTN_S_NV 4
#endif
#ifndef QKV_ATTN_PV_R
#define QKV_ATTN_PV_R 2
#endif
#ifndef QKV_ATTN_PV_NV
#define QKV_ATTN_PV_NV 4
#endif
constexpr int kScoreR = QKV_ATTN_S_R, kScoreNV = QKV_ATTN_S_NV;
constexpr int kValueR = QKV_ATTN_PV_R, kValueNV = QKV_ATTN_PV_NV;

// Per-worker scratch, reused across the items a worker computes: one allocation, each array
// starting on a 64-byte cache line (so that no vector load of it straddles two lines).
class Scratch {
 public:
  float* qt;     // (D, kQueryTile)        queries, transposed and multiplied by scale * log2(e)
  float* st;     // (kKeyTile, kQueryTile) scores of one key tile (log2 units) minus the reference max
  float* o;      // (kQueryTile, Dv)       unnormalised output
  float* m;      // (kQueryTile)           reference max of the scores (lags the true max, see below)
  float* l;      // (kQueryTile)           running sum of 2^(score - m)
  float* alpha;  // (kQueryTile)           rescale factor of this tile, 2^(m_old - m_new)
  float* pt;     // (kKeyTile, kQueryTile) probabilities of one key tile, 2^(score - m)
  float* shift;  // (kQueryTile)           -m where m is finite, else 0: St = shift + K Qt

  explicit Scratch(const AttentionShape& s) : buffer_(floats(s)) {
    const auto misaligned = reinterpret_cast<std::uintptr_t>(buffer_.data()) / sizeof(float) % kAlign;
    float* p = buffer_.data() + (kAlign - misaligned) % kAlign;
    const auto take = [&p](int64_t n) { return std::exchange(p, p + round_up(n)); };
    qt = take(s.D * kQueryTile);
    st = take(kKeyTile * kQueryTile);
    o = take(kQueryTile * s.Dv);
    m = take(kQueryTile);
    l = take(kQueryTile);
    alpha = take(kQueryTile);
    pt = take(kKeyTile * kQueryTile);
    shift = take(kQueryTile);
  }
  Scratch(const Scratch&) = delete;
  Scratch(Scratch&&) = default;  // the buffer's storage moves with it, so the pointers stay valid

  // Floats a worker allocates: the arrays above, each rounded up to whole cache lines, and the
  // slack to align the first.
  static int64_t floats(const AttentionShape& s) {
    return round_up(s.D * kQueryTile) + 2 * round_up(kKeyTile * kQueryTile) + round_up(kQueryTile * s.Dv) +
           4 * round_up(kQueryTile) + kAlign;
  }

 private:
  static constexpr int64_t kAlign = 64 / sizeof(float);
  static int64_t round_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
  std::vector<float> buffer_;
};

// Online softmax over one key tile for the query rows [r, r + lanes<V>). st[j, r] holds
// x = score - m_sub for j < n, where m_sub is the row's reference max m where finite, else 0
// (the product K Qt starts from -m_sub), masked (-inf = hidden). Writes p = 2^(score - m) to
// pt, moves m where the tile needs it, and updates l; alpha = 2^(m_old - m_new) rescales o.
template <class V>
inline void softmax_rows(const float* st, float* pt, std::ptrdiff_t n, std::ptrdiff_t r, float* m, float* l,
                         float* alpha) {
  const V neg_inf = simd::splat<V>(kNegInf), pos_inf = simd::splat<V>(-kNegInf);
  const V zero = simd::splat<V>(0.0f), one = simd::splat<V>(1.0f), threshold = simd::splat<V>(kRescaleThreshold);
  const float* const col = st + r;  // st[:, r .. r + lanes)
  const float* const end = col + n * kQueryTile;
  float* const out = pt + r;
  const V m_old = simd::load<V>(m + r);
  const auto finite = (m_old != neg_inf) & (m_old != pos_inf);
  const V m_sub = simd::select(finite, m_old, zero);
  V sum = zero, x_max = neg_inf;
  const auto exp2 = simd::exp2_in_registers<V>();
  if (simd::all(finite)) {
    // Every row has a reference: one pass, p = 2^x, with the tile's max alongside. Done
    // unless that max exceeds the reference by more than the threshold (then p is redone).
    float* o = out;
    for (const float* at = col; at != end; at += kQueryTile, o += kQueryTile) {
      const V x = simd::load<V>(at);
      x_max = simd::max(x_max, x);
      const V p = exp2(x);
      simd::store(o, p);
      sum += p;
    }
    if (!simd::any(x_max > threshold)) {
      simd::store(alpha + r, one);
      simd::store(l + r, simd::load<V>(l + r) + sum);
      return;
    }
  } else {
    // The tile's max first, in 4 partial maxima (one chain of dependent max is latency-bound)
    V part[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
    const float* at = col;
    for (; at + 3 * kQueryTile < end; at += 4 * kQueryTile) {
      QKV_UNROLL
      for (int u = 0; u < 4; ++u) part[u] = simd::max(part[u], simd::load<V>(at + u * kQueryTile));
    }
    for (; at != end; at += kQueryTile) part[0] = simd::max(part[0], simd::load<V>(at));
    x_max = simd::max(simd::max(part[0], part[1]), simd::max(part[2], part[3]));
  }
  // The new reference: the tile's max where it exceeds the old one by more than the threshold
  // (always where the row had seen nothing and now sees a key: m_old = -inf)
  const V tile_max = x_max + m_sub;
  const auto moves = (tile_max > m_old + threshold) | ((m_old == neg_inf) & (x_max != neg_inf));
  const V m_new = simd::select(moves, tile_max, m_old);
  sum = zero;
  float* o = out;
  if (!simd::any(m_new == pos_inf)) {
    const V d = simd::select(moves, x_max, zero);  // x - d = score - m_new (exactly 0 at the max)
    for (const float* at = col; at != end; at += kQueryTile, o += kQueryTile) {
      const V p = exp2(simd::load<V>(at) - d);
      simd::store(o, p);
      sum += p;
    }
  } else {
    // a +inf score (+inf in a float mask, or products that overflow): the +inf keys share the
    // weight; rows that see nothing (m_new = -inf) keep weight 0
    const V m_new_sub = simd::select(m_new == neg_inf, zero, m_new);
    for (const float* at = col; at != end; at += kQueryTile, o += kQueryTile) {
      const V score = simd::load<V>(at) + m_sub;
      const V p = simd::select((score == m_new) & (m_new == pos_inf), one, exp2(score - m_new_sub));
      simd::store(o, p);
      sum += p;
    }
  }
  const V a = simd::select(m_old == m_new, one, exp2(m_old - m_new));
  simd::store(alpha + r, a);
  simd::store(l + r, simd::load<V>(l + r) * a + sum);
  simd::store(m + r, m_new);
}

struct Call {
  const AttentionShape& s;
  const AttentionOptions& o;
  const float *query, *key, *value;
  float *output, *weights;
  float scale;
  int64_t q_tiles;
  detail::MaskRows<uint8_t> allow;
  detail::MaskRows<float> add;

  void run_item(int64_t item, Scratch& w) const;
};

void Call::run_item(int64_t item, Scratch& w) const {
  constexpr int W = simd::lanes<Batch>;
  constexpr int64_t QT = kQueryTile;
  const int64_t bh = item / q_tiles;
  const int64_t tile = q_tiles - 1 - item % q_tiles;  // last tiles first: under causal they are the longest
  const int64_t b = bh / s.H, h = bh % s.H;
  const int64_t g = h / (s.H / s.Hkv);  // kv head read by query head h
  const int64_t i0 = tile * QT;
  const int64_t rows = std::min(QT, s.Lq - i0);
  const int64_t kv_rows = s.kv_rows_per_head();
  const float* k_head = key + (b * s.Hkv + g) * kv_rows * s.D;            // (Lk, D)
  const float* v_head = value + (b * s.Hkv + g) * kv_rows * s.Dv;         // (Lk, Dv)
  const float* q_rows = query + (bh * s.Lq + i0) * s.D;                   // (rows, D)
  float* out_rows = output + (bh * s.Lq + i0) * s.Dv;                     // (rows, Dv)
  float* w_rows = weights ? weights + (bh * s.Lq + i0) * s.Lk : nullptr;  // (rows, Lk)

  // 1. Qt = scale * log2(e) * Q transposed (scores in log2 units); m = -inf, l = 0, o = 0;
  //    weights start at -inf (hidden)
  const float q_scale = scale * kLog2e;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < s.D; ++d) w.qt[d * QT + r] = q_scale * q_rows[r * s.D + d];
  std::fill(w.m, w.m + QT, kNegInf);
  std::fill(w.l, w.l + QT, 0.0f);
  std::fill(w.o, w.o + QT * s.Dv, 0.0f);
  if (w_rows) std::fill(w_rows, w_rows + rows * s.Lk, kNegInf);

  // 2. the key tiles any row of this item may see
  const detail::KeyRange first = detail::visible_keys(s, o, i0);
  const detail::KeyRange last = detail::visible_keys(s, o, i0 + rows - 1);
  const bool plain = !allow.data && !add.data;
  for (int64_t j0 = first.begin; j0 < last.end; j0 += kKeyTile) {
    const int64_t n = std::min(kKeyTile, last.end - j0);
    // 2a. St = K Qt over the tile's n keys: K's rows are D apart, Qt's QT
    //     minus each row's reference max (where it has one): St = shift + K Qt
    for (int64_t r = 0; r < QT; ++r) w.shift[r] = std::isfinite(w.m[r]) ? -w.m[r] : 0.0f;
    detail::accumulate<kScoreR, kScoreNV>(k_head + j0 * s.D, P(s.D), Fixed<1>(), w.qt, Fixed<QT>(), n, s.D, rows, w.st,
                                          QT, w.shift);
    // 2b. masks: keys outside a row's range or hidden by the bool mask become -inf; float mask added.
    //     Ranges only move right with the row, so with no mask a tile is visible to every row
    //     when it is to the last row's begin and the first row's end.
    const bool whole_tile = plain && j0 >= last.begin && j0 + n <= first.end;
    for (int64_t r = 0; r < rows && !whole_tile; ++r) {
      // this row sees the tile's keys [lo, hi)
      const detail::KeyRange range = detail::visible_keys(s, o, i0 + r);
      const int64_t lo = std::clamp<int64_t>(range.begin - j0, 0, n);
      const int64_t hi = std::clamp<int64_t>(range.end - j0, lo, n);
      float* column = w.st + r;  // St[:, r]
      for (int64_t jj = 0; jj < lo; ++jj) column[jj * QT] = kNegInf;
      for (int64_t jj = hi; jj < n; ++jj) column[jj * QT] = kNegInf;
      const uint8_t* allow_row = allow.row(b, h, i0 + r);
      const float* add_row = add.row(b, h, i0 + r);
      for (int64_t jj = lo; jj < hi && (allow_row || add_row); ++jj) {
        const int64_t j = j0 + jj;
        if (allow_row && !allow_row[j * allow.k_stride]) {
          column[jj * QT] = kNegInf;
        } else if (add_row) {
          column[jj * QT] += kLog2e * add_row[j * add.k_stride];
        }
      }
    }
    if (w_rows) {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t jj = 0; jj < n; ++jj) w_rows[r * s.Lk + j0 + jj] = w.st[jj * QT + r] - w.shift[r];
    }
    // 2c. online softmax, a batch of rows at a time, then a scalar tail
    int64_t r = 0;
    for (; r + W <= rows; r += W) softmax_rows<Batch>(w.st, w.pt, n, r, w.m, w.l, w.alpha);
    for (; r < rows; ++r) softmax_rows<float>(w.st, w.pt, n, r, w.m, w.l, w.alpha);
    // 2d. o = alpha * o + P V
    for (r = 0; r < rows; ++r) {
      if (w.alpha[r] == 1.0f) continue;
      const Batch a = simd::splat<Batch>(w.alpha[r]);
      float* o_row = w.o + r * s.Dv;
      int64_t e = 0;
      for (; e + W <= s.Dv; e += W) simd::store(o_row + e, simd::load<Batch>(o_row + e) * a);
      for (; e < s.Dv; ++e) o_row[e] *= w.alpha[r];
    }
    //     P's rows are adjacent in Pt, its keys QT apart; V's rows are Dv apart
    detail::accumulate<kValueR, kValueNV>(w.pt, Fixed<1>(), Fixed<QT>(), v_head + j0 * s.Dv, P(s.Dv), rows, n, s.Dv,
                                          w.o, s.Dv);
  }

  // 3. output = o / l (0 for a row with nothing visible); weights = 2^(s - m) / l
  for (int64_t r = 0; r < rows; ++r) {
    const float inv_l = w.l[r] > 0.0f ? 1.0f / w.l[r] : 0.0f;
    for (int64_t e = 0; e < s.Dv; ++e) out_rows[r * s.Dv + e] = w.o[r * s.Dv + e] * inv_l;
    if (!w_rows) continue;
    float* wr = w_rows + r * s.Lk;
    for (int64_t j = 0; j < s.Lk; ++j) {
      const float p = wr[j] == w.m[r] ? 1.0f : simd::exp2(wr[j] - w.m[r]);  // 1, not NaN, for +inf == +inf
      wr[j] = w.m[r] == kNegInf ? 0.0f : p * inv_l;
    }
  }
}

// Worker threads for a call: items are (batch, head, query tile); the work counts every score
// and output element (masked tiles are skipped, so causal calls do about half of it).
int workers_for(const AttentionShape& s, const AttentionOptions& o) {
  const int64_t items = s.B * s.H * ((s.Lq + kQueryTile - 1) / kQueryTile);
  const int64_t work = s.B * s.H * s.Lq * s.Lk * (s.D + s.Dv);
  return useful_threads(o.threads, items, work, o.min_work_per_thread);
}

}  // namespace

int64_t attention_workspace_bytes(const AttentionShape& s, const AttentionOptions& o) {
  if (detail::few_query_rows(s)) return detail::attention_few_rows_workspace_bytes(s, o);
  const int64_t workers = workers_for(s, o);
  return workers * Scratch::floats(s) * static_cast<int64_t>(sizeof(float));
}

void attention(const AttentionShape& s, const float* query, const float* key, const float* value,
               const AttentionOptions& o, float* output, float* weights) {
  validate_attention("attention", s, o);
  const float scale = o.scale ? *o.scale : 1.0f / std::sqrt(static_cast<float>(s.D));
  // a decode step (a few query rows per head): vectorised over keys, same bits per row
  if (detail::few_query_rows(s)) return detail::attention_few_rows(s, query, key, value, o, scale, output, weights);
  const int64_t q_tiles = (s.Lq + kQueryTile - 1) / kQueryTile;
  const Call call{s,
                  o,
                  query,
                  key,
                  value,
                  output,
                  weights,
                  scale,
                  q_tiles,
                  detail::MaskRows<uint8_t>(o.bool_mask),
                  detail::MaskRows<float>(o.float_mask)};
  const int64_t items = s.B * s.H * q_tiles;
  const int workers = workers_for(s, o);
  std::vector<Scratch> scratch;
  scratch.reserve(workers);
  for (int w = 0; w < workers; ++w) scratch.emplace_back(s);
  parallel_for(items, workers, [&](int64_t item, int worker) { call.run_item(item, scratch[worker]); });
}

}  // namespace qkv
