// The matmul kernels (src/matmul/) against plain loops: every weight type and layout, the
// matrix-vector and the matrix-matrix kernel, odd sizes (M, K, N not multiples of the vector
// width, the 32-block, the micro-tile or the packed block), 1 to 3 threads (bit-identical).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "matmul/halves.hpp"
#include "matmul/matmul.hpp"
#include "model/safetensors.hpp"
#include "testing.hpp"

using namespace qkv;

namespace {

// A random weight matrix held in one of the stored forms.
struct Stored {
  std::vector<float> f32;      // K * N values as generated (storage order)
  std::vector<uint16_t> half;  // F16 / BF16 storage
  std::vector<int8_t> q8;
  std::vector<uint8_t> q4;
  std::vector<uint16_t> scales;
  WeightMatrix w;
};

Stored make_weights(WeightType type, WeightLayout layout, int64_t K, int64_t N, std::mt19937& rng) {
  Stored s;
  s.f32 = qkv::testing::normal(K * N, rng, 0.5f);
  // a few exact zeros, tiny values (subnormal in F16) and large ones
  for (size_t i = 0; i < s.f32.size(); i += 7) s.f32[i] = 0.0f;
  for (size_t i = 3; i < s.f32.size(); i += 11) s.f32[i] *= 1e-6f;
  for (size_t i = 5; i < s.f32.size(); i += 13) s.f32[i] *= 300.0f;
  s.w.type = type;
  s.w.layout = layout;
  s.w.K = K;
  s.w.N = N;
  if (type == WeightType::F32) {
    s.w.data = s.f32.data();
  } else if (type == WeightType::F16 || type == WeightType::BF16) {
    for (float v : s.f32) s.half.push_back(type == WeightType::F16 ? halves::f32_to_f16(v) : halves::f32_to_bf16(v));
    s.w.data = s.half.data();
  } else if (type == WeightType::Q4) {
    WeightMatrix src{WeightType::F32, layout, K, N, s.f32.data(), nullptr};
    const Q4Layout q = Q4Layout::of(K, N);
    s.q4.resize(q.data_bytes());
    s.scales.resize(q.scale_count());
    quantize_q4(src, s.q4.data(), s.scales.data());
    s.w.data = s.q4.data();
    s.w.scales = s.scales.data();
  } else {
    WeightMatrix src{WeightType::F32, layout, K, N, s.f32.data(), nullptr};
    const Q8Layout q = Q8Layout::of(K, N);
    s.q8.resize(q.data_bytes());
    s.scales.resize(q.scale_count());
    quantize_q8(src, s.q8.data(), s.scales.data());
    s.w.data = s.q8.data();
    s.w.scales = s.scales.data();
  }
  return s;
}

// |y - want| <= tol where tol scales with the sizes of the terms summed
void check_close(const std::vector<float>& y, const std::vector<float>& want, const std::vector<float>& x,
                 const WeightMatrix& w, const std::vector<float>& bias, int64_t M, double rel, double x_rel) {
  double worst = 0.0;
  for (int64_t m = 0; m < M; ++m) {
    double xmax = 0.0;
    for (int64_t k = 0; k < w.K; ++k) xmax = std::max(xmax, std::fabs(double(x[size_t(m * w.K + k)])));
    for (int64_t n = 0; n < w.N; ++n) {
      double mag = std::fabs(double(bias[size_t(n)])), wsum = 0.0;
      for (int64_t k = 0; k < w.K; ++k) {
        const double wk = std::fabs(double(weight_at(w, k, n)));
        mag += std::fabs(double(x[size_t(m * w.K + k)])) * wk;
        wsum += wk;
      }
      const double tol = rel * mag + x_rel * wsum * xmax + 1e-30;
      const double err = std::fabs(double(y[size_t(m * w.N + n)]) - double(want[size_t(m * w.N + n)]));
      worst = std::max(worst, err / tol);
      if (!(err <= tol)) {
        FAIL_CHECK("y[" << m << ", " << n << "] = " << y[size_t(m * w.N + n)] << ", want " << want[size_t(m * w.N + n)]
                        << " (tolerance " << tol << ")");
        return;
      }
    }
  }
  CHECK(worst <= 1.0);
}

const char* layout_name(WeightLayout l) {
  return l == WeightLayout::InOut ? "InOut" : l == WeightLayout::OutIn ? "OutIn" : "Panels";
}

// The layouts a matrix of this type can be given: Panels is the float types' (Q8 and Q4 have their own)
bool panels_ok(WeightType type) { return type != WeightType::Q8 && type != WeightType::Q4; }
std::vector<WeightLayout> layouts_of(WeightType type) {
  if (panels_ok(type)) return {WeightLayout::InOut, WeightLayout::OutIn, WeightLayout::Panels};
  return {WeightLayout::InOut, WeightLayout::OutIn};
}

}  // namespace

