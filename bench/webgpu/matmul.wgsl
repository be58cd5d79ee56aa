// Benchmark only: the adapter's f32 matmul throughput, the yardstick for the attention
// kernel ("attention reaches >= 30 % of what a plain matmul gets on the same adapter").
// C[M, N] = A[M, K] * B[K, N], row-major, M, N multiples of 64, K a multiple of 16.
// A 64 x 64 tile of C per workgroup of 256 threads, 4 x 4 outputs per thread (register
// blocking), A/B tiles of 16 x 64 in workgroup memory (8 KiB): a decent, portable kernel
// within the default limits, not a vendor BLAS.

struct Dims { M: u32, N: u32, K: u32, pad: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> A: array<f32>;
@group(0) @binding(2) var<storage, read> B: array<f32>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;

var<workgroup> As: array<f32, 1024>;  // [16][64], A tile transposed: As[k][m]
var<workgroup> Bs: array<f32, 1024>;  // [16][64]: Bs[k][n]

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let m0 = wid.y * 64u;
  let n0 = wid.x * 64u;
  let tm = (lid / 16u) * 4u;
  let tn = (lid % 16u) * 4u;
  var acc: array<vec4<f32>, 4>;
  for (var i = 0u; i < 4u; i++) { acc[i] = vec4<f32>(0.0); }
  for (var k0 = 0u; k0 < dims.K; k0 += 16u) {
    for (var t = 0u; t < 4u; t++) {
      let idx = lid + 256u * t;          // 0..1023
      let am = idx / 16u;                // row of A in the tile
      let ak = idx % 16u;
      As[ak * 64u + am] = A[(m0 + am) * dims.K + k0 + ak];
      let bk = idx / 64u;
      let bn = idx % 64u;
      Bs[bk * 64u + bn] = B[(k0 + bk) * dims.N + n0 + bn];
    }
    workgroupBarrier();
    for (var k = 0u; k < 16u; k++) {
      let a = vec4<f32>(As[k * 64u + tm], As[k * 64u + tm + 1u], As[k * 64u + tm + 2u], As[k * 64u + tm + 3u]);
      let b = vec4<f32>(Bs[k * 64u + tn], Bs[k * 64u + tn + 1u], Bs[k * 64u + tn + 2u], Bs[k * 64u + tn + 3u]);
      acc[0] = fma(vec4<f32>(a.x), b, acc[0]);
      acc[1] = fma(vec4<f32>(a.y), b, acc[1]);
      acc[2] = fma(vec4<f32>(a.z), b, acc[2]);
      acc[3] = fma(vec4<f32>(a.w), b, acc[3]);
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let row = (m0 + tm + i) * dims.N + n0 + tn;
    C[row] = acc[i].x;
    C[row + 1u] = acc[i].y;
    C[row + 2u] = acc[i].z;
    C[row + 3u] = acc[i].w;
  }
}
