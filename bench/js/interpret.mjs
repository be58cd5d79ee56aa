// The measures of web/lib/interpret/ in Node, one thread: attention rollout (12 layers x 12
// heads, L = 128 / 256 / 512, causal and bidirectional maps, through the wasm module's matrix
// product and in TypeScript) and attention flow (12 x 12, L = 16 / 32 / 64). Inputs: random
// softmax maps (the timings do not depend on the values, only on which are zero). Each figure
// is the median of --reps calls after two untimed calls, on the process's CPU time (the machine
// is shared: CPU time is what the code costs) with wall time beside it.
//
//   node bench/js/interpret.mjs [--reps 5] [--quick]
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

const out = {
  benchmark: 'interpret',
  date: new Date().toISOString(),
  machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, load_average: os.loadavg().map((x) => +x.toFixed(2)), node: process.version },
  wasm_variant: qkv.env.loadedVariant,
  threads: 1,
  method: `12 layers x 12 heads of random softmax maps; median of ${REPS} calls after two untimed calls; process CPU time (wall beside it)`,
  results: rows,
};
mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
writeFileSync(path.join(ROOT, 'bench', 'results', 'interpret-node.json'), JSON.stringify(out, null, 2) + '\n');
console.log('measure  L    maps           backend  CPU ms   wall ms');
for (const r of rows) {
  console.log(`${r.measure.padEnd(8)} ${String(r.L).padEnd(4)} ${(r.causal ? 'causal' : 'bidirectional').padEnd(14)} ${r.backend.padEnd(8)} ${String(r.cpu_ms).padStart(7)}  ${String(r.wall_ms).padStart(8)}`);
}
console.log(`load average ${out.machine.load_average.join(' ')}; wrote bench/results/interpret-node.json`);
