// Shared by flash_attention.wgsl and attention_weights.wgsl: the runner prepends this file
// to each (WGSL has no includes). It reads the including shader's uniforms P and its
// q_buf / k_buf / bool_mask / float_mask bindings, so both kernels stage Q and K tiles the same
// way and apply exactly the same visibility rules:
// causal (bottom-right, P.diag = Lk - Lq), window, bool mask (bytes packed in u32), float mask
// (f32 bits, so that -inf hides a key and +inf becomes the POS_INF sentinel); finite scores
// are clamped to +-CLAMP so no infinity enters the arithmetic.

const POS_INF: f32 = 1e38;
const CLAMP: f32 = 1e37;

struct Score { s: f32, visible: bool }

// Scaled, masked score of key j for query i (both inside the call) given the raw dot product.
fn masked_score(dot: f32, b: u32, h: u32, i: u32, j: u32) -> Score {
  var res = Score(0.0, true);
  let ii = i32(i);
  let jj = i32(j);
  if (P.causal != 0u && jj > ii + P.diag) { res.visible = false; }
  if (P.window > 0 && jj <= ii + P.diag - P.window) { res.visible = false; }
  if (P.has_bool != 0u) {
    let e = b * P.bm_b + h * P.bm_h + i * P.bm_q + j * P.bm_k;
    if (((bool_mask[e >> 2u] >> ((e & 3u) * 8u)) & 0xffu) == 0u) { res.visible = false; }
  }
  var s = clamp(P.scale * dot, -CLAMP, CLAMP);
  if (P.has_float != 0u) {
    let bits = float_mask[b * P.fm_b + h * P.fm_h + i * P.fm_q + j * P.fm_k];
    if (bits == 0xff800000u) {
      res.visible = false;
    } else if (bits == 0x7f800000u) {
      s = POS_INF;
    } else {
      s = clamp(s + bitcast<f32>(bits), -CLAMP, CLAMP);
    }
  }
  res.s = s;
  return res;
}

// Element d of query row qi and of key row kj (rows counted within the (b, h) slices that start
// at rows q_base and kv_base), as (q, k); 0 past Lq, Lk or D, the zero padding of the tiles.
fn q_k_elements(q_base: u32, kv_base: u32, qi: u32, kj: u32, d: u32) -> vec2<f32> {
  var qk = vec2<f32>(0.0, 0.0);
  if (d < P.D) {
    if (qi < P.Lq) { qk.x = q_buf[(q_base + qi) * P.D + d]; }
    if (kj < P.Lk) { qk.y = k_buf[(kv_base + kj) * P.D + d]; }
  }
  return qk;
}
