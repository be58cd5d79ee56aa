// model.forward with signal / onProgress / chunkSize (web/lib/model/chunked.ts): the prompt runs
// through the KV-cache session a chunk at a time. The results equal the single call's (bit for
// bit where the kernels add in the same order, else within a measured tolerance), progress is
// reported, an abort rejects with AbortError within one chunk and leaves the model usable.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { ROOT, api, buildSafetensors, llamaConfig, randomLlamaTensors } from './model-helpers.js';

const qkv = await api();
after(() => qkv.dispose());

const ids = (L, V, seed = 3) => Array.from({ length: L }, (_, i) => (i * 7 + seed) % V);

/** Largest |a - b| over two forward results (logits, every attention, queries and keys). */
function maxDiff(a, b) {
  const d = (x, y) => {
    assert.deepEqual(y.shape, x.shape);
    let m = 0;
    for (let i = 0; i < x.data.length; i++) m = Math.max(m, Math.abs(x.data[i] - y.data[i]));
    return m;
  };
  let m = d(a.logits, b.logits);
  assert.equal(b.attentions?.length, a.attentions?.length);
  for (let l = 0; l < (a.attentions?.length ?? 0); l++) m = Math.max(m, d(a.attentions[l], b.attentions[l]));
  assert.equal(b.queriesKeys?.length, a.queriesKeys?.length);
  for (let l = 0; l < (a.queriesKeys?.length ?? 0); l++) {
    m = Math.max(m, d(a.queriesKeys[l].queries, b.queriesKeys[l].queries), d(a.queriesKeys[l].keys, b.queriesKeys[l].keys));
  }
  return m;
}

let gpt2; // tiny-kjv: GPT-2 layout, 4 layers x 4 heads, context 256
let llama; // Llama (GQA 4/2), context 64
let qwen; // Qwen2 with a sliding window of 37 on layer 1, context 300
let gpt2f16; // GPT-2 layout with F16 weights of real size (std 0.2)
before(async () => {
  gpt2 = await qkv.loadModel(path.join(ROOT, 'web', 'models', 'tiny-kjv'));
  gpt2f16 = await qkv.loadModel(path.join(ROOT, 'tests', 'data', 'f16', 'gpt2-f16'));
  llama = await qkv.loadModel(path.join(ROOT, 'tests', 'data', 'llama', 'llama-rope3'));
  const cfg = llamaConfig({ model_type: 'qwen2', positions: 300, window: 37, layers: 2, hidden: 64, heads: 4, kvHeads: 2, intermediate: 96, vocab: 100 });
  qwen = await qkv.loadModel({ config: cfg, weights: buildSafetensors(randomLlamaTensors(cfg, 3)) });
});
after(() => { gpt2.dispose(); llama.dispose(); qwen.dispose(); gpt2f16.dispose(); });

const everything = { outputAttentions: true, outputQueriesKeys: true };

// chunkSize 1 runs every matmul as a matrix-vector product: with the float weights held in
// panels (src/matmul/weights.hpp) it adds each output's products in the matrix product's order,
// so a token decoded alone gets its bits in a prefill, F32 and F16 alike
for (const [name, model, L, sizes] of [
  ['GPT-2 (tiny-kjv)', () => gpt2, 200, [1, 2, 5, 64, 65, 199, 200, 1000]],
  ['Llama (llama-rope3)', () => llama, 64, [1, 2, 7, 63]],
  ['GPT-2 with F16 weights (gpt2-f16)', () => gpt2f16, 40, [1, 7]],
  ['Qwen2 with a sliding window', () => qwen, 300, [64, 128]],
]) {
  test(`${name}: chunked forward equals the single call bit for bit (attentions, q/k, logits all and last)`, async () => {
    const m = model();
    const x = ids(L, m.dims.vocab);
    for (const logits of ['all', 'last']) {
      const ref = await m.forward(x, { ...everything, logits });
      for (const chunkSize of [undefined, ...sizes]) {
        const got = await m.forward(x, { ...everything, logits, chunkSize, onProgress: () => {} });
        assert.equal(maxDiff(ref, got), 0, `chunkSize ${chunkSize ?? 'default'}, logits '${logits}'`);
      }
    }
    // attentions only (no q/k), and logits only
    assert.equal(maxDiff(await m.forward(x, { outputAttentions: true }), await m.forward(x, { outputAttentions: true, chunkSize: sizes[0] })), 0);
    assert.equal(maxDiff(await m.forward(x), await m.forward(x, { chunkSize: sizes[0] })), 0);
  });
}

