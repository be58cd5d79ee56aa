// qkv's Hub loading in Chromium (stage 35; the library itself, not the demo): loadModel('owner/name') of a
// sharded checkpoint from a fake Hub (tests/js/shared/fake-hub.js) through Cache Storage. The
// logits equal the unsplit checkpoint's in Node; progress counts every file's download; a second
// load makes no request and reads every shard from the cache (the absent model.safetensors kept
// as a 404 entry); a shard cut half-way is an Error and is not cached; the signal aborts.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ROOT, launch, openPage, serve } from './harness.js';
import { api, buildSafetensors, llamaConfig, randomLlamaTensors, shardSafetensors } from '../js/model-helpers.js';
import { makeRepo, serveFakeHub } from '../js/shared/fake-hub.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ID = 'kjv/sharded';
const cfg = llamaConfig({ layers: 2, hidden: 16, heads: 4, kvHeads: 2, vocab: 64, tied: false });
const tensors = randomLlamaTensors(cfg, 5);
const split = shardSafetensors(tensors, Math.ceil(tensors.reduce((a, t) => a + t.bytes.length, 0) / 2));
const IDS = [4, 8, 15, 16, 23, 42];
let hub, site, browser, page, want;
let cut = '';
let trickle = false;

before(async () => {
  hub = await serveFakeHub({ [ID]: makeRepo({ main: { 'config.json': JSON.stringify(cfg), 'model.safetensors.index.json': split.index, ...split.files } }) }, {
    cut: (f) => f === cut,
    trickle: (f) => trickle && f.endsWith('.safetensors'),
  });
  // the unsplit checkpoint's logits, in Node, on the same wasm build
  const qkv = await api();
  const dir = mkdtempSync(join(tmpdir(), 'qkv-hub-browser-'));
  writeFileSync(join(dir, 'config.json'), JSON.stringify(cfg));
  writeFileSync(join(dir, 'model.safetensors'), buildSafetensors(tensors));
  const m = await qkv.loadModel(dir);
  want = Array.from((await m.forward(IDS)).logits.data);
  m.dispose();
  rmSync(dir, { recursive: true, force: true });
  site = await serve({ root: ROOT, isolated: false });
  browser = await launch();
  page = await openPage(browser, `${site.url}/tests/browser/hub/index.html`);
  await page.waitForSelector('body[data-ready=true]', { state: 'attached' });
  await page.evaluate((url) => { window.qkv.env.hubUrl = url; window.qkv.env.variant = 'simd'; }, hub.url);
});
after(async () => { await browser?.close(); await site?.close(); await hub?.close(); });

/** loadModel(ID) in the page: its logits, its progress events, or its Error's message. */
const load = (options = {}) => page.evaluate(async ([id, ids, { abortAt }]) => {
  const events = [];
  const ac = new AbortController();
  try {
    const m = await window.qkv.loadModel(id, {
      signal: ac.signal,
      onProgress: (p) => { events.push(p); if (abortAt && p.stage === 'download' && p.file.endsWith('.safetensors') && p.loaded >= abortAt) ac.abort(new Error('stopped')); },
    });
    const logits = Array.from((await m.forward(ids)).logits.data);
    m.dispose();
    return { logits, events };
  } catch (e) {
    return { error: e.message, events };
  }
}, [ID, IDS, options]);
const cached = () => page.evaluate(async () => {
  const c = await caches.open('qkv-hub-v1');
  return Promise.all((await c.keys()).map(async (k) => `${(await c.match(k)).status} ${k.url.split('/').pop()}`));
});

test('a sharded Hub checkpoint loads through Cache Storage; the second load makes no request', async () => {
  const first = await load();
  assert.equal(first.error, undefined, first.error);
  assert.deepEqual(first.logits, want);
  for (const [f, bytes] of Object.entries(split.files)) {
    assert.equal(first.events.filter((e) => e.file === f && e.stage === 'download').at(-1).loaded, bytes.length, f);
  }
  const sum = Object.values(split.files).reduce((a, b) => a + b.length, 0);
  assert.deepEqual(first.events.at(-1), { loaded: sum, total: sum, file: Object.keys(split.files).at(-1), stage: 'load' });
  assert.deepEqual((await cached()).sort(), ['200 config.json', '200 model.safetensors.index.json', ...Object.keys(split.files).map((f) => `200 ${f}`),
    // what the Hub lacks, remembered: the weights' single file, and the tokenizer files looked for (a Llama folder without any)
    ...['model.safetensors', 'tokenizer.json', 'vocab.json', 'merges.txt', 'vocab.txt'].map((f) => `404 ${f}`)].sort());
  const n = hub.requests.length;
  const second = await load();
  assert.deepEqual(second.logits, want);
  assert.deepEqual(hub.requests.slice(n), []);
  assert.ok(second.events.every((e) => e.stage === 'load'));
  assert.deepEqual(page.problems.filter((p) => !/404/.test(p)), []);
});

test('a shard cut half-way is an Error and is not cached; the signal aborts a download', async () => {
  await page.evaluate(() => window.qkv.clearHubCache());
  const shard = Object.keys(split.files)[1];
  cut = shard;
  const broken = await load();
  cut = '';
  assert.match(broken.error, new RegExp(`loadModel\\('kjv/sharded'\\): downloading ${hub.url.replaceAll('.', '\\.')}/kjv/sharded/resolve/main/${shard.replaceAll('.', '\\.')} failed`));
  assert.ok(!(await cached()).includes(`200 ${shard}`));
  trickle = true;
  const stopped = await load({ abortAt: 1 });
  trickle = false;
  assert.equal(stopped.error, 'stopped');
  const again = await load();
  assert.deepEqual(again.logits, want);
});
