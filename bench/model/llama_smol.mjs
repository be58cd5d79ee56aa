// Llama-family benchmark in Node: a SmolLM2-135M-shaped model (30 layers, 9 heads, 3 kv heads,
// hidden 576, intermediate 1536, vocab 49152, tied embeddings) with generated random weights
// (no download): load time, peak RSS, prefill of 128 tokens, greedy decode tokens/s, for
// weights 'auto' (the F32 file read in place), 'f16', 'int8' and 'int4', on 1 and 2 threads.
// --shape qwen3-0.6b: Qwen3-0.6B's shape instead (28 layers, 16 heads, 8 kv heads, head_dim
// 128, hidden 1024, intermediate 3072, vocab 151936, q/k norms, tied) in BF16 as Qwen ships it
// (1.2 GB). With --dtype f32 it is written in F32 (2.4 GB: the 4 GB wasm heap holds it) and gets
// the onnxruntime-web peer (export_llama_onnx_kv.py follows Qwen3's q/k norms and writes the
// weights as external data, handed to ORT as the session option externalData); --layers N keeps
// the first N of the 28 layers (everything else as Qwen3-0.6B), for a machine with less memory
// (the whole F32 run peaks at 2.4 GB RSS for qkv and 5.9 GB for ORT).
//
//   node bench/model/llama_smol.mjs [--shape smollm2-135m|qwen3-0.6b] [--dtype bf16|f32] [--layers N] [--decode 32] [--prompt 16] [--reps 3]
//                                   [--threads 1,2] [--weights auto,f16,int8,int4] [--no-peer] [--out bench/results/llama-smol-node.json]
//
// Decode is timed after a --prompt-token prompt (the attention then reads prompt .. prompt + decode
// cached positions); --out names the JSON written (a run with other options need not replace the
// committed one).
//
// Each (weights, threads) runs in its own child process, so peak RSS (resourceUsage().maxRSS)
// is that configuration's own: taken right after the load (the load's peak) and at the end
// (with the prefill's and decode's buffers). Times are wall and CPU (user + system of the process, every
// thread): on a shared machine the 1-thread CPU time is what the code costs. The checkpoint is written once to build/bench-llama/.
// Peer: onnxruntime-web with past key/values on the same weights (bench/model/
// export_llama_onnx_kv.py, exported into build/bench-llama/ on first use), prefill of the same
// 128 ids and greedy decode feeding "present" back as "past", argmax in JS; --no-peer skips it.
// Writes bench/results/llama-smol-node.json (or --out) and prints a table.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, fstatSync, mkdirSync, openSync, readSync, writeSync, closeSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { machineLimits } from '../limits.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const DECODE = Number(arg('--decode', 32));
const REPS = Number(arg('--reps', 3));
const THREADS = arg('--threads', '1,2').split(',').map(Number);
const WEIGHTS = arg('--weights', 'auto,f16,int8,int4').split(',');
const PREFILL = 128;
const PROMPT = Number(arg('--prompt', 16));
const SHAPE = arg('--shape', 'smollm2-135m');
const QWEN3 = SHAPE === 'qwen3-0.6b';
if (!QWEN3 && SHAPE !== 'smollm2-135m') throw new Error(`--shape must be smollm2-135m or qwen3-0.6b, got ${SHAPE}`);
// the file's dtype: Qwen3 ships BF16; F32 for the onnxruntime-web peer (which reads F32 only)
const DTYPE = arg('--dtype', QWEN3 ? 'bf16' : 'f32');
if (!['bf16', 'f32'].includes(DTYPE) || (!QWEN3 && DTYPE !== 'f32')) throw new Error(`--dtype must be bf16 or f32 (bf16 only with --shape qwen3-0.6b), got ${DTYPE}`);
const BF16 = DTYPE === 'bf16';
const LAYERS = arg('--layers', null);
const TAG = `${SHAPE}${LAYERS ? `-${LAYERS}l` : ''}${QWEN3 && !BF16 ? '-f32' : ''}`;
const OUT = path.resolve(arg('--out', path.join(ROOT, 'bench', 'results', QWEN3 ? `qwen3-0.6b${LAYERS ? `-${LAYERS}l` : ''}${BF16 ? '' : '-f32'}-node.json` : 'llama-smol-node.json')));
const DIR = path.join(ROOT, 'build', 'bench-llama', `${TAG}-shape`);
const ONNX = path.join(ROOT, 'build', 'bench-llama', `${TAG}-shape-kv.onnx`);
const PEER = !args.includes('--no-peer') && !BF16;
const DIST = process.env.QKV_DIST ? path.resolve(process.env.QKV_DIST) : path.join(ROOT, 'dist');

