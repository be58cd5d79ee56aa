// loadModel('owner/name', { revision }) in Node: files from env.hubUrl (a fake Hub on
// 127.0.0.1, tests/js/shared/fake-hub.js, answering with the Hub's headers) into Hugging Face's
// cache layout under HF_HUB_CACHE, as huggingface_hub lays it out: refs/<revision>, blobs/<etag>,
// snapshots/<commit>/<file> -> ../../blobs/<etag>, .no_exist/<commit>/<file>. A second load makes
// no request; a tree made by hand as huggingface_hub makes it loads with the server down; an
// interrupted download is never cached as complete; the signal aborts; onProgress counts the
// bytes of every file.
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, beforeEach, test } from 'node:test';

import { ROOT, api, buildSafetensors, llamaConfig, logitsHex, randomLlamaTensors, shardSafetensors } from './model-helpers.js';
import { etagOf, makeRepo, serveFakeHub } from './shared/fake-hub.js';

const qkv = await api();
const TINY = path.join(ROOT, 'web/models/tiny-kjv-bpe');
const tinyFiles = Object.fromEntries(['config.json', 'vocab.json', 'merges.txt', 'model.safetensors'].map((f) => [f, readFileSync(path.join(TINY, f))]));
const cfg = llamaConfig({ layers: 2, hidden: 16, heads: 4, kvHeads: 2, vocab: 64 });
const llamaTensors = randomLlamaTensors(cfg, 11);
const sharded = shardSafetensors(llamaTensors, Math.ceil(llamaTensors.reduce((a, t) => a + t.bytes.length, 0) / 2));
const repos = {
  'kjv/tiny-bpe': makeRepo({ main: tinyFiles, v2: { ...tinyFiles, 'generation_config.json': '{"max_new_tokens": 5}' } }),
  'kjv/sharded': makeRepo({ main: { 'config.json': JSON.stringify(cfg), 'model.safetensors.index.json': sharded.index, ...sharded.files } }),
};
const IDS = [3, 7, 11, 2];
let hub, cache;
const caches = [];

before(async () => {
  hub = await serveFakeHub(repos);
  qkv.env.hubUrl = hub.url;
});
after(async () => {
  await hub.close();
  for (const c of caches) rmSync(c, { recursive: true, force: true });
});
beforeEach(() => {
  cache = mkdtempSync(path.join(tmpdir(), 'qkv-hf-cache-'));
  caches.push(cache);
  process.env.HF_HUB_CACHE = cache;
  hub.requests.length = 0;
  hub.options.cut = () => false;
  hub.options.trickle = () => false;
});

const logitsOf = (source, options) => logitsHex(qkv, IDS, source, options);
const wholeTiny = await logitsOf(TINY);
const storage = (id) => path.join(cache, `models--${id.replace('/', '--')}`);

test('a first load downloads into the Hugging Face layout; a second makes no request', async () => {
  const events = [];
  assert.equal(await logitsOf('kjv/tiny-bpe', { onProgress: (p) => events.push(p) }), wholeTiny);
  const commit = repos['kjv/tiny-bpe'].revisions.main;
  const s = storage('kjv/tiny-bpe');
  assert.equal(readFileSync(path.join(s, 'refs/main'), 'utf8'), commit);
  for (const [f, bytes] of Object.entries(tinyFiles)) {
    const pointer = path.join(s, 'snapshots', commit, f);
    assert.ok(lstatSync(pointer).isSymbolicLink(), f);
    assert.equal(readlinkSync(pointer), `../../blobs/${etagOf(f, bytes)}`);
    assert.deepEqual(readFileSync(pointer), bytes);
  }
  // what the Hub lacks is remembered as huggingface_hub remembers it
  for (const f of ['generation_config.json', 'special_tokens_map.json']) assert.ok(existsSync(path.join(s, '.no_exist', commit, f)), f);
  assert.deepEqual(readdirSync(path.join(s, 'blobs')).sort(), Object.entries(tinyFiles).map(([f, b]) => etagOf(f, b)).sort());
  // the LFS file came from the CDN URL the HEAD's Location gave
  assert.ok(hub.requests.includes('HEAD /kjv/tiny-bpe/resolve/main/config.json'), hub.requests.join('\n'));
  assert.ok(hub.requests.some((r) => r.startsWith('GET /lfs/')), hub.requests.join('\n'));
  // onProgress: every file's bytes as it downloads, then the weights as they load
  for (const [f, bytes] of Object.entries(tinyFiles)) {
    const last = events.filter((e) => e.file === f && e.stage === 'download').at(-1);
    assert.deepEqual(last, { loaded: bytes.length, total: bytes.length, file: f, stage: 'download' }, f);
  }
  assert.deepEqual(events.at(-1), { loaded: tinyFiles['model.safetensors'].length, total: tinyFiles['model.safetensors'].length, file: 'model.safetensors', stage: 'load' });

  hub.requests.length = 0;
  const again = [];
  assert.equal(await logitsOf('kjv/tiny-bpe', { onProgress: (p) => again.push(p) }), wholeTiny);
  assert.deepEqual(hub.requests, []);
  assert.ok(again.every((e) => e.stage === 'load'));
});

