// The WebGPU benchmark itself, shared by the browser page (bench/webgpu/index.html, driven by
// bench/webgpu/run.mjs) and Node + Dawn (bench/webgpu/node-dawn.mjs): time vs L for WASM SIMD,
// WASM SIMD + threads and WebGPU (wall time including upload and readback; GPU time from
// timestamp-query when the adapter has it), causal and not, H = 8, D = 64; the crossover L;
// and the adapter's own f32 matmul throughput (matmul.wgsl) as the yardstick for the kernel.
//
// runBenchmark({ qkv, gpu, matmulWgsl, Ls, budgetS, log }) -> results (JSON-able)
//   qkv: the package (dist/index.js); gpu: dist/webgpu/index.js
//   budgetS: a (backend, causal) series stops once the next size is estimated to take longer

const H = 8, D = 64;
const now = () => performance.now();

function fill(n, seed) {
  const a = new Float32Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) { x = (Math.imul(x, 1664525) + 1013904223) >>> 0; a[i] = x / 2147483648 - 1; }
  return a;
}

/** Multiply-adds of one call (only visible pairs when causal). */
function macs(L, causal) {
  const pairs = causal ? (L * (L + 1)) / 2 : L * L;
  return H * pairs * (D + D);
}

/** Median of `reps` timings (at least 1, more while the total stays under ~1.5 s). */
async function timeIt(fn, { maxReps = 5, minTotalMs = 1500 } = {}) {
  const ts = [];
  let extra = null;
  let total = 0;
  while (ts.length < maxReps && (ts.length === 0 || total < minTotalMs)) {
    const t0 = now();
    const r = await fn();
    const t = now() - t0;
    ts.push(t);
    total += t;
    if (r && typeof r.gpuTimeMs === 'number') (extra ??= []).push(r.gpuTimeMs);
  }
  const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  return { ms: med(ts), reps: ts.length, gpuMs: extra ? med(extra) : undefined };
}

async function matmulThroughput(device, wgsl, sizes, log) {
  const usage = { STORAGE: 0x80, COPY_DST: 0x8, COPY_SRC: 0x4, UNIFORM: 0x40, MAP_READ: 0x1, QUERY_RESOLVE: 0x200 };
  const module = device.createShaderModule({ code: wgsl });
  const pipeline = await device.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const ts = device.features.has('timestamp-query');
  const out = [];
  for (const N of sizes) {
    const bytes = N * N * 4;
    const mk = (u) => device.createBuffer({ size: bytes, usage: u });
    const a = mk(usage.STORAGE | usage.COPY_DST), b = mk(usage.STORAGE | usage.COPY_DST), c = mk(usage.STORAGE | usage.COPY_SRC);
    device.queue.writeBuffer(a, 0, fill(N * N, 1));
    device.queue.writeBuffer(b, 0, fill(N * N, 2));
    const u = device.createBuffer({ size: 16, usage: usage.UNIFORM | usage.COPY_DST });
    device.queue.writeBuffer(u, 0, new Uint32Array([N, N, N, 0]));
    const bg = device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: [u, a, b, c].map((buffer, binding) => ({ binding, resource: { buffer } })),
    });
    const qs = ts ? device.createQuerySet({ type: 'timestamp', count: 2 }) : null;
    const resolve = ts ? device.createBuffer({ size: 16, usage: usage.QUERY_RESOLVE | usage.COPY_SRC }) : null;
    const read = ts ? device.createBuffer({ size: 16, usage: usage.MAP_READ | usage.COPY_DST }) : null;
    const once = async () => {
      const enc = device.createCommandEncoder();
      const pass = enc.beginComputePass(qs ? { timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } } : {});
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bg);
      pass.dispatchWorkgroups(N / 64, N / 64);
      pass.end();
      if (qs) { enc.resolveQuerySet(qs, 0, 2, resolve, 0); enc.copyBufferToBuffer(resolve, 0, read, 0, 16); }
      device.queue.submit([enc.finish()]);
      await device.queue.onSubmittedWorkDone();
      if (!read) return {};
      await read.mapAsync(1);
      const t = new BigUint64Array(read.getMappedRange());
      const gpuTimeMs = Number(t[1] - t[0]) / 1e6;
      read.unmap();
      return { gpuTimeMs };
    };
    await once();  // warm-up
    const r = await timeIt(once, { maxReps: 5, minTotalMs: 1000 });
    const ms = r.gpuMs > 0 ? r.gpuMs : r.ms;
    const gflops = (2 * N ** 3) / (ms * 1e6);
    out.push({ N, wallMs: r.ms, gpuMs: r.gpuMs, gflops });
    log(`matmul ${N}x${N}x${N}: ${ms.toFixed(2)} ms (${r.gpuMs > 0 ? 'GPU timestamps' : 'wall'}) = ${gflops.toFixed(1)} GFLOP/s`);
    for (const x of [a, b, c, u, resolve, read]) x?.destroy();
    qs?.destroy();
    if (ms > 5000) break;
  }
  return out;
}

