// Which keys a query row may see, shared by the reference and the fast kernel so the two
// cannot disagree on the rules in attention.hpp.
#pragma once

#include <algorithm>
#include <cstdint>

#include "attention.hpp"

namespace qkv::detail {

// Keys [begin, end) pass the causal and window rules for query row i.
struct KeyRange {
  int64_t begin, end;
};

inline KeyRange visible_keys(const AttentionShape& s, const AttentionOptions& o, int64_t i) {
  const int64_t diagonal = i + (s.Lk - s.Lq);  // the last key query i sees under causal
  int64_t begin = 0, end = s.Lk;
  if (o.causal) end = std::min(end, diagonal + 1);
  if (o.window > 0) begin = std::max(begin, diagonal - o.window + 1);
  end = std::max<int64_t>(end, 0);
  begin = std::min(begin, end);
  return {begin, end};
}

// A mask broadcast to [B, H, Lq, Lk]: row(b, h, i)[j * k_stride] is element (b, h, i, j).
template <class T>
struct MaskRows {
  const T* data = nullptr;
  int64_t b_stride = 0, h_stride = 0, q_stride = 0, k_stride = 0;

  explicit MaskRows(const MaskView<T>& m) : data(m.data) {
    const auto& d = m.dims;
    k_stride = d[3] == 1 ? 0 : 1;
    q_stride = d[2] == 1 ? 0 : d[3];
    h_stride = d[1] == 1 ? 0 : d[2] * d[3];
    b_stride = d[0] == 1 ? 0 : d[1] * d[2] * d[3];
  }
  const T* row(int64_t b, int64_t h, int64_t i) const {
    return data ? data + b * b_stride + h * h_stride + i * q_stride : nullptr;
  }
};

}  // namespace qkv::detail
