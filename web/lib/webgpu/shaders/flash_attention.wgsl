// Flash-attention forward: scaled dot-product attention tiled over keys with an online softmax.
//
// One workgroup computes BQ = 32 query rows of one (batch, head) against the keys in tiles of
// BK = 32, for up to 256 output columns (dispatch z carries batch * column chunks, so any Dv
// works). The head dimension D is streamed through workgroup memory in chunks of DC = 32, so
// any D works as well. Workgroup memory: 3424 f32 = 13.4 KiB (< the 16 KiB default limit);
// 256 invocations (= the default limit); no optional feature.
//
// Thread t owns query row r = t / 8 of the tile and, inside it, lane c = t % 8: the scores of
// keys c + 8k (k < 4) of each key tile and the output columns c + 8n (n < 32) of its chunk.
//
// Mask presence and the number of 64-column chunks are uniforms, not override constants: one
// pipeline per kernel (compiling one costs seconds on software adapters such as SwiftShader).
//
// Semantics (src/attention.hpp): s = scale * q.k + floatMask; key j visible to query i iff the
// bool mask allows it, causal: j <= i + diag, window w > 0: j > i + diag - w, where
// diag = Lk - Lq (+ the first query row of this piece when the runner splits a call).
// p = exp(s - max) (1 where s == max, so +inf scores share the weight); a row with no visible
// key gives 0. Infinities are never computed in the shader (WGSL may assume there are none):
// a -inf float-mask entry hides the key, +inf becomes the sentinel POS_INF, finite scores are
// clamped to +-1e37, the running max starts at NEG_INIT; differences stay finite.
//
// Keep the visibility and score code in sync with attention_weights.wgsl.

struct Params {
  H: u32, Hkv: u32, Lq: u32, Lk: u32,
  D: u32, Dv: u32, group: u32, causal: u32,
  diag: i32, window: i32, scale: f32, write_stats: u32,
  bm_b: u32, bm_h: u32, bm_q: u32, bm_k: u32,  // bool mask strides in elements (0 = broadcast)
  fm_b: u32, fm_h: u32, fm_q: u32, fm_k: u32,  // float mask strides in elements (0 = broadcast)
  dv_chunks: u32, has_bool: u32, has_float: u32, nch: u32,  // nch: 64-column chunks used (<= 4)
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> q_buf: array<f32>;
@group(0) @binding(2) var<storage, read> k_buf: array<f32>;
@group(0) @binding(3) var<storage, read> v_buf: array<f32>;
@group(0) @binding(4) var<storage, read> bool_mask: array<u32>;   // bytes, 4 per word
@group(0) @binding(5) var<storage, read> float_mask: array<u32>;  // f32 bits (to see infinities)
@group(0) @binding(6) var<storage, read_write> out_buf: array<f32>;
@group(0) @binding(7) var<storage, read_write> stats: array<f32>;  // per row: max, sum

const BQ: u32 = 32u;
const BK: u32 = 32u;
const DC: u32 = 32u;
const LDS: u32 = 33u;  // padded row stride of the Q, K and P tiles
const NEG_INIT: f32 = -1e38;

var<workgroup> tile_qk: array<f32, 2112>;  // Q tile [32][33] + K tile [32][33]; V tile [32][64]
var<workgroup> tile_p: array<f32, 1056>;   // P [32][33]
var<workgroup> red: array<f32, 256>;

// masked_score(), Score, POS_INF and CLAMP come from masked_score.wgsl, which the runner prepends.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let q0 = wid.x * BQ;
  let h = wid.y;
  let b = wid.z / P.dv_chunks;
  let col0 = (wid.z % P.dv_chunks) * 256u;  // first output column of this chunk
  let g = h / P.group;
  let r = lid / 8u;
  let c = lid % 8u;
  let i = q0 + r;
  let q_base = (b * P.H + h) * P.Lq;    // row index of (b, h, 0)
  let kv_base = (b * P.Hkv + g) * P.Lk;  // row index of (b, g, 0)

  // Key range any row of this tile may see (causal and window tiles are skipped).
  let last_row = i32(min(q0 + BQ, P.Lq)) - 1;
  var k_end = i32(P.Lk);
  if (P.causal != 0u) { k_end = min(k_end, last_row + P.diag + 1); }
  var k_begin = 0;
  if (P.window > 0) { k_begin = max(0, i32(q0) + P.diag - P.window + 1); }
  k_begin = (k_begin / i32(BK)) * i32(BK);

