// Validation of one attention call: every shape, mask and option is checked here, before
// any kernel runs, and each failure names the function, the argument and the shapes.
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "attention.hpp"

namespace qkv {
namespace {

std::string dims(std::initializer_list<int64_t> d) {
  std::ostringstream s;
  s << '[';
  const char* sep = "";
  for (int64_t x : d) {
    s << sep << x;
    sep = ", ";
  }
  s << ']';
  return s.str();
}

std::string shapes(const AttentionShape& s) {
  return "query " + dims({s.B, s.H, s.Lq, s.D}) + ", key " + dims({s.B, s.Hkv, s.Lk, s.D}) + ", value " +
         dims({s.B, s.Hkv, s.Lk, s.Dv});
}

[[noreturn]] void fail(const char* fn, const std::string& what, const AttentionShape& s) {
  throw std::invalid_argument(std::string(fn) + ": " + what + " (got " + shapes(s) + ")");
}

template <class T>
void check_mask(const char* fn, const char* name, const MaskView<T>& m, const AttentionShape& s) {
  if (!m.data) return;
  const int64_t full[4] = {s.B, s.H, s.Lq, s.Lk};
  for (int k = 0; k < 4; ++k) {
    if (m.dims[k] != 1 && m.dims[k] != full[k]) {
      fail(fn,
           std::string(name) + " of shape " + dims({m.dims[0], m.dims[1], m.dims[2], m.dims[3]}) +
               " does not broadcast to [B, H, Lq, Lk] = " + dims({s.B, s.H, s.Lq, s.Lk}),
           s);
    }
  }
}

}  // namespace

void validate_attention(const char* fn, const AttentionShape& s, const AttentionOptions& o) {
  const struct {
    const char* name;
    int64_t value;
  } sizes[] = {{"batch B", s.B},        {"query heads H", s.H}, {"kv heads Hkv", s.Hkv}, {"query length Lq", s.Lq},
               {"key length Lk", s.Lk}, {"head dim D", s.D},    {"value dim Dv", s.Dv}};
  for (const auto& size : sizes) {
    if (size.value < 1) fail(fn, std::string(size.name) + " must be >= 1, got " + std::to_string(size.value), s);
  }
  if (s.H % s.Hkv != 0) {
    fail(fn, "query heads H=" + std::to_string(s.H) + " is not a multiple of kv heads Hkv=" + std::to_string(s.Hkv), s);
  }
  if (s.kv_rows != 0 && s.kv_rows < s.Lk) {
    fail(fn, "kv_rows=" + std::to_string(s.kv_rows) + " is smaller than Lk=" + std::to_string(s.Lk), s);
  }
  if (o.scale && !(std::isfinite(*o.scale) && *o.scale >= 0.0f)) {
    fail(fn, "scale must be a finite number >= 0, got " + std::to_string(*o.scale), s);
  }
  if (o.window < 0) fail(fn, "window must be >= 0 (0 = no window), got " + std::to_string(o.window), s);
  if (o.threads < 1 || o.threads > 256) {
    fail(fn, "threads must be in [1, 256], got " + std::to_string(o.threads), s);
  }
  if (o.min_work_per_thread < 0) {
    fail(fn, "min_work_per_thread must be >= 0, got " + std::to_string(o.min_work_per_thread), s);
  }
  check_mask(fn, "bool_mask", o.bool_mask, s);
  check_mask(fn, "float_mask", o.float_mask, s);
}

}  // namespace qkv
