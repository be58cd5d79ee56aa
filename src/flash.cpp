// The fast kernel: flash attention on the CPU.
//
// Work is split into items of (batch, head, tile of kQueryTile query rows); each item walks
// the key tiles its rows may see (tiles the causal/window rules hide entirely are never
// touched), keeping per row a running max m, a running sum l and an unnormalised output
// accumulator o that is rescaled whenever m grows (the online softmax). Only O(tile)
// scratch is used, never an Lq x Lk matrix (unless the caller asks for the weights).
//
// Inner loops are register-blocked micro-kernels over the batch type V (simd.hpp):
//   scores:  S[r, j] = sum_d Q[r, d] Kt[d, j]   vectorised over keys j (K tile transposed)
//   values:  O[r, e] += sum_j P[r, j] V[j, e]   vectorised over value columns e (accumulate.hpp)
// each a block of kRows rows x kVecs batches = 12 independent mul+add chains.
#include <cmath>
#include <limits>
#include <vector>

#include "accumulate.hpp"
#include "attention.hpp"
#include "simd.hpp"
#include "thread_pool.hpp"
#include "visibility.hpp"

namespace qkv {
namespace {

using simd::Batch;
using simd::lanes;

constexpr int64_t kQueryTile = 32;  // query rows per work item
constexpr int64_t kKeyTile = 48;    // keys per tile: a multiple of kVecs * lanes for 1, 4, 8 and 16 lanes
constexpr int kRows = 4;            // rows per register block
constexpr int kVecs = 3;            // batches per register block
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
static_assert(kKeyTile % (kVecs * lanes<Batch>) == 0, "key tile must hold whole register blocks");

// Per-worker scratch, reused across the items a worker computes.
struct Scratch {
  std::vector<float> q;   // (kQueryTile, D)        query rows, pre-multiplied by scale
  std::vector<float> kt;  // (D, kKeyTile)          key tile, transposed, zero-padded
  std::vector<float> p;   // (kQueryTile, kKeyTile) scores, then exp(score - m)
  std::vector<float> o;   // (kQueryTile, Dv)       unnormalised output
  std::vector<float> m;   // (kQueryTile)           running max of the scores
  std::vector<float> l;   // (kQueryTile)           running sum of exp(score - m)

