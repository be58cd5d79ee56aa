// The measures of web/lib/interpret/ in Node, one thread: attention rollout (12 layers x 12
// heads, L = 128 / 256 / 512, causal and bidirectional maps, through the wasm module's matrix
// product and in TypeScript) and attention flow (12 x 12, L = 16 / 32 / 64). Inputs: random
// softmax maps (the timings do not depend on the values, only on which are zero). Each figure
// is the median of --reps calls after two untimed calls, on the process's CPU time (the machine
// is shared: CPU time is what the code costs) with wall time beside it.
//
//   node bench/js/interpret.mjs [--reps 5] [--quick]
//
// Then the wasm rollout's parts at L = 512, beside the machine's f32x4 multiply-add limit
// (bench/js/peak.js) measured in the same run: one product of the chain (lower triangular:
// L^3 / 3 FLOPs; dense: 2 L^3), and the copy of 12 layers' maps into the heap chunk by chunk
// (TypedArray.set, as rollout-wasm.ts does), against a plain read of the same maps.
//
// Prints a table; writes bench/results/interpret-node.json. The probes' figures (GPT-2 small)
// come from bench/js/interpret-probes.mjs.
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const quick = args.includes('--quick');
const REPS = Number(args.includes('--reps') ? args[args.indexOf('--reps') + 1] : quick ? 2 : 5);
const qkv = await import(path.join(ROOT, 'dist', 'index.js'));
const { getModule } = await import(path.join(ROOT, 'dist', 'wasm', 'loader.js'));
const { peakGflops } = await import('./peak.js');
await qkv.init({ variant: 'simd', numThreads: 1 });
const { Tensor, attentionRolloutSync, attentionFlowSync } = qkv;

let seed = 1;
const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
function attentions(NL, H, L, causal) {
  return Array.from({ length: NL }, () => {
    const d = new Float32Array(H * L * L);
    for (let r = 0; r < H * L; r++) {
      const i = r % L, n = causal ? i + 1 : L;
      let s = 0;
      for (let j = 0; j < n; j++) s += (d[r * L + j] = Math.exp(4 * rnd()));
      for (let j = 0; j < n; j++) d[r * L + j] /= s;
    }
    return new Tensor(d, [1, H, L, L]);
  });
}
function time(f) {
  f();
  f(); // two untimed calls: the JIT has compiled the loops
  const cpu = [], wall = [];
  for (let k = 0; k < REPS; k++) {
    const c0 = process.cpuUsage(), w0 = performance.now();
    f();
    const c = process.cpuUsage(c0);
    wall.push(performance.now() - w0);
    cpu.push((c.user + c.system) / 1000);
  }
  const med = (a) => a.sort((x, y) => x - y)[a.length >> 1];
  return { cpu_ms: +med(cpu).toFixed(2), wall_ms: +med(wall).toFixed(2) };
}

const NL = 12, H = 12;
const rows = [];
for (const L of quick ? [128, 512] : [128, 256, 512]) {
  for (const causal of [true, false]) {
    const atts = attentions(NL, H, L, causal);
    for (const backend of ['wasm', 'js']) {
      if (backend === 'js' && L > 256 && !causal && quick) continue;
      const t = time(() => attentionRolloutSync(atts, { backend }));
      rows.push({ measure: 'rollout', layers: NL, heads: H, L, causal, backend, ...t });
      process.stderr.write(`  rollout L=${L} ${causal ? 'causal' : 'bidirectional'} ${backend}: ${t.cpu_ms} ms CPU\n`);
    }
  }
}
for (const L of quick ? [16, 64] : [16, 32, 64]) {
  for (const causal of [true, false]) {
    const atts = attentions(NL, H, L, causal);
    const t = time(() => attentionFlowSync(atts));
    rows.push({ measure: 'flow', layers: NL, heads: H, L, causal, backend: 'js', ...t });
    process.stderr.write(`  flow L=${L} ${causal ? 'causal' : 'bidirectional'}: ${t.cpu_ms} ms CPU\n`);
  }
}

