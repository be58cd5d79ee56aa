// The probe behind bench/matmul/relaxed_dot_q4.mjs (which builds it, rewrites its stand-in
// opcode and runs it in Chromium): three matrix-vector kernels over one set of 16 columns at a
// time, each against a float64 reference on the same 4-bit values (u - 8, u in 0..15), timed in
// cache and from memory, and a read-bandwidth loop. Written with wasm_simd128.h, not the
// library's SSE spelling: a probe of the instruction, not of the library's kernels.
#include <emscripten.h>
#include <wasm_simd128.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>
// c + the dot products of a's and b's 4-byte runs, lane by lane (a signed, b in 0..127): the
// stand-in the runner rewrites into i32x4.relaxed_dot_i8x16_i7x16_add_s. Every call has
// run-time operands, so LLVM (which takes it for a float fma) has nothing to fold.
typedef double f64x2 __attribute__((vector_size(16)));
static inline v128_t rdot(v128_t a, v128_t b, v128_t c) {
  return (v128_t)__builtin_wasm_fma_f64x2((f64x2)a, (f64x2)b, (f64x2)c);
}
// plain: data [sets][blocks][16 k-pairs][16 bytes]: byte lane pair (2 bytes = int16 lane l = column c*2+parity),
// nibble j of int16 lane l = u of column 4j + c at k = 2p + parity. x pairs [blocks][16][8] int16 (pair x4)
__attribute__((noinline)) void plain_set(const uint8_t* w, const float* dw, int blocks, const int16_t* xp,
                                         const float* sx, const int32_t* sum8, float* out) {
  v128_t acc[4] = {wasm_f32x4_splat(0), wasm_f32x4_splat(0), wasm_f32x4_splat(0), wasm_f32x4_splat(0)};
  const v128_t m = wasm_i16x8_splat(0xF), m1 = wasm_i16x8_splat(0xF0);
  for (int b = 0; b < blocks; ++b) {
    v128_t s0 = wasm_i32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
    const uint8_t* wb = w + b * 256;
    const int16_t* xb = xp + b * 128;
#pragma clang loop unroll(full)
    for (int p = 0; p < 16; ++p) {
      const v128_t v = wasm_v128_load(wb + p * 16), x = wasm_v128_load(xb + p * 8);
      s0 = wasm_i32x4_add(s0, wasm_i32x4_dot_i16x8(wasm_v128_and(v, m), x));
      s1 = wasm_i32x4_add(s1, wasm_i32x4_dot_i16x8(wasm_v128_and(v, m1), x));
      s2 = wasm_i32x4_add(s2, wasm_i32x4_dot_i16x8(wasm_u16x8_shr(wasm_i16x8_shl(v, 4), 12), x));
      s3 = wasm_i32x4_add(s3, wasm_i32x4_dot_i16x8(wasm_u16x8_shr(v, 12), x));
    }
    const v128_t corr = wasm_i32x4_splat(sum8[b]);
    const v128_t s[4] = {wasm_i32x4_sub(s0, corr), wasm_i32x4_sub(s1, wasm_i32x4_shl(corr, 4)),
                         wasm_i32x4_sub(s2, corr), wasm_i32x4_sub(s3, corr)};
    const float un[4] = {1, 0.0625f, 1, 1};
    const v128_t dx = wasm_f32x4_splat(sx[b]);
    for (int j = 0; j < 4; ++j)
      acc[j] =
          wasm_f32x4_add(acc[j], wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s[j]), wasm_f32x4_splat(un[j])),
                                                wasm_f32x4_mul(wasm_v128_load(dw + b * 16 + j * 4), dx)));
  }
  for (int j = 0; j < 4; ++j) wasm_v128_store(out + j * 4, acc[j]);
}