TEST_CASE("matmul: every weight type and layout vs plain loops, odd sizes, both kernels, 1-3 threads") {
  std::mt19937 rng(20240611);
  struct Shape {
    int64_t M, K, N;
  };
  // M: 1 (decode) and more; K and N cross the 4/8-lane, 32-block, micro-tile (2 x 16 in wasm),
  // 256-row and 768-column blocking boundaries
  const Shape shapes[] = {{1, 1, 1},   {1, 5, 3},    {2, 7, 13},    {3, 33, 29},   {4, 64, 24},    {5, 31, 9},
                          {7, 67, 50}, {1, 300, 97}, {13, 257, 37}, {6, 513, 800}, {1, 130, 1001}, {2, 40, 2}};
  for (WeightType type : {WeightType::F32, WeightType::F16, WeightType::BF16, WeightType::Q8, WeightType::Q4}) {
    const bool quantized = type == WeightType::Q8 || type == WeightType::Q4;
    for (WeightLayout layout : layouts_of(type)) {
      for (const Shape& s : shapes) {
        CAPTURE(weight_type_name(type));
        CAPTURE(layout_name(layout));
        CAPTURE(s.M);
        CAPTURE(s.K);
        CAPTURE(s.N);
        Stored st = make_weights(type, layout, s.K, s.N, rng);
        const WeightMatrix& w = st.w;
        std::vector<float> x = qkv::testing::normal(s.M * s.K, rng), bias = qkv::testing::normal(s.N, rng);
        std::vector<float> want(size_t(s.M * s.N));
        matmul_reference(w, x.data(), s.M, bias.data(), want.data());

        // the matrix product (prefill), any M
        std::vector<float> y1(want.size(), NAN);
        detail::gemm(w, x.data(), s.M, bias.data(), y1.data(), 1);
        check_close(y1, want, x, w, bias, s.M, 2e-6 * std::sqrt(double(s.K)) + 1e-6, 0.0);
        for (int threads : {2, 3}) {
          std::vector<float> yt(want.size(), NAN);
          detail::gemm(w, x.data(), s.M, bias.data(), yt.data(), threads);
          CHECK(yt == y1);
        }
        // the matrix-vector product (decode), row by row; Q8 quantizes x to int16 per block
        std::vector<float> y2(want.size(), NAN);
        for (int64_t m = 0; m < s.M; ++m) detail::gemv(w, x.data() + m * s.K, bias.data(), y2.data() + m * s.N, 1);
        check_close(y2, want, x, w, bias, s.M, 2e-6 * std::sqrt(double(s.K)) + 1e-6, quantized ? 1.0 / 65534 : 0.0);
        for (int threads : {2, 3}) {
          std::vector<float> yt(want.size(), NAN);
          for (int64_t m = 0; m < s.M; ++m)
            detail::gemv(w, x.data() + m * s.K, bias.data(), yt.data() + m * s.N, threads);
          CHECK(yt == y2);
        }
        // Conv1D float weights and panels: decoding a row gives the bits the matrix product gives
        // it (both add a column's products in k order after its bias; src/matmul compiles with
        // -ffp-contract=off, so no build fuses some multiply-adds and not others: CMakeLists.txt)
        if (!quantized && layout != WeightLayout::OutIn) CHECK(y2 == y1);
        // matmul() picks one of the two; without bias
        std::vector<float> y3(want.size()), want0(want.size());
        matmul(w, x.data(), s.M, nullptr, y3.data(), 2);
        matmul_reference(w, x.data(), s.M, nullptr, want0.data());
        check_close(y3, want0, x, w, std::vector<float>(size_t(s.N), 0.0f), s.M, 2e-6 * std::sqrt(double(s.K)) + 1e-6,
                    quantized ? 1.0 / 65534 : 0.0);
        if (quantized) {  // the integer matrix product (matmul's for M > 1), any M
          const auto gemm_int = type == WeightType::Q8 ? detail::gemm_q8 : detail::gemm_q4;
          std::vector<float> y4(want.size(), NAN);
          gemm_int(w, x.data(), s.M, bias.data(), y4.data(), 1);
          check_close(y4, want, x, w, bias, s.M, 2e-6 * std::sqrt(double(s.K)) + 1e-6, 1.0 / 65534);
          CHECK(y4 == y2);  // each row: the bits the matrix-vector product gives it
          for (int threads : {2, 3}) {
            std::vector<float> yt(want.size(), NAN);
            gemm_int(w, x.data(), s.M, bias.data(), yt.data(), threads);
            CHECK(yt == y4);
          }
        }
      }
    }
  }
}

