// The MiniLM benchmark's table (Node and Chromium runs alike): ms per sentence per runtime,
// ORT / qkv ratios, the lowest cosine to qkv, the 2x target at 64 tokens.

const f = (x, d = 2) => (x === undefined || x === null || Number.isNaN(x) ? '' : x.toFixed(d));

/** clock: 'wall' or 'cpu' (1 thread in Node may be read on CPU time; both are in the JSON). */
export function printTable(out, where) {
  const la = out.machine.load_average;
  const lim = out.machine.wasm_limits_1t;
  console.log(`MiniLM-L6 shape, model.embed vs onnxruntime-web ${out.onnxruntime_web}, ${where}${out.browser ? ` (${out.browser})` : ''}, ` +
    `${out.machine.cpu}, ${out.machine.cores} cores, load ${la.before.map((x) => x.toFixed(1)).join(' ')} -> ${la.after.map((x) => x.toFixed(1)).join(' ')}` +
    (lim ? `; wasm mul+add peak ${lim.mul_add_peak_gflops.toFixed(1)} GFLOP/s, read ${lim.read_bandwidth_gbs.toFixed(1)} GB/s (1 thread)` : ''));
  const hasCpu = out.runs.some((r) => Object.values(r.cells).some((c) => Number.isFinite(c.qkv.cpu_ms)));
  const int8 = out.runs.some((r) => Object.values(r.cells).some((c) => c['qkv-int8']));
  console.log(`| threads | L | B | qkv ms/sent | ORT F32 | ORT q8 | F32/qkv | q8/qkv |${hasCpu ? ' F32/qkv cpu | q8/qkv cpu |' : ''} cos F32 | cos q8 |` +
    (int8 ? ' qkv int8 ms/sent | F32/qkv-int8 | q8/qkv-int8 | cos int8 |' : ''));
  console.log(`|---:|---:|---:|---:|---:|---:|---:|---:|${hasCpu ? '---:|---:|' : ''}---:|---:|${int8 ? '---:|---:|---:|---:|' : ''}`);
  for (const r of out.runs) {
    for (const c of Object.values(r.cells)) {
      const q = c.qkv, a = c['ort-f32'], b = c['ort-q8'];
      console.log(`| ${r.threads} | ${c.L} | ${c.B} | ${f(q.ms, 3)} | ${f(a.ms, 3)} | ${f(b.ms, 3)} | ${f(a.ms / q.ms)}x | ${f(b.ms / q.ms)}x |` +
        (hasCpu ? ` ${f(a.cpu_ms / q.cpu_ms)}x | ${f(b.cpu_ms / q.cpu_ms)}x |` : '') +
        ` ${f(c.cos['ort-f32'], 6)} | ${f(c.cos['ort-q8'], 4)} |` +
        (c['qkv-int8'] ? ` ${f(c['qkv-int8'].ms, 3)} | ${f(a.ms / c['qkv-int8'].ms)}x | ${f(b.ms / c['qkv-int8'].ms)}x | ${f(c.cos['qkv-int8'], 4)} |` : ''));
    }
  }
  for (const r of out.runs) {
    const at64 = Object.values(r.cells).filter((c) => c.L === 64);
    for (const c of at64) {
      const x = c['ort-f32'].ms / c.qkv.ms;
      console.log(`target (${r.threads} thread${r.threads > 1 ? 's' : ''}, 64 tokens, batch ${c.B}): qkv >= 2x ORT F32: ${x.toFixed(2)}x ${x >= 2 ? 'MET' : 'NOT MET'}`);
      if (c['qkv-int8']) {
        console.log(`  (int8, 64 tokens, batch ${c.B}: qkv int8 is ${(c['ort-f32'].ms / c['qkv-int8'].ms).toFixed(2)}x ORT F32 and ` +
          `${(c['ort-q8'].ms / c['qkv-int8'].ms).toFixed(2)}x ORT q8, the peer of its precision)`);
      }
    }
  }
}
