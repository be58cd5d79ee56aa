// The qkv page of bench/gguf/race.mjs: one GGUF file, one thread count, qkv's fastest build
// (the relaxed-SIMD one, its threads twin for 2 threads; plain SIMD where the browser lacks
// relaxed SIMD, which 'auto' picks).
//   qkv.html?file=/gguf/<name>.gguf&threads=1&reps=3&prompt=8&tokens=64&prefill=128
// Result: window.__race = { runtime, build, threads, load_ms, prefill: [ms], decode: [{ steps, ms }] } or { error }.
//  - prefill: a forward of `prefill` tokens to the last position's logits (wall ms);
//  - decode: generate() greedy (temperature 0) after a `prompt`-token prompt, `tokens` new tokens;
//    timed from the first token (the prompt's) to the last: tokens - 1 steps of one token each.
import { idsOf } from './ids.js';

const p = new URLSearchParams(location.search);
const threads = Number(p.get('threads'));
const REPS = Number(p.get('reps')), PROMPT = Number(p.get('prompt')), TOKENS = Number(p.get('tokens')), PREFILL = Number(p.get('prefill'));

async function run() {
  const qkv = await import('/dist/index.js');
  qkv.env.numThreads = threads;
  await qkv.init();  // 'auto': relaxed SIMD where validated, the threads twin when numThreads > 1
  const t0 = performance.now();
  const model = await qkv.loadModel(new URL(p.get('file'), location.href).href);
  const out = { runtime: 'qkv', build: qkv.env.loadedVariant, threads: qkv.env.threads, crossOriginIsolated, load_ms: performance.now() - t0, prefill: [], decode: [] };
  const V = model.config.vocab_size;
  await model.forward(idsOf(32, V, 99), { logits: 'last' });  // warm-up: V8 tiers the wasm up
  for (let r = 0; r < REPS; r++) {
    const a = performance.now();
    await model.forward(idsOf(PREFILL, V, r), { logits: 'last' });
    out.prefill.push(performance.now() - a);
  }
  for (let r = 0; r < REPS; r++) {
    let a, steps = 0;
    for await (const s of model.generate(idsOf(PROMPT, V, r), { maxNewTokens: TOKENS, temperature: 0 })) {
      if (s.index === 0) a = performance.now();
      else steps++;
    }
    out.decode.push({ steps, ms: performance.now() - a });
  }
  model.dispose();
  qkv.dispose();
  return out;
}

run().then((r) => { window.__race = r; }, (e) => { window.__race = { error: String(e?.stack ?? e) }; });
