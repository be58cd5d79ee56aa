// The calls bench/js/attn-shape.mjs times: several builds of qkv's `simd` variant (flash.cpp's
// micro-kernel block shapes) loaded side by side, their SDPA calls (non-causal, B=1, H=8, D=64,
// one thread) alternating per round, and the limit (peak.js) in the same run.
import { peakKernels } from './peak.js';

export const H = 8, D = 64;
const flops = (L) => 4 * H * D * L * L;

async function time(call, cpuMs, minCalls = 3) {
  let t0 = performance.now();
  call();
  const n = Math.max(minCalls, Math.min(200, Math.round(300 / Math.max(0.01, performance.now() - t0))));
  for (let i = 0; i < n; i++) call();
  const ts = [];
  const c0 = await cpuMs();
  for (let i = 0; i < n; i++) {
    t0 = performance.now();
    call();
    ts.push(performance.now() - t0);
  }
  const cpu = ((await cpuMs()) - c0) / n;
  ts.sort((a, b) => a - b);
  return { ms: ts[n >> 1], cpuMs: cpu };
}

export async function runShapes(builds, { sizes, rounds, cpuMs, log = () => {} }) {
  const rows = [], peaks = [];
  const loops = await peakKernels();
  const peak = async (round) => {
    for (const [loop, { run, flopsPerStep }] of Object.entries(loops)) {
      for (let t0 = performance.now(); performance.now() - t0 < 100; ) run(1 << 12);
      const t0 = performance.now();
      run(1 << 16);
      const steps = Math.round(((1 << 16) * 20) / Math.max(0.01, performance.now() - t0));
      const t = await time(() => run(steps), cpuMs);
      peaks.push({ loop, round, gflops: (steps * flopsPerStep) / t.cpuMs / 1e6, wallGflops: (steps * flopsPerStep) / t.ms / 1e6 });
    }
  };
  for (let round = 0; round < rounds; round++) {
    await peak(round);
    for (const L of sizes) {
      const x = (f) => Float32Array.from({ length: H * L * D }, (_, i) => Math.sin(i * f));
      const [q, k, v] = [x(0.37), x(0.11), x(0.05)];
      const order = round % 2 ? [...builds].reverse() : builds;
      let ref = null;
      for (const { tag, qkv } of order) {
        const T = (a) => new qkv.Tensor(a, [1, H, L, D]);
        const [tq, tk, tv] = [T(q), T(k), T(v)];
        let out;
        const t = await time(() => { out = qkv.scaledDotProductAttentionSync(tq, tk, tv); }, cpuMs);
        // every shape must give the same bits
        const data = out.data ?? (await out.toArray?.());
        // (a tag starting 'diag' is a diagnostic build, not expected to match)
        if (round === 0 && data && !tag.startsWith('diag')) {
          if (!ref) ref = Float32Array.from(data);
          else if (!ref.every((y, i) => Object.is(y, data[i]))) throw new Error(`${tag}: L=${L} output differs from ${order[0].tag}`);
        }
        rows.push({ tag, L, round, gflops: flops(L) / t.cpuMs / 1e6, wallGflops: flops(L) / t.ms / 1e6 });
        log(`${tag} L=${L} round ${round}: ${(flops(L) / t.cpuMs / 1e6).toFixed(2)} GFLOP/s (cpu)`);
      }
    }
  }
  await peak(rounds);
  return { rows, peaks };
}

export function summarize({ rows, peaks }, tags, sizes) {
  const limit = Math.max(...peaks.map((p) => p.gflops));
  const lines = [`limit ${limit.toFixed(2)} GFLOP/s (best peak loop, cpu clock); per row the best of the rounds`,
    `shape      ${sizes.map((L) => `L=${L} GFLOP/s  of limit`.padStart(24)).join('')}   vs base`];
  const best = (tag, L) => Math.max(...rows.filter((r) => r.tag === tag && r.L === L).map((r) => r.gflops));
  const table = [];
  for (const tag of tags) {
    const cells = sizes.map((L) => ({ L, gflops: best(tag, L), ofLimit: best(tag, L) / limit, vsBase: best(tag, L) / best(tags[0], L) }));
    table.push({ tag, cells });
    lines.push(`${tag.padEnd(10)} ${cells.map((c) => `${c.gflops.toFixed(2).padStart(14)} ${(100 * c.ofLimit).toFixed(1).padStart(8)}%`).join('')}   ${cells.map((c) => c.vsBase.toFixed(3)).join(' ')}`);
  }
  return { limit, table, text: lines.join('\n') };
}
