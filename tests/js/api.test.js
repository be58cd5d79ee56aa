// API behaviour beyond the numbers: loading and variant choice, env, sync entry points,
// lifetimes (dispose, FinalizationRegistry), memory errors the module survives.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test, after } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import * as qkv from 'qkv';
import { probes, relaxedSimdSupported } from '../../dist/wasm/loader.js';

const { Tensor } = qkv;
const f = (shape, x = 0.5) => new Tensor(new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(x), shape);
after(() => qkv.dispose());

test('sync entry points need the module loaded first, with a clear message', () => {
  // A fresh process: nothing loaded yet.
  const code = `import * as q from ${JSON.stringify(new URL('../../dist/index.js', import.meta.url).href)};
    const t = new q.Tensor(new Float32Array(8), [1, 1, 1, 8]);
    try { q.scaledDotProductAttentionSync(t, t, t); } catch (e) { console.log(e.message); }
    try { new q.KVCache({ numKvHeads: 1, maxLength: 2, headDim: 8 }); } catch (e) { console.log(e.message); }
    console.log(q.env.loadedVariant, q.memoryUsage());`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(r.stdout.trim().split('\n'), [
    'scaledDotProductAttentionSync: the wasm module is not loaded yet; call `await init()` (or any async qkv function) first',
    'KVCache: the wasm module is not loaded yet; call `await init()` (or any async qkv function) first',
    'null null',
  ]);
});

test("auto picks SIMD + threads in Node when numThreads > 1, SIMD with 1 (relaxed where the engine has it); forcing works", async () => {
  const relaxed = relaxedSimdSupported() ? 'simd-relaxed' : 'simd';
  qkv.dispose();
  qkv.env.variant = 'auto';
  qkv.env.numThreads = 2;
  assert.deepEqual(await qkv.init(), { variant: `${relaxed}-threads`, threads: 2 });
  qkv.env.numThreads = 8; // capped by the pool created at load
  assert.equal(qkv.env.threads, 2);
  qkv.dispose();
  qkv.env.numThreads = 1;
  assert.deepEqual(await qkv.init(), { variant: relaxed, threads: 1 });
  qkv.dispose();
  assert.deepEqual(await qkv.init({ variant: 'scalar' }), { variant: 'scalar', threads: 1 });
  qkv.dispose();
  qkv.env.variant = 'auto';
  qkv.env.numThreads = 2;
});