TEST_CASE("matmul: F16 subnormals moved to fixes keep the product exact (matmul, matmul_many, read_column)") {
  // Weights of real size (std 0.5 here) with some subnormal halves: the product over the prepared
  // matrix (subnormals stored as zero + fixes) must match plain loops over the values as stored,
  // as the unprepared matrix does. Flushing them to zero alone missed by x * 6.1e-5 per weight.
  std::mt19937 rng(25);
  for (WeightLayout layout : {WeightLayout::InOut, WeightLayout::OutIn, WeightLayout::Panels}) {
    for (int64_t M : {1, 2, 9}) {
      CAPTURE(layout_name(layout));
      CAPTURE(M);
      const int64_t K = 67, N = 45;
      Stored st = make_weights(WeightType::F16, layout, K, N, rng);  // every 11th value subnormal-sized
      const WeightMatrix exact = st.w;  // unprepared: the kernels multiply the subnormal floats
      std::vector<uint16_t> prepared_half = st.half;
      WeightMatrix prepared = exact;
      prepared.data = prepared_half.data();
      std::vector<WeightFix> fixes;
      const size_t count = prepare_f16_weights(prepared, "w", fixes);
      REQUIRE(count > 20);
      prepared.fixes = fixes.data();
      prepared.fix_count = fixes.size();
      std::vector<float> x = qkv::testing::normal(M * K, rng), bias = qkv::testing::normal(N, rng);
      const size_t size = size_t(M * N);
      std::vector<float> want(size), y(size, NAN), y_many(size, NAN), z(size, NAN);
      matmul_reference(exact, x.data(), M, bias.data(), want.data());
      matmul(prepared, x.data(), M, bias.data(), y.data(), 2);
      check_close(y, want, x, exact, bias, M, 2e-6 * std::sqrt(double(K)) + 1e-6, 0.0);
      matmul_many({{&prepared, bias.data(), y_many.data()}}, x.data(), M, 1);
      CHECK(y_many == y);
      // without the fixes the same product is off by more than float32's rounding
      WeightMatrix flushed = prepared;
      flushed.fixes = nullptr;
      flushed.fix_count = 0;
      matmul(flushed, x.data(), M, bias.data(), z.data(), 1);
      double off = 0.0;
      for (size_t i = 0; i < z.size(); ++i) off = std::max(off, std::fabs(double(z[i]) - double(want[i])));
      CHECK(off > 1e-5);
      // weight_at and read_column give the stored values, fixes included
      std::vector<float> column(static_cast<size_t>(K));
      for (int64_t n = 0; n < N; ++n) {
        read_column(prepared, n, column.data());
        for (int64_t k = 0; k < K; ++k) {
          CHECK(column[size_t(k)] == weight_at(exact, k, n));
          CHECK(weight_at(prepared, k, n) == weight_at(exact, k, n));
        }
      }
    }
  }
}

TEST_CASE("matmul: the threaded kernels with the work floor off give the same bits (large enough to split)") {
  std::mt19937 rng(7);
  for (WeightType type : {WeightType::F32, WeightType::F16, WeightType::Q8, WeightType::Q4}) {
    for (WeightLayout layout : layouts_of(type)) {  // OutIn: columns far apart; Panels: in pairs
      CAPTURE(weight_type_name(type));
      CAPTURE(layout_name(layout));
      const int64_t M = 9, K = 520, N = 1100;  // M * K * N > 2^18 per thread: the pool really runs
      Stored st = make_weights(type, layout, K, N, rng);
      std::vector<float> x = qkv::testing::normal(M * K, rng);
      std::vector<float> y1(size_t(M * N)), y4(size_t(M * N)), v1(static_cast<size_t>(N)), v4(static_cast<size_t>(N));
      matmul(st.w, x.data(), M, nullptr, y1.data(), 1);
      matmul(st.w, x.data(), M, nullptr, y4.data(), 4);
      CHECK(y1 == y4);
      matmul(st.w, x.data(), 1, nullptr, v1.data(), 1);
      matmul(st.w, x.data(), 1, nullptr, v4.data(), 4);
      CHECK(v1 == v4);
    }
  }
}

