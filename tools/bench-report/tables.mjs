// The tables that tools/bench-report.mjs writes. Each is { build() -> { columns, rows, files } }:
// which result files it reads (bench/results/), the header, and one array of formatted cells per
// row. Which run a table shows: the newest file of its benchmark on its machine (the file names
// and the JSON's `date` decide); a series (one command repeated, files -r1, -r2, ...) is shown
// whole. Add a table here and a marker `<!-- bench:report NAME --><!-- /bench:report -->` where
// it goes (README.md or docs/benchmarks.md).
import { bold, f0, f1, f2, median, newest, pct, range, ratio, result, results, series, source, when } from './results.mjs';

const ATTENTION_COLUMNS = ['L', 'causal', 'scalar', 'SIMD 1t', 'of limit', 'SIMD 2t', '2t/1t', 'relaxed 1t', 'ORT 1t', 'ORT 2t', 'SIMD / ORT 1t'];

// bench/js/node.mjs and browser.mjs: GFLOP/s per implementation, L and causal.
function attention(name) {
  const r = result(name);
  const at = (impl, L, causal) => r.json.rows.find((x) => x.impl === impl && x.L === L && x.causal === causal)?.gflops;
  const cell = (x) => (x === undefined ? '' : f1(x));
  const rows = r.json.ratios.filter((q) => q.L >= 512).sort((a, b) => a.causal - b.causal || a.L - b.L).map((q) => {
    const s1 = at('qkv-simd', q.L, q.causal), s2 = at('qkv-simd-threads', q.L, q.causal);
    return [q.L, q.causal ? 'yes' : 'no', cell(at('qkv-scalar', q.L, q.causal)), cell(s1), q.simdOfLimit ? pct(q.simdOfLimit) : '', cell(s2),
      f2(s2 / s1), cell(at('qkv-simd-relaxed', q.L, q.causal)), cell(at('onnxruntime-web', q.L, q.causal)),
      cell(r.json.rows.find((x) => x.impl === 'onnxruntime-web' && x.threads === 2 && x.L === q.L && x.causal === q.causal)?.gflops),
      ratio(q.simdVsOrt1)];
  });
  const columns = r.json.rows.some((x) => x.impl === 'qkv-simd-relaxed') ? ATTENTION_COLUMNS : ATTENTION_COLUMNS.filter((c) => c !== 'relaxed 1t');
  if (columns.length < ATTENTION_COLUMNS.length) rows.forEach((row) => row.splice(7, 1));
  return { columns, rows, files: [r] };
}

// bench/model/gpt2_small.mjs: one run's settings (runtime, weights, threads).
const gpt2Run = (r, runtime, weights, threads) => r.json.runs.find((x) => x.runtime === runtime && x.weights === weights && x.threads === threads);
const gpt2Name = (x) => `${x.runtime === 'qkv' ? 'qkv' : 'ORT'} ${x.weights}, ${x.threads}t`;
const isZen5Full = (r) => r.host.includes('Zen 5') && r.json.runs.length >= 12;

// int8 prefill against ORT q8: per run, the prefill times and their ratios.
const int8Runs = (r) => {
  const q = gpt2Run(r, 'qkv', 'int8', 1), o = gpt2Run(r, 'onnxruntime-web', 'q8', 1);
  return q && o ? { q, o, at: (n) => o.prefill_ms[n] / q.prefill_ms[n] } : null;
};
const int8Series = () => series(/^model-gpt2-small-node-(zen5-)?(int8-vs-q8-)?2026\d{4}T\d\d-(int8-)?r\d+\.json$/)
  .map((s) => s.filter(int8Runs)).filter((s) => s.length >= 4);

