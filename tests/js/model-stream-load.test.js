// A load that converts the weights ('f16', 'int8', 'int4') streams model.safetensors (or a
// sharded checkpoint, joined) through a small wasm buffer and converts each tensor as it
// arrives (web/lib/model/stream-load.ts, src/model/decoder_stream.hpp): the heap holds the
// converted weights, not the file (what memoryUsage() reports, read first in this process); the
// logits equal those of the whole-file path (a download of unknown size is read whole first)
// bit for bit, whatever the chunks (a folder, HTTP in 64 KiB pieces, a Blob, shards); progress
// counts every byte; the signal cancels mid-file and frees what the load held; damage found
// mid-file is the Error the whole-file path gives. The encoders and the encoder-decoder, which
// convert every tensor, always stream: the same bits as the whole-file path.
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { DATA, api, buildSafetensors, gpt2Config, llamaConfig, logitsHex, randomGpt2Tensors, randomLlamaTensors, shardSafetensors } from './model-helpers.js';

const qkv = await api();
after(() => qkv.dispose());

// a Llama (tied: its table is the LM head, quantized too) whose F32 file (~38 MB) is larger than the module's first heap
const big = llamaConfig({ layers: 2, hidden: 256, heads: 4, kvHeads: 2, intermediate: 512, vocab: 32768, tied: true });
const bigTensors = randomLlamaTensors(big, 3);
const bigFile = buildSafetensors(bigTensors);
// GPT-2 (byte-level vocab: no tokenizer files), wte [256, 64]: four strips of 64 rows
const gpt2 = gpt2Config({ n_embd: 64, n_head: 4, vocab_size: 256, n_positions: 64 });
const gpt2Tensors = randomGpt2Tensors(gpt2, 5);
const IDS = [1, 5, 9, 33, 2, 63, 17];

let root, server, url;
/** A folder with config.json and model.safetensors, or the index and its shards (read whole). */
function writeFolder(name, cfg, tensors, sharded) {
  const dir = path.join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify(cfg));
  if (!sharded) {
    writeFileSync(path.join(dir, 'model.safetensors'), buildSafetensors(tensors));
  } else {
    const s = shardSafetensors(tensors, Math.ceil(tensors.reduce((a, t) => a + t.bytes.length, 0) / 2));
    writeFileSync(path.join(dir, 'model.safetensors.index.json'), s.index);
    for (const [f, bytes] of Object.entries(s.files)) writeFileSync(path.join(dir, f), bytes);
  }
  return dir;
}

