// loadModel's options: weights as stored or converted ('auto' | 'f32' | 'f16' | 'int8') against
// the F32 path and PyTorch, model.safetensors streamed into wasm memory with progress and an
// AbortSignal (from a folder, over HTTP, from a Blob), damaged and truncated downloads, forward's
// logits 'last', memoryUsage().
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { DATA, api, argmax, manifest, readF32 } from './model-helpers.js';

const qkv = await api();
after(() => qkv.dispose());

const M = manifest('random-gpt2.json');
const DIR = path.join(DATA, M.model_dir);
const FILE = readFileSync(path.join(DIR, 'model.safetensors'));
const CONFIG = readFileSync(path.join(DIR, 'config.json'), 'utf8');

// A local server for the random GPT-2's folder at /<mode>/: how model.safetensors is served.
// plain; truncate-N: its first N bytes as the whole file; drop-N: N bytes under the full
// Content-Length, then the connection drops; encoded: with Content-Encoding (size unknown in
// advance); slow: in 64 KiB pieces 5 ms apart.
let server, root;
const folder = (mode) => `${root}/${mode}/`;
before(async () => {
  server = createServer(async (req, res) => {
    const [, mode, name] = req.url.split('/');
    const arg = Number(mode.split('-')[1]);
    let body;
    try {
      body = readFileSync(path.join(DIR, name));
    } catch {
      return res.writeHead(404).end();
    }
    const weights = name === 'model.safetensors';
    if (weights && mode.startsWith('truncate-')) body = body.subarray(0, arg);
    const headers = { 'content-length': String(body.length) };
    if (weights && mode === 'encoded') {
      delete headers['content-length'];
      headers['content-encoding'] = 'identity, '; // not plain identity: the length is not trusted
    }
    res.writeHead(200, headers);
    if (weights && mode.startsWith('drop-')) {
      res.write(body.subarray(0, arg));
      return setTimeout(() => res.destroy(), 20);
    }
    if (weights && mode === 'slow') {
      for (let at = 0; at < body.length && !res.destroyed; at += 65536) {
        res.write(body.subarray(at, at + 65536));
        await new Promise((r) => setTimeout(r, 5));
      }
      return res.end();
    }
    res.end(body);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  root = `http://127.0.0.1:${server.address().port}`;
});
after(() => server?.close());

function maxAbs(a, b) {
  let w = 0;
  for (let i = 0; i < a.length; i++) w = Math.max(w, Math.abs(a[i] - b[i]));
  return w;
}

test("weights 'auto' | 'f32' | 'f16' | 'int8': logits vs PyTorch within each dtype's tolerance; where the bytes are", async () => {
  const c = M.cases[0];
  const ref = readF32(c.logits.file);
  const V = M.config.vocab_size;
  // max abs logits error vs PyTorch (float64), as the C++ tests state them per dtype
  const tol = { auto: 1e-4, f32: 1e-4, f16: 0.03, int8: 0.6 };
  const dtype = { auto: 'F32', f32: 'F32', f16: 'F16', int8: 'Q8' };
  const fileBytes = FILE.byteLength;
  const got = {};
  for (const weights of ['auto', 'f32', 'f16', 'int8']) {
    const model = await qkv.loadModel(DIR, { weights });
    try {
      const { logits } = await model.forward(c.ids);
      const err = maxAbs(logits.data, ref);
      assert.ok(err <= tol[weights], `${weights}: logits max abs err ${err} > ${tol[weights]}`);
      assert.equal(argmax(logits.data, (c.ids.length - 1) * V, V), c.last_logits_argmax);
      const mem = model.memoryUsage();
      got[weights] = mem;
      assert.equal(mem.dtype, dtype[weights]);
      assert.ok(mem.wasmHeap >= mem.weights + mem.kvCache);
      assert.equal(mem.kvCache, 0, `${weights}: no KV cache before a generation`);
      if (weights === 'auto') {
        // generate() sizes the caches once for prompt + maxNewTokens (at least 64 positions, at most
        // n_positions: 64 here, so the C++ tests check the sizes in between)
        const maxNew = 20;
        for await (const _ of model.generate(c.ids, { maxNewTokens: maxNew, temperature: 0 })) { /* run to the end */ }
        const { n_layer, n_head, n_embd, n_positions } = M.config;
        const positions = Math.min(n_positions, Math.max(64, c.ids.length + maxNew));
        assert.equal(model.memoryUsage().kvCache, n_layer * 2 * n_embd * positions * 4,
          `the caches hold ${positions} positions of ${n_layer} layers x ${n_head} heads`);
      }
      if (weights === 'auto' || weights === 'f32') {
        assert.equal(mem.file, fileBytes, 'read in place from the file buffer');
        assert.equal(mem.converted, 0);
      } else {
        assert.equal(mem.file, 0, 'the file buffer is freed after converting');
        assert.ok(mem.converted >= mem.weights);
      }
    } finally {
      model.dispose();
    }
  }
  assert.ok(got.f16.weights < 0.51 * got.auto.weights, `f16 holds ${got.f16.weights} of ${got.auto.weights}`);
  assert.ok(got.int8.weights < 0.35 * got.auto.weights, `int8 holds ${got.int8.weights} of ${got.auto.weights}`);
});

test("forward logits: 'last' is the last row of 'all'; bad values are errors", async () => {
  const model = await qkv.loadModel(DIR);
  try {
    const ids = M.cases[0].ids;
    const V = M.config.vocab_size;
    const all = await model.forward(ids);
    const last = await model.forward(ids, { logits: 'last' });
    assert.deepEqual(last.logits.shape, [1, 1, V]);
    assert.ok(maxAbs(last.logits.data, all.logits.data.subarray((ids.length - 1) * V)) <= 1e-5);
    await assert.rejects(model.forward(ids, { logits: 'first' }), /model\.forward: options\.logits must be 'all' or 'last', got "first"/);
  } finally {
    model.dispose();
  }
});

test('model.safetensors streams with progress: from a folder, over HTTP (length known or not), from a Blob', async () => {
  const want = await (async () => {
    const m = await qkv.loadModel(DIR);
    const { logits } = await m.forward(M.cases[0].ids);
    m.dispose();
    return logits.data;
  })();
  const sources = {
    folder: DIR,
    http: folder('plain'),
    'http, length unknown': folder('encoded'),
    blob: { config: CONFIG, weights: new Blob([FILE]), vocab: readFileSync(path.join(DIR, 'vocab.json'), 'utf8'), merges: readFileSync(path.join(DIR, 'merges.txt'), 'utf8') },
  };
  for (const [name, source] of Object.entries(sources)) {
    const events = [];
    const model = await qkv.loadModel(source, { onProgress: (p) => events.push(p) });
    try {
      const { logits } = await model.forward(M.cases[0].ids);
      assert.deepEqual(logits.data, want, `${name}: same logits`);
    } finally {
      model.dispose();
    }
    assert.ok(events.length >= 1, `${name}: progress reported`);
    for (const e of events) assert.equal(e.file, 'model.safetensors');
    for (let i = 1; i < events.length; i++) assert.ok(events[i].loaded > events[i - 1].loaded, `${name}: loaded grows`);
    const last = events[events.length - 1];
    assert.equal(last.loaded, FILE.byteLength, `${name}: every byte arrived`);
    assert.equal(last.total, name === 'http, length unknown' ? undefined : FILE.byteLength);
  }
});

test('an AbortSignal stops the download and the load; the heap buffer is freed', async () => {
  const before = (await qkv.loadModel(DIR)).memoryUsage().wasmHeap;
  const ac = new AbortController();
  let calls = 0;
  const p = qkv.loadModel(folder('slow'), {
    signal: ac.signal,
    onProgress: (e) => {
      if (++calls === 2) ac.abort(new Error('user cancelled'));
      assert.ok(e.loaded < FILE.byteLength);
    },
  });
  await assert.rejects(p, /user cancelled/);
  // aborted before anything: rejects at once
  const done = new AbortController();
  done.abort();
  await assert.rejects(qkv.loadModel(DIR, { signal: done.signal }), (e) => e.name === 'AbortError');
  // loading again works and the heap did not keep growing by a file per aborted load
  for (let i = 0; i < 3; i++) {
    const again = new AbortController();
    const q = qkv.loadModel(DIR, { signal: again.signal, onProgress: () => again.abort() });
    await assert.rejects(q, (e) => e.name === 'AbortError');
  }
  const m = await qkv.loadModel(DIR);
  assert.ok(m.memoryUsage().wasmHeap <= before + 4 * FILE.byteLength);
  m.dispose();
});

test('a truncated or damaged download gives the same errors as the file would (read whole, or converted as it streams)', async () => {
  const tok = { vocab: readFileSync(path.join(DIR, 'vocab.json'), 'utf8'), merges: readFileSync(path.join(DIR, 'merges.txt'), 'utf8') };
  for (const weights of ['auto', 'int8']) {
    for (const cut of [1000, 20000]) {  // inside the header; inside the data
      const localErr = await qkv.loadModel({ config: CONFIG, weights: FILE.subarray(0, cut), ...tok }, { weights }).then(() => null, (e) => e.message);
      assert.match(localErr, /safetensors: .*(truncated|header length)/, `${weights}, ${cut} bytes`);
      const remote = await qkv.loadModel(folder(`truncate-${cut}`), { weights }).then(() => null, (e) => e.message);
      assert.equal(remote, localErr, `${weights}, ${cut} bytes`);
    }
    // the connection drops mid-body: an Error naming the URL
    for (const at of [100, 50000]) {
      await assert.rejects(qkv.loadModel(folder(`drop-${at}`), { weights }),
        new RegExp(`loadModel: (reading|cannot fetch) http://127\\.0\\.0\\.1:\\d+/drop-${at}/model\\.safetensors`), `${weights}, drop at ${at}`);
    }
    // a damaged header
    const bad = Uint8Array.from(FILE);
    bad[8] = 0x78; // 'x' where the JSON header's '{' was
    await assert.rejects(qkv.loadModel({ config: CONFIG, weights: new Blob([bad]), ...tok }, { weights }), /loadModel: safetensors: header does not start with '\{'/);
  }
});

test('loadModel options are checked before anything is read', async () => {
  await assert.rejects(qkv.loadModel(DIR, { weights: 'q4' }), /loadModel: options\.weights must be 'auto', 'f32', 'f16', 'int8', 'int4', got "q4"/);
  await assert.rejects(qkv.loadModel(DIR, { onProgress: 5 }), /loadModel: options\.onProgress must be a function, got 5/);
  await assert.rejects(qkv.loadModel(DIR, { signal: {} }), /loadModel: options\.signal must be an AbortSignal/);
  await assert.rejects(qkv.loadModel(DIR, { weigths: 'f16' }), /loadModel: unknown option 'weigths'/);
});