TEST_CASE(
    "gemm_q8 / gemm_q4: x in int16 per row and block, int32 sums; the bound is the quantization's; rows independent") {
  // The integer product adds, per output, sum_k d_w q_w (x_k + e_k) with |e_k| <= d_x / 2 =
  // max|x_block| / 65534: within rel * sum |x w| + sum_k |w| max|x| / 65534 of the plain loop
  // over the stored values (weight_at). Shapes cross the micro-tile (4 rows x 2 groups of 4
  // columns), Q4's sets of 16 columns, the 32-block (K = 33, 95, 200: a padded last block) and a
  // large K; M = 2, 3, 32, 128 among them. x quantized to int8 instead (error max|x| / 254)
  // would miss this bound ~250-fold; a Q4 panel unpacked with the wrong nibble, sign or offset
  // misses it by far more.
  std::mt19937 rng(808);
  struct Shape {
    int64_t M, K, N;
  };
  const Shape shapes[] = {{2, 32, 8},    {3, 33, 5}, {5, 64, 12},    {7, 95, 17}, {32, 768, 36},
                          {9, 3072, 20}, {4, 1, 4},  {128, 200, 44}, {3, 70, 21}, {2, 96, 50}};
  for (WeightType type : {WeightType::Q8, WeightType::Q4}) {
    const auto gemm_int = type == WeightType::Q8 ? detail::gemm_q8 : detail::gemm_q4;
    for (WeightLayout layout : {WeightLayout::InOut, WeightLayout::OutIn}) {
      for (const Shape& s : shapes) {
        CAPTURE(weight_type_name(type));
        CAPTURE(layout_name(layout));
        CAPTURE(s.M);
        CAPTURE(s.K);
        CAPTURE(s.N);
        Stored st = make_weights(type, layout, s.K, s.N, rng);
        std::vector<float> x = qkv::testing::normal(s.M * s.K, rng), bias = qkv::testing::normal(s.N, rng);
        for (size_t i = 0; i < x.size(); i += 17) x[i] *= 40.0f;  // outliers: each block's scale follows its own
        std::vector<float> want(size_t(s.M * s.N)), y(want.size(), NAN);
        matmul_reference(st.w, x.data(), s.M, bias.data(), want.data());
        gemm_int(st.w, x.data(), s.M, bias.data(), y.data(), 1);
        check_close(y, want, x, st.w, bias, s.M, 2e-6 * std::sqrt(double(s.K)) + 1e-6, 1.0 / 65534);
        // each row alone (M = 1 through the same kernel) gives that row's bits: no tile edge leaks
        bool same = true;
        for (int64_t m = 0; m < s.M; ++m) {
          std::vector<float> row(static_cast<size_t>(s.N), NAN);
          gemm_int(st.w, x.data() + m * s.K, 1, bias.data(), row.data(), 1);
          same = same && std::memcmp(row.data(), y.data() + m * s.N, size_t(s.N) * 4) == 0;
        }
        CHECK(same);
        // matmul() takes this kernel for M > 1
        std::vector<float> ym(want.size(), NAN);
        matmul(st.w, x.data(), s.M, bias.data(), ym.data(), 1);
        if (s.M > 1) CHECK(ym == y);
        // no bias
        std::vector<float> y0(want.size(), NAN), want0(want.size());
        matmul_reference(st.w, x.data(), s.M, nullptr, want0.data());
        gemm_int(st.w, x.data(), s.M, nullptr, y0.data(), 2);
        check_close(y0, want0, x, st.w, std::vector<float>(size_t(s.N), 0.0f), s.M,
                    2e-6 * std::sqrt(double(s.K)) + 1e-6, 1.0 / 65534);
      }
    }
    // |x| beyond 2^31: the folded scales (d_x * 2^112) overflow, the plain loop takes over, same bound
    Stored st = make_weights(type, WeightLayout::InOut, 70, 9, rng);
    std::vector<float> x = qkv::testing::normal(3 * 70, rng);
    for (float& v : x) v *= 1e10f;
    std::vector<float> want(27), y(27, NAN);
    matmul_reference(st.w, x.data(), 3, nullptr, want.data());
    gemm_int(st.w, x.data(), 3, nullptr, y.data(), 1);
    check_close(y, want, x, st.w, std::vector<float>(9, 0.0f), 3, 2e-6 * std::sqrt(70.0) + 1e-6, 1.0 / 65534);
  }
}