// bench/gguf/race.mjs: qkv against llama.cpp's wasm (wllama) on the same GGUF files.
const ggufRace = () => newest(/^gguf-race-chromium/);
const WLLAMA_BUILDS = { 'wllama': 'wllama 3.13', 'wllama-compat': 'wllama-compat 3.13', 'wllama-2.3': 'wllama 2.3.7' };
// the race's rows in the README's headline (1 thread)
const HEADLINE_RACE = ['SmolLM2-135M Q8_0', 'Qwen3-0.6B Q8_0'];
const raceBuild = (r) => r.json.runs.find((x) => x.runtime === 'wllama').build;
/** Each runtime's decode and prefill with 2 threads against 1, both on wall time, from one race file. */
function threadsTable(r) {
  const by = new Map();
  for (const x of raceRows(r)) by.set(`${x.m} ${x.t}`, [...(by.get(`${x.m} ${x.t}`) ?? []), x]);
  // several rounds (race.mjs --rounds): each round's gain, median (min-max); one: the medians' ratio
  const rounds = r.json.rounds ?? 1;
  const gain = (a, b, k, which) => {
    const g = r.json.thread_gains?.find((x) => x.model === a[k].model && x.type === a[k].type && x.runtime === a[k].runtime);
    return rounds > 1 && g ? `${ratio(g[which].median)} (${range([g[which].min, g[which].max], f2)})` : ratio(b[k][`${which}_tps`].wall_median / a[k][`${which}_tps`].wall_median);
  };
  const rows = [...by.values()].filter((g) => g.length === 2).flatMap(([a, b]) => ['q', 'w'].map((k) => [a.m, a.t, k === 'q' ? `qkv (${a[k].build}, ${b[k].build})` : raceBuild(r),
    f1(a[k].decode_tps.wall_median), f1(b[k].decode_tps.wall_median), gain(a, b, k, 'decode'), gain(a, b, k, 'prefill')]));
  const per = rounds > 1 ? `, ${rounds} rounds: median (range)` : '';
  return { columns: ['model shape', 'file', 'runtime', 'decode 1t tok/s (wall)', 'decode 2t tok/s (wall)', `decode 2t / 1t${per}`, `prefill 2t / 1t${per}`], rows, files: [r] };
}
/** Per (model, file, threads): the qkv run and the wllama run. */
const raceRows = (r) => {
  const out = [];
  for (const q of r.json.runs.filter((x) => x.runtime === 'qkv')) {
    const w = r.json.runs.find((x) => x.runtime === 'wllama' && x.model === q.model && x.type === q.type && x.threads === q.threads);
    if (w) out.push({ m: { 'smollm2-135m': 'SmolLM2-135M', 'qwen3-0.6b': 'Qwen3-0.6B' }[q.model] ?? q.model, t: q.type, th: q.threads, q, w });
  }
  return out;
};
/** "median (min-max)" of a race figure. */
const spread = (s, fmt) => `${fmt(s.median)} (${range([s.min, s.max], fmt)})`;
const raceLimits = (r) => `load ${range(r.json.runs.flatMap((x) => x.load_average), f1)} around the runs; wasm read bandwidth ${f1(r.json.limits.read_bandwidth_gbs)} GB/s (1 thread` +
  `${r.json.limits.read_bandwidth_2_threads_gbs.length ? `; ${r.json.limits.read_bandwidth_2_threads_gbs.map(f1).join(', ')} with 2` : ''}), f32x4 mul+add peak ${f1(r.json.limits.mul_add_peak_gflops)} GFLOP/s (1 thread); ${r.json.browser}`;

/** The race table of one result file: per (model, file, threads) qkv, wllama and their ratio. */
function raceTable(r) {
  const rows = raceRows(r).map(({ m, t, th, q, w }) => [m, t, `${th} (${q.decode_tps.clock})`, spread(q.decode_tps, f1), spread(w.decode_tps, f1), ratio(q.decode_tps.median / w.decode_tps.median),
    spread(q.prefill_tps, f0), spread(w.prefill_tps, f0), ratio(q.prefill_tps.median / w.prefill_tps.median), f0(q.decode_bound_tps)]);
  return { columns: ['model shape', 'file', 'threads (clock)', 'qkv decode tok/s', `${raceBuild(r)} decode`, 'qkv / llama.cpp', `qkv prefill ${r.json.prefill} tok/s`,
    `${raceBuild(r)} prefill`, 'qkv / llama.cpp', 'decode bound tok/s'], rows, files: [r] };
}

