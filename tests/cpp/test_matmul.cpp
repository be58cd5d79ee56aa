// The matmul kernels (src/matmul/) against plain loops: every weight type and layout, the
// matrix-vector and the matrix-matrix kernel, odd sizes (M, K, N not multiples of the vector
// width, the 32-block, the micro-tile or the packed block), 1 to 3 threads (bit-identical).
// The stored forms themselves (panels, Q8 quantization, F16's preparation): test_matmul_storage.cpp.
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
#include "test_matmul_util.hpp"
#include "testing.hpp"

using namespace qkv;
using namespace qkv::matmul_testing;

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

TEST_CASE("matmul_many: the bits of separate matmul calls, any thread count, mixed types; bad lists are errors") {
  std::mt19937 rng(11);
  const int64_t K = 520;
  // sum N * K > 3 * 2^18: three threads really run, and their ranges end inside matrices
  const int64_t widths[] = {1100, 404, 13};
  const WeightType mixes[][3] = {
      {WeightType::F32, WeightType::F32, WeightType::F32},  {WeightType::Q8, WeightType::Q8, WeightType::Q8},
      {WeightType::F16, WeightType::BF16, WeightType::F16}, {WeightType::Q8, WeightType::F32, WeightType::F16},
      {WeightType::Q4, WeightType::Q8, WeightType::Q4},     {WeightType::Q4, WeightType::Q4, WeightType::Q4}};
  const auto integer = [](WeightType t) { return t == WeightType::Q8 || t == WeightType::Q4; };
  for (WeightLayout layout : {WeightLayout::InOut, WeightLayout::OutIn, WeightLayout::Panels}) {  // Panels: floats'
    for (const auto& types : mixes) {
      // M = 200: x's rounding for the integer products splits over 3 threads (M * K > 3 * 2^15)
      for (int64_t M : {1, 3, 200}) {
        if (M == 200 && !(integer(types[0]) && integer(types[1]) && integer(types[2]))) continue;
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