TEST_CASE("gemv OutIn: parts whose streams would start 4 KiB apart are shortened; every column keeps its bits") {
  // gemv_outin cuts the columns into 8 (F32) or 16 (16-bit) parts read side by side, gemv_q8
  // its groups of 4 columns into 8; parts a multiple of 4 KiB long share L1 sets, so their
  // length is cut (part_stride) and the columns left over go round again. Shapes: parts of
  // exactly 4 KiB (F32 8 x 16 rows of 256 bytes, F16 16 x 32 rows of 128 bytes), 27 x 4 KiB
  // (SmolLM2's 576 x 1536: F16 16 x 96 rows of 1152 bytes, Q8 8 x 48 groups of 2304), rows of
  // 4 KiB (no stride helps), and leftovers of every kind. The plain loop within rounding; the
  // same bits on 2 and 3 threads (other ranges, other parts); for float weights each column
  // equal, bit for bit, to the same column computed alone (one row of storage, N = 1).
  std::mt19937 rng(4096);
  struct Shape {
    int64_t K, N;
  };
  for (WeightType type : {WeightType::F32, WeightType::F16, WeightType::BF16, WeightType::Q8, WeightType::Q4}) {
    const bool quantized = type == WeightType::Q8 || type == WeightType::Q4;
    const int64_t elem = type == WeightType::F32 ? 4 : 2;
    const Shape shapes[] = {{64, 128}, {64, 512}, {64, 515}, {576, 1536}, {4096 / elem, 48}, {33, 1024}};
    for (const Shape& s : shapes) {
      CAPTURE(weight_type_name(type));
      CAPTURE(s.K);
      CAPTURE(s.N);
      Stored st = make_weights(type, WeightLayout::OutIn, s.K, s.N, rng);
      std::vector<float> x = qkv::testing::normal(s.K, rng), bias = qkv::testing::normal(s.N, rng);
      std::vector<float> want(static_cast<size_t>(s.N)), y(static_cast<size_t>(s.N), NAN);
      matmul_reference(st.w, x.data(), 1, bias.data(), want.data());
      detail::gemv(st.w, x.data(), bias.data(), y.data(), 1);
      check_close(y, want, x, st.w, bias, 1, 2e-6 * std::sqrt(double(s.K)) + 1e-6, quantized ? 1.0 / 65534 : 0.0);
      for (int threads : {2, 3}) {
        std::vector<float> yt(static_cast<size_t>(s.N), NAN);
        detail::gemv(st.w, x.data(), bias.data(), yt.data(), threads);
        CHECK(yt == y);
      }
      if (quantized) continue;  // groups of 4 (16) columns: no column alone
      bool same = true;
      for (int64_t n = 0; n < s.N; ++n) {
        WeightMatrix one = st.w;  // row n of storage: column n alone
        one.N = 1;
        one.data = static_cast<const uint8_t*>(st.w.data) + n * s.K * elem;
        float yn = NAN;
        detail::gemv(one, x.data(), bias.data() + n, &yn, 1);
        same = same && std::memcmp(&yn, &y[size_t(n)], 4) == 0;
      }
      CHECK(same);
    }
  }
}

TEST_CASE("to_panels: [K, N] and [N, K] -> panels of 16 in place, F32 and 16-bit; weight_at, read_column") {
  std::vector<float> scratch;  // one buffer per element size for every matrix, as the loader does
  std::vector<uint16_t> half_scratch;
  std::mt19937 rng(16);
  for (WeightType type : {WeightType::F32, WeightType::F16, WeightType::BF16}) {
    for (const auto& [K, N] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {3, 15}, {2, 16}, {5, 17}, {33, 40}, {7, 1}, {64, 95}, {9, 257}}) {
      for (WeightLayout from : {WeightLayout::InOut, WeightLayout::OutIn}) {
        CAPTURE(weight_type_name(type));
        CAPTURE(K);
        CAPTURE(N);
        CAPTURE(layout_name(from));
        const Stored original = make_weights(type, from, K, N, rng);
        Stored moved = original;
        void* data = nullptr;
        if (type == WeightType::F32) {
          to_panels(moved.f32.data(), K, N, from, scratch);
          data = moved.f32.data();
        } else {
          to_panels(moved.half.data(), K, N, from, half_scratch);
          data = moved.half.data();
        }
        const WeightMatrix before{type, from, K, N, original.w.data, nullptr};
        const WeightMatrix after{type, WeightLayout::Panels, K, N, data, nullptr};
        bool same = true;
        for (int64_t k = 0; k < K; ++k)
          for (int64_t n = 0; n < N; ++n) same = same && weight_at(after, k, n) == weight_at(before, k, n);
        CHECK(same);
        // the layout itself: column n of a whole panel at (n / 16) 16 K + k 16 + n % 16, the last
        // panel's at its start + k (N % 16) + n % 16
        const int64_t n = N - 1, first = n / 16 * 16, width = std::min<int64_t>(16, N - first);
        const size_t at = size_t(first * K + (K - 1) * width + n - first);
        const float stored = type == WeightType::F32   ? moved.f32[at]
                             : type == WeightType::F16 ? halves::f16_to_f32(moved.half[at])
                                                       : halves::bf16_to_f32(moved.half[at]);
        CHECK(stored == weight_at(before, K - 1, n));
        std::vector<float> column(static_cast<size_t>(K)), want(static_cast<size_t>(K));
        read_column(after, n, column.data());
        read_column(before, n, want.data());
        CHECK(column == want);
      }
    }
  }
  std::vector<int8_t> q(128, 0);
  std::vector<uint16_t> scales(4, 0);
  const WeightMatrix q8{WeightType::Q8, WeightLayout::Panels, 4, 4, q.data(), scales.data()};
  std::vector<float> x(4, 1.0f), y(4);
  CHECK_THROWS_WITH_AS(matmul(q8, x.data(), 1, nullptr, y.data()),
                       "matmul: W Q8 [4, 4] in Panels: that layout is for F32, F16 and BF16", std::invalid_argument);
}