  var o: array<f32, 32>;
  for (var n = 0u; n < 32u; n++) { o[n] = 0.0; }
  var m = NEG_INIT;
  var l = 0.0;

  for (var kt = k_begin; kt < k_end; kt += i32(BK)) {
    let k0 = u32(kt);
    // S = Q K^T for the tile, D streamed in chunks of DC.
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    for (var d0 = 0u; d0 < P.D; d0 += DC) {
      workgroupBarrier();
      for (var t = 0u; t < 4u; t++) {
        let idx = lid + 256u * t;
        let rr = idx / DC;
        let dd = idx % DC;
        let qk = q_k_elements(q_base, kv_base, q0 + rr, k0 + rr, d0 + dd);
        tile_qk[rr * LDS + dd] = qk.x;
        tile_qk[1056u + rr * LDS + dd] = qk.y;
      }
      workgroupBarrier();
      let dn = min(DC, P.D - d0);
      for (var dd = 0u; dd < dn; dd++) {
        let qv = tile_qk[r * LDS + dd];
        for (var k = 0u; k < 4u; k++) {
          acc[k] = fma(qv, tile_qk[1056u + (c + 8u * k) * LDS + dd], acc[k]);
        }
      }
    }

    // Online softmax: mask, row max over the 8 lanes of the row, rescale.
    var s4: array<f32, 4>;
    var vis4: array<bool, 4>;
    var tmax = NEG_INIT;
    for (var k = 0u; k < 4u; k++) {
      let j = k0 + c + 8u * k;
      var sc = Score(0.0, false);
      if (i < P.Lq && j < P.Lk) { sc = masked_score(acc[k], b, h, i, j); }
      s4[k] = sc.s;
      vis4[k] = sc.visible;
      if (sc.visible) { tmax = max(tmax, sc.s); }
    }
    red[lid] = tmax;
    workgroupBarrier();
    var row_max = NEG_INIT;
    for (var u = 0u; u < 8u; u++) { row_max = max(row_max, red[r * 8u + u]); }
    let m_new = max(m, row_max);
    let alpha = exp(m - m_new);
    l = l * alpha;
    for (var k = 0u; k < 4u; k++) {
      var p = 0.0;
      if (vis4[k]) {
        if (s4[k] == m_new) { p = 1.0; } else { p = exp(s4[k] - m_new); }
      }
      l += p;
      tile_p[r * LDS + c + 8u * k] = p;
    }
    m = m_new;

    // O = alpha * O + P V, V streamed through workgroup memory 64 columns at a time.
    for (var ch = 0u; ch < 4u; ch++) {
      if (ch < P.nch) {
        workgroupBarrier();
        for (var t = 0u; t < 8u; t++) {
          let idx = lid + 256u * t;
          let jj = idx / 64u;
          let e = col0 + ch * 64u + idx % 64u;
          var vv = 0.0;
          if (k0 + jj < P.Lk && e < P.Dv) { vv = v_buf[(kv_base + k0 + jj) * P.Dv + e]; }
          tile_qk[idx] = vv;
        }
        workgroupBarrier();
        for (var n = 0u; n < 8u; n++) { o[ch * 8u + n] *= alpha; }
        for (var jj = 0u; jj < BK; jj++) {
          let p = tile_p[r * LDS + jj];  // one load of p per 8 fma
          let row = jj * 64u + c;
          for (var n = 0u; n < 8u; n++) {
            o[ch * 8u + n] = fma(p, tile_qk[row + 8u * n], o[ch * 8u + n]);
          }
        }
      }
    }
  }

  // Row sum over the 8 lanes; normalise and store.
  workgroupBarrier();
  red[lid] = l;
  workgroupBarrier();
  var row_sum = 0.0;
  for (var u = 0u; u < 8u; u++) { row_sum += red[r * 8u + u]; }
  if (i < P.Lq) {
    var inv = 0.0;
    if (row_sum > 0.0) { inv = 1.0 / row_sum; }
    for (var ch = 0u; ch < 4u; ch++) {
      if (ch < P.nch) {
        for (var n = 0u; n < 8u; n++) {
          let e = col0 + ch * 64u + c + 8u * n;
          if (e < P.Dv) { out_buf[(q_base + i) * P.Dv + e] = o[ch * 8u + n] * inv; }
        }
      }
    }
    if (P.write_stats != 0u && c == 0u && col0 == 0u) {
      stats[(q_base + i) * 2u] = m;
      stats[(q_base + i) * 2u + 1u] = row_sum;
    }
  }
}