test('a cache tree laid out by hand as huggingface_hub lays it out loads with the server down', async () => {
  // what `hf_hub_download` leaves after a Python user fetched these four files (no .no_exist entries)
  const commit = 'a'.repeat(40);
  const s = storage('py-user/tiny');
  mkdirSync(path.join(s, 'refs'), { recursive: true });
  writeFileSync(path.join(s, 'refs/main'), commit);
  mkdirSync(path.join(s, 'blobs'));
  mkdirSync(path.join(s, 'snapshots', commit), { recursive: true });
  for (const [f, bytes] of Object.entries(tinyFiles)) {
    writeFileSync(path.join(s, 'blobs', etagOf(f, bytes)), bytes);
    symlinkSync(`../../blobs/${etagOf(f, bytes)}`, path.join(s, 'snapshots', commit, f));
  }
  const down = await serveFakeHub({});
  const url = down.url;
  await down.close();
  qkv.env.hubUrl = url;
  try {
    assert.equal(await logitsOf('py-user/tiny'), wholeTiny);
    // a commit hash as the revision reads snapshots/<commit> directly
    assert.equal(await logitsOf('py-user/tiny', { revision: commit }), wholeTiny);
    // HF_HUB_OFFLINE: no request at all, the cache as it is
    process.env.HF_HUB_OFFLINE = '1';
    qkv.env.hubUrl = hub.url;
    assert.equal(await logitsOf('py-user/tiny'), wholeTiny);
    await assert.rejects(qkv.loadModel('kjv/tiny-bpe'), /loadModel\('kjv\/tiny-bpe'\): config\.json is not in the cache \(.*models--kjv--tiny-bpe\) and the Hub cannot be asked: HF_HUB_OFFLINE is set/);
    assert.deepEqual(hub.requests, []);
  } finally {
    delete process.env.HF_HUB_OFFLINE;
    qkv.env.hubUrl = hub.url;
  }
  // not cached, server down: the Error says both
  qkv.env.hubUrl = url;
  try {
    await assert.rejects(qkv.loadModel('kjv/tiny-bpe'), /config\.json is not in the cache .* and the Hub cannot be reached: http:\/\/127\.0\.0\.1:\d+\/kjv\/tiny-bpe\/resolve\/main\/config\.json/);
  } finally {
    qkv.env.hubUrl = hub.url;
  }
});

test('a download interrupted half-way is never cached as complete; the next load downloads it whole', async () => {
  hub.options.cut = (f) => f === 'model.safetensors';
  await assert.rejects(qkv.loadModel('kjv/tiny-bpe'), /loadModel\('kjv\/tiny-bpe'\): downloading model\.safetensors from http:\/\/127\.0\.0\.1:\d+\/lfs\/[0-9a-f]{64} failed after/);
  const s = storage('kjv/tiny-bpe');
  const commit = repos['kjv/tiny-bpe'].revisions.main;
  const blob = path.join(s, 'blobs', etagOf('model.safetensors', tinyFiles['model.safetensors']));
  assert.ok(!existsSync(blob));
  assert.ok(!existsSync(path.join(s, 'snapshots', commit, 'model.safetensors')));
  assert.ok(statSync(`${blob}.incomplete`).size < tinyFiles['model.safetensors'].length);
  hub.options.cut = () => false;
  assert.equal(await logitsOf('kjv/tiny-bpe'), wholeTiny);
  assert.equal(statSync(blob).size, tinyFiles['model.safetensors'].length);
  assert.ok(!existsSync(`${blob}.incomplete`));
});

test('the signal aborts a download (nothing cached as complete)', async () => {
  hub.options.trickle = (f) => f === 'model.safetensors';
  const ac = new AbortController();
  const err = await qkv.loadModel('kjv/tiny-bpe', {
    signal: ac.signal,
    onProgress: (p) => { if (p.file === 'model.safetensors' && p.stage === 'download' && p.loaded >= 128 * 1024) ac.abort(new Error('stopped')); },
  }).then(() => null, (e) => e);
  assert.equal(err?.message, 'stopped');
  const blob = path.join(storage('kjv/tiny-bpe'), 'blobs', etagOf('model.safetensors', tinyFiles['model.safetensors']));
  assert.ok(!existsSync(blob));
  await assert.rejects(qkv.loadModel('kjv/tiny-bpe', { signal: AbortSignal.abort(new Error('before')) }), /before/);
});