export const tables = {
  'headline': {
    build() {
      const chromium = result('js-chromium.json'), relaxed = result('relaxed-chromium.json');
      const gpt2 = results(/^model-gpt2-small-node-zen5/).filter(isZen5Full).pop();
      const smol = newest(/^llama-smol-node-zen5/);
      const int8 = int8Series().filter((s) => s[0].host.includes('Zen 5')).pop();
      const race = newest(/^gguf-race-wllama3-chromium/);
      const attn = (L, causal) => ({
        q: chromium.json.rows.find((x) => x.impl === 'qkv-simd' && x.L === L && x.causal === causal).gflops,
        o: chromium.json.rows.find((x) => x.impl === 'onnxruntime-web' && x.threads === 1 && x.L === L && x.causal === causal).gflops,
      });
      const a = attn(2048, false), c = attn(2048, true);
      const rx = relaxed.json.rows.find((x) => x.what === 'sdpa' && x.L === 1024 && !x.causal);
      const g = (rt, w) => gpt2Run(gpt2, rt, w, 1);
      const smolRow = (w) => smol.json.rows.find((x) => x.weights === w);
      const i8 = int8.map(int8Runs);
      const rows = [
        ['attention, wasm SIMD, L=2048, Chromium', `${f1(a.q)} GFLOP/s`, `ORT ${f1(a.o)}`, ratio(a.q / a.o)],
        ['causal attention, L=2048, Chromium', `${f1(c.q)} GFLOP/s`, `ORT ${f1(c.o)}`, ratio(c.q / c.o)],
        ['attention, relaxed SIMD, L=1024, Chromium', `${f1(rx.relaxedGflops)} GFLOP/s`, `ORT ${f1(rx.ortGflops)}`, ratio(rx.relaxedVsOrt)],
        ['GPT-2 small F32 decode, Node', `${f1(g('qkv', 'f32').decode[8])} tok/s`, `ORT ${f1(g('onnxruntime-web', 'f32').decode[8])}`, ratio(g('qkv', 'f32').decode[8] / g('onnxruntime-web', 'f32').decode[8])],
        ['GPT-2 small F32 prefill 128 tokens, Node', `${f0(g('qkv', 'f32').prefill_ms[128])} ms`, `ORT ${f0(g('onnxruntime-web', 'f32').prefill_ms[128])} ms`, ratio(g('onnxruntime-web', 'f32').prefill_ms[128] / g('qkv', 'f32').prefill_ms[128])],
        ['GPT-2 small int8 decode, Node', `${f1(g('qkv', 'int8').decode[8])} tok/s`, `ORT q8 ${f1(g('onnxruntime-web', 'q8').decode[8])}`, ratio(g('qkv', 'int8').decode[8] / g('onnxruntime-web', 'q8').decode[8])],
        [`GPT-2 small int8 prefill 128 tokens, Node (median of ${i8.length} runs)`, `${f0(median(i8.map((x) => x.q.prefill_ms[128])))} ms`,
          `ORT q8 ${f0(median(i8.map((x) => x.o.prefill_ms[128])))} ms`, ratio(median(i8.map((x) => x.at(128))))],
        ['SmolLM2-135M F32 decode, Node', `${f1(smolRow('auto').decodeTokSCpu)} tok/s`, `ORT ${f1(smolRow('onnxruntime-web').decodeTokSCpu)}`, ratio(smolRow('auto').decodeTokSCpu / smolRow('onnxruntime-web').decodeTokSCpu)],
        ...raceRows(race).filter((x) => x.th === 1 && HEADLINE_RACE.includes(`${x.m} ${x.t}`)).map(({ m, t, q, w }) =>
          [`${m} ${t} decode, Chromium`, `${f1(q.decode_tps.median)} tok/s`, `llama.cpp ${f1(w.decode_tps.median)}`, ratio(q.decode_tps.median / w.decode_tps.median)]),
      ];
      const files = [chromium, relaxed, gpt2, smol, ...int8, race];
      return { columns: ['what (1 thread)', 'qkv', 'peer', 'qkv / peer'], rows, files };
    },
    caption: (files) => {
      const at = (fs) => `${[...new Set(fs.map((f) => f.host))].join(', ')}, ${when(fs).replace(/ \d\d:\d\d(-\d\d:\d\d)? UTC/, '')}`;
      return `*Attention rows: ${at(files.slice(0, 2))}; model rows: ${at(files.slice(2))}. Peer: onnxruntime-web 1.30 (ORT); GGUF rows: ` +
        `llama.cpp (${WLLAMA_BUILDS[raceBuild(files.at(-1))]}); same inputs, same run.*`;
    },
  },
  'attention-native': {
    build() {
      const r = result('native-attention.json');
      const at = (k, L, c, t) => r.json.rows.find((x) => x.kernel === k && x.L === L && x.causal === c && x.threads === t)?.gflops;
      const rows = [[512, false], [2048, false], [2048, true], [8192, false], [8192, true]].map(([L, c]) => {
        const ref = at('reference', L, c, 1), fast = at('fast', L, c, 1);
        return [L, c ? 'yes' : 'no', ref ? f1(ref) : '-', f1(fast), f1(at('fast', L, c, 2)), ref ? ratio(fast / ref) : ''];
      });
      return { columns: ['L', 'causal', 'reference 1t', 'fast 1t', 'fast 2t', 'fast / reference'], rows, files: [r] };
    },
  },
  'attention-node': { build: () => attention('js-node.json') },
  'attention-chromium': { build: () => attention('js-chromium.json') },
  'attention-firefox': { build: () => attention('js-firefox.json') },
  'attention-relaxed': {
    build() {
      const files = [result('relaxed-chromium.json'), result('relaxed-node.json')];
      const rows = files.flatMap((r) => r.json.rows.filter((x) => (x.what === 'sdpa' && x.L === 1024) || x.K === 'all').map((x) => [
        r.name.includes('chromium') ? 'Chromium' : 'Node', x.what === 'sdpa' ? `attention L=${x.L}${x.causal ? ' causal' : ''}` : `GPT-2 prefill matmuls M=${x.M}`,
        f1(x.simdGflops), f1(x.relaxedGflops), f1(x.ortGflops), ratio(x.relaxedVsSimd), ratio(x.relaxedVsOrt), pct(x.relaxedOfLimit)]));
      return { columns: ['runtime', 'kernel', 'SIMD', 'relaxed', 'ORT', 'relaxed / SIMD', 'relaxed / ORT', 'relaxed of limit'], rows, files };
    },
  },
  'tiny-gpt': {
    build() {
      const r = result('model-node.json'), one = r.json.runs.find((x) => x.threads === 1), g = one.generate;
      const p = (n) => one.prefill[n];
      return {
        columns: ['1 thread, CPU time', 'qkv', 'ORT', 'qkv / ORT'],
        rows: [
          ['generation with KV cache, tokens/s', f0(g.qkv_tokens_per_cpu_s), `${f0(g.ort_kv_tokens_per_cpu_s)} (past key/values)`, ratio(g.qkv_tokens_per_cpu_s / g.ort_kv_tokens_per_cpu_s)],
          ...[32, 128, 256].map((n) => [`prefill ${n} tokens, ms`, f2(p(n).qkv_cpu_ms), f2(p(n).ort_cpu_ms), ratio(p(n).ort_cpu_ms / p(n).qkv_cpu_ms)]),
        ],
        files: [r],
      };
    },
  },
  'gpt2-node': {
    build() {
      const r = results(/^model-gpt2-small-node-zen5/).filter(isZen5Full).pop();
      const bw = r.json.limits.read_bandwidth_gbs;
      const rows = r.json.runs.map((x) => [gpt2Name(x), f1(x.load_s), `${f0(x.load_rss_mb)} / ${f0(x.end_rss_mb)}`,
        [32, 128, 512].map((n) => f0(x.prefill_ms[n])).join(' / '), `${f1(x.decode[8])} / ${f1(x.decode[512])}`,
        x.decode_fraction_of_bandwidth ? f2(x.decode_fraction_of_bandwidth[8]) : '']);
      return { columns: ['setting', 'load s', 'RSS after load / at end, MB', 'prefill 32 / 128 / 512, ms', 'decode tok/s after 8 / 512', `decode of ${f1(bw)} GB/s`], rows, files: [r] };
    },
  },
  'gpt2-decode': {
    build() {
      const files = results(/^model-gpt2-small-node-zen5-2026\d{4}T\d\d-decode-r\d+\.json$/);
      const rows = files.map((r) => {
        const d = (w, t) => gpt2Run(r, 'qkv', w, t).decode[8];
        return [r.name.replace(/^model-gpt2-small-node-zen5-|\.json$/g, ''), f1(r.json.limits.read_bandwidth_gbs),
          `${f1(d('f32', 1))} / ${f1(d('f32', 2))} (${ratio(d('f32', 2) / d('f32', 1))})`, f2(gpt2Run(r, 'qkv', 'f32', 1).decode_fraction_of_bandwidth[8]),
          `${f1(d('int8', 1))} / ${f1(d('int8', 2))} (${ratio(d('int8', 2) / d('int8', 1))})`, `${f1(d('int4', 1))} / ${f1(d('int4', 2))}`, ratio(d('int4', 1) / d('int8', 1))];
      });
      return { columns: ['run', 'read GB/s', 'F32 1t / 2t tok/s', 'F32 of bandwidth', 'int8 1t / 2t', 'int4 1t / 2t', 'int4 / int8'], rows, files };
    },
  },
  'int8-prefill-runs': {
    build() {
      const files = int8Series().pop();
      const rows = files.map((r) => {
        const { q, o, at } = int8Runs(r), ms = (x) => [32, 128, 512].map((n) => f0(x.prefill_ms[n])).join(' / ');
        return [r.name.match(/r\d+/)[0], ms(q), ms(o), `${f2(at(32))} / ${bold(f2(at(128)))} / ${f2(at(512))}`, `${f1(q.decode[8])} / ${f1(q.decode[512])}`];
      });
      return { columns: ['run', 'qkv int8 32 / 128 / 512 ms', 'ORT q8 32 / 128 / 512 ms', 'q8 ms / int8 ms at 32 / 128 / 512', 'int8 decode tok/s at 8 / 512'], rows, files };
    },
  },
  'int8-prefill-machines': {
    build() {
      const all = int8Series();
      const newestPerHost = [...new Map(all.map((s) => [s[0].host, s])).values()];
      const rows = newestPerHost.map((s) => {
        const runs = s.map(int8Runs), at = (n) => runs.map((x) => x.at(n));
        const cell = (n) => `${ratio(median(at(n)))} (${range(at(n), f2)})`;
        return [s[0].host, when(s), s.length, cell(32), bold(cell(128)), cell(512), `${at(128).filter((x) => x >= 1.1).length} of ${s.length}`];
      });
      return { columns: ['machine', 'runs', 'n', 'at 32: median (range)', 'at 128', 'at 512', '128: runs >= 1.1x'], rows, files: newestPerHost.flat() };
    },
  },
  'gpt2-chromium': {
    build() {
      const r = results(/^model-gpt2-small-chromium-zen5/).filter((x) => x.json.runs.length >= 8).pop();
      const rows = r.json.runs.map((x) => [`${x.weights}, ${x.threads}t`, f1(x.load.wall / 1000), f0(x.peakRssMB),
        [32, 128].map((n) => f0(x.threads === 1 ? x.prefill[n].cpu : x.prefill[n].wall)).join(' / '), f1(x.threads === 1 ? x.decode[8].cpu : x.decode[8].wall)]);
      return { columns: ['weights, threads', 'load s', 'renderer peak RSS MB', 'prefill 32 / 128 ms', 'decode tok/s after 8'], rows, files: [r] };
    },
  },
  'int4-relaxed': {
    build() {
      const files = results(/^model-gpt2-small-chromium-zen5-int4-r\d+\.json$/);
      const rows = files.map((r) => {
        const d = (w) => r.json.runs.find((x) => x.weights === w && x.variant === 'simd-relaxed').decode[8].cpu;
        return [r.name.match(/r\d+/)[0], f1(d('int8')), f1(d('int4')), bold(ratio(d('int4') / d('int8')))];
      });
      return { columns: ['run', 'int8 tok/s', 'int4 tok/s', 'int4 / int8'], rows, files };
    },
  },
  'llama-node': {
    build() {
      const files = [newest(/^llama-smol-node-zen5/), newest(/^llama-qwen3-8l-bf16-node-zen5-panels\.json/), result('qwen3-0.6b-f32-node.json')];
      const label = { 'llama-smol-node-zen5-panels.json': 'SmolLM2-135M', 'llama-qwen3-8l-bf16-node-zen5-panels.json': 'Qwen3-0.6B, 8 layers', 'qwen3-0.6b-f32-node.json': 'Qwen3-0.6B, 28 layers' };
      const rows = files.flatMap((r) => r.json.rows.map((x) => [label[r.name] ?? r.name, x.weights === 'onnxruntime-web' ? 'ORT F32' : `${x.weights} (${x.dtype})`,
        f0(x.peakRssMB), f0(x.prefill128CpuMs), f1(x.decodeTokSCpu), x.decodeFractionOfBandwidth == null ? '' : f2(x.decodeFractionOfBandwidth)]));
      return { columns: ['model shape', 'weights (held as)', 'peak RSS MB', 'prefill 128, CPU ms', 'decode tok/s per CPU s', 'decode of bandwidth'], rows, files };
    },
  },
  'load-peak': {
    build() {
      const gpt2 = results(/^load-peak-node-zen5-stream-r\d+\.json$/);
      const others = [result('load-peak-node-zen5-qwen3-bf16-stream.json'), result('load-peak-node-zen5-bert-base.json')];
      const label = (r) => (r.name.includes('qwen3') ? 'Qwen3-0.6B (BF16 file)' : r.name.includes('bert') ? 'BERT-base (F32 file)' : 'GPT-2 small (F32 file)');
      const groups = [gpt2, ...others.map((r) => [r])];
      const rows = groups.flatMap((g) => g[0].json.rows.map((x, i) => {
        const all = g.map((r) => r.json.rows[i]);
        return [label(g[0]), `${f0(g[0].json.fileMB)} MiB`, x.weights, x.wasmHeapMB == null ? '' : range(all.map((y) => y.wasmHeapMB), f0),
          range(all.map((y) => y.peakRssMB), f0), range(all.map((y) => y.loadMs / 1000), f1)];
      }));
      return { columns: ['model shape', 'file', 'loaded as', 'wasm heap MiB', 'peak RSS MiB', 'load s'], rows, files: [...gpt2, ...others] };
    },
  },
  'gguf-load-peak': {
    build() {
      const r = result('gguf-load-peak-node.json');
      const rows = r.json.rows.map((x) => [x.label, f0(x.fileMB), x.weights, x.dtype, f0(x.weightsMB), f0(x.wasmHeapMB), f0(x.peakRssAfterLoadMB), f0(x.peakRssMB)]);
      return { columns: ['file', 'MiB', 'weights', 'held as', 'weights MiB', 'wasm heap MiB', 'peak RSS after load MiB', 'peak RSS MiB (+ a forward of 8)'], rows, files: [r] };
    },
  },
  // qkv against wllama's fastest build (3.x), 1 thread; the same against 2.3.7 with 1 and 2 threads
  'gguf-race': { build: () => raceTable(newest(/^gguf-race-wllama3-chromium/)), caption: (files) => `<sub>${source(files)}; ${raceLimits(files[0])}</sub>` },
  'gguf-race-wllama23': { build: () => raceTable(ggufRace()), caption: (files) => `<sub>${source(files)}; ${raceLimits(files[0])}</sub>` },
  'gguf-race-threads': { build: () => threadsTable(ggufRace()), caption: (files) => `<sub>${source(files)}; ${raceLimits(files[0])}</sub>` },
  // the same on a quiet machine (load about 2), llama.cpp as wllama 3.13, the Q8_0 files
  'gguf-threads-quiet': { build: () => threadsTable(newest(/^gguf-threads-quiet-chromium/)), caption: (files) => `<sub>${source(files)}; ${raceLimits(files[0])}</sub>` },
  'gguf-wllama-builds': {
    build() {
      const r = newest(/^gguf-wllama-builds-chromium/);
      // on wall time for every build (3.x's figures are its server's timings, wall clock)
      const w = (t, fmt) => fmt(t.wall_median);
      const rows = r.json.runs.map((x) => [x.runtime === 'qkv' ? `qkv (${x.build})` : x.build, w(x.decode_tps, f1), w(x.prefill_tps, f0)]);
      return { columns: [`build (${r.json.runs[0].model} ${r.json.runs[0].type}, 1 thread)`, `decode tok/s, wall, median of ${r.json.reps} (${r.json.tokens} tokens)`, `prefill ${r.json.prefill} tok/s, wall`], rows, files: [r] };
    },
  },
  'residual-forward': {
    build() {
      const r = result('model-residual-node.json');
      const spread = (x) => `${f2(x.ratio)}x (${f2(x.ratio_min)}-${f2(x.ratio_max)})`;
      const rows = r.json.forward.rows.map((x) => [x.name, f0(x.ms), spread(x)]);
      const l = r.json.lens;
      rows.push([`lens: unembed [${l.rows}, d] -> [${l.rows}, V]`, f0(l.calls.find((c) => c.name.startsWith('unembed')).ms),
        `${f1(l.unembed_gflops)} GFLOP/s = ${pct(l.fraction_of_gemm)} of the GEMM's ${f1(l.gemm_gflops)}`]);
      rows.push(['logitLens, the whole call', f0(l.calls.find((c) => c.name.startsWith('logitLens')).ms), '']);
      return { columns: [`GPT-2 small shape, ${r.json.forward.tokens} tokens, 1 thread`, 'ms (median)', 'against the plain forward (min-max over rounds)'], rows, files: [r] };
    },
  },
  'residual-sweeps': {
    build() {
      const r = result('model-residual-node.json');
      const w = r.json.sweeps;
      const last = w.forward.find((x) => x.name.includes("'last'")).ms, all = w.forward.find((x) => x.name.includes("'all'")).ms;
      const rows = w.runs.map((x) => [x.over, x.cells, f1(x.ms / 1000), f1(x.per_cell_ms), `${f2(x.x_forwards_last)}x`, `${f2(x.x_forwards_all)}x`, `<= ${f2(x.target)}x`]);
      return { columns: [`sweep, ${w.tokens} tokens`, 'patched runs', 's', 'ms a run', `of as many forwards ('last', ${f0(last)} ms)`, `('all', ${f0(all)} ms)`, 'target'], rows, files: [r] };
    },
  },
  'encoder-hidden-lens': {
    build() {
      const r = result('encoder-hidden-lens-node.json');
      const rows = r.json.rows.map((x) => [x.tokens, f1(x.plain_ms), f1(x.hidden_states_ms), ratio(x.hidden_states_ms / x.plain_ms), f1(x.head_ms), f1(x.lens_ms),
        ratio(x.lens_ms / x.plain_ms)]);
      return { columns: ['tokens', 'forward', 'with outputHiddenStates', 'ratio', `head on ${r.json.rows[0].head_rows / r.json.rows[0].tokens} x T rows`, 'lens', 'lens / forward'], rows, files: [r] };
    },
  },
  'int8-accuracy': {
    build() {
      const r = result('model-int8-accuracy.json');
      const rows = r.json.results.map((x) => [`${x.model.replace(/ \(.*\)/, '')}, ${x.runtime === 'qkv' ? 'qkv int8' : 'ORT q8'}`, x.positions,
        pct(x.top1_agreement), x.mean_kl_nats.toExponential(1), x.max_kl_nats.toExponential(1), `${x.cross_entropy_nats.f32.toFixed(4)} / ${x.cross_entropy_nats.int8.toFixed(4)}`]);
      return { columns: ['model, 8-bit weights', 'positions', 'top-1 agreement', 'mean KL (nats)', 'max KL', 'cross-entropy F32 / 8-bit'], rows, files: [r] };
    },
  },
  'matmul-gemv': {
    build() {
      const r = newest(/^matmul-wasm-1t-zen5-panels\.json$/);
      const rows = r.json.results.map((x) => [x.kernel, x.type, x.what, f1(x.gbs), `${f2(x.fraction_of_bandwidth)}x`]);
      return { columns: ['kernel', 'type', 'what', 'GB/s', `of the ${f1(r.json.read_bandwidth_gbs)} GB/s read bandwidth`], rows, files: [r] };
    },
  },
  'webgpu': {
    build() {
      const r = result('webgpu-swiftshader.json');
      const rows = r.json.rows.filter((x) => !x.causal && x.webgpu?.ms).map((x) => [x.L, f1(x['wasm-simd'].ms), f1(x['wasm-threads'].ms), f0(x.webgpu.ms)]);
      return { columns: ['L', 'wasm SIMD ms', 'wasm threads ms', 'WebGPU (SwiftShader) ms'], rows, files: [r] };
    },
  },
};