// Q8 for comparison: 4 groups of 4 columns, data [groups][blocks][16 k-pairs][8 bytes] (k-pair p of
// column c at bytes 2c, 2c+1), widened in the load, against the same x pairs as plain_set.
__attribute__((noinline)) void q8_set(const int8_t* w, const float* dw, int blocks, const int16_t* xp, const float* sx,
                                      float* out) {
  v128_t acc[4] = {wasm_f32x4_splat(0), wasm_f32x4_splat(0), wasm_f32x4_splat(0), wasm_f32x4_splat(0)};
  for (int b = 0; b < blocks; ++b) {
    const int16_t* xb = xp + b * 128;
    const v128_t dx = wasm_f32x4_splat(sx[b]);
    for (int g = 0; g < 4; ++g) {
      const int8_t* wb = w + (size_t(g) * blocks + b) * 128;
      v128_t s0 = wasm_i32x4_splat(0), s1 = s0;
#pragma clang loop unroll(full)
      for (int p = 0; p < 16; p += 2) {
        s0 = wasm_i32x4_add(s0, wasm_i32x4_dot_i16x8(wasm_i16x8_load8x8(wb + p * 8), wasm_v128_load(xb + p * 8)));
        s1 = wasm_i32x4_add(s1,
                            wasm_i32x4_dot_i16x8(wasm_i16x8_load8x8(wb + p * 8 + 8), wasm_v128_load(xb + p * 8 + 8)));
      }
      acc[g] = wasm_f32x4_add(acc[g], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_add(s0, s1)),
                                                     wasm_f32x4_mul(wasm_v128_load(dw + b * 16 + g * 4), dx)));
    }
  }
  for (int j = 0; j < 4; ++j) wasm_v128_store(out + j * 4, acc[j]);
}
// relaxed: data [sets][blocks][8 quads][2 halves][16 bytes]: byte 4c + i of half h holds, low nibble,
// u of column 4(2h) + c at k = 4q + i; high nibble: column 4(2h+1) + c. x [blocks][32] int8.
__attribute__((noinline)) void relaxed_set(const uint8_t* w, const float* dw, int blocks, const int8_t* x8,
                                           const float* sx8, const int32_t* sum8x, float* out) {
  v128_t acc[4] = {wasm_f32x4_splat(0), wasm_f32x4_splat(0), wasm_f32x4_splat(0), wasm_f32x4_splat(0)};
  const v128_t m = wasm_i8x16_splat(0xF);
  for (int b = 0; b < blocks; ++b) {
    v128_t s0 = wasm_i32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
    const uint8_t* wb = w + b * 256;
    const int8_t* xb = x8 + b * 32;
#pragma clang loop unroll(full)
    for (int q = 0; q < 8; ++q) {
      const v128_t x = wasm_v128_load32_splat(xb + q * 4);
      const v128_t v0 = wasm_v128_load(wb + q * 32), v1 = wasm_v128_load(wb + q * 32 + 16);
      s0 = rdot(x, wasm_v128_and(v0, m), s0);
      s1 = rdot(x, wasm_u8x16_shr(v0, 4), s1);
      s2 = rdot(x, wasm_v128_and(v1, m), s2);
      s3 = rdot(x, wasm_u8x16_shr(v1, 4), s3);
    }
    const v128_t corr = wasm_i32x4_splat(sum8x[b]);
    const v128_t s[4] = {wasm_i32x4_sub(s0, corr), wasm_i32x4_sub(s1, corr), wasm_i32x4_sub(s2, corr),
                         wasm_i32x4_sub(s3, corr)};
    const v128_t dx = wasm_f32x4_splat(sx8[b]);
    for (int j = 0; j < 4; ++j)
      acc[j] = wasm_f32x4_add(acc[j], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s[j]),
                                                     wasm_f32x4_mul(wasm_v128_load(dw + b * 16 + j * 4), dx)));
  }
  for (int j = 0; j < 4; ++j) wasm_v128_store(out + j * 4, acc[j]);
}
static double now() { return emscripten_get_now() / 1000; }
// One line "RESULT {json}" per shape and kernel, then one with the read bandwidth.
extern "C" EMSCRIPTEN_KEEPALIVE int run() {
  struct Shape {
    int K, N, copies, reps;
    const char* name;
  };
  const Shape shapes[] = {{576, 576, 1, 200, "576x576 in cache"},
                          {768, 2304, 48, 1, "768x2304, 48 copies (from memory)"},
                          {576, 576, 1, 200, "576x576 in cache"}};
  for (const Shape& sh : shapes) {
    const int K = sh.K, N = sh.N, blocks = K / 32, sets = N / 16;
    const size_t per = size_t(sets) * blocks * 256;
    std::vector<uint8_t> wp(per * sh.copies), wr(per * sh.copies);
    std::vector<float> dw(size_t(sets) * blocks * 16);
    std::vector<int8_t> u(size_t(K) * N);  // u[k][n] in 0..15
    for (size_t i = 0; i < u.size(); ++i) u[i] = int8_t((i * 2654435761u >> 7) % 16);
    for (size_t i = 0; i < dw.size(); ++i) dw[i] = 0.001f * float(1 + i % 7);
    for (int s = 0; s < sets; ++s)
      for (int b = 0; b < blocks; ++b) {
        uint8_t* P = wp.data() + (size_t(s) * blocks + b) * 256;
        uint8_t* R = wr.data() + (size_t(s) * blocks + b) * 256;
        std::memset(P, 0, 256);
        std::memset(R, 0, 256);
        for (int kk = 0; kk < 32; ++kk)
          for (int col = 0; col < 16; ++col) {
            const int k = b * 32 + kk, n = s * 16 + col, v = u[size_t(k) * N + n];
            {  // plain: k-pair p = kk/2, parity, column 4j + c: int16 lane c*2+parity, nibble j
              const int p = kk / 2, par = kk % 2, j = col / 4, c = col % 4, lane = c * 2 + par;
              uint16_t* L = reinterpret_cast<uint16_t*>(P + p * 16) + lane;
              *L |= uint16_t(v << (4 * j));
            }
            {  // relaxed: quad q, i; group g = col/4, c; half h = g/2, high nibble if g odd
              const int q = kk / 4, i = kk % 4, g = col / 4, c = col % 4, h = g / 2;
              R[q * 32 + h * 16 + 4 * c + i] |= uint8_t(v << (4 * (g % 2)));
            }
          }
      }
    for (int c = 1; c < sh.copies; ++c) {
      std::memcpy(wp.data() + per * c, wp.data(), per);
      std::memcpy(wr.data() + per * c, wr.data(), per);
    }
    std::vector<float> x(K);
    for (int k = 0; k < K; ++k) x[k] = std::sin(0.37f * k) * 3.0f;
    // x as int16 pairs (plain) and as int8 (relaxed), per block of 32
    std::vector<int16_t> xp(size_t(blocks) * 128);
    std::vector<int8_t> x8(K);
    std::vector<float> sx(blocks), sx8(blocks);
    std::vector<int32_t> sum8(blocks), sum8x(blocks);
    for (int b = 0; b < blocks; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[b * 32 + i]));
      const float d = amax / 32767, d8 = amax / 127;
      sx[b] = d;
      sx8[b] = d8;
      int32_t s16 = 0, s8 = 0;
      for (int i = 0; i < 32; ++i) {
        const int16_t q = int16_t(std::nearbyint(x[b * 32 + i] / d));
        const int8_t q8 = int8_t(std::nearbyint(x[b * 32 + i] / d8));
        s16 += q;
        s8 += q8;
        x8[b * 32 + i] = q8;
        for (int c = 0; c < 4; ++c) xp[size_t(b) * 128 + (i / 2) * 8 + c * 2 + i % 2] = q;
      }
      sum8[b] = 8 * s16;
      sum8x[b] = 8 * s8;
    }
    // references, float64: y = sum (u - 8) * dw * x, with x as given and as each kernel quantized it
    std::vector<double> ref(N, 0.0), ref16(N, 0.0), ref8(N, 0.0);
    for (int k = 0; k < K; ++k) {
      const int b = k / 32;
      const double x16 = double(xp[size_t(b) * 128 + ((k % 32) / 2) * 8 + k % 2]) * sx[b], x8d = double(x8[k]) * sx8[b];
      for (int n = 0; n < N; ++n) {
        const int s = n / 16, col = n % 16;
        const double wv = double(u[size_t(k) * N + n] - 8) * dw[(size_t(s) * blocks + b) * 16 + col];
        ref[n] += wv * x[k];
        ref16[n] += wv * x16;
        ref8[n] += wv * x8d;
      }
    }
    // the same matrix as int8 (u - 8), Q8's layout
    std::vector<int8_t> w8(size_t(K) * N * sh.copies);
    for (int s = 0; s < sets; ++s)
      for (int b = 0; b < blocks; ++b)
        for (int kk = 0; kk < 32; ++kk)
          for (int col = 0; col < 16; ++col) {
            const int k = b * 32 + kk, n = s * 16 + col, g = col / 4, c = col % 4, p = kk / 2, par = kk % 2;
            w8[((size_t(s * 4 + g) * blocks + b) * 16 + p) * 8 + c * 2 + par] = int8_t(u[size_t(k) * N + n] - 8);
          }
    for (int c = 1; c < sh.copies; ++c) std::memcpy(w8.data() + size_t(K) * N * c, w8.data(), size_t(K) * N);
    std::vector<float> y[3] = {std::vector<float>(N), std::vector<float>(N), std::vector<float>(N)};
    auto pass = [&](int kind) {
      const double t0 = now();
      for (int r = 0; r < sh.reps; ++r)
        for (int c = 0; c < sh.copies; ++c)
          for (int s = 0; s < sets; ++s) {
            const float* d = dw.data() + size_t(s) * blocks * 16;
            float* out = y[kind].data() + s * 16;
            if (kind == 0)
              q8_set(w8.data() + size_t(K) * N * c + size_t(s) * blocks * 512, d, blocks, xp.data(), sx.data(), out);
            else if (kind == 1)
              plain_set(wp.data() + per * c + size_t(s) * blocks * 256, d, blocks, xp.data(), sx.data(), sum8.data(),
                        out);
            else
              relaxed_set(wr.data() + per * c + size_t(s) * blocks * 256, d, blocks, x8.data(), sx8.data(),
                          sum8x.data(), out);
          }
      return now() - t0;
    };
    double best[3] = {1e9, 1e9, 1e9};
    for (int t = 0; t < 7; ++t)
      for (int kind = 0; kind < 3; ++kind) best[kind] = std::fmin(best[kind], pass(kind));
    // error against the exact x, and against the kernel's own quantized x (what it should give)
    double err[3] = {0, 0, 0}, own[3] = {0, 0, 0}, rmax = 0;
    for (int n = 0; n < N; ++n) {
      rmax = std::fmax(rmax, std::fabs(ref[n]));
      for (int kind = 0; kind < 3; ++kind) {
        err[kind] = std::fmax(err[kind], std::fabs(y[kind][n] - ref[n]));
        own[kind] = std::fmax(own[kind], std::fabs(y[kind][n] - (kind == 2 ? ref8[n] : ref16[n])));
      }
    }
    const double wts = double(K) * N * sh.copies * sh.reps;
    const char* names[3] = {"q8_plain", "q4_plain", "q4_relaxed_dot"};
    const double bytes_per_weight[3] = {1.0 + 2.0 / 32, 0.5 + 2.0 / 32, 0.5 + 2.0 / 32};
    for (int kind = 0; kind < 3; ++kind)
      std::printf(
          "RESULT {\"shape\": \"%s\", \"kernel\": \"%s\", \"gweights_per_s\": %.3f, \"gb_per_s\": %.3f, "
          "\"max_error_over_max_y\": %.3e, \"max_error_vs_own_x_over_max_y\": %.3e}\n",
          sh.name, names[kind], wts / best[kind] / 1e9, wts * bytes_per_weight[kind] / best[kind] / 1e9,
          err[kind] / rmax, own[kind] / rmax);
  }
  {  // read bandwidth: a v128 sum over 256 MiB, best of 5
    std::vector<v128_t> big(size_t(256) << 16);
    for (size_t i = 0; i < big.size(); ++i) big[i] = wasm_i32x4_splat(int(i));
    double bestt = 1e9;
    v128_t sum = wasm_i32x4_splat(0);
    for (int t = 0; t < 5; ++t) {
      const double t0 = now();
      v128_t a = sum, b = sum, c = sum, d = sum;
      for (size_t i = 0; i < big.size(); i += 4) {
        a = wasm_i32x4_add(a, big[i]);
        b = wasm_i32x4_add(b, big[i + 1]);
        c = wasm_i32x4_add(c, big[i + 2]);
        d = wasm_i32x4_add(d, big[i + 3]);
      }
      sum = wasm_i32x4_add(wasm_i32x4_add(a, b), wasm_i32x4_add(c, d));
      bestt = std::fmin(bestt, now() - t0);
    }
    std::printf("RESULT {\"read_bandwidth_gbs\": %.3f, \"checksum\": %d}\n", double(big.size()) * 16 / bestt / 1e9,
                wasm_i32x4_extract_lane(sum, 0));
  }
  return 0;
}