test('a revision resolves to its own commit (refs/<revision>); URLs name the revision, then the commit', async () => {
  const model = await qkv.loadModel('kjv/tiny-bpe', { revision: 'v2' });
  model.dispose();
  const s = storage('kjv/tiny-bpe');
  const v2 = repos['kjv/tiny-bpe'].revisions.v2;
  assert.equal(readFileSync(path.join(s, 'refs/v2'), 'utf8'), v2);
  assert.ok(!existsSync(path.join(s, 'refs/main')));
  assert.equal(hub.requests[0], 'HEAD /kjv/tiny-bpe/resolve/v2/config.json');
  assert.ok(hub.requests.includes(`HEAD /kjv/tiny-bpe/resolve/${v2}/vocab.json`), hub.requests.join('\n'));
  // the extra file a Python user wants is there too
  assert.equal(readFileSync(path.join(s, 'snapshots', v2, 'generation_config.json'), 'utf8'), '{"max_new_tokens": 5}');
  await assert.rejects(qkv.loadModel('kjv/tiny-bpe', { revision: 'nope' }), /loadModel\('kjv\/tiny-bpe'\): .*resolve\/nope\/config\.json.*HTTP 404/);
});

test('a sharded checkpoint on the Hub: index and shards cached, logits as the unsplit file', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'qkv-whole-'));
  try {
    writeFileSync(path.join(dir, 'config.json'), JSON.stringify(cfg));
    writeFileSync(path.join(dir, 'model.safetensors'), buildSafetensors(llamaTensors));
    const events = [];
    assert.equal(await logitsOf('kjv/sharded', { onProgress: (p) => events.push(p) }), await logitsOf(dir));
    const commit = repos['kjv/sharded'].revisions.main;
    assert.ok(existsSync(path.join(storage('kjv/sharded'), '.no_exist', commit, 'model.safetensors')));
    for (const f of Object.keys(sharded.files)) {
      assert.ok(lstatSync(path.join(storage('kjv/sharded'), 'snapshots', commit, f)).isSymbolicLink());
      assert.equal(events.filter((e) => e.file === f && e.stage === 'download').at(-1).loaded, sharded.files[f].length);
    }
    hub.requests.length = 0;
    await logitsOf('kjv/sharded');
    assert.deepEqual(hub.requests, []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('Hub ids, the cache folder and the Errors', async () => {
  await assert.rejects(qkv.loadModel('nobody/nothing'), /loadModel\('nobody\/nothing'\): .* answered HTTP 401 .*\(RepoNotFound\): no such repository, or it is private or gated/);
  await assert.rejects(qkv.loadModel(TINY, { revision: 'main' }), /loadModel: options\.revision is only for a Hub id \('owner\/name'\)/);
  await assert.rejects(qkv.loadModel('kjv/tiny-bpe', { revision: '../x' }), /options\.revision "\.\.\/x" is not a branch, tag or commit hash/);
  await assert.rejects(qkv.loadModel('kjv/tiny-bpe', { revision: 3 }), /options\.revision must be a branch, tag or commit hash/);
  assert.throws(() => { qkv.env.hubUrl = 'ftp://x'; }, /env\.hubUrl: must be an http\(s\) URL/);
  assert.equal(qkv.hubCacheDir({ HOME: '/home/u' }), '/home/u/.cache/huggingface/hub');
  assert.equal(qkv.hubCacheDir({ HOME: '/home/u', XDG_CACHE_HOME: '/xdg' }), '/xdg/huggingface/hub');
  assert.equal(qkv.hubCacheDir({ HOME: '/home/u', HF_HOME: '/hf' }), '/hf/hub');
  assert.equal(qkv.hubCacheDir({ HOME: '/home/u', HF_HOME: '/hf', HF_HUB_CACHE: '/cache' }), '/cache');
  // a folder by that relative path wins over the Hub id (as in transformers)
  const cwd = process.cwd();
  const base = mkdtempSync(path.join(tmpdir(), 'qkv-rel-'));
  try {
    mkdirSync(path.join(base, 'kjv'));
    symlinkSync(TINY, path.join(base, 'kjv', 'tiny-bpe'));
    process.chdir(base);
    hub.requests.length = 0;
    assert.equal(await logitsOf('kjv/tiny-bpe'), wholeTiny);
    assert.deepEqual(hub.requests, []);
  } finally {
    process.chdir(cwd);
    rmSync(base, { recursive: true, force: true });
  }
});
