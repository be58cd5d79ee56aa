// The calls bench/js/threads.mjs times, in Node and in a page alike: qkv on 1 thread (simd) and
// 2 threads (simd-threads), B=1 H=8 D=64, causal and not. mark() snapshots the threads of the
// process running the calls (Node: read directly; page: the server reads the renderer's);
// per (L, causal, threads) the rep with the median wall time is kept.
const H = 8, D = 64;

export async function runThreadCalls(qkv, { sizes, reps, mark, delta }) {
  const rows = [];
  for (const [variant, threadCount] of [['simd', 1], ['simd-threads', 2]]) {
    qkv.dispose();
    qkv.env.variant = variant;
    qkv.env.numThreads = threadCount;
    await qkv.init();
    for (const L of sizes) {
      const n = H * L * D;
      const tensor = (f) => new qkv.Tensor(Float32Array.from({ length: n }, (_, i) => f(i)), [1, H, L, D]);
      const q = tensor((i) => Math.sin(i * 0.37)), k = tensor((i) => Math.cos(i * 0.11)), v = tensor((i) => Math.sin(i * 0.05 + 1));
      for (const causal of [false, true]) {
        const call = () => qkv.scaledDotProductAttentionSync(q, k, v, { isCausal: causal });
        for (const t0 = performance.now(); performance.now() - t0 < 500; ) call(); // every thread tiers up
        const runs = [];
        for (let i = 0; i < reps; i++) {
          const before = await mark();
          const t0 = performance.now();
          call();
          const ms = performance.now() - t0;
          runs.push({ ms, before, after: await mark() });
        }
        runs.sort((a, b) => a.ms - b.ms);
        const median = runs[runs.length >> 1];
        const row = { L, causal, threadCount, ms: +median.ms.toFixed(2), fastestMs: +runs[0].ms.toFixed(2) };
        if (delta) row.threads = delta(median.before, median.after, median.ms);
        else Object.assign(row, { before: median.before, after: median.after });
        rows.push(row);
      }
    }
  }
  qkv.dispose();
  return rows;
}