before(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'qkv-stream-'));
  writeFolder('big', big, bigTensors, false);
  writeFolder('big-shards', big, bigTensors, true);
  writeFolder('gpt2', gpt2, gpt2Tensors, false);
  writeFolder('gpt2-shards', gpt2, gpt2Tensors, true);
  cpSync(path.join(DATA, '..', 'encoder', 'random-bert'), path.join(root, 'bert'), { recursive: true });
  cpSync(path.join(DATA, '..', 'seq2seq', 'random-bart'), path.join(root, 'bart'), { recursive: true });
  // /<folder>/<file>: the file in 64 KiB pieces, 1 ms apart, its Content-Length given;
  // /whole/<folder>/<file>: the same without a length (the loader reads it whole first)
  server = createServer(async (req, res) => {
    const parts = req.url.split('/').slice(1);
    const whole = parts[0] === 'whole';
    const [dir, name] = whole ? parts.slice(1) : parts;
    let body;
    try {
      body = readFileSync(path.join(root, dir, name));
    } catch {
      return res.writeHead(404).end();
    }
    res.writeHead(200, whole ? {} : { 'content-length': String(body.length) });
    for (let at = 0; at < body.length && !res.destroyed; at += 65536) {
      res.write(body.subarray(at, at + 65536));
      await new Promise((r) => setTimeout(r, 1));
    }
    res.end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${server.address().port}`;
});
after(() => {
  server?.close();
  rmSync(root, { recursive: true, force: true });
});

test('loading an F32 file (or its shards) as int4 holds the converted weights, not the file', async () => {
  // first in this process: the heap has not grown for anything else yet
  for (const dir of ['big', 'big-shards']) {
    const events = [];
    const m = await qkv.loadModel(path.join(root, dir), { weights: 'int4', onProgress: (e) => events.push(e) });
    const mem = m.memoryUsage();
    m.dispose();
    assert.equal(mem.dtype, 'Q4');
    assert.equal(mem.file, 0);
    assert.ok(mem.weights < bigFile.byteLength / 6, `${dir}: int4 weights ${mem.weights} of a ${bigFile.byteLength}-byte file`);
    assert.ok(mem.wasmHeap < bigFile.byteLength / 2, `${dir}: the heap grew to ${mem.wasmHeap} bytes for a ${bigFile.byteLength}-byte file`);
    // progress: every byte, in order, against the file's (the shards') size
    assert.ok(events.length > 1);
    for (let i = 1; i < events.length; i++) assert.ok(events[i].loaded > events[i - 1].loaded);
    const last = events.at(-1);
    assert.equal(last.loaded, last.total);
    if (dir === 'big') assert.deepEqual(last, { loaded: bigFile.byteLength, total: bigFile.byteLength, file: 'model.safetensors', stage: 'load' });
  }
});

test('the streamed loads give the whole-file loads\' logits bit for bit (folder, HTTP in 64 KiB pieces, Blob, shards)', async () => {
  for (const [name, cfg, tensors] of [['gpt2', gpt2, gpt2Tensors], ['big', big, bigTensors]]) {
    for (const weights of ['int4', 'int8', 'f16']) {
      const whole = await logitsHex(qkv, IDS, `${url}/whole/${name}/`, { weights });
      assert.equal(await logitsHex(qkv, IDS, path.join(root, name), { weights }), whole, `${name} ${weights}: folder`);
      assert.equal(await logitsHex(qkv, IDS, path.join(root, `${name}-shards`), { weights }), whole, `${name} ${weights}: shards`);
      assert.equal(await logitsHex(qkv, IDS, `${url}/${name}/`, { weights }), whole, `${name} ${weights}: HTTP`);
      const blob = { config: JSON.stringify(cfg), weights: new Blob([buildSafetensors(tensors)]) };
      if (name === 'gpt2') assert.equal(await logitsHex(qkv, IDS, blob, { weights }), whole, `${name} ${weights}: Blob`);
    }
  }
});

test('an encoder streams too (always): float32 and int8 give the whole-file logits bit for bit', async () => {
  const ids = [2, 7, 3, 11, 5, 3];
  const hex = async (source, weights) => {
    const m = await qkv.loadModel(source, { weights });
    try {
      return Buffer.from((await m.forward(ids)).logits.data.buffer).toString('hex');
    } finally {
      m.dispose();
    }
  };
  for (const weights of ['auto', 'int8']) {
    const whole = await hex(`${url}/whole/bert/`, weights);
    assert.equal(await hex(path.join(root, 'bert'), weights), whole, `${weights}: folder`);
    assert.equal(await hex(`${url}/bert/`, weights), whole, `${weights}: HTTP in pieces`);
  }
  // cut short: the same Error as the whole file's (the header is whole, a tensor is not)
  const file = readFileSync(path.join(root, 'bert', 'model.safetensors'));
  const cut = { config: readFileSync(path.join(root, 'bert', 'config.json'), 'utf8'), vocabTxt: readFileSync(path.join(root, 'bert', 'vocab.txt'), 'utf8'), weights: file.subarray(0, file.length - 100) };
  await assert.rejects(qkv.loadModel(cut), /loadModel: safetensors: .*truncated or damaged/);
});

test('the encoder-decoder streams too: the whole-file logits bit for bit', async () => {
  const hex = async (source) => {
    const m = await qkv.loadModel(source);
    try {
      return Buffer.from((await m.forward([0, 7, 3, 11, 2], { decoderInputIds: [2, 0, 5, 9] })).logits.data.buffer).toString('hex');
    } finally {
      m.dispose();
    }
  };
  const whole = await hex(`${url}/whole/bart/`);
  assert.equal(await hex(path.join(root, 'bart')), whole, 'folder');
  assert.equal(await hex(`${url}/bart/`), whole, 'HTTP in pieces');
});

test('an AbortSignal stops a streamed load mid-file; what it held is freed', async () => {
  const warm = await qkv.loadModel(path.join(root, 'big'), { weights: 'int8' });
  const before = warm.memoryUsage().wasmHeap;
  warm.dispose();
  for (let i = 0; i < 4; i++) {
    const ac = new AbortController();
    let calls = 0;
    const p = qkv.loadModel(`${url}/big/`, {
      weights: 'int8', signal: ac.signal,
      onProgress: (e) => { if (++calls === 3 + i) ac.abort(new Error('user cancelled')); },
    });
    await assert.rejects(p, /user cancelled/);
  }
  const m = await qkv.loadModel(path.join(root, 'big'), { weights: 'int8' });
  const after = m.memoryUsage().wasmHeap;
  m.dispose();
  // four aborted loads kept nothing: the heap holds what one load needs
  assert.ok(after <= before + bigFile.byteLength / 4, `heap ${before} -> ${after} after four aborted loads`);
});

test('damage found mid-file is the Error the whole-file path gives', async () => {
  // a NaN in layer 1's up_proj: quantizing it fails, after earlier tensors were converted
  const bad = gpt2Tensors.map((t) => ({ ...t, bytes: Uint8Array.from(t.bytes) }));
  const t = bad.find((x) => x.name === 'h.1.mlp.c_fc.weight');
  new DataView(t.bytes.buffer).setFloat32(4 * 100, NaN, true);
  writeFolder('bad', gpt2, bad, false);
  const streamed = await qkv.loadModel(path.join(root, 'bad'), { weights: 'int8' }).then(() => null, (e) => e.message);
  const whole = await qkv.loadModel(`${url}/whole/bad/`, { weights: 'int8' }).then(() => null, (e) => e.message);
  assert.match(streamed, /^loadModel: GPT2: tensor "h\.1\.mlp\.c_fc\.weight": quantize_q8: a weight is nan/);
  assert.equal(streamed, whole);
  // a model loads after it (nothing left half-held)
  assert.equal(typeof (await logitsHex(qkv, IDS, path.join(root, 'gpt2'), { weights: 'int8' })), 'string');
});
