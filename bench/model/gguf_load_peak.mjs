// Peak memory of loading a GGUF file beside the safetensors checkpoint it was written from: a
// random Llama-shaped model (E 768, 6 layers, I 2048, V 16000: 55M parameters, std 0.2) written
// by the tests' GGUF writer (tests/js/shared/gguf-writer.js) as F32, Q8_0 and Q4_K, each load in
// a process of its own, from a file on disk (read in chunks: the load streams where it converts),
// then one forward of 8 tokens: peak RSS and the wasm heap (model.memoryUsage()).
//
//   node bench/model/gguf_load_peak.mjs [--dir build/gguf-bench] [--out bench/results/gguf-load-peak-node.json]
//
// Prints a table; writes the JSON (with the machine's figures).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const DIR = path.resolve(ROOT, arg('--dir', 'build/gguf-bench'));
const OUT = path.resolve(ROOT, arg('--out', 'bench/results/gguf-load-peak-node.json'));
const CONFIG = {
  model_type: 'llama', hidden_size: 768, intermediate_size: 2048, num_attention_heads: 12, num_key_value_heads: 4,
  num_hidden_layers: 6, vocab_size: 16000, max_position_embeddings: 512, rms_norm_eps: 1e-5, rope_theta: 10000,
  tie_word_embeddings: true, hidden_act: 'silu',
};
// [label, file, weights option]
const RUNS = [
  ['safetensors F32', 'f32', 'auto'], ['safetensors F32', 'f32', 'int8'], ['safetensors F32', 'f32', 'int4'],
  ['GGUF F32', 'model-F32.gguf', 'auto'], ['GGUF Q8_0', 'model-Q8_0.gguf', 'auto'], ['GGUF Q4_K', 'model-Q4_K.gguf', 'auto'],
  ['GGUF Q4_K', 'model-Q4_K.gguf', 'int4'],
];

if (args[0] === '--child') {
  const [, file, weights] = args;
  const qkv = await import(path.join(ROOT, 'dist', 'index.js'));
  qkv.env.variant = 'simd';
  const t0 = performance.now();
  const model = await qkv.loadModel(path.join(DIR, file), { weights });
  const loadMs = performance.now() - t0;
  const afterLoad = process.resourceUsage().maxRSS / 1024;
  await model.forward(new Int32Array([1, 2, 3, 4, 5, 6, 7, 8]), { logits: 'last' });
  const mem = model.memoryUsage();
  process.stdout.write(JSON.stringify({ file, weights, dtype: mem.dtype, loadMs, weightsMB: mem.weights / 2 ** 20,
    wasmHeapMB: mem.wasmHeap / 2 ** 20, peakRssAfterLoadMB: afterLoad, peakRssMB: process.resourceUsage().maxRSS / 1024 }));
  model.dispose();
} else if (args[0] === '--write') {
  const { checkpointToGguf, f32Safetensors } = await import('../../tests/js/shared/gguf-writer.js');
  const { randn } = await import('../../tests/js/model-helpers.js');
  const E = CONFIG.hidden_size, I = CONFIG.intermediate_size, V = CONFIG.vocab_size;
  const H = CONFIG.num_attention_heads, Hkv = CONFIG.num_key_value_heads, D = E / H;
  const shapes = [['model.embed_tokens.weight', [V, E]], ['model.norm.weight', [E]]];
  for (let l = 0; l < CONFIG.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`;
    shapes.push([p + 'input_layernorm.weight', [E]], [p + 'post_attention_layernorm.weight', [E]],
      [p + 'self_attn.q_proj.weight', [H * D, E]], [p + 'self_attn.k_proj.weight', [Hkv * D, E]],
      [p + 'self_attn.v_proj.weight', [Hkv * D, E]], [p + 'self_attn.o_proj.weight', [E, H * D]],
      [p + 'mlp.gate_proj.weight', [I, E]], [p + 'mlp.up_proj.weight', [I, E]], [p + 'mlp.down_proj.weight', [E, I]]);
  }
  const st = f32Safetensors(shapes.map(([name, shape], i) => ({
    name, shape, data: randn(shape.reduce((a, b) => a * b, 1), 100 + i, shape.length === 1 ? 0.1 : 0.2, shape.length === 1 ? 1 : 0),
  })));
  mkdirSync(path.join(DIR, 'f32'), { recursive: true });
  writeFileSync(path.join(DIR, 'f32', 'config.json'), JSON.stringify(CONFIG));
  writeFileSync(path.join(DIR, 'f32', 'model.safetensors'), st);
  for (const type of ['F32', 'Q8_0', 'Q4_K']) writeFileSync(path.join(DIR, `model-${type}.gguf`), checkpointToGguf(CONFIG, st, type).gguf);
} else {
  // the files are written by a process of their own: Linux keeps a process's peak RSS across
  // exec, so children of a parent that held the files would report its peak
  if (!existsSync(path.join(DIR, 'model-Q4_K.gguf'))) {
    const w = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--write', '--dir', DIR], { encoding: 'utf8' });
    if (w.status !== 0) throw new Error(`writing the files: ${w.stderr}`);
  }
  const rows = [];
  for (const [label, file, weights] of RUNS) {
    const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', file, weights, '--dir', DIR], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`child ${file} ${weights}: ${r.stderr}`);
    const size = statSync(path.join(DIR, file === 'f32' ? 'f32/model.safetensors' : file)).size / 2 ** 20;
    rows.push({ label, fileMB: size, ...JSON.parse(r.stdout) });
  }
  const out = { benchmark: 'gguf-load-peak', date: new Date().toISOString(), config: CONFIG,
    machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, load_average: os.loadavg(), node: process.version }, rows };
  mkdirSync(path.dirname(OUT), { recursive: true });
  writeFileSync(OUT, JSON.stringify(out, null, 2) + '\n');
  console.log(`55M-parameter Llama, Node ${process.version}, ${out.machine.cpu} x${out.machine.cores}, load ${os.loadavg()[0].toFixed(1)}`);
  console.log('| file | MiB | weights | held | weights MiB | wasm heap MiB | peak RSS after load MiB | peak RSS MiB | load s |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const mb = (x) => x.toFixed(0);
    console.log(`| ${r.label} | ${mb(r.fileMB)} | ${r.weights} | ${r.dtype} | ${mb(r.weightsMB)} | ${mb(r.wasmHeapMB)} | ${mb(r.peakRssAfterLoadMB)} | ${mb(r.peakRssMB)} | ${(r.loadMs / 1000).toFixed(2)} |`);
  }
  console.log(`wrote ${path.relative(ROOT, OUT)}`);
}
