// The calls bench/js/cpu-time.mjs times, in Node and in a page alike: the limit's loops
// (bench/js/peak.js) and qkv on 1 thread (simd) and 2 threads (simd-threads), B=1 H=8 D=64,
// causal and not. mark() snapshots the threads of the process running them (Node: read
// directly; page: the server reads the renderer's) before and after a batch of calls (~200
// ms, so the marks' own work is small beside it); per measurement the batch with the median
// wall time is kept, with its snapshots and its number of calls.
import { peakKernels } from './peak.js';

const H = 8, D = 64;

async function measure(call, reps, mark) {
  let t0 = performance.now();
  call();
  const calls = Math.max(1, Math.round(200 / Math.max(0.01, performance.now() - t0)));
  const runs = [];
  for (let i = 0; i < reps; i++) {
    const before = await mark();
    t0 = performance.now();
    for (let c = 0; c < calls; c++) call();
    const ms = (performance.now() - t0) / calls;
    runs.push({ ms, calls, before, after: await mark() });
  }
  runs.sort((a, b) => a.ms - b.ms);
  return runs[runs.length >> 1];
}

export async function runCpuTimed(qkv, { sizes, reps, mark }) {
  const rows = [];
  for (const [name, { run, flopsPerStep }] of Object.entries(await peakKernels())) {
    for (let t0 = performance.now(); performance.now() - t0 < 200; ) run(1 << 12); // tier up
    const t0 = performance.now();
    run(1 << 16);
    const steps = Math.round((1 << 16) * 20 / Math.max(0.01, performance.now() - t0)); // ~20 ms a call
    rows.push({ impl: `peak ${name}`, flops: steps * flopsPerStep, threadCount: 1, ...(await measure(() => run(steps), reps, mark)) });
  }
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
        const flops = causal ? 4 * H * D * (L * (L + 1)) / 2 : 4 * H * D * L * L; // the FLOPs the call needs
        rows.push({ impl: `qkv-${variant}`, L, causal, threadCount, flops, ...(await measure(call, reps, mark)) });
      }
    }
  }
  qkv.dispose();
  return rows;
}