TEST_CASE("matmul_many: the bits of separate matmul calls, any thread count, mixed types; bad lists are errors") {
  std::mt19937 rng(11);
  const int64_t K = 520;
  // sum N * K > 3 * 2^18: three threads really run, and their ranges end inside matrices
  const int64_t widths[] = {1100, 404, 13};
  const WeightType mixes[][3] = {{WeightType::F32, WeightType::F32, WeightType::F32},
                                 {WeightType::Q8, WeightType::Q8, WeightType::Q8},
                                 {WeightType::F16, WeightType::BF16, WeightType::F16},
                                 {WeightType::Q8, WeightType::F32, WeightType::F16},
                                 {WeightType::Q4, WeightType::Q8, WeightType::Q4}};
  for (WeightLayout layout : {WeightLayout::InOut, WeightLayout::OutIn, WeightLayout::Panels}) {  // Panels: floats'
    for (const auto& types : mixes) {
      for (int64_t M : {1, 3}) {
        CAPTURE(layout_name(layout));
        CAPTURE(weight_type_name(types[0]));
        CAPTURE(weight_type_name(types[1]));
        CAPTURE(weight_type_name(types[2]));
        CAPTURE(M);
        std::vector<Stored> st;
        for (int i = 0; i < 3; ++i) {
          const bool as_asked = layout != WeightLayout::Panels || panels_ok(types[i]);
          st.push_back(make_weights(types[i], as_asked ? layout : WeightLayout::InOut, K, widths[i], rng));
        }
        const std::vector<float> x = qkv::testing::normal(M * K, rng), bias = qkv::testing::normal(widths[0], rng);
        const float* biases[3] = {bias.data(), nullptr, bias.data()};  // the third reads the first 13
        std::vector<std::vector<float>> want(3);
        for (int i = 0; i < 3; ++i) {
          want[size_t(i)].assign(size_t(M * widths[i]), NAN);
          matmul(st[size_t(i)].w, x.data(), M, biases[i], want[size_t(i)].data(), 1);
        }
        for (int threads : {1, 2, 3, 4}) {
          CAPTURE(threads);
          std::vector<std::vector<float>> y(3);
          for (int i = 0; i < 3; ++i) y[size_t(i)].assign(size_t(M * widths[i]), NAN);
          matmul_many({{&st[0].w, biases[0], y[0].data()},
                       {&st[1].w, biases[1], y[1].data()},
                       {&st[2].w, biases[2], y[2].data()}},
                      x.data(), M, threads);
          for (int i = 0; i < 3; ++i) CHECK(y[size_t(i)] == want[size_t(i)]);
        }
      }
    }
  }
  // one output, and none
  std::vector<Stored> st;
  st.push_back(make_weights(WeightType::Q8, WeightLayout::OutIn, 40, 9, rng));
  st.push_back(make_weights(WeightType::F32, WeightLayout::OutIn, 41, 9, rng));
  std::vector<float> x = qkv::testing::normal(41, rng), y(9, NAN), want(9);
  matmul(st[0].w, x.data(), 1, nullptr, want.data(), 2);
  matmul_many({{&st[0].w, nullptr, y.data()}}, x.data(), 1, 2);
  CHECK(y == want);
  matmul_many(nullptr, 0, x.data(), 1, 2);
  CHECK_THROWS_WITH_AS(matmul_many({{&st[0].w, nullptr, y.data()}, {&st[1].w, nullptr, y.data()}}, x.data(), 1),
                       "matmul_many: output 1 has W [41, 9], output 0 W [40, 9]: one x [1, K] needs the same K",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(matmul_many({{&st[0].w, nullptr, y.data()}, {nullptr, nullptr, y.data()}}, x.data(), 1),
                       "matmul_many: output 1 has no weight matrix", std::invalid_argument);
  CHECK_THROWS_WITH_AS(matmul_many({{&st[1].w, nullptr, nullptr}}, x.data(), 1),
                       "matmul_many: null buffer (W F32 [41, 9], M = 1)", std::invalid_argument);
}

TEST_CASE("quantize_q8: layout, error bound, zeros and read_column") {
  std::mt19937 rng(3);
  for (WeightLayout layout : {WeightLayout::InOut, WeightLayout::OutIn}) {
    const int64_t K = 45, N = 6;  // K: one full block and a padded one; N: one full group and a padded one
    std::vector<float> v = qkv::testing::normal(K * N, rng);
    for (int64_t k = 0; k < K; ++k)
      v[size_t(layout == WeightLayout::InOut ? k * N + 5 : 5 * K + k)] = 0.0f;  // column 5: zeros
    WeightMatrix src{WeightType::F32, layout, K, N, v.data(), nullptr};
    const Q8Layout q = Q8Layout::of(K, N);
    CHECK(q.groups == 2);
    CHECK(q.blocks == 2);
    std::vector<int8_t> data(q.data_bytes(), 99);
    std::vector<uint16_t> scales(q.scale_count(), uint16_t(0x5633));  // 99 as a half
    quantize_q8(src, data.data(), scales.data());
    WeightMatrix w{WeightType::Q8, layout, K, N, data.data(), scales.data()};
    CHECK(w.bytes() == q.data_bytes() + 2 * q.scale_count());
    for (int64_t n = 0; n < N; ++n) {
      std::vector<float> col(static_cast<size_t>(K));
      read_column(w, n, col.data());
      for (int64_t b = 0; b < 2; ++b) {
        float amax = 0.0f;
        for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k)
          amax = std::max(amax, std::fabs(weight_at(src, k, n)));
        // the scale: amax / 127 rounded to a half (relative error <= 2^-11)
        CHECK(halves::f16_to_f32(scales[size_t((n / 4 * 2 + b) * 4 + n % 4)]) ==
              doctest::Approx(amax / 127.0f).epsilon(4.9e-4));
        for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k) {
          CHECK(col[size_t(k)] == weight_at(w, k, n));
          CHECK(std::fabs(col[size_t(k)] - weight_at(src, k, n)) <= amax / 254.0f * (1.0f + 1.0f / 2048));
        }
      }
      if (n == 5) CHECK(std::all_of(col.begin(), col.end(), [](float c) { return c == 0.0f; }));
    }
    // padding: columns 6, 7 and rows 45..63 are zeros
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t p = 0; p < 16; ++p)
        for (int64_t c = 0; c < 4; ++c)
          for (int64_t par = 0; par < 2; ++par) {
            const int64_t k = b * 32 + p * 2 + par, n = 4 + c;
            if (k >= K || n >= N) CHECK(data[size_t(((1 * 2 + b) * 16 + p) * 8 + c * 2 + par)] == 0);
          }
  }
}

