// Sharded checkpoints: model.safetensors.index.json + shards (split by huggingface_hub's rule,
// shardSafetensors in model-helpers.js) load as one file: the logits equal the unsplit
// checkpoint's bit for bit, from a folder and over HTTP; progress counts every shard's bytes
// against their sum; the signal cancels; a damaged index or shard is an Error naming the file,
// the tensor and what is wrong.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { api, buildSafetensors, llamaConfig, logitsHex, randomLlamaTensors, shardSafetensors } from './model-helpers.js';

const qkv = await api();
const cfg = llamaConfig({ layers: 2, hidden: 16, heads: 4, kvHeads: 2, vocab: 64, tied: false });
const tensors = randomLlamaTensors(cfg, 7);
const total = tensors.reduce((a, t) => a + t.bytes.length, 0);
/** The most bytes a shard holds: the 3 shards of the tests (a 4th would need under total / 3). */
const SHARD = Math.ceil(total / 2);
const IDS = [1, 5, 9, 33, 2, 63, 17];
let root;

/** A folder with config.json and either model.safetensors or the index + shards (edited by `edit`). */
function writeFolder(name, { sharded = true, maxShard = SHARD, edit = (s) => s } = {}) {
  const dir = path.join(root, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify(cfg));
  if (!sharded) {
    writeFileSync(path.join(dir, 'model.safetensors'), buildSafetensors(tensors));
    return dir;
  }
  const s = edit(shardSafetensors(tensors, maxShard));
  writeFileSync(path.join(dir, 'model.safetensors.index.json'), typeof s.index === 'string' ? s.index : JSON.stringify(s.index));
  for (const [f, bytes] of Object.entries(s.files)) writeFileSync(path.join(dir, f), bytes);
  return dir;
}

before(() => { root = mkdtempSync(path.join(tmpdir(), 'qkv-shards-')); });
after(() => rmSync(root, { recursive: true, force: true }));

const logitsOf = (source, options) => logitsHex(qkv, IDS, source, options);

test('the split checkpoint is 3 shards by the index rule, and its logits equal the unsplit one bit for bit', async () => {
  const { files, index } = shardSafetensors(tensors, SHARD);
  assert.equal(Object.keys(files).length, 3);
  assert.deepEqual(Object.keys(files), ['model-00001-of-00003.safetensors', 'model-00002-of-00003.safetensors', 'model-00003-of-00003.safetensors']);
  assert.equal(JSON.parse(index).metadata.total_size, total);
  const whole = await logitsOf(writeFolder('whole', { sharded: false }));
  const split = await logitsOf(writeFolder('split'));
  assert.equal(split, whole);
  // quantized on load, the same conversion of the same tensors
  assert.equal(await logitsOf(path.join(root, 'split'), { weights: 'int8' }), await logitsOf(path.join(root, 'whole'), { weights: 'int8' }));
  // a tensor per shard (max below every tensor's size): 2 + 9 * 2 shards
  const many = writeFolder('many', { maxShard: 1 });
  assert.equal(Object.keys(shardSafetensors(tensors, 1).files).length, tensors.length);
  assert.equal(await logitsOf(many), whole);
});

test('progress counts every shard against the sum of their sizes; the memory is one file', async () => {
  const dir = writeFolder('split');
  const sizes = Object.fromEntries(Object.keys(shardSafetensors(tensors, SHARD).files).map((f) => [f, readFileSync(path.join(dir, f)).length]));
  const sum = Object.values(sizes).reduce((a, b) => a + b, 0);
  const events = [];
  const model = await qkv.loadModel(dir, { onProgress: (p) => events.push(p) });
  try {
    assert.ok(events.length >= 3);
    for (const e of events) {
      assert.equal(e.total, sum);
      assert.equal(e.stage, 'load');
      assert.ok(e.file in sizes, e.file);
    }
    for (let i = 1; i < events.length; i++) assert.ok(events[i].loaded >= events[i - 1].loaded);
    assert.equal(events.at(-1).loaded, sum);
    assert.deepEqual([...new Set(events.map((e) => e.file))], Object.keys(sizes));
    // the joined file: the tensors' bytes and one header (at most a few hundred bytes a tensor)
    const file = model.memoryUsage().file;
    assert.ok(file >= total && file < total + 512 * tensors.length, `${file} bytes for ${total} of tensors`);
  } finally {
    model.dispose();
  }
});

