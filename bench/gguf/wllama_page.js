// The wllama page of bench/gguf/race.mjs: llama.cpp's WebAssembly build, one GGUF file, one
// thread count, one of wllama's three builds:
//   build=wllama         @wllama/wllama 3.x: memory64 + JSPI, llama-server's server-context inside;
//   build=wllama-compat  @wllama/wllama-compat: the same release built for 32-bit memory with
//                        Asyncify (what 3.x falls back to without JSPI or memory64; forced here
//                        by handing the instance the compat worker resources);
//   build=wllama-2.3     @wllama/wllama 2.3.7 (npm alias wllama-2.3): 32-bit memory, wllama's own
//                        low-level bindings (decode / samplingSample / samplingAccept).
//   wllama.html?build=wllama&file=/gguf/<name>.gguf&threads=1&reps=3&prompt=8&tokens=64&prefill=128
// Result: window.__race = { runtime, build, threads, load_ms, prefill: [region], decode: [{ steps, ...region }] } or { error }
// (regions as qkv_page.js's; 3.x's wall ms are its server's timings, and a decode's CPU time is
// its completion's less that of the same prompt completed with one token: `minus`).
// The same measures as qkv_page.js, each on llama.cpp's own clock where it has one:
//  - prefill: `prefill` tokens in one batch (3.x takes text only: as many digits, one token
//    each; 2.3: token ids as qkv's page gives them). 3.x: a completion of max_tokens 1 with
//    cache_prompt false, the server's timings.prompt_ms (the batch's decode and the first
//    token's sampling); 2.3: decode(ids) timed around the call.
//  - decode: greedy (temperature 0, top_k 1) after a `prompt`-token prompt, `tokens` new tokens,
//    the end-of-text token ignored. 3.x: timings.predicted_ms, which runs from the first token
//    (the prompt's) to the last: predicted_n - 1 steps; 2.3: the same span timed in the page
//    (decode of one token, sample, accept per step).
import { idsOf, mark, span } from './common.js';

const p = new URLSearchParams(location.search);
const build = p.get('build');
const threads = Number(p.get('threads'));
const REPS = Number(p.get('reps')), PROMPT = Number(p.get('prompt')), TOKENS = Number(p.get('tokens')), PREFILL = Number(p.get('prefill'));
const BUDGET = Number(p.get('budget'));  // ms a 2.3 decode may take (as qkv_page.js's)
const abs = (u) => new URL(u, location.href).href;
const DEBUG = p.has('debug');
const quiet = DEBUG ? console : { debug() {}, log() {}, info() {}, warn: console.warn, error: console.error };

async function v3(blob, V, compat) {
  const { Wllama } = await import('/node_modules/@wllama/wllama/esm/index.js');
  const w = new Wllama({ default: abs('/node_modules/@wllama/wllama/esm/wasm/wllama.wasm') }, { suppressNativeLog: !DEBUG, logger: quiet });
  if (compat) {
    const worker = await (await fetch('/node_modules/@wllama/wllama-compat/wasm/wllama.js')).text();
    w.getWorkerResources = () => ({ wasmPath: abs('/node_modules/@wllama/wllama-compat/wasm/wllama.wasm'), jsPath: { code: worker }, compat: true, noWebGPU: true });
  }
  const t0 = performance.now();
  await w.loadModel([blob], { n_threads: threads, n_ctx: 512, n_batch: 512, n_ubatch: 512, n_gpu_layers: 0, n_parallel: 1 });
  const out = { load_ms: performance.now() - t0, multithread: w.isMultithread(), nThreads: w.getNumThreads(), prefill: [], decode: [] };
  // 3.x takes a prompt as text only: n digits are n tokens (both pre-tokenizers split digits one by one)
  const digits = (n, seed) => idsOf(n, 10, seed).map((id) => id % 10).join('');
  const complete = (n, seed, max_tokens) => w.createCompletion({
    prompt: digits(n, seed), max_tokens, temperature: 0, top_k: 1, ignore_eos: true, cache_prompt: false,
  });
  await complete(32, 99, 2);  // warm-up
  for (let r = 0; r < REPS; r++) {
    const a = await mark();
    const res = await complete(PREFILL, r, 1);
    if (res.timings.prompt_n !== PREFILL) throw new Error(`wllama: prompt_n ${res.timings.prompt_n}, not ${PREFILL}`);
    out.prefill.push({ ...span(a, await mark()), wall: res.timings.prompt_ms });
  }
  for (let r = 0; r < REPS; r++) {
    // CPU time: the completion less the same prompt's completion of one token (minus)
    const a = await mark();
    await complete(PROMPT, r, 1);
    const b = await mark();
    const res = await complete(PROMPT, r, TOKENS);
    if (res.timings.prompt_n !== PROMPT) throw new Error(`wllama: prompt_n ${res.timings.prompt_n}, not ${PROMPT}`);
    out.decode.push({ steps: res.timings.predicted_n - 1, ...span(b, await mark()), minus: span(a, b), wall: res.timings.predicted_ms });
  }
  await w.exit();
  return out;
}

async function v2(blob, V) {
  const { Wllama } = await import('/node_modules/wllama-2.3/esm/index.js');
  const base = '/node_modules/wllama-2.3/esm/';
  const w = new Wllama({ 'single-thread/wllama.wasm': abs(`${base}single-thread/wllama.wasm`), 'multi-thread/wllama.wasm': abs(`${base}multi-thread/wllama.wasm`) },
    { suppressNativeLog: !DEBUG, logger: quiet });
  const t0 = performance.now();
  await w.loadModel([blob], { n_threads: threads, n_ctx: 512, n_batch: 512 });
  const out = { load_ms: performance.now() - t0, multithread: w.isMultithread(), nThreads: w.getNumThreads(), prefill: [], decode: [] };
  await w.kvClear();
  await w.decode(idsOf(32, V, 99), {});  // warm-up
  for (let r = 0; r < REPS; r++) {
    await w.kvClear();
    const a = await mark();
    await w.decode(idsOf(PREFILL, V, r), {});
    out.prefill.push(span(a, await mark()));
  }
  for (let r = 0; r < REPS; r++) {
    await w.kvClear();
    await w.samplingInit({ temp: 0, top_k: 1 });
    await w.decode(idsOf(PROMPT, V, r), {});
    let { token } = await w.samplingSample();
    await w.samplingAccept([token]);
    const a = await mark();
    let steps = 0;
    for (let i = 1; i < TOKENS; i++) {
      await w.decode([token], {});
      ({ token } = await w.samplingSample());
      await w.samplingAccept([token]);
      if (++steps && performance.now() - a.wall > BUDGET) break;
    }
    out.decode.push({ steps, ...span(a, await mark()) });
  }
  await w.exit();
  return out;
}

async function run() {
  const res = await fetch(p.get('file'));
  if (!res.ok) throw new Error(`${p.get('file')}: HTTP ${res.status}`);
  const blob = await res.blob();
  const V = Number(p.get('vocab'));
  const r = build === 'wllama-2.3' ? await v2(blob, V) : await v3(blob, V, build === 'wllama-compat');
  return { runtime: 'wllama', build, threads, crossOriginIsolated, ...r };
}

run().then((r) => { window.__race = r; }, (e) => { window.__race = { error: String(e?.stack ?? e) }; });