export async function runBenchmark({
  qkv, gpu, matmulWgsl, Ls = [128, 256, 512, 1024, 2048, 4096, 8192, 16384], budgetS = 30,
  matmulSizes = [512, 1024, 2048, 4096], log = () => {},
}) {
  const result = {
    what: 'scaledDotProductAttention forward, B=1, H=8, D=Dv=64, float32; time per call in ms',
    date: new Date().toISOString(),
    userAgent: globalThis.navigator?.userAgent ?? `node ${globalThis.process?.version}`,
    crossOriginIsolated: globalThis.crossOriginIsolated ?? null,
    H, D, Ls, budgetS,
    threshold: qkv.WEBGPU_THRESHOLD,
    webgpu: null, matmul: [], rows: [],
  };
  const haveGpu = await gpu.webgpuAvailable();
  if (haveGpu) {
    result.webgpu = await gpu.webgpuInfo();
    log(`WebGPU adapter: ${JSON.stringify(result.webgpu.adapter)}; timestamp-query: ${result.webgpu.timestampQuery}`);
  } else {
    result.webgpuUnavailable = await gpu.webgpuUnavailableReason();
    log(`WebGPU unavailable: ${result.webgpuUnavailable}`);
  }

  // backends: [name, prepare, run(L, causal, inputs)]
  const backends = [];
  const wasmVariant = (variant) => async () => {
    qkv.dispose();
    qkv.env.variant = variant;
    const r = await qkv.init();
    return r.variant === variant ? `${r.variant} (${r.threads} threads)` : null;
  };
  backends.push(['wasm-simd', wasmVariant('simd')]);
  backends.push(['wasm-threads', wasmVariant('simd-threads')]);
  if (haveGpu) backends.push(['webgpu', async () => 'webgpu']);

  const inputs = (L) => {
    const n = H * L * D;
    return { q: fill(n, 11), k: fill(n, 12), v: fill(n, 13) };
  };
  const cells = new Map();  // `${name}|${causal}|${L}` -> timing
  for (const [name, prepare] of backends) {
    let label;
    try { label = await prepare(); } catch (e) { label = null; log(`${name}: ${e.message}`); }
    if (!label) { log(`${name}: not available here, skipped`); continue; }
    log(`--- ${name}: ${label}`);
    for (const causal of [false, true]) {
      let lastMs = 0, lastL = 0;
      for (const L of Ls) {
        const key = `${name}|${causal}|${L}`;
        const est = lastMs * (L / lastL) ** 2;
        if (lastL && est > budgetS * 1000) { cells.set(key, { skipped: `estimated ${(est / 1000).toFixed(0)} s > budget ${budgetS} s` }); continue; }
        const { q, k, v } = inputs(L);
        let run;
        if (name === 'webgpu') {
          const problem = { B: 1, H, Hkv: H, Lq: L, Lk: L, D, Dv: D, query: q, key: k, value: v, causal, window: 0, scale: 1 / Math.sqrt(D), returnWeights: false };
          run = () => gpu.webgpuAttention(problem, { timing: true });
          if (L === Ls[0] && !causal) await run();  // compile the pipelines outside the timings
        } else {
          const T = (x) => new qkv.Tensor(x, [1, H, L, D]);
          const [tq, tk, tv] = [T(q), T(k), T(v)];
          run = () => qkv.scaledDotProductAttention(tq, tk, tv, { isCausal: causal, backend: 'wasm' });
        }
        try {
          const t = await timeIt(run);
          const gflops = (2 * macs(L, causal)) / ((t.gpuMs > 0 ? t.gpuMs : t.ms) * 1e6);
          cells.set(key, { ...t, gflops });
          log(`${name} L=${L} causal=${causal}: ${t.ms.toFixed(2)} ms wall${t.gpuMs !== undefined ? `, ${t.gpuMs.toFixed(2)} ms GPU` : ''} (${t.reps} reps)`);
          lastMs = t.ms; lastL = L;
        } catch (e) {
          cells.set(key, { error: String(e.message ?? e) });
          log(`${name} L=${L} causal=${causal}: ${e.message}`);
          lastMs = Infinity; lastL = L;
        }
      }
    }
  }
  qkv.dispose();
  qkv.env.variant = 'auto';

  for (const causal of [false, true]) {
    for (const L of Ls) {
      const row = { L, causal, work: H * L * L * 2 * D };
      for (const [name] of backends) { const c = cells.get(`${name}|${causal}|${L}`); if (c) row[name] = c; }
      result.rows.push(row);
    }
    // crossover: smallest measured L from which WebGPU's wall time beats both wasm builds at every larger measured L
    const series = result.rows.filter((r) => r.causal === causal);
    let cross = null;
    for (let i = series.length - 1; i >= 0; i--) {
      const r = series[i];
      const g = r.webgpu?.ms, w = Math.min(r['wasm-simd']?.ms ?? Infinity, r['wasm-threads']?.ms ?? Infinity);
      if (g === undefined || w === Infinity) continue;
      if (g < w) cross = r.L; else break;
    }
    result[causal ? 'crossoverCausal' : 'crossover'] = cross;
  }

  if (haveGpu && matmulWgsl) {
    await gpu.webgpuAvailable();  // (re)acquire: qkv.dispose() may have released the device
    const device = gpu.currentWebGPUDevice();
    result.matmul = await matmulThroughput(device, matmulWgsl, matmulSizes, log);
    const best = Math.max(...result.matmul.map((m) => m.gflops));
    const att = Math.max(...result.rows.map((r) => r.webgpu?.gflops ?? 0));
    result.matmulBestGflops = best;
    result.attentionBestGflops = att;
    result.attentionVsMatmul = att / best;
  }
  return result;
}

