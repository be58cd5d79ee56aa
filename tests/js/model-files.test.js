// Loading: GPT-2's BPE tokenizer against the reference encoder, a generated random GPT-2
// checkpoint with BPE files, loading from objects, damaged files -> Errors, dispose.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import {
  DATA, api, buildSafetensors, gpt2Config, manifest, randomGpt2Tensors, rawSafetensors,
} from './model-helpers.js';

const qkv = await api();

test('GPT-2 BPE tokenizer matches the reference encoder (random-gpt2 vocab.json + merges.txt)', async () => {
  const m = manifest('random-gpt2.json');
  const dir = path.join(DATA, m.model_dir);
  const vocab = JSON.parse(readFileSync(path.join(dir, 'vocab.json'), 'utf8'));
  const merges = readFileSync(path.join(dir, 'merges.txt'), 'utf8');
  const tok = new qkv.BpeTokenizer(vocab, merges);
  assert.equal(tok.vocabSize, 300);
  for (const c of m.tokenizer_cases) {
    assert.deepEqual(tok.pieces(c.text), c.pieces, `pieces of ${JSON.stringify(c.text)}`);
    assert.deepEqual(tok.encode(c.text), c.ids, `ids of ${JSON.stringify(c.text)}`);
    assert.deepEqual(c.ids.map((i) => tok.token(i)), c.tokens);
    assert.equal(tok.decode(c.ids), c.text);
  }
  // the loaded model's tokenizer is the same
  const model = await qkv.loadModel(dir);
  assert.equal(model.tokenizer.kind, 'bpe');
  assert.deepEqual(model.tokenizer.encode(m.tokenizer_cases[0].text), m.tokenizer_cases[0].ids);
  model.dispose();
});

test('bytes_to_unicode and the pre-tokenizer follow GPT-2', () => {
  const map = qkv.bytesToUnicode();
  assert.equal(map.length, 256);
  assert.equal(map[0x21], '!');
  assert.equal(map[0x20], '\u0120'); // 'Ġ'
  assert.equal(map[0x0a], '\u010a'); // 'Ċ'
  assert.equal(map[0xad], '\u0143');
  assert.equal(new Set(map).size, 256);
  const pieces = (s) => Array.from(s.matchAll(qkv.GPT2_PATTERN), (m) => m[0]);
  assert.deepEqual(pieces("I'll  go\n\n now 42x"), ['I', "'ll", ' ', ' go', '\n\n', ' now', ' 42', 'x']);
  // Python regex's \s is Unicode White_Space: U+0085 is space, U+FEFF is not
  assert.deepEqual(pieces('a\u0085b'), ['a', '\u0085', 'b']);
  assert.deepEqual(pieces('a\ufeffb'), ['a', '\ufeff', 'b']);
});

