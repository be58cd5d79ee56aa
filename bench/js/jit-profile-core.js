// bench/js/jit-profile.mjs's workload, the same in Node and in the page: `calls` public SDPA
// calls (non-causal, B=1, H=8, D=64, one thread), the first ones tiering the kernel up to
// TurboFan. Returns the wall ms of each call.
export function runCalls(qkv, { L, calls }) {
  const H = 8, D = 64;
  const fill = (seed) => Float32Array.from({ length: H * L * D }, (_, i) => Math.sin(i * 0.37 + seed));
  const [q, k, v] = [fill(0), fill(1), fill(2)].map((a) => new qkv.Tensor(a, [1, H, L, D]));
  const ms = [];
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    qkv.scaledDotProductAttentionSync(q, k, v);
    ms.push(+(performance.now() - t0).toFixed(2));
  }
  return ms;
}
