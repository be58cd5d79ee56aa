// The page of bench/model/gpt2_small_browser.mjs: one qkv setting (weights, variant, threads)
// on the GPT-2-small-shaped checkpoint, fetched from the runner's server with loadModel(url).
//   gpt2_small_browser.html?weights=f32|f16|int8&variant=simd&threads=1&prefill=32,128&contexts=8&reps=3&tokens=16[&source=blob]
// source=blob loads as the demo's Hub path does: model.safetensors stored in Cache Storage
// (before the timed load), then handed to loadModel as the cached response's Blob.
// Every timed region is bracketed by GET /mark (the server reads the renderers' threads' CPU
// time and their RSS from /proc and answers the reading's index), so the runner reports CPU
// time and wall time alike. Result: window.__gpt2 = { load, prefill, decode: wall ms and mark
// indices per run, ... } or { error }.

const p = new URLSearchParams(location.search);
const weights = p.get('weights');
const variant = p.get('variant');
const threads = Number(p.get('threads'));
const PREFILL = p.get('prefill').split(',').map(Number);
const CONTEXTS = p.get('contexts').split(',').map(Number);
const REPS = Number(p.get('reps'));
const TOKENS = Number(p.get('tokens'));
const SOURCE = p.get('source') ?? 'url';

/**
 * The folder's files as loadModel's ModelFiles, model.safetensors a Blob from Cache Storage (the
 * demo's Hub cache keeps downloads the same way).
 */
async function filesFromCache(folderUrl) {
  const text = async (name) => {
    const res = await fetch(new URL(name, folderUrl));
    if (!res.ok) throw new Error(`${name}: HTTP ${res.status}`);
    return res.text();
  };
  const url = new URL('model.safetensors', folderUrl).href;
  const cache = await caches.open('qkv-gpt2-small-bench');
  await cache.delete(url);
  const res = await fetch(url);
  if (!res.ok) throw new Error(`model.safetensors: HTTP ${res.status}`);
  await cache.put(url, res);
  const weights = await (await cache.match(url)).blob();
  return { config: await text('config.json'), vocab: await text('vocab.json'), merges: await text('merges.txt'), weights };
}

/** A mark: the time here and the server's reading of the renderers (an index the runner resolves). */
const mark = async () => ({ wall: performance.now(), id: Number(await (await fetch('/mark')).text()) });
/** A timed region: its wall time (ms) and the marks around it. */
const span = (a, b) => ({ wall: b.wall - a.wall, from: a.id, to: b.id });
const idsOf = (L, V) => Array.from({ length: L }, (_, i) => (i * 7919 + 13) % V);

async function run() {
  const qkv = await import('/dist/index.js');
  qkv.env.variant = variant;
  qkv.env.numThreads = threads;
  await qkv.init();
  // the F16 folder is read as stored ('auto'); int8 is quantized on load from the F32 file
  const folder = new URL(`/weights/${weights === 'f16' ? 'f16' : 'f32'}/`, location.href).href;
  const source = SOURCE === 'blob' ? await filesFromCache(folder) : folder;
  let progress = 0, total;
  const m0 = await mark();  // its peak RSS: what the page reached before the load (the Blob source's download and cache.put)
  const model = await qkv.loadModel(source, {
    weights: weights === 'f16' ? 'auto' : weights,
    onProgress: (e) => { progress++; total = e.total; },
  });
  const m1 = await mark();
  // a full GC (the runner launches Chromium with --expose-gc): what the load left as garbage
  globalThis.gc?.();
  const m2 = await mark();
  const V = model.config.vocab_size;
  const out = {
    weights, source: SOURCE, variant: qkv.env.loadedVariant, threads: qkv.env.threads, crossOriginIsolated,
    load: { ...span(m0, m1), progressEvents: progress, bytes: total }, beforeLoad: m0.id, afterLoad: m1.id, afterGc: globalThis.gc ? m2.id : null,
    memory: model.memoryUsage(), prefill: {}, decode: {},
  };
  await model.forward(idsOf(32, V), { logits: 'last' }); // warm-up: V8 tiers the wasm up
  for (const L of PREFILL) {
    out.prefill[L] = [];
    for (let r = 0; r < REPS; r++) {
      const a = await mark();
      await model.forward(idsOf(L, V), { logits: 'last' });
      out.prefill[L].push(span(a, await mark()));
    }
  }
  for (const ctx of CONTEXTS) {
    out.decode[ctx] = [];
    for (let r = 0; r < REPS; r++) {
      let a, n = 0;
      for await (const s of model.generate(idsOf(ctx, V), { maxNewTokens: TOKENS, temperature: 0 })) {
        if (s.index === 0) a = await mark(); // the prefill is done: time the steps after it
        else n++;
      }
      out.decode[ctx].push({ tokens: n, ...span(a, await mark()) });
    }
  }
  out.end = (await mark()).id;
  model.dispose();
  qkv.dispose();
  if (SOURCE === 'blob') await caches.delete('qkv-gpt2-small-bench');
  return out;
}

run().then((r) => { window.__gpt2 = r; }, (e) => { window.__gpt2 = { error: String(e?.stack ?? e) }; });