test('default numThreads is min(4, cores)', async () => {
  const code = `import * as q from ${JSON.stringify(new URL('../../dist/index.js', import.meta.url).href)};
    import os from 'node:os'; console.log(q.env.numThreads === Math.min(4, os.availableParallelism()));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
  assert.equal(r.stdout.trim(), 'true', r.stderr);
});

test('env.wasmPaths overrides where the files are found', async () => {
  qkv.dispose();
  qkv.env.wasmPaths = '/nonexistent/qkv/';
  await assert.rejects(qkv.init({ variant: 'simd' }), /nonexistent/);
  qkv.env.wasmPaths = fileURLToPath(new URL('../../dist/wasm/', import.meta.url)); // a plain directory path works too
  assert.equal((await qkv.init()).variant, 'simd');
  qkv.dispose();
  qkv.env.wasmPaths = undefined;
  qkv.env.variant = 'auto';
});

test('a request the heap cannot hold is a RangeError and the module keeps working', async () => {
  await qkv.init();
  const big = f([1, 1, 100000, 1]);
  await assert.rejects(qkv.scaledDotProductAttention(big, big, big, { returnWeights: true }), RangeError);
  // A request that passes the up-front estimate (just under the heap's 4 GiB) but cannot be
  // allocated: its keys alone are one 2 GiB block, more than the heap's malloc hands out in one
  // piece (wasm/heap_alloc.hpp); C++ throws bad_alloc inside the constructor, caught at the boundary.
  let error;
  try {
    const c = await qkv.KVCache.create({ numKvHeads: 1, maxLength: 2 ** 25 - 64, headDim: 16, valueDim: 16 });
    c.dispose();
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof RangeError, `expected RangeError, got ${error}`);
  assert.match(error.message, /^KVCache: out of wasm memory/);
  assert.equal(qkv.memoryUsage().liveObjects, 0);
  const t = f([1, 2, 3, 8]);
  const { output } = await qkv.scaledDotProductAttention(t, t, t);
  assert.equal(output.data[0], 0.5);
  qkv.dispose(); // drop the grown heap
});

test('shapes: rank 2 and 3 inputs keep their rank; weights follow', async () => {
  const r2 = await qkv.scaledDotProductAttention(f([3, 4]), f([5, 4]), f([5, 2]), { returnWeights: true });
  assert.deepEqual(r2.output.shape, [3, 2]);
  assert.deepEqual(r2.weights.shape, [3, 5]);
  const r3 = await qkv.scaledDotProductAttention(f([2, 3, 4]), f([2, 5, 4]), f([2, 5, 4]));
  assert.deepEqual(r3.output.shape, [2, 3, 4]);
  assert.equal(r3.weights, undefined);
});

test('options.out: the output is written into the caller\'s array, bit for bit what a fresh one holds', async () => {
  const rand = (shape, seed) => {
    const n = shape.reduce((a, b) => a * b, 1), d = new Float32Array(n);
    for (let i = 0; i < n; i++) d[i] = Math.sin(seed * 7.1 + i * 1.3);
    return new Tensor(d, shape);
  };
  const q = rand([1, 2, 5, 8], 1), k = rand([1, 2, 7, 8], 2), v = rand([1, 2, 7, 8], 3);
  const fresh = await qkv.scaledDotProductAttention(q, k, v, { isCausal: true });
  const out = new Float32Array(2 * 5 * 8).fill(NaN);
  const r = await qkv.scaledDotProductAttention(q, k, v, { isCausal: true, out });
  assert.equal(r.output.data, out, 'the result wraps the caller\'s array');
  assert.deepEqual(r.output.shape, [1, 2, 5, 8]);
  assert.deepEqual(out, fresh.output.data);
  const s = qkv.scaledDotProductAttentionSync(q, k, v, { isCausal: true, out: new Float32Array(80) });
  assert.deepEqual(s.output.data, fresh.output.data);
  // the query's own array as out: inputs are read before the output is written
  const q2 = new Tensor(q.data.slice(), q.shape);
  const alias = await qkv.scaledDotProductAttention(q2, k, v, { isCausal: true, out: q2.data });
  assert.equal(alias.output.data, q2.data);
  assert.deepEqual(q2.data, fresh.output.data);
  // KVCache.attend takes it too
  const cache = await qkv.KVCache.create({ numKvHeads: 2, maxLength: 8, headDim: 8 });
  cache.append(k, v);
  const cached = new Float32Array(80);
  const c = await cache.attend(q, { isCausal: true, out: cached });
  assert.equal(c.output.data, cached);
  assert.deepEqual(cached, fresh.output.data);
  cache.dispose();
});

test('fully masked rows give output 0 and weights 0, never NaN', async () => {
  const mask = new Tensor(new Uint8Array([0, 0, 0, 1, 1, 1]), [2, 3]);
  const r = await qkv.scaledDotProductAttention(f([2, 4], 1), f([3, 4]), f([3, 4], 2), { attnMask: mask, returnWeights: true });
  assert.deepEqual(Array.from(r.output.data), [0, 0, 0, 0, 2, 2, 2, 2]);
  assert.deepEqual(Array.from(r.weights.data).map((x) => +x.toFixed(6)), [0, 0, 0, 0.333333, 0.333333, 0.333333]);
});

test('dispose() frees every live object and the module; objects report disposed', async () => {
  await qkv.init();
  const cache = await qkv.KVCache.create({ numKvHeads: 1, maxLength: 4, headDim: 8 });
  const mha = new qkv.MultiHeadAttention({ embedDim: 4, numHeads: 2, weights: { inProjWeight: new Float32Array(48), outProjWeight: new Float32Array(16) } });
  await mha.forward(f([1, 2, 4]), f([1, 2, 4]), f([1, 2, 4]));
  assert.equal(qkv.memoryUsage().liveObjects, 2);
  qkv.dispose();
  assert.equal(qkv.memoryUsage(), null);
  assert.equal(cache.disposed, true);
  assert.equal(mha.disposed, true);
  assert.throws(() => cache.append(f([1, 1, 1, 8]), f([1, 1, 1, 8])), /^Error: KVCache.append: the cache was disposed$/);
  await assert.rejects(mha.forward(f([1, 2, 4]), f([1, 2, 4]), f([1, 2, 4])), /this MultiHeadAttention was disposed/);
  cache.dispose(); // idempotent
  // and the next call loads afresh
  const { output } = await qkv.scaledDotProductAttention(f([1, 1, 1, 2]), f([1, 1, 1, 2]), f([1, 1, 1, 2]));
  assert.equal(output.data[0], 0.5);
});

test('the FinalizationRegistry frees caches users forget', async () => {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc');
  await qkv.init();
  const base = qkv.memoryUsage();
  (() => {
    for (let i = 0; i < 20; i++) new qkv.KVCache({ numKvHeads: 2, maxLength: 1024, headDim: 64 }); // 1 MiB each, never disposed
  })();
  assert.equal(qkv.memoryUsage().liveObjects, base.liveObjects + 20);
  for (let i = 0; i < 20 && qkv.memoryUsage().liveObjects > base.liveObjects; i++) {
    gc();
    await new Promise((ok) => setTimeout(ok, 10));
  }
  const now = qkv.memoryUsage();
  assert.equal(now.liveObjects, base.liveObjects);
  assert.equal(now.inUseBytes, base.inUseBytes);
});

test('Tensor basics', () => {
  const t = new Tensor(new Uint8Array(6), [2, 3]);
  assert.equal(t.dtype, 'bool');
  assert.equal(t.size, 6);
  assert.ok(Object.isFrozen(t.shape));
  assert.equal(String(t), 'Tensor(bool, [2, 3])');
  t.dispose();
  assert.equal(t.disposed, true);
  assert.equal(t.data.length, 0);
});

test('many concurrent async calls all complete correctly', async () => {
  await qkv.init();
  const calls = Array.from({ length: 50 }, (_, i) => qkv.scaledDotProductAttention(f([1, 2, 3, 4], i), f([1, 2, 5, 4]), f([1, 2, 5, 4], i)));
  const results = await Promise.all(calls);
  results.forEach((r, i) => assert.ok(Math.abs(r.output.data[0] - i) < 1e-5));
});
