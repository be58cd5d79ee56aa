// Plain-JS scaled dot-product attention with exactly the semantics of src/attention.hpp /
// src/reference.cpp (a line-by-line port), used to check the WebGPU kernels where the WASM
// path is not at hand. Works in Node and in a page.
//
// a: { B, H, Hkv, Lq, Lk, D, Dv, query, key, value, boolMask?: {data, dims}, floatMask?: {data, dims},
//      causal, window, scale, returnWeights } -> { output, weights? }

function maskRows(m) {
  if (!m) return null;
  const [db, dh, dq, dk] = m.dims;
  return {
    data: m.data,
    k: dk === 1 ? 0 : 1,
    q: dq === 1 ? 0 : dk,
    h: dh === 1 ? 0 : dq * dk,
    b: db === 1 ? 0 : dh * dq * dk,
  };
}

export function referenceAttention(a) {
  const { B, H, Hkv, Lq, Lk, D, Dv, query, key, value } = a;
  const scale = Math.fround(a.scale ?? 1 / Math.sqrt(D));
  const group = H / Hkv;
  const bm = maskRows(a.boolMask), fm = maskRows(a.floatMask);
  const output = new Float32Array(B * H * Lq * Dv);
  const weights = a.returnWeights ? new Float32Array(B * H * Lq * Lk) : undefined;
  const score = new Float64Array(Lk);
  const seen = new Uint8Array(Lk);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / group);
      const kBase = (b * Hkv + g) * Lk * D, vBase = (b * Hkv + g) * Lk * Dv;
      for (let i = 0; i < Lq; i++) {
        const qBase = ((b * H + h) * Lq + i) * D;
        const oBase = ((b * H + h) * Lq + i) * Dv;
        const diag = i + (Lk - Lq);
        let begin = 0, end = Lk;
        if (a.causal) end = Math.min(end, diag + 1);
        if (a.window > 0) begin = Math.max(begin, diag - a.window + 1);
        end = Math.max(end, 0);
        begin = Math.min(begin, end);
        const bRow = bm ? b * bm.b + h * bm.h + i * bm.q : 0;
        const fRow = fm ? b * fm.b + h * fm.h + i * fm.q : 0;
        let m = -Infinity;
        for (let j = 0; j < Lk; j++) {
          seen[j] = j >= begin && j < end && (!bm || bm.data[bRow + j * bm.k] !== 0) ? 1 : 0;
          if (!seen[j]) continue;
          let dot = 0;
          for (let d = 0; d < D; d++) dot += query[qBase + d] * key[kBase + j * D + d];
          score[j] = scale * dot + (fm ? fm.data[fRow + j * fm.k] : 0);
          if (score[j] > m) m = score[j];
        }
        let l = 0;
        for (let j = 0; j < Lk; j++) {
          score[j] = seen[j] && m !== -Infinity ? (score[j] === m ? 1 : Math.exp(score[j] - m)) : 0;
          l += score[j];
        }
        const inv = l > 0 ? 1 / l : 0;
        for (let j = 0; j < Lk; j++) {
          const p = score[j] * inv;
          if (weights) weights[((b * H + h) * Lq + i) * Lk + j] = p;
          if (p === 0) continue;
          for (let e = 0; e < Dv; e++) output[oBase + e] += p * value[vBase + j * Dv + e];
        }
      }
    }
  }
  return { output, weights };
}