test('over HTTP (fetch; HEAD for the sizes) it loads the same, and the signal cancels it', async () => {
  const dir = writeFolder('split');
  const seen = [];
  const server = createServer((req, res) => {
    const name = decodeURIComponent(new URL(req.url, 'http://x').pathname.slice(1));
    seen.push(`${req.method} ${name}`);
    let body;
    try {
      body = readFileSync(path.join(dir, path.basename(name)));
    } catch {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Length': body.length });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const url = `http://127.0.0.1:${server.address().port}/`;
  try {
    assert.equal(await logitsOf(url), await logitsOf(writeFolder('whole', { sharded: false })));
    assert.ok(seen.includes('HEAD model-00002-of-00003.safetensors') && seen.includes('GET model-00003-of-00003.safetensors'), seen.join(', '));
    const ac = new AbortController();
    const err = await qkv.loadModel(url, {
      signal: ac.signal,
      onProgress: (p) => { if (p.file === 'model-00002-of-00003.safetensors') ac.abort(new Error('stop here')); },
    }).then(() => null, (e) => e);
    assert.equal(err?.message, 'stop here');
    // nothing left behind: a load after the cancelled one works
    assert.equal(await logitsOf(url), await logitsOf(path.join(root, 'whole')));
  } finally {
    server.close();
  }
});

test('a damaged index or shard: an Error naming the file, the tensor and what is wrong', async () => {
  const s1 = 'model-00001-of-00003.safetensors', s2 = 'model-00002-of-00003.safetensors', s3 = 'model-00003-of-00003.safetensors';
  const editIndex = (f) => (s) => { const j = JSON.parse(s.index); f(j.weight_map, j); return { ...s, index: j }; };
  const firstOf = (s, file) => Object.entries(JSON.parse(s.index).weight_map).find(([, f]) => f === file)[0];
  const cases = [
    // a shard the index names that is not there
    [writeFolder('gone'), /model\.safetensors\.index\.json maps tensors to model-00002-of-00003\.safetensors, which cannot be read: .*ENOENT/],
    // the index maps a tensor to a shard that lacks it
    [writeFolder('absent', { edit: editIndex((m) => { m['model.extra.weight'] = s1; }) }),
      /weight_map puts tensor "model\.extra\.weight" in model-00001-of-00003\.safetensors, whose header lacks it/],
    // a shard holds a tensor the index does not map
    [writeFolder('unmapped', { edit: (s) => editIndex((m) => { delete m[firstOf(s, s2)]; })(s) }),
      new RegExp(`model-00002-of-00003\\.safetensors \\(a shard .*\\): holds tensor "${firstOf(shardSafetensors(tensors, SHARD), s2).replaceAll('.', '\\.')}", which the index's weight_map does not map`)],
    // the index puts a tensor in another shard than the one holding it
    [writeFolder('moved', { edit: (s) => editIndex((m) => { m[firstOf(s, s2)] = s3; })(s) }), /holds tensor "[^"]+", which the index's weight_map puts in model-00003-of-00003\.safetensors/],
    // one tensor in two shards
    [writeFolder('twice', { edit: (s) => ({ ...s, files: { ...s.files, [s3]: buildSafetensors([...tensors.filter((t) => JSON.parse(s.index).weight_map[t.name] === s3), tensors[0]]) } }) }),
      new RegExp(`model-00003-of-00003\\.safetensors .*: holds tensor "${tensors[0].name.replaceAll('.', '\\.')}", which model-00001-of-00003\\.safetensors holds too`)],
    // a truncated shard
    [writeFolder('short', { edit: (s) => ({ ...s, files: { ...s.files, [s2]: s.files[s2].subarray(0, s.files[s2].length - 10) } }) }), /model-00002-of-00003\.safetensors .*(truncated|out of range)/],
    // a shard name that leaves the folder
    [writeFolder('escape', { edit: editIndex((m) => { m[tensors[0].name] = '../x.safetensors'; }) }), /weight_map\["model\.embed_tokens\.weight"\] = "\.\.\/x\.safetensors" is not a file name beside the index/],
    [writeFolder('nomap', { edit: editIndex((m, j) => { delete j.weight_map; }) }), /model\.safetensors\.index\.json: weight_map must be an object mapping tensor names to shard files, got undefined/],
    [writeFolder('empty', { edit: editIndex((m, j) => { j.weight_map = {}; }) }), /weight_map is empty/],
    [writeFolder('notjson', { edit: (s) => ({ ...s, index: '{"weight_map": ' }) }), /model\.safetensors\.index\.json is not valid JSON/],
  ];
  unlinkSync(path.join(root, 'gone', s2));
  for (const [dir, want] of cases) {
    await assert.rejects(qkv.loadModel(dir), (e) => { assert.match(e.message, /^loadModel: /); assert.match(e.message, want); return true; }, dir);
  }
  // neither the single file nor the index
  const none = writeFolder('none');
  unlinkSync(path.join(none, 'model.safetensors.index.json'));
  await assert.rejects(qkv.loadModel(none), /loadModel: .*none has neither model\.safetensors nor model\.safetensors\.index\.json/);
});

test('the shards given as files ({ config, index, weights: { name: Blob } }, a dropped folder): the same logits; a missing shard is an Error naming it', async () => {
  const whole = await logitsOf(writeFolder('whole-files', { sharded: false }));
  const { files, index } = shardSafetensors(tensors, SHARD);
  const blobs = Object.fromEntries(Object.entries(files).map(([f, b]) => [f, new Blob([b])]));
  assert.equal(await logitsOf({ config: cfg, index, weights: blobs }), whole);
  assert.equal(await logitsOf({ config: JSON.stringify(cfg), index: JSON.parse(index), weights: files }), whole); // bytes, index as object
  const progress = [];
  const m = await qkv.loadModel({ config: cfg, index, weights: blobs }, { onProgress: (p) => progress.push(p) });
  m.dispose();
  assert.equal(progress.at(-1).loaded, progress.at(-1).total);
  assert.ok(progress.at(-1).total >= total, `progress total ${progress.at(-1).total} covers the ${total} bytes of the shards`);
  const { 'model-00002-of-00003.safetensors': _gone, ...two } = blobs;
  await assert.rejects(qkv.loadModel({ config: cfg, index, weights: two }),
    /maps tensors to model-00002-of-00003\.safetensors, which cannot be read: source\.weights has no model-00002-of-00003\.safetensors \(the shards given: model-00001-of-00003\.safetensors, model-00003-of-00003\.safetensors\)/);
  await assert.rejects(qkv.loadModel({ config: cfg, index, weights: new Blob([files['model-00001-of-00003.safetensors']]) }),
    /loadModel: with source\.index, source\.weights must be the shards by file name/);
  await assert.rejects(qkv.loadModel({ config: cfg, index: 42, weights: blobs }), /loadModel: source\.index must be model\.safetensors\.index\.json's object or text, got 42/);
});