// ---- the parts at L = 512, and the limit ----
const parts = {};
{
  const L = 512, LL = L * L;
  const m = getModule();
  const pA = m._malloc(4 * LL), pB = m._malloc(4 * LL), pC = m._malloc(4 * LL);
  const heap = new Float32Array(m.HEAPF32.buffer);
  for (let i = 0; i < L; i++) for (let j = 0; j <= i; j++) heap[(pA >>> 2) + i * L + j] = heap[(pB >>> 2) + i * L + j] = rnd();
  const lower = time(() => m.rolloutProduct(pA, pB, pC, L, true));
  const dense = time(() => m.rolloutProduct(pA, pB, pC, L, false));
  parts.product_lower = { ...lower, gflops: +((L ** 3 / 3) / lower.cpu_ms / 1e6).toFixed(1) };
  parts.product_dense = { ...dense, gflops: +((2 * L ** 3) / dense.cpu_ms / 1e6).toFixed(1) };
  const maps = attentions(NL, H, L, true).map((t) => t.data);
  const chunk = Math.floor((256 * 1024) / (4 * H * L)); // rollout-wasm.ts's CHUNK_BYTES
  const pM = m._malloc(4 * H * chunk * L);
  const copy = time(() => {
    const h = new Float32Array(m.HEAPF32.buffer);
    for (const d of maps) {
      for (let i0 = 0; i0 < L; i0 += chunk) {
        const rows = Math.min(chunk, L - i0);
        for (let hh = 0; hh < H; hh++) h.set(d.subarray(hh * LL + i0 * L, hh * LL + (i0 + rows) * L), (pM >>> 2) + hh * rows * L);
      }
    }
  });
  let sink = 0;
  const read = time(() => {
    for (const d of maps) {
      const v = new Float64Array(d.buffer, d.byteOffset, d.length / 2);
      for (let i = 0; i < v.length; i += 8) sink += v[i]; // one float64 per 64-byte line: every line read
    }
  });
  const bytes = NL * H * LL * 4;
  parts.copy_maps = { ...copy, gb_s: +(bytes / copy.cpu_ms / 1e6).toFixed(1), bytes };
  parts.read_maps = { ...read, gb_s: +(bytes / read.cpu_ms / 1e6).toFixed(1), sink: sink > 0 };
  [pA, pB, pC, pM].forEach((p) => m._free(p));
}
const peak = await peakGflops();
process.stderr.write(`  parts at L=512: product lower ${parts.product_lower.cpu_ms} ms (${parts.product_lower.gflops} GFLOP/s), dense ${parts.product_dense.cpu_ms} ms (${parts.product_dense.gflops}); copy ${parts.copy_maps.cpu_ms} ms (${parts.copy_maps.gb_s} GB/s), read ${parts.read_maps.gb_s} GB/s; f32x4 peak ${peak.gflops.toFixed(1)} GFLOP/s\n`);

const out = {
  benchmark: 'interpret',
  date: new Date().toISOString(),
  machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, load_average: os.loadavg().map((x) => +x.toFixed(2)), node: process.version },
  wasm_variant: qkv.env.loadedVariant,
  threads: 1,
  method: `12 layers x 12 heads of random softmax maps; median of ${REPS} calls after two untimed calls; process CPU time (wall beside it)`,
  peak_gflops: +peak.gflops.toFixed(1),
  peak_loop: peak.loop,
  results: rows,
  parts_L512: parts,
};
mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
writeFileSync(path.join(ROOT, 'bench', 'results', 'interpret-node.json'), JSON.stringify(out, null, 2) + '\n');
console.log('measure  L    maps           backend  CPU ms   wall ms');
for (const r of rows) {
  console.log(`${r.measure.padEnd(8)} ${String(r.L).padEnd(4)} ${(r.causal ? 'causal' : 'bidirectional').padEnd(14)} ${r.backend.padEnd(8)} ${String(r.cpu_ms).padStart(7)}  ${String(r.wall_ms).padStart(8)}`);
}
const p = parts;
console.log(`parts at L = 512 (CPU ms): one causal product ${p.product_lower.cpu_ms} (${p.product_lower.gflops} GFLOP/s), one dense ${p.product_dense.cpu_ms} (${p.product_dense.gflops} GFLOP/s); f32x4 mul+add limit ${out.peak_gflops} GFLOP/s (${out.peak_loop})`);
console.log(`  copy of 12 layers' maps into the heap ${p.copy_maps.cpu_ms} (${p.copy_maps.gb_s} GB/s); a plain read of them ${p.read_maps.cpu_ms} (${p.read_maps.gb_s} GB/s)`);
console.log(`load average ${out.machine.load_average.join(' ')}; wrote bench/results/interpret-node.json`);