TEST_CASE("quantize_q8: scales are normal halves; tiny blocks keep a 2^-15 error, huge ones are an error") {
  const int64_t K = 32, N = 4;
  std::vector<float> v(size_t(K * N));
  for (int64_t i = 0; i < K * N; ++i) v[size_t(i)] = float((i * 37) % 19 - 9);  // -9 .. 9
  for (int64_t k = 0; k < K; ++k) {
    v[size_t(k * N + 1)] *= 1e-7f;  // column 1: |w| <= 9e-7, amax / 127 a subnormal half
    v[size_t(k * N + 2)] = 0.0f;    // column 2: zeros
  }
  WeightMatrix src{WeightType::F32, WeightLayout::InOut, K, N, v.data(), nullptr};
  const Q8Layout q = Q8Layout::of(K, N);
  std::vector<int8_t> data(q.data_bytes());
  std::vector<uint16_t> scales(q.scale_count());
  quantize_q8(src, data.data(), scales.data());
  CHECK(scales[1] == 0x0400);  // 2^-14, the smallest normal half
  CHECK(scales[2] == 0);
  WeightMatrix w{WeightType::Q8, WeightLayout::InOut, K, N, data.data(), scales.data()};
  for (int64_t k = 0; k < K; ++k) {
    CHECK(std::fabs(weight_at(w, k, 1) - weight_at(src, k, 1)) <= 0x1p-15f);
    CHECK(weight_at(w, k, 2) == 0.0f);
  }
  // the kernels widen the scales as weight_at does: products through the GEMV (M = 1) and the
  // GEMM (M = 5, packing) against sum_k x[k] * weight_at, for x of ones and for x with a value
  // beyond ~2^31 in a block (the kernels' x scale times 2^112 would overflow there, so they take
  // the plain scales)
  const auto check_products = [&](float big, double epsilon) {
    for (int64_t M : {1, 5}) {
      std::vector<float> xm(size_t(M * K), 1.0f), ym(size_t(M * N));
      xm[size_t((M - 1) * K + 7)] = big;
      matmul(w, xm.data(), M, nullptr, ym.data(), 1);
      for (int64_t n = 0; n < N; ++n) {
        float ref = 0.0f;
        for (int64_t k = 0; k < K; ++k) ref += xm[size_t((M - 1) * K + k)] * weight_at(w, k, n);
        CHECK(std::isfinite(ym[size_t((M - 1) * N + n)]));
        CHECK(ym[size_t((M - 1) * N + n)] == doctest::Approx(ref).epsilon(epsilon));
      }
    }
  };
  check_products(1.0f, 1e-4);
  check_products(3e10f, 1e-3);
  v[5 * N + 3] = 1e7f;  // a scale beyond the half range
  CHECK_THROWS_WITH_AS(quantize_q8(src, data.data(), scales.data()),
                       "quantize_q8: a block's largest weight 10000000.000000 is beyond what an 8-bit block with a "
                       "half scale holds (|w| <= 8.3e6)",
                       std::invalid_argument);
}