test('chunk sizes whose rows take another kernel path: within float rounding (measured, stated here)', async () => {
  // With a sliding window, a chunk that does not start on the attention kernel's 64-row query
  // tile starts its key tiles elsewhere. Measured max |diff| (simd): Qwen2 with window 1.2e-4
  // (chunkSize 1) and 1.2e-5 (chunkSize 16); bound 1e-3. (GPT-2 and Llama at chunkSize 1 differed
  // by 9.5e-6 and 1.4e-6 before the panels; now they are bit for bit, above.)
  for (const [m, L, chunkSize] of [[qwen, 300, 1], [qwen, 300, 16]]) {
    const x = ids(L, m.dims.vocab);
    const d = maxDiff(await m.forward(x, everything), await m.forward(x, { ...everything, chunkSize }));
    assert.ok(d < 1e-3, `${m}: chunkSize ${chunkSize}: max |diff| ${d}`);
  }
});

test('onProgress: (0, L) first, then after each chunk, increasing, ending at (L, L)', async () => {
  for (const [L, chunkSize, expected] of [
    [200, 64, [0, 64, 128, 192, 200]],
    [129, 64, [0, 64, 129]], // a last chunk of one token joins the one before
    [1, 64, [0, 1]],
    [5, 2, [0, 2, 5]],
  ]) {
    const calls = [];
    await gpt2.forward(ids(L, 256), { chunkSize, onProgress: (done, total) => calls.push([done, total]) });
    assert.deepEqual(calls, expected.map((d) => [d, L]), `L ${L}, chunkSize ${chunkSize}`);
  }
});

test('the event loop runs between chunks (a page would paint, a click would land)', async () => {
  let ticks = 0;
  let running = true;
  const tick = () => { ticks++; if (running) setImmediate(tick); };
  setImmediate(tick);
  const calls = [];
  await gpt2.forward(ids(256, 256), { outputAttentions: true, chunkSize: 32, onProgress: (d) => calls.push([d, ticks]) });
  running = false;
  // between each chunk's report and the next, at least one other macrotask ran
  for (let i = 2; i < calls.length; i++) assert.ok(calls[i][1] > calls[i - 1][1], `no event between chunks ${i - 1} and ${i}: ${JSON.stringify(calls)}`);
});

test('abort before the start rejects with AbortError at once; no progress is reported', async () => {
  const ac = new AbortController();
  ac.abort();
  let calls = 0;
  await assert.rejects(gpt2.forward(ids(100, 256), { signal: ac.signal, onProgress: () => calls++ }),
    (e) => e instanceof DOMException && e.name === 'AbortError');
  assert.equal(calls, 0);
  // an abort with a reason rejects with that reason, as fetch does
  const why = new AbortController();
  why.abort(new Error('user left the page'));
  await assert.rejects(gpt2.forward(ids(10, 256), { signal: why.signal }), /user left the page/);
});

test('abort mid-way rejects with AbortError within one chunk; the model then runs forward and generate as before', async () => {
  for (const m of [gpt2, qwen]) {
    const L = m === gpt2 ? 200 : 300;
    const x = ids(L, m.dims.vocab);
    const ref = await m.forward(x, { ...everything, logits: 'last' });
    const ac = new AbortController();
    const seen = [];
    const p = m.forward(x, { ...everything, signal: ac.signal, onProgress: (done) => { seen.push(done); if (done === 64) ac.abort(); } });
    await assert.rejects(p, (e) => e.name === 'AbortError');
    assert.deepEqual(seen, [0, 64], 'no chunk ran after the abort');
    // an abort from outside (a timer: a Cancel click) while the pass is running
    const late = new AbortController();
    const seen2 = [];
    const q = m.forward(x, { outputAttentions: true, signal: late.signal, chunkSize: 16, onProgress: (done) => seen2.push(done) });
    setImmediate(() => late.abort());
    await assert.rejects(q, (e) => e.name === 'AbortError');
    assert.ok(seen2.at(-1) < L, `stopped before the end: ${seen2}`);
    // usable: both paths give the reference again, and the KV cache of generate starts empty
    assert.equal(maxDiff(ref, await m.forward(x, { ...everything, logits: 'last' })), 0);
    assert.equal(maxDiff(ref, await m.forward(x, { ...everything, logits: 'last', signal: new AbortController().signal })), 0);
    const tokens = async () => { const out = []; for await (const s of m.generate(x.slice(0, 20), { maxNewTokens: 5, temperature: 0 })) out.push(s.token); return out; };
    const before = await tokens();
    await assert.rejects(m.forward(x, { signal: AbortSignal.abort() }), (e) => e.name === 'AbortError');
    assert.deepEqual(await tokens(), before);
  }
});