/** A plain-text table of the results. */
export function formatTable(r) {
  const sw = r.webgpu?.adapter?.architecture === 'swiftshader' || !r.webgpu;
  const lines = [];
  const f = (c) => (!c ? '-' : c.skipped ? 'skip' : c.error ? 'error' : c.ms.toFixed(1));
  lines.push(`qkv attention, B=1 H=${r.H} D=${r.D}, ms per call (median)` +
    (sw ? '   ** SwiftShader (CPU emulation of a GPU): absolute numbers say little **' : ''));
  lines.push(`adapter: ${r.webgpu ? JSON.stringify(r.webgpu.adapter) : `none (${r.webgpuUnavailable})`}`);
  lines.push('');
  lines.push('     L  causal  wasm-simd  wasm-threads  webgpu-wall  webgpu-gpu  webgpu-GFLOP/s  fastest');
  for (const row of r.rows) {
    const opts = ['wasm-simd', 'wasm-threads', 'webgpu'].filter((k) => row[k]?.ms !== undefined);
    const fastest = opts.sort((a, b) => row[a].ms - row[b].ms)[0] ?? '-';
    lines.push(`${String(row.L).padStart(6)}  ${row.causal ? 'yes   ' : 'no    '}  ${f(row['wasm-simd']).padStart(9)}  ${f(row['wasm-threads']).padStart(12)}  ` +
      `${f(row.webgpu).padStart(11)}  ${(row.webgpu?.gpuMs !== undefined ? row.webgpu.gpuMs.toFixed(1) : '-').padStart(10)}  ` +
      `${(row.webgpu?.gflops !== undefined ? row.webgpu.gflops.toFixed(2) : '-').padStart(14)}  ${fastest}`);
  }
  lines.push('');
  lines.push(`crossover L (WebGPU wall time beats WASM from here on): non-causal ${r.crossover ?? 'none measured'}, causal ${r.crossoverCausal ?? 'none measured'}`);
  if (r.matmul?.length) {
    lines.push(`adapter f32 matmul (bench/webgpu/matmul.wgsl): ${r.matmul.map((m) => `${m.N}: ${m.gflops.toFixed(1)}`).join(', ')} GFLOP/s`);
    lines.push(`attention best ${r.attentionBestGflops.toFixed(2)} GFLOP/s = ${(100 * r.attentionVsMatmul).toFixed(0)} % of the best matmul (target >= 30 %)`);
  }
  return lines.join('\n');
}