TEST_CASE(
    "matmul: F16 weights readied for the kernels (inf/NaN refused, subnormals moved to fixes); bad shapes are errors") {
  std::vector<uint16_t> h = {0x3C00, 0x7C00, 0x0001};
  std::vector<WeightFix> fixes;
  const auto view = [&](int64_t K, int64_t N, WeightLayout layout) {
    return WeightMatrix{WeightType::F16, layout, K, N, h.data(), nullptr};
  };
  CHECK_THROWS_WITH_AS(prepare_f16_weights(view(1, 3, WeightLayout::InOut), "GPT2: tensor \"x\"", fixes),
                       "GPT2: tensor \"x\": F16 weights hold inf at element 1 (of 3)", std::invalid_argument);
  h[1] = 0xFE00;
  CHECK_THROWS_WITH_AS(prepare_f16_weights(view(1, 3, WeightLayout::InOut), "w", fixes),
                       "w: F16 weights hold NaN at element 1 (of 3)", std::invalid_argument);
  // [2, 3] InOut: 65504, subnormals +-, smallest normal, -0, 0
  h = {0x7BFF, 0x0001, 0x83FF, 0x0400, 0x8000, 0x0000};
  fixes.clear();
  CHECK(prepare_f16_weights(view(2, 3, WeightLayout::InOut), "w", fixes) == 2);
  CHECK(h == std::vector<uint16_t>{0x7BFF, 0x0000, 0x8000, 0x0400, 0x8000, 0x0000});
  REQUIRE(fixes.size() == 2);  // sorted by (n, k): W[0, 1] = 2^-24, W[0, 2] = -1023 * 2^-24
  CHECK((fixes[0].n == 1 && fixes[0].k == 0 && fixes[0].value == 0x1p-24f));
  CHECK((fixes[1].n == 2 && fixes[1].k == 0 && fixes[1].value == -1023 * 0x1p-24f));
  // the same storage read as OutIn [N = 2, K = 3]: element i = n K + k
  h = {0x7BFF, 0x0001, 0x83FF, 0x0400, 0x8000, 0x0000};
  fixes.clear();
  CHECK(prepare_f16_weights(view(3, 2, WeightLayout::OutIn), "w", fixes) == 2);
  CHECK((fixes[0].n == 0 && fixes[0].k == 1 && fixes[1].n == 0 && fixes[1].k == 2));

  float x = 1.0f, y = 0.0f;
  WeightMatrix w{WeightType::F32, WeightLayout::InOut, 0, 1, &x, nullptr};
  CHECK_THROWS_WITH_AS(matmul(w, &x, 1, nullptr, &y), "matmul: shapes x [1, 0] and W [0, 1] must be positive",
                       std::invalid_argument);
  WeightMatrix q{WeightType::Q8, WeightLayout::InOut, 1, 1, &x, nullptr};
  CHECK_THROWS_WITH_AS(matmul(q, &x, 1, nullptr, &y), "matmul: null buffer (W Q8 [1, 1], M = 1)",
                       std::invalid_argument);
}
