// The calls bench/js/cpu-time.mjs times, in Node and in a page alike: the limit's loops
// (bench/js/peak.js) and qkv on 1 thread (simd) and 2 threads (simd-threads), B=1 H=8 D=64,
// causal and not: each through the public API (scaledDotProductAttentionSync: inputs copied
// into the wasm heap, one call into wasm, the output copied out) and as the bare call into
// wasm on inputs copied in once (`kernel` rows: what the API adds is the difference); `out` rows
// are the public call writing into one output array reused across calls (options.out).
// mark() snapshots the threads of the process running them (Node: read directly; page: the
// server reads the renderer's) before and after a batch of calls (~200 ms, so the marks' own
// work is small beside it); per measurement the batch with the median wall time is kept, with
// its snapshots and its number of calls.
import { D, H, inputs, usefulFlops } from './core.js';
import { peakKernels } from './peak.js';
// the module the package loaded (the same module instance as dist/index.js's, in Node and in the page)
import { callThreads, getModule } from '../../dist/wasm/loader.js';

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
      const tensor = (a) => new qkv.Tensor(a, [1, H, L, D]);
      const { q: qa, k: ka, v: va } = inputs(L);
      const q = tensor(qa), k = tensor(ka), v = tensor(va);
      for (const causal of [false, true]) {
        const call = () => qkv.scaledDotProductAttentionSync(q, k, v, { isCausal: causal });
        for (const t0 = performance.now(); performance.now() - t0 < 500; ) call(); // every thread tiers up
        const flops = usefulFlops(L, causal); // the FLOPs the call needs
        rows.push({ impl: `qkv-${variant}`, L, causal, threadCount, flops, ...(await measure(call, reps, mark)) });
        // the same call writing into one output array reused across calls (options.out)
        const out = new Float32Array(n);
        const callOut = () => qkv.scaledDotProductAttentionSync(q, k, v, { isCausal: causal, out });
        for (const t0 = performance.now(); performance.now() - t0 < 200; ) callOut();
        rows.push({ impl: `qkv-${variant} out`, L, causal, threadCount, flops, ...(await measure(callOut, reps, mark)) });
        const kernel = bareCall(q.data, k.data, v.data, L, causal);
        for (const t0 = performance.now(); performance.now() - t0 < 200; ) kernel.call();
        rows.push({ impl: `qkv-${variant} kernel`, L, causal, threadCount, flops, ...(await measure(kernel.call, reps, mark)) });
        kernel.free();
      }
    }
  }
  qkv.dispose();
  return rows;
}

/**
 * The call into wasm that scaledDotProductAttentionSync makes, alone: q, k, v copied into the
 * heap once, an output buffer allocated once; call() runs the kernel, free() releases them.
 */
function bareCall(q, k, v, L, causal) {
  const m = getModule();
  const bytes = q.byteLength;
  const [pq, pk, pv, po] = [0, 1, 2, 3].map(() => m._malloc(bytes) >>> 0);
  const heap = new Float32Array(m.qkvMemory().buffer);
  heap.set(q, pq >>> 2);
  heap.set(k, pk >>> 2);
  heap.set(v, pv >>> 2);
  const args = {
    B: 1, H, Hkv: H, Lq: L, Lk: L, D, Dv: D, query: pq, key: pk, value: pv, output: po, weights: 0,
    scale: 1 / Math.sqrt(D), causal, window: 0, boolMask: 0, boolMaskDims: [1, 1, 1, 1],
    floatMask: 0, floatMaskDims: [1, 1, 1, 1], threads: callThreads(), reference: false,
  };
  return {
    call: () => {
      const err = m.attention(args);
      if (err) throw new Error(`cpu-time: the kernel call failed: ${err}`);
    },
    free: () => [pq, pk, pv, po].forEach((ptr) => m._free(ptr)),
  };
}