test('a generated random GPT-2 checkpoint with BPE files loads from a folder and runs', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'qkv-gpt2-'));
  try {
    // 256 byte tokens in GPT-2's order, then three merges
    const bytes = qkv.bytesToUnicode();
    const vocab = {};
    bytes.forEach((c, i) => (vocab[c] = i));
    const merges = [['h', 'e'], ['\u0120', 't'], ['\u0120t', 'he']];
    for (const [a, b] of merges) vocab[a + b] = Object.keys(vocab).length;
    const cfg = gpt2Config({ n_layer: 2, n_head: 3, n_embd: 24, n_positions: 40, vocab_size: 262 });
    writeFileSync(path.join(dir, 'config.json'), JSON.stringify(cfg));
    writeFileSync(path.join(dir, 'model.safetensors'), buildSafetensors(randomGpt2Tensors(cfg, 3, 'transformer.')));
    writeFileSync(path.join(dir, 'vocab.json'), JSON.stringify(vocab));
    writeFileSync(path.join(dir, 'merges.txt'), '#version: 0.2\n' + merges.map((m) => m.join(' ')).join('\n') + '\n');

    const model = await qkv.loadModel(dir);
    assert.equal(model.config.vocab_size, 262);
    const ids = model.tokenizer.encode('the hen the');
    // 'the' -> t, he; ' hen' -> Ġ, he, n... ranks: (h,e)=0, (Ġ,t)=1, (Ġt,he)=2
    assert.deepEqual(ids.map((i) => model.tokenizer.token(i)), ['t', 'he', '\u0120', 'he', 'n', '\u0120the']);
    assert.equal(model.tokenizer.decode(ids), 'the hen the');
    const { logits, attentions } = await model.forward(ids, { outputAttentions: true });
    assert.deepEqual(logits.shape, [1, 6, 262]);
    assert.deepEqual(attentions[1].shape, [1, 3, 6, 6]);
    assert.ok(logits.data.every(Number.isFinite));
    const steps = [];
    for await (const s of model.generate('the', { maxNewTokens: 8, seed: 7, topK: 20 })) steps.push(s.token);
    assert.equal(steps.length, 8);
    assert.ok(steps.every((t) => t >= 0 && t < 262));
    model.dispose();

    // only one of the two tokenizer files: an Error
    rmSync(path.join(dir, 'merges.txt'));
    await assert.rejects(qkv.loadModel(dir), /needs both vocab\.json and merges\.txt; only vocab\.json was given/);
    rmSync(path.join(dir, 'vocab.json'));
    await assert.rejects(qkv.loadModel(dir), /vocab_size is 262, so the model needs its tokenizer files/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('loadModel from { config, weights } and dispose', async () => {
  const cfg = gpt2Config({ vocab_size: 256, n_positions: 16 });
  const weights = buildSafetensors(randomGpt2Tensors(cfg, 1));
  const model = await qkv.loadModel({ config: cfg, weights: weights.buffer });
  assert.equal(model.tokenizer.kind, 'bytes');
  const a = await model.forward([1, 2, 3]);
  const model2 = await qkv.loadModel({ config: JSON.stringify(cfg), weights });
  const b = await model2.forward([1, 2, 3]);
  assert.deepEqual(a.logits.data, b.logits.data);
  model.dispose();
  model.dispose(); // idempotent
  assert.equal(model.disposed, true);
  await assert.rejects(model.forward([1]), /model\.forward: the model has been disposed/);
  model2.dispose();
});

test('damaged files each give their Error', async () => {
  const cfg = gpt2Config({ vocab_size: 256 }); // byte-level: no tokenizer files needed
  const tensors = randomGpt2Tensors(cfg, 2);
  const good = buildSafetensors(tensors);
  const load = (weights, config = cfg) => qkv.loadModel({ config, weights });
  (await load(good)).dispose();

  // truncated
  await assert.rejects(load(good.slice(0, good.length - 4)), (e) => {
    assert.ok(e instanceof Error);
    assert.match(e.message, /^loadModel: safetensors: tensor "ln_f\.bias": data_offsets \[\d+, \d+\] out of range: the data region holds \d+ bytes/);
    return true;
  });
  await assert.rejects(load(good.slice(0, 5)), /loadModel: safetensors: file is 5 bytes, too short for the 8-byte header length/);
  // header longer than the file
  await assert.rejects(load(rawSafetensors('{}', new Uint8Array(0), 4096)),
    /loadModel: safetensors: header length 4096 is longer than the file allows \(10 bytes/);
  // overlapping offsets
  await assert.rejects(load(rawSafetensors(
    '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
    new Uint8Array(12))), /tensor "b" data_offsets \[4, 12\] overlap tensor "a" \[0, 8\]/);
  // out-of-range offsets
  await assert.rejects(load(rawSafetensors('{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}', new Uint8Array(8))),
    /tensor "a": data_offsets \[8, 16\] out of range: the data region holds 8 bytes/);
  // unknown dtype
  await assert.rejects(load(rawSafetensors('{"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}}', new Uint8Array(8))),
    /tensor "a": unknown dtype "Q4"/);
  // shape vs bytes
  await assert.rejects(load(rawSafetensors('{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', new Uint8Array(8))),
    /tensor "a": dtype F32 and shape \[3\] need 12 bytes, but data_offsets \[0, 8\] hold 8/);
  // not JSON
  await assert.rejects(load(rawSafetensors('{"a":', new Uint8Array(0))), /safetensors: header is not valid JSON/);
  // missing tensor
  await assert.rejects(load(buildSafetensors(tensors.filter((t) => t.name !== 'h.1.attn.c_proj.weight'))),
    /loadModel: GPT2: missing tensor "h\.1\.attn\.c_proj\.weight" \(expected shape \[16, 16\]\)/);
  // shape not matching the config
  await assert.rejects(load(good, { ...cfg, n_positions: 64, n_ctx: 64 }),
    /GPT2: tensor "wpe\.weight" has shape \[32, 16\], but the config needs \[64, 16\]/);
  // bad config
  await assert.rejects(load(good, { ...cfg, n_head: 3 }), /GPT2Config: n_embd \(16\) must be divisible by n_head \(3\)/);
  await assert.rejects(load(good, '{"n_layer": 2,'), /loadModel: source\.config is not valid JSON/);
  await assert.rejects(qkv.loadModel({ config: cfg }), /source\.weights must be an ArrayBuffer/);
  await assert.rejects(qkv.loadModel({ config: cfg, weights: good, vocabulary: {} }), /unknown key 'vocabulary'/);
  await assert.rejects(qkv.loadModel(42), /loadModel: source must be a folder URL\/path or \{ config, weights, vocab\?, merges\? \}, got 42/);
  await assert.rejects(qkv.loadModel(path.join(DATA, 'no-such-model')), /loadModel: cannot read .*no-such-model.*config\.json/);
});

test('loadModel fetches a folder URL (the browser path), tokenizer files optional', async () => {
  const m = manifest('random-gpt2.json');
  const dir = path.join(DATA, m.model_dir);
  const requests = [];
  const server = createServer((req, res) => {
    requests.push(req.url);
    const name = req.url.replace(/^\/models\/random\//, '');
    if (!req.url.startsWith('/models/random/') || name.includes('/')) return res.writeHead(404).end();
    let body;
    try {
      body = readFileSync(path.join(dir, name));
    } catch {
      return res.writeHead(404).end();
    }
    res.writeHead(200).end(body);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${server.address().port}`;
  try {
    const model = await qkv.loadModel(`${base}/models/random`);
    // GPT-2's files, then its tokenizer_config.json (absent here: a 404, and GPT-2's own encoding)
    assert.deepEqual(requests.sort(), ['/models/random/config.json', '/models/random/merges.txt',
      '/models/random/model.safetensors', '/models/random/tokenizer_config.json', '/models/random/vocab.json']);
    assert.equal(model.tokenizer.addPrefixSpace, false);
    const c = m.cases[0];
    const { logits } = await model.forward(c.ids);
    assert.equal(logits.shape[1], c.ids.length);
    assert.deepEqual(model.tokenizer.encode(m.tokenizer_cases[0].text), m.tokenizer_cases[0].ids);
    model.dispose();
    await assert.rejects(qkv.loadModel(new URL(`${base}/models/none/`)),
      /loadModel: fetching http:\/\/127\.0\.0\.1:\d+\/models\/none\/config\.json failed: HTTP 404/);
  } finally {
    server.close();
  }
});
