#include "model/residual.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace qkv {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

[[noreturn]] void fail(const char* fn, const std::string& msg) {
  throw std::invalid_argument(std::string(fn) + ": residual hooks: " + msg);
}

}  // namespace

double norm_divisor(const float* x, int64_t d, bool layer_norm, double eps) {
  double mean = 0.0;
  if (layer_norm) {
    for (int64_t i = 0; i < d; ++i) mean += x[i];
    mean /= double(d);
  }
  double ss = 0.0;
  for (int64_t i = 0; i < d; ++i) ss += (double(x[i]) - mean) * (double(x[i]) - mean);
  return std::sqrt(ss / double(d) + eps);
}

bool ResidualHooks::has_rows() const {
  bool any = hidden || final_resid || final_scale || sub_scale || patch_slot || steer_rows;
  for (const float* r : record) any = any || r;
  return any;
}

void ResidualHooks::validate(const char* fn, int64_t L, int64_t D, int64_t pos0, int64_t rows, bool all_logits) const {
  if (layers != L || d != D) {
    fail(fn,
         "made for " + str(layers) + " layers of d_model " + str(d) + ", the model has " + str(L) + " of " + str(D));
  }
  if (steer_count < 0 || (steer_count > 0 && (!steer_layer || !steer_vec))) {
    fail(fn, str(steer_count) + " steering entries without layers or vectors");
  }
  for (int64_t i = 0; i < steer_count; ++i) {
    if (steer_layer[i] < 0 || steer_layer[i] >= layers) {
      fail(fn,
           "steering entry " + str(i) + " is at layer " + str(steer_layer[i]) + ", not in [0, " + str(layers) + ")");
    }
  }
  if (start_layer >= layers || (start_layer >= 0 && !start_resid) || (start_layer < 0 && start_att)) {
    fail(fn, "start layer " + str(start_layer) + " (of " + str(layers) + ") without its stream, or out of range");
  }
  if (last_row_only && (hidden || final_resid || final_scale || sub_scale || record[0] || record[1] || record[2] ||
                        record[3] || record[4])) {
    fail(fn, "last_row_only takes no record");
  }
  if (last_row_only && all_logits) {
    fail(fn, "last_row_only computes the last row's logits only, every row's were asked");
  }
  if (readout && (all_logits || readout_count < 1 || !readout_rows)) {
    fail(fn, "a readout of " + str(readout_count) + " tokens needs their rows and the last row's logits only");
  }
  if (!has_rows()) return;
  if (length < 1 || pos0 < 0 || pos0 + rows > length) {
    fail(fn, "rows [" + str(pos0) + ", " + str(pos0 + rows) + ") fall outside the forward they were made for (" +
                 str(length) + " rows)");
  }
  if (patch_slot) {
    if (!patch || !patch_rows) fail(fn, "patch slots without values or rows");
    for (int64_t i = 0; i < kResidSites * layers; ++i) {
      if (patch_slot[i] < -1 || patch_slot[i] >= patch_count) {
        fail(fn, "patch slot " + str(i) + " is " + str(patch_slot[i]) + ", not in [-1, " + str(patch_count) + ")");
      }
    }
  }
}

void ResidualHooks::at(ResidSite s, int64_t l, float* x, int64_t pos0, int64_t L) const {
  const int si = int(s);
  // steering: x[t] += vec at the marked rows of this block's resid_pre
  if (s == ResidSite::ResidPre) {
    for (int64_t i = 0; i < steer_count; ++i) {
      if (steer_layer[i] != l) continue;
      const float* v = steer_vec + i * d;
      const uint8_t* rows = steer_rows ? steer_rows + i * length + pos0 : nullptr;
      for (int64_t t = 0; t < L; ++t) {
        if (rows && !rows[t]) continue;
        for (int64_t j = 0; j < d; ++j) x[t * d + j] += v[j];
      }
    }
  }
  // patch: rows of the site replaced
  const int32_t slot = patch_slot ? patch_slot[si * layers + l] : -1;
  if (slot >= 0) {
    const uint8_t* rows = patch_rows + int64_t(slot) * length + pos0;
    const float* vals = patch + (int64_t(slot) * length + pos0) * d;
    for (int64_t t = 0; t < L; ++t) {
      if (rows[t]) std::copy(vals + t * d, vals + (t + 1) * d, x + t * d);
    }
  }
  // record
  if (float* r = record[si]) std::copy(x, x + L * d, r + (l * length + pos0) * d);
}

void ResidualHooks::embeddings(const float* x, int64_t pos0, int64_t L) const {
  if (hidden) std::copy(x, x + L * d, hidden + pos0 * d);
}

void ResidualHooks::block_output(int64_t l, const float* x, int64_t pos0, int64_t L) const {
  if (hidden && l + 1 < layers) std::copy(x, x + L * d, hidden + ((l + 1) * length + pos0) * d);
}

void ResidualHooks::final_input(const float* x, int64_t pos0, int64_t L, bool layer_norm, double eps) const {
  if (final_resid) std::copy(x, x + L * d, final_resid + pos0 * d);
  if (final_scale) {
    for (int64_t t = 0; t < L; ++t) final_scale[pos0 + t] = float(norm_divisor(x + t * d, d, layer_norm, eps));
  }
}

void ResidualHooks::final_output(const float* xn, int64_t pos0, int64_t L) const {
  if (hidden) std::copy(xn, xn + L * d, hidden + (layers * length + pos0) * d);
}

bool ResidualHooks::read_out(const float* xn, float cap) const {
  if (!readout) return false;
  for (int64_t i = 0; i < readout_count; ++i) {
    const float* w = readout_rows + i * d;
    double s = 0.0;
    for (int64_t j = 0; j < d; ++j) s += double(xn[j]) * double(w[j]);
    readout[i] = cap > 0 ? float(double(cap) * std::tanh(s / double(cap))) : float(s);
  }
  return true;
}

void ResidualHooks::output_norm_scale(int64_t l, int which, const float* y, int64_t pos0, int64_t L, double eps) const {
  if (!sub_scale) return;
  float* out = sub_scale + (l * 2 + which) * length + pos0;
  for (int64_t t = 0; t < L; ++t) out[t] = float(norm_divisor(y + t * d, d, false, eps));
}

}  // namespace qkv
