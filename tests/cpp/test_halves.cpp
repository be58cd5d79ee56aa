// The 16-bit float widenings (src/matmul/halves.hpp) the matmul kernels and the safetensors
// reader use: exact one value at a time, and the kernels' vector forms bit for bit against it.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "matmul/halves.hpp"
#include "model/safetensors.hpp"

using namespace qkv;

TEST_CASE("halves: F16 and BF16 widening is exact and matches the safetensors reader") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = halves::f16_to_f32(uint16_t(h)), b = safetensors::f16_to_f32(uint16_t(h));
    if (std::isnan(b)) {
      CHECK(std::isnan(a));
      continue;
    }
    REQUIRE(std::memcmp(&a, &b, 4) == 0);
    CHECK(halves::f32_to_f16(a) == uint16_t(h));  // every half survives the round trip
    const float c = halves::bf16_to_f32(uint16_t(h)), d = safetensors::bf16_to_f32(uint16_t(h));
    if (!std::isnan(d)) CHECK(std::memcmp(&c, &d, 4) == 0);
  }
  // rounding to nearest even, overflow to inf
  CHECK(halves::f32_to_f16(1.0f + 1.0f / 2048) == 0x3C00);  // halfway: to the even 1.0
  CHECK(halves::f32_to_f16(1.0f + 3.0f / 2048) == 0x3C02);  // halfway: to the even 1 + 2/1024
  CHECK(halves::f32_to_f16(65520.0f) == 0x7C00);
  CHECK(halves::f32_to_f16(65519.0f) == 0x7BFF);
  CHECK(halves::f32_to_f16(-3e-8f) == 0x8001);        // rounds up to the smallest subnormal
  CHECK(halves::f32_to_bf16(1.00390625f) == 0x3F80);  // halfway: to even
}

#ifndef QKV_NO_SIMD
TEST_CASE("halves: the kernels' vector widening of even and odd elements, every half, any neighbour") {
  // each half h as the even (low) and the odd (high) element of a lane, beside a neighbour that
  // varies (all bits set, none, and h's complement): the widening must not see the neighbour
  const auto lane_value = [](halves::F4 v, int i) {
    alignas(16) float f[4];
    v.store_aligned(f);
    return f[i];
  };
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t other[4] = {0u, 0xFFFFu, ~h & 0xFFFFu, (h * 40503u) & 0xFFFFu};
    alignas(16) int32_t even_lanes[4], odd_lanes[4];
    for (int i = 0; i < 4; ++i) {
      even_lanes[i] = int32_t(h | other[i] << 16);
      odd_lanes[i] = int32_t(other[i] | h << 16);
    }
    const halves::I4 ue = halves::I4::load_aligned(even_lanes), uo = halves::I4::load_aligned(odd_lanes);
    const halves::F4 bf_even = halves::wide_even<false>(ue), bf_odd = halves::wide_odd<false>(uo);
    const halves::F4 f16_even = halves::wide_even<true>(ue), f16_odd = halves::wide_odd<true>(uo);
    const bool finite = (h & 0x7C00u) != 0x7C00u;
    for (int i = 0; i < 4; ++i) {
      const float bf = halves::bf16_to_f32(uint16_t(h));
      if (!std::isnan(bf)) {
        REQUIRE(lane_value(bf_even, i) == bf);
        REQUIRE(lane_value(bf_odd, i) == bf);
      }
      if (!finite) continue;  // F16 weights are checked to be finite on load
      const float want = halves::f16_to_f32(uint16_t(h));
      // the 2^-112 undone in two exact steps (a subnormal half is a subnormal float here)
      const float scale = halves::kF16Half;
      REQUIRE(lane_value(f16_even, i) * scale * scale == want);
      REQUIRE(lane_value(f16_odd, i) * scale * scale == want);
      // bit for bit the widening of the half alone in a high half (signed zeros included)
      const float ref = lane_value(halves::f16_high_scaled(halves::I4(int32_t(h << 16))), 0);
      const float e = lane_value(f16_even, i), o = lane_value(f16_odd, i);
      REQUIRE(std::memcmp(&e, &ref, 4) == 0);
      REQUIRE(std::memcmp(&o, &ref, 4) == 0);
    }
  }
}
#endif