const CONFIG = {
  model_type: 'llama', architectures: ['LlamaForCausalLM'], hidden_act: 'silu', hidden_size: 576,
  intermediate_size: 1536, num_hidden_layers: 30, num_attention_heads: 9, num_key_value_heads: 3,
  vocab_size: 49152, max_position_embeddings: 8192, rms_norm_eps: 1e-5, rope_theta: 100000,
  tie_word_embeddings: true, torch_dtype: 'float32',
};
const QWEN3_CONFIG = { // Qwen/Qwen3-0.6B's config.json (sizes, rope, norms)
  model_type: 'qwen3', architectures: ['Qwen3ForCausalLM'], hidden_act: 'silu', hidden_size: 1024, head_dim: 128,
  intermediate_size: 3072, num_hidden_layers: 28, num_attention_heads: 16, num_key_value_heads: 8,
  vocab_size: 151936, max_position_embeddings: 40960, rms_norm_eps: 1e-6, rope_theta: 1000000,
  attention_bias: false, tie_word_embeddings: true, use_sliding_window: false, torch_dtype: 'bfloat16',
};
if (QWEN3) Object.assign(CONFIG, QWEN3_CONFIG, BF16 ? {} : { torch_dtype: 'float32' });
if (LAYERS) {
  if (!(Number(LAYERS) >= 1 && Number(LAYERS) <= CONFIG.num_hidden_layers)) throw new Error(`--layers must be 1..${CONFIG.num_hidden_layers}, got ${LAYERS}`);
  CONFIG.num_hidden_layers = Number(LAYERS);
}
const MODEL = `${QWEN3 ? 'Qwen3-0.6B shape' : 'SmolLM2-135M shape'}${LAYERS ? ` (first ${LAYERS} layers)` : ''}`;