  Scratch(const AttentionShape& s)
      : q(kQueryTile * s.D), kt(s.D * kKeyTile), p(kQueryTile * kKeyTile), o(kQueryTile * s.Dv),
        m(kQueryTile), l(kQueryTile) {}
};

// p[r, 0 : kVecs*W] = q[r, :] . kt[:, 0 : kVecs*W] for r < R.
template <class V, int R>
inline void score_block(const float* q, int64_t D, const float* kt, float* p) {
  constexpr int W = lanes<V>;
  V acc[R][kVecs];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kVecs; ++v) acc[r][v] = simd::splat<V>(0.0f);
  for (int64_t d = 0; d < D; ++d) {
    V k[kVecs];
    for (int v = 0; v < kVecs; ++v) k[v] = simd::load<V>(kt + d * kKeyTile + v * W);
    for (int r = 0; r < R; ++r) {
      const V qd = simd::splat<V>(q[r * D + d]);
      for (int v = 0; v < kVecs; ++v) acc[r][v] += qd * k[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kVecs; ++v) simd::store(p + r * kKeyTile + v * W, acc[r][v]);
}

// Scores of R rows against the whole key tile.
template <int R>
inline void score_rows(const float* q, int64_t D, const float* kt, float* p) {
  for (int64_t j = 0; j < kKeyTile; j += kVecs * lanes<Batch>) score_block<Batch, R>(q, D, kt + j, p + j);
}

// Masks row r's scores in the tile [j0, j0 + n): keys outside its visible range, keys the
// bool mask hides and the zero padding past n become -inf; the float mask is added.
inline void mask_row(float* p, int64_t j0, int64_t n, detail::KeyRange range, const uint8_t* allow,
                     int64_t allow_stride, const float* add, int64_t add_stride) {
  for (int64_t jj = 0; jj < kKeyTile; ++jj) {
    const int64_t j = j0 + jj;
    if (jj >= n || j < range.begin || j >= range.end || (allow && !allow[j * allow_stride])) {
      p[jj] = kNegInf;
    } else if (add) {
      p[jj] += add[j * add_stride];
    }
  }
}

// Online softmax update of one row over a tile of scores p[0, kKeyTile) (masked: -inf).
// Replaces p by exp(p - m_new), rescales the row's accumulator, updates m and l.
// Returns false when nothing in the row is visible yet (p left all -inf, nothing to add).
inline bool softmax_update(float* p, float& m, float& l, float* o, int64_t Dv) {
  constexpr int W = lanes<Batch>;
  Batch tile_max = simd::splat<Batch>(kNegInf);
  for (int64_t j = 0; j < kKeyTile; j += W) tile_max = simd::max(tile_max, simd::load<Batch>(p + j));
  const float m_new = std::max(m, simd::reduce_max(tile_max));
  if (m_new == kNegInf) return false;
  const float alpha = m == m_new ? 1.0f : std::exp(m - m_new);  // m = -inf gives 0: nothing to keep
  const Batch mb = simd::splat<Batch>(m_new);
  Batch sum = simd::splat<Batch>(0.0f);
  for (int64_t j = 0; j < kKeyTile; j += W) {
    const Batch e = simd::exp_shifted(simd::load<Batch>(p + j), mb);
    simd::store(p + j, e);
    sum += e;
  }
  if (alpha != 1.0f) {
    for (int64_t e = 0; e < Dv; ++e) o[e] *= alpha;
  }
  l = l * alpha + simd::sum(sum);
  m = m_new;
  return true;
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
  const int64_t bh = item / q_tiles;
  const int64_t tile = q_tiles - 1 - item % q_tiles;  // last tiles first: under causal they are the longest
  const int64_t b = bh / s.H, h = bh % s.H;
  const int64_t g = h / (s.H / s.Hkv);  // kv head read by query head h
  const int64_t i0 = tile * kQueryTile;
  const int64_t rows = std::min(kQueryTile, s.Lq - i0);
  const int64_t kv_rows = s.kv_rows_per_head();
  const float* k_head = key + (b * s.Hkv + g) * kv_rows * s.D;    // (Lk, D)
  const float* v_head = value + (b * s.Hkv + g) * kv_rows * s.Dv;  // (Lk, Dv)
  const float* q_rows = query + (bh * s.Lq + i0) * s.D;            // (rows, D)
  float* out_rows = output + (bh * s.Lq + i0) * s.Dv;              // (rows, Dv)
  float* w_rows = weights ? weights + (bh * s.Lq + i0) * s.Lk : nullptr;  // (rows, Lk)

  // 1. scaled queries; m = -inf, l = 0, o = 0; weights start at -inf (= not visible)
  for (int64_t x = 0; x < rows * s.D; ++x) w.q[x] = scale * q_rows[x];
  std::fill(w.m.begin(), w.m.end(), kNegInf);
  std::fill(w.l.begin(), w.l.end(), 0.0f);
  std::fill(w.o.begin(), w.o.end(), 0.0f);
  if (w_rows) std::fill(w_rows, w_rows + rows * s.Lk, kNegInf);

  // 2. the key tiles any row of this item may see
  const detail::KeyRange first = detail::visible_keys(s, o, i0);
  const detail::KeyRange last = detail::visible_keys(s, o, i0 + rows - 1);
  const int64_t k_begin = first.begin / kKeyTile * kKeyTile;
  const int64_t k_end = last.end;
  const bool plain = !allow.data && !add.data;

  for (int64_t j0 = k_begin; j0 < k_end; j0 += kKeyTile) {
    const int64_t n = std::min(kKeyTile, s.Lk - j0);
    // 2a. Kt = transpose of the tile's keys, zero-padded to kKeyTile columns
    for (int64_t d = 0; d < s.D; ++d) {
      float* row = w.kt.data() + d * kKeyTile;
      for (int64_t jj = 0; jj < n; ++jj) row[jj] = k_head[(j0 + jj) * s.D + d];
      for (int64_t jj = n; jj < kKeyTile; ++jj) row[jj] = 0.0f;
    }
    // 2b. S = (scale Q) Kt, in blocks of kRows rows
    int64_t r = 0;
    for (; r + kRows <= rows; r += kRows) score_rows<kRows>(&w.q[r * s.D], s.D, w.kt.data(), &w.p[r * kKeyTile]);
    for (; r < rows; ++r) score_rows<1>(&w.q[r * s.D], s.D, w.kt.data(), &w.p[r * kKeyTile]);
    // 2c. masks, then the online softmax per row
    for (r = 0; r < rows; ++r) {
      float* p = &w.p[r * kKeyTile];
      const detail::KeyRange range = detail::visible_keys(s, o, i0 + r);
      if (!plain || n < kKeyTile || j0 < range.begin || j0 + n > range.end) {
        mask_row(p, j0, n, range, allow.row(b, h, i0 + r), allow.k_stride, add.row(b, h, i0 + r), add.k_stride);
      }
      if (w_rows) std::copy(p, p + n, w_rows + r * s.Lk + j0);
      if (!softmax_update(p, w.m[r], w.l[r], &w.o[r * s.Dv], s.Dv)) {
        std::fill(p, p + kKeyTile, 0.0f);
      }
    }
    // 2d. O += P V
    detail::accumulate(w.p.data(), kKeyTile, v_head + j0 * s.Dv, s.Dv, rows, n, s.Dv, w.o.data(), s.Dv);
  }

  // 3. output = o / l (0 for a row with nothing visible); weights = exp(s - m) / l
  for (int64_t r = 0; r < rows; ++r) {
    const float inv_l = w.l[r] > 0.0f ? 1.0f / w.l[r] : 0.0f;
    for (int64_t e = 0; e < s.Dv; ++e) out_rows[r * s.Dv + e] = w.o[r * s.Dv + e] * inv_l;
    if (!w_rows) continue;
    float* wr = w_rows + r * s.Lk;
    for (int64_t j = 0; j < s.Lk; ++j) {
      wr[j] = w.m[r] == kNegInf ? 0.0f : simd::exp_shifted(wr[j], w.m[r]) * inv_l;
    }
  }
}

}  // namespace

int64_t attention_workspace_bytes(const AttentionShape& s, const AttentionOptions& o) {
  const int64_t items = s.B * s.H * ((s.Lq + kQueryTile - 1) / kQueryTile);
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(o.threads, items));
  const int64_t floats = kQueryTile * s.D + s.D * kKeyTile + kQueryTile * kKeyTile + kQueryTile * s.Dv + 2 * kQueryTile;
  return workers * floats * static_cast<int64_t>(sizeof(float));
}

void attention(const AttentionShape& s, const float* query, const float* key, const float* value,
               const AttentionOptions& o, float* output, float* weights) {
  validate_attention("attention", s, o);
  const float scale = o.scale ? *o.scale : 1.0f / std::sqrt(static_cast<float>(s.D));
  const int64_t q_tiles = (s.Lq + kQueryTile - 1) / kQueryTile;
  const Call call{s, o, query, key, value, output, weights, scale, q_tiles,
                  detail::MaskRows<uint8_t>(o.bool_mask), detail::MaskRows<float>(o.float_mask)};
  const int64_t items = s.B * s.H * q_tiles;
  const int workers = static_cast<int>(std::min<int64_t>(o.threads, items));
  std::vector<Scratch> scratch(workers, Scratch(s));
  parallel_for(items, workers, [&](int64_t item, int worker) { call.run_item(item, scratch[worker]); });
}

}  // namespace qkv
