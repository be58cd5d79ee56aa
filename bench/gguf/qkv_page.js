// The qkv page of bench/gguf/race.mjs: one GGUF file, one thread count, qkv's fastest build
// (the relaxed-SIMD one, its threads twin for 2 threads; plain SIMD where the browser lacks
// relaxed SIMD, which 'auto' picks).
//   qkv.html?file=/gguf/<name>.gguf&threads=1&reps=3&prompt=8&tokens=64&prefill=128
// Result: window.__race = { runtime, build, threads, load_ms, prefill: [region], decode: [{ steps, ...region }] } or { error };
// a region: { wall ms, from, to } (marks: common.js).
//  - prefill: a forward of `prefill` tokens to the last position's logits (wall ms);
//  - decode: generate() greedy (temperature 0) after a `prompt`-token prompt, `tokens` new tokens;
//    timed from the first token (the prompt's) to the last: tokens - 1 steps of one token each,
//    fewer where a decode passes `budget` ms (the runner's --budget-s: a loaded machine).
import { idsOf, mark, span } from './common.js';

const p = new URLSearchParams(location.search);
const threads = Number(p.get('threads'));
const REPS = Number(p.get('reps')), PROMPT = Number(p.get('prompt')), TOKENS = Number(p.get('tokens')), PREFILL = Number(p.get('prefill'));
const BUDGET = Number(p.get('budget'));  // ms a decode may take: it stops after the step that passes it

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
    const a = await mark();
    await model.forward(idsOf(PREFILL, V, r), { logits: 'last' });
    out.prefill.push(span(a, await mark()));
  }
  for (let r = 0; r < REPS; r++) {
    let a, steps = 0;
    for await (const s of model.generate(idsOf(PROMPT, V, r), { maxNewTokens: TOKENS, temperature: 0 })) {
      if (s.index === 0) a = await mark();
      else if (++steps && performance.now() - a.wall > BUDGET) break;
    }
    out.decode.push({ steps, ...span(a, await mark()) });
  }
  model.dispose();
  qkv.dispose();
  return out;
}

run().then((r) => { window.__race = r; }, (e) => { window.__race = { error: String(e?.stack ?? e) }; });