// wall and CPU (user + system, all the process's threads) milliseconds of `f`
async function timed(f) {
  const c = process.cpuUsage();
  const t = performance.now();
  await f();
  const d = process.cpuUsage(c);
  return { wall: performance.now() - t, cpu: (d.user + d.system) / 1000 };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// ---- the checkpoint: random F32 weights (std 0.02, norms 1), HF names ----------------------

function writeCheckpoint() {
  if (existsSync(path.join(DIR, 'model.safetensors'))) return;
  mkdirSync(DIR, { recursive: true });
  const { hidden_size: E, intermediate_size: I, vocab_size: V, num_attention_heads: H, num_key_value_heads: Hkv } = CONFIG;
  const D = CONFIG.head_dim ?? E / H;
  const tensors = [['model.embed_tokens.weight', [V, E], 0.02]];
  for (let l = 0; l < CONFIG.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`;
    tensors.push([p + 'input_layernorm.weight', [E], 1], [p + 'self_attn.q_proj.weight', [H * D, E], 0.02],
      [p + 'self_attn.k_proj.weight', [Hkv * D, E], 0.02], [p + 'self_attn.v_proj.weight', [Hkv * D, E], 0.02],
      [p + 'self_attn.o_proj.weight', [E, H * D], 0.02], [p + 'post_attention_layernorm.weight', [E], 1],
      [p + 'mlp.gate_proj.weight', [I, E], 0.02], [p + 'mlp.up_proj.weight', [I, E], 0.02],
      [p + 'mlp.down_proj.weight', [E, I], 0.02]);
    if (QWEN3) tensors.push([p + 'self_attn.q_norm.weight', [D], 1], [p + 'self_attn.k_norm.weight', [D], 1]);
  }
  tensors.push(['model.norm.weight', [E], 1]);
  const header = {};
  let offset = 0;
  const size = BF16 ? 2 : 4; // BF16 or F32
  for (const [name, shape] of tensors) {
    const bytes = size * shape.reduce((a, b) => a * b, 1);
    header[name] = { dtype: BF16 ? 'BF16' : 'F32', shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let h = Buffer.from(JSON.stringify(header));
  h = Buffer.concat([h, Buffer.alloc((8 - (h.length % 8)) % 8, 0x20)]);
  const fd = openSync(path.join(DIR, 'model.safetensors'), 'w');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(h.length));
  writeSync(fd, len);
  writeSync(fd, h);
  let seed = 12345;
  for (const [, shape, scale] of tensors) {
    const a = new Float32Array(shape.reduce((x, y) => x * y, 1));
    if (scale === 1) a.fill(1);
    else {
      for (let i = 0; i < a.length; i++) {
        seed = (seed * 1103515245 + 12345) >>> 0; // uniform in [-sqrt(3), sqrt(3)) * scale: std `scale`
        a[i] = ((seed / 4294967296) * 2 - 1) * 1.7320508 * scale;
      }
    }
    if (!BF16) {
      writeSync(fd, new Uint8Array(a.buffer));
      continue;
    }
    const u = new Uint32Array(a.buffer); // bfloat16: the top half of each float, rounded to nearest even
    const b = new Uint16Array(a.length);
    for (let i = 0; i < a.length; i++) b[i] = (u[i] + 0x7fff + ((u[i] >>> 16) & 1)) >>> 16;
    writeSync(fd, new Uint8Array(b.buffer));
  }
  closeSync(fd);
  writeFileSync(path.join(DIR, 'config.json'), JSON.stringify(CONFIG, null, 2));
}

// medians of the prefill times and of the decode rates (DECODE tokens per timed run), wall and CPU
function summary(prefill, decode) {
  return {
    prefill128Ms: median(prefill.map((t) => t.wall)), prefill128CpuMs: median(prefill.map((t) => t.cpu)),
    decodeTokS: median(decode.map((t) => (DECODE / t.wall) * 1000)),
    decodeTokSCpu: median(decode.map((t) => (DECODE / t.cpu) * 1000)),
  };
}

// ---- child: one (weights, threads) ---------------------------------------------------------

async function child(weights, threads) {
  writeCheckpoint();
  const qkv = await import(pathToFileURL(path.join(DIST, 'index.js')).href);
  qkv.env.variant = threads > 1 ? 'simd-threads' : 'simd';
  qkv.env.numThreads = threads;
  const t0 = performance.now();
  const model = await qkv.loadModel(DIR, { weights });
  const loadMs = performance.now() - t0;
  const loadRssMB = process.resourceUsage().maxRSS / 1024; // the load's own peak (before any forward's buffers)
  const mem = model.memoryUsage();
  const ids = Array.from({ length: Math.max(PREFILL, PROMPT) }, (_, i) => (i * 7919 + 13) % CONFIG.vocab_size);
  await model.forward(ids.slice(0, 8), { logits: 'last' }); // warm-up
  const prefill = [];
  for (let r = 0; r < REPS; r++) prefill.push(await timed(() => model.forward(ids.slice(0, PREFILL), { logits: 'last' })));
  // decode: greedy after a PROMPT-token prompt; time from the first token to the last
  const decode = [];
  for (let r = 0; r < REPS; r++) {
    const it = model.generate(ids.slice(0, PROMPT), { maxNewTokens: DECODE + 1, temperature: 0 });
    await it.next(); // prefill and the first token
    decode.push(await timed(async () => {
      for await (const step of it) void step;
    }));
  }
  const out = {
    weights, threads, dtype: mem.dtype, loadMs, weightsMB: mem.weights / 2 ** 20, wasmHeapMB: mem.wasmHeap / 2 ** 20,
    loadRssMB, peakRssMB: process.resourceUsage().maxRSS / 1024, ...summary(prefill, decode),
  };
  model.dispose();
  process.stdout.write(JSON.stringify(out) + '\n');
}

// ---- child: the onnxruntime-web peer --------------------------------------------------------

// a file of any size (up to the 4 GB a Uint8Array may hold here) read into one Uint8Array
function readWhole(file) {
  const fd = openSync(file, 'r');
  const out = new Uint8Array(fstatSync(fd).size);
  for (let at = 0; at < out.length;) at += readSync(fd, out, at, Math.min(2 ** 30, out.length - at), at);
  closeSync(fd);
  return out;
}

async function childOrt(threads) {
  const ort = await import('onnxruntime-web');
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.simd = true;
  const { num_hidden_layers: NL, num_key_value_heads: Hkv, hidden_size: E, num_attention_heads: H, vocab_size: V } = CONFIG;
  const D = CONFIG.head_dim ?? E / H;
  const t0 = performance.now();
  // the weights: the export's external data file (<onnx>.data), read here in 1 GB pieces (a
  // single fs read stops at 2 GB) and handed over once as the session option externalData
  const dataPath = `${ONNX}.data`;
  const externalData = existsSync(dataPath) ? [{ path: path.basename(dataPath), data: readWhole(dataPath) }] : undefined;
  const sess = await ort.InferenceSession.create(ONNX, { executionProviders: ['wasm'], graphOptimizationLevel: 'all', externalData });
  const loadMs = performance.now() - t0;
  const loadRssMB = process.resourceUsage().maxRSS / 1024;
  const ids = Array.from({ length: Math.max(PREFILL, PROMPT) }, (_, i) => (i * 7919 + 13) % V);
  const run = async (tokens, past, T) => sess.run({
    input_ids: new ort.Tensor('int64', BigInt64Array.from(tokens.map(BigInt)), [1, tokens.length]),
    past: past ?? new ort.Tensor('float32', new Float32Array(0), [NL, 2, Hkv, T, D]),
  });
  const argmaxOf = (a) => { let b = 0; for (let i = 1; i < a.length; i++) if (a[i] > a[b]) b = i; return b; };
  await run(ids.slice(0, 8), null, 0); // warm-up
  const prefill = [];
  for (let r = 0; r < REPS; r++) prefill.push(await timed(() => run(ids.slice(0, PREFILL), null, 0)));
  const decode = [];
  for (let r = 0; r < REPS; r++) {
    let out = await run(ids.slice(0, PROMPT), null, 0);
    let tok = argmaxOf(out.logits.data);
    decode.push(await timed(async () => {
      for (let k = 0; k < DECODE; k++) {
        out = await run([tok], out.present);
        tok = argmaxOf(out.logits.data);
      }
    }));
  }
  const out = {
    weights: 'onnxruntime-web', threads, dtype: 'F32', loadMs, weightsMB: null, wasmHeapMB: null,
    loadRssMB, peakRssMB: process.resourceUsage().maxRSS / 1024, ...summary(prefill, decode),
  };
  process.stdout.write(JSON.stringify(out) + '\n');
}

// ---- parent ----------------------------------------------------------------------------

async function main() {
  writeCheckpoint();
  if (PEER && !existsSync(ONNX)) {
    execFileSync('/usr/bin/python3', [path.join(ROOT, 'bench', 'model', 'export_llama_onnx_kv.py'), '--model', DIR, '--out', ONNX],
      { stdio: 'inherit' });
  }
  const limits = machineLimits({ who: 'llama_smol' });   // wasm read bandwidth and mul+add peak, 1 thread
  const rows = [];
  for (const threads of THREADS) {
    for (const weights of [...WEIGHTS, ...(PEER ? ['ort'] : [])]) {
      const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', weights, String(threads),
        '--shape', SHAPE, '--dtype', DTYPE, ...(LAYERS ? ['--layers', LAYERS] : []), '--decode', String(DECODE), '--prompt', String(PROMPT), '--reps', String(REPS)], { encoding: 'utf8', maxBuffer: 1 << 24 });
      if (r.status !== 0) { // said, and the other rows still measured and written
        const why = (r.stderr.match(/^(?:\w*Error|RuntimeError): .*$/m) ?? [r.stderr.trim().split('\n').pop()])[0].slice(0, 300);
        console.error(`child ${weights} ${threads}t failed: ${why}`);
        rows.push({ weights: weights === 'ort' ? 'onnxruntime-web' : weights, threads, failed: why });
        continue;
      }
      const row = JSON.parse(r.stdout.trim().split('\n').pop());
      rows.push(row);
      console.error(`${weights} ${threads}t done`);
    }
  }
  console.log(`${MODEL} (random weights), Node ${process.version}, ${os.cpus().length} cores (${os.cpus()[0].model}), load ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`);
  console.log(`this machine (bench/matmul, wasm, 1 thread, measured before the runs): read bandwidth ${limits.read_bandwidth_gbs.toFixed(2)} GB/s, ` +
    `mul+add peak ${limits.mul_add_peak_gflops.toFixed(1)} GFLOP/s`);
  // a decode step reads every weight once: tok/s x weight bytes over the bandwidth (ORT on qkv's F32 bytes)
  const f32Bytes = rows.find((r) => r.dtype === 'F32' && r.weightsMB != null)?.weightsMB;
  for (const r of rows.filter((x) => !x.failed)) {
    const mb = r.weightsMB ?? f32Bytes;
    r.decodeFractionOfBandwidth = mb ? (r.decodeTokSCpu * mb * 2 ** 20) / (limits.read_bandwidth_gbs * 1e9) : null;
  }
  console.log('| runtime / weights | threads | dtype | load s | weights MB | RSS after load / peak MB | prefill 128 ms (CPU ms) | decode tok/s (per CPU s) | decode of bandwidth |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const who = r.weights === 'onnxruntime-web' ? r.weights : `qkv ${r.weights}`;
    if (r.failed) { console.log(`| ${who} | ${r.threads} | failed: ${r.failed} |||||||`); continue; }
    const mb = r.weightsMB == null ? '-' : r.weightsMB.toFixed(0);
    console.log(`| ${who} | ${r.threads} | ${r.dtype} | ${(r.loadMs / 1000).toFixed(2)} | ${mb} | ${r.loadRssMB.toFixed(0)} / ${r.peakRssMB.toFixed(0)} | ` +
      `${r.prefill128Ms.toFixed(0)} (${r.prefill128CpuMs.toFixed(0)}) | ${r.decodeTokS.toFixed(1)} (${r.decodeTokSCpu.toFixed(1)}) | ` +
      `${r.decodeFractionOfBandwidth == null ? '-' : r.decodeFractionOfBandwidth.toFixed(2)} |`);
  }
  mkdirSync(path.dirname(OUT), { recursive: true });
  writeFileSync(OUT, JSON.stringify({
    date: new Date().toISOString(), model: `${MODEL}, random ${BF16 ? 'BF16' : 'F32'} weights`, peer: PEER ? 'onnxruntime-web, past key/values' : null, config: CONFIG, decodeTokens: DECODE, promptTokens: PROMPT, reps: REPS,
    node: process.version, cores: os.cpus().length, cpu: os.cpus()[0].model, limits, loadavg: os.loadavg(), rows,
  }, null, 2) + '\n');
}

if (args[0] === '--child' && args[1] === 'ort') await childOrt(Number(args[2]));
else if (args[0] === '--child') await child(args[1], Number(args[2]));
else await main();