test('options are checked: signal, onProgress, chunkSize (Error naming model.forward and the option)', async () => {
  const x = ids(8, 256);
  await assert.rejects(gpt2.forward(x, { signal: {} }), /^TypeError: model\.forward: options\.signal must be an AbortSignal, got an object$/);
  await assert.rejects(gpt2.forward(x, { signal: new AbortController() }), /model\.forward: options\.signal must be an AbortSignal, got an AbortController/);
  await assert.rejects(gpt2.forward(x, { onProgress: 'yes' }), /^TypeError: model\.forward: options\.onProgress must be a function, got "yes"$/);
  for (const bad of [0, -1, 1.5, '64', NaN]) {
    await assert.rejects(gpt2.forward(x, { chunkSize: bad }), /^RangeError: model\.forward: options\.chunkSize must be an integer >= 1 \(tokens per chunk\), got /);
  }
  await assert.rejects(gpt2.forward(x, { onprogress: () => {} }), /model\.forward: unknown option 'onprogress' \(known options: .*onProgress/);
});

test('chunked forwards on one model run one after another; one supersedes a suspended generation; none after dispose', async () => {
  const x = ids(150, 256);
  const ref = await gpt2.forward(x, everything);
  // three at once, through the one session: each gets its own right answer
  const order = [];
  const all = await Promise.all([1, 2, 3].map((n) => gpt2.forward(x.slice(0, 150 - n), { ...everything, chunkSize: 32, onProgress: (d) => order.push(n) })));
  all.forEach((r, i) => {
    const L = 150 - (i + 1);
    assert.equal(r.attentions[0].shape[2], L);
    assert.deepEqual(r.logits.data.subarray(0, 3), ref.logits.data.subarray(0, 3));
  });
  assert.deepEqual(order, [...order].sort(), `not interleaved: ${order}`);
  // one aborted while it waits for another leaves at once; the one after it still waits its turn
  const first = gpt2.forward(x, { chunkSize: 16, outputAttentions: true });
  const ac = new AbortController();
  let waitingRan = false;
  const waiting = gpt2.forward(x, { signal: ac.signal, onProgress: () => { waitingRan = true; } });
  const third = gpt2.forward(x, { chunkSize: 16 });
  ac.abort();
  await assert.rejects(waiting, (e) => e.name === 'AbortError');
  assert.equal(waitingRan, false);
  assert.equal(maxDiff({ logits: ref.logits, attentions: ref.attentions }, await first), 0);
  assert.equal(maxDiff({ logits: ref.logits }, await third), 0);
  // a generation suspended at a step gives the session up to a chunked forward: it is then done
  const it = gpt2.generate(x.slice(0, 10), { maxNewTokens: 3, temperature: 0 });
  await it.next();
  assert.equal(maxDiff({ logits: ref.logits, attentions: ref.attentions }, await gpt2.forward(x, { chunkSize: 32, outputAttentions: true })), 0);
  assert.deepEqual(await it.next(), { done: true, value: undefined });
  assert.equal(maxDiff(ref, await gpt2.forward(x, everything)), 0, 'the single call still works');
  // and a generation cannot start while a chunked forward runs
  const p = gpt2.forward(x, { chunkSize: 16, outputAttentions: true });
  await new Promise((r) => setImmediate(r));
  await assert.rejects(gpt2.generate(x.slice(0, 10), { maxNewTokens: 2 }).next(), /model\.generate: a forward pass with signal, onProgress or chunkSize is running on this model/);
  assert.equal(maxDiff({ logits: ref.logits, attentions: ref.attentions }, await p), 0);
  // disposed while running: a clear Error, not a trap
  const cfg = llamaConfig();
  const m = await qkv.loadModel({ config: cfg, weights: buildSafetensors(randomLlamaTensors(cfg, 5)) });
  const q = m.forward(ids(60, 64), { chunkSize: 8, onProgress: (d) => { if (d === 8) m.dispose(); } });
  await assert.rejects(q, /model\.forward: the model was disposed during the forward pass/);
});
