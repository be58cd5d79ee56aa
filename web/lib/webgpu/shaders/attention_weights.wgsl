// Attention weights (returnWeights): weights[b,h,i,j] = p_ij / l_i, where the row max m_i and
// the row sum l_i were written by flash_attention.wgsl (write_stats = 1) and the scores are
// recomputed here in the same order (D in chunks of 32, one fma per element).
//
// One workgroup writes a 16 x 16 block (16 query rows x 16 keys) of one (batch, head); thread
// (ty, tx) = (t / 16, t % 16) writes element (q0 + ty, k0 + tx). Q and K blocks are staged in
// workgroup memory (2 x 16 x 33 f32 = 4.1 KiB). Causal/window blocks with nothing visible just
// write zeros. Keep the visibility and score code in sync with flash_attention.wgsl.

struct Params {
  H: u32, Hkv: u32, Lq: u32, Lk: u32,
  D: u32, Dv: u32, group: u32, causal: u32,
  diag: i32, window: i32, scale: f32, write_stats: u32,
  bm_b: u32, bm_h: u32, bm_q: u32, bm_k: u32,
  fm_b: u32, fm_h: u32, fm_q: u32, fm_k: u32,
  dv_chunks: u32, has_bool: u32, has_float: u32, nch: u32,  // nch: 64-column chunks used (<= 4)
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> q_buf: array<f32>;
@group(0) @binding(2) var<storage, read> k_buf: array<f32>;
@group(0) @binding(3) var<storage, read> stats: array<f32>;
@group(0) @binding(4) var<storage, read> bool_mask: array<u32>;
@group(0) @binding(5) var<storage, read> float_mask: array<u32>;
@group(0) @binding(6) var<storage, read_write> weights: array<f32>;

const T: u32 = 16u;
const DC: u32 = 32u;
const LDS: u32 = 33u;

var<workgroup> tile_q: array<f32, 528>;  // [16][33]
var<workgroup> tile_k: array<f32, 528>;  // [16][33]

// masked_score(), Score, POS_INF and CLAMP come from masked_score.wgsl, which the runner prepends.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let k0 = wid.x * T;
  let q0 = wid.y * T;
  let bh = wid.z;  // b * H + h
  let b = bh / P.H;
  let h = bh % P.H;
  let g = h / P.group;
  let ty = lid / T;
  let tx = lid % T;
  let i = q0 + ty;
  let j = k0 + tx;
  let q_base = bh * P.Lq;
  let kv_base = (b * P.Hkv + g) * P.Lk;

  // Skip the dot products when causal/window hide the whole block (uniform per workgroup).
  let last_row = i32(min(q0 + T, P.Lq)) - 1;
  var hidden = false;
  if (P.causal != 0u && i32(k0) > last_row + P.diag) { hidden = true; }
  if (P.window > 0 && i32(min(k0 + T, P.Lk)) - 1 <= i32(q0) + P.diag - P.window) { hidden = true; }

  var acc = 0.0;
  if (!hidden) {
    for (var d0 = 0u; d0 < P.D; d0 += DC) {
      workgroupBarrier();
      for (var t = 0u; t < 2u; t++) {
        let idx = lid + 256u * t;
        let rr = idx / DC;
        let dd = idx % DC;
        let qk = q_k_elements(q_base, kv_base, q0 + rr, k0 + rr, d0 + dd);
        tile_q[rr * LDS + dd] = qk.x;
        tile_k[rr * LDS + dd] = qk.y;
      }
      workgroupBarrier();
      let dn = min(DC, P.D - d0);
      for (var dd = 0u; dd < dn; dd++) {
        acc = fma(tile_q[ty * LDS + dd], tile_k[tx * LDS + dd], acc);
      }
    }
  }

  if (i < P.Lq && j < P.Lk) {
    var w = 0.0;
    let m = stats[(q_base + i) * 2u];
    let l = stats[(q_base + i) * 2u + 1u];
    if (!hidden && l > 0.0) {
      let sc = masked_score(acc, b, h, i, j);
      if (sc.visible) {
        if (sc.s == m) { w = 1.0 / l; } else { w = exp(sc.s - m) / l; }
      }
    }
    weights[(q_base + i) * P.Lk + j] = w;
  }
}
