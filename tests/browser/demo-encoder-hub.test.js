// The Encoders page's own-encoder panel in headless Chromium, without the network: a
// MiniLM-shaped sentence-transformers checkpoint (BertModel, hidden 384, 12 heads, intermediate
// 1536, 2 layers instead of 6, a small WordPiece vocabulary; random weights:
// encoder-checkpoint.js) served by the fake Hub (tests/js/shared/fake-hub.js: the Hub's URLs and
// headers, the weights by a 302). Given the Hub id, the page downloads it with progress, and the
// similarity matrix it prints is model.embed's in Node on the same files (3 decimals) with the
// checkpoint's mean pooling; a second visit reads every file from Cache Storage (no request). A
// bge-like folder (CLS pooling) picked from disk loads the same way, with its own pooling; a
// folder without weights is a message naming what is missing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, launch } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';
import { writeEncoderCheckpoint } from './encoder-checkpoint.js';
import { makeRepo, serveFakeHub } from '../js/shared/fake-hub.js';

const ID = 'test-org/minilm-shaped';
const MINILM = join(ROOT, 'build/test-hub/minilm-shaped');
const BGE = join(ROOT, 'build/test-hub/bge-shaped');
const BROKEN = join(ROOT, 'build/test-hub/no-weights');
const TEXT = 'In the beginning God created the heaven and the earth. And God said, Let there be light: and there was light. '
  + 'The LORD is my shepherd; I shall not want. And the earth was without form, and void.';
const WORDS = TEXT.toLowerCase().match(/[a-z]+/g);
let demo, hub, browser, qkv;
let FILES;

before(async () => {
  assert.ok(existsSync(join(ROOT, 'build/demo/encoders.html')), 'build/demo/ is missing: run the Vite build first (tools/stages/60-demo.sh)');
  const files = FILES = await writeEncoderCheckpoint(MINILM, { layers: 2, hidden: 384, heads: 12, intermediate: 1536 }, WORDS, 'mean', 31);
  await writeEncoderCheckpoint(BGE, { layers: 2, hidden: 64, heads: 4, intermediate: 128 }, WORDS, 'cls', 32);
  await writeEncoderCheckpoint(BROKEN, { layers: 1, hidden: 16, heads: 2, intermediate: 32 }, WORDS, 'mean', 33);
  const { rm } = await import('node:fs/promises');
  await rm(join(BROKEN, 'model.safetensors'));
  hub = await serveFakeHub({ [ID]: makeRepo({ main: files }) });
  demo = await serveDemo({ port: 0 });
  browser = await launch();
  qkv = await import(pathToFileURL(join(ROOT, 'dist', 'index.js')).href);
  qkv.env.variant = 'simd';
});
after(async () => { await browser?.close(); demo?.server.close(); await hub?.close(); });

/** The cosine matrix of `lines` from model.embed in Node, as the page prints it (3 decimals). */
async function expected(dir, lines, pooling) {
  const model = await qkv.loadModel(dir);
  try {
    assert.equal(model.embeddingDefaults.pooling, pooling);
    const e = await model.embed(lines, { pooling, normalize: true });
    const E = e.shape[1];
    return lines.map((_a, i) => lines.map((_b, j) => {
      let s = 0;
      for (let k = 0; k < E; k++) s += e.data[i * E + k] * e.data[j * E + k];
      return s.toFixed(3);
    }));
  } finally {
    model.dispose();
  }
}

/** The page's console problems less the browser's own line for each optional file the Hub answered 404 (tokenizer.json, ...: a sentence-transformers repo may lack them). */
function problemsBesides404s(page, requests) {
  const missing = requests.filter((r) => r.startsWith('GET ') && !r.startsWith('GET /lfs/')).map((r) => r.split('/resolve/main/')[1]).filter((f) => !(f in FILES));
  for (const f of missing) assert.ok(['tokenizer.json', 'vocab.json', 'merges.txt', 'special_tokens_map.json', 'generation_config.json'].includes(f), `asked for ${f}`);
  const rest = page.problems.filter((p) => !/Failed to load resource: the server responded with a status of 404/.test(p));
  assert.equal(page.problems.length - rest.length, missing.length, JSON.stringify(page.problems));
  return rest;
}

const printed = (page) => page.$$eval('#sim-table tr', (trs) => trs.slice(1).map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
const lines = async (page) => (await page.inputValue('#sim-text')).split('\n').map((s) => s.trim()).filter(Boolean);

async function open(context) {
  const page = await context.newPage({ viewport: { width: 1280, height: 900 } });
  page.problems = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') page.problems.push(`${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => page.problems.push(`pageerror: ${e.message}`));
  await page.goto(`${demo.url}encoders.html?hubUrl=${encodeURIComponent(hub.url)}&encoder=${encodeURIComponent(ID)}`);
  await page.waitForSelector('body[data-ready=true]', { timeout: 90_000 });
  return page;
}

/** Clicks Load (or runs `act`) and waits for the panel's message. */
async function load(page, act = () => page.click('#encsrc-load')) {
  await page.evaluate(() => { delete document.body.dataset.encsrc; });
  await act();
  await page.waitForSelector('body[data-encsrc]', { timeout: 60_000 });
  return page.textContent('#encsrc-msg');
}

test('Encoders page: a Hub id loads the encoder with progress; the matrix is model.embed\'s; a second visit comes from the cache', async () => {
  const context = await browser.newContext();
  const page = await open(context);
  assert.equal(await page.inputValue('#encsrc-id'), ID);
  assert.match(await page.textContent('#sim-model'), /^tiny-bert-kjv \(this page's\): bert/);
  const before = await printed(page);
  const seen = [];
  const watch = setInterval(() => page.textContent('#encsrc-text').then((t) => t && seen.push(t), () => {}), 30);
  const msg = await load(page);
  clearInterval(watch);
  assert.equal(msg, 'Downloaded and cached for the next visit.');
  assert.ok(seen.some((t) => /MiB/.test(t)), `progress text seen: ${JSON.stringify(seen.slice(0, 5))}`);
  assert.equal(await page.textContent('#sim-model'),
    `${ID} (Hub): bert, 2 layers × 12 heads, hidden 384; mean pooling (from its sentence-transformers files), normalized.`);
  await page.waitForFunction((id) => document.querySelector('#sim-table').dataset.model.startsWith(id), ID);
  const after = await printed(page);
  assert.deepEqual(after, await expected(MINILM, await lines(page), 'mean'));
  assert.notDeepEqual(after, before, 'the matrix is the new model\'s');
  for (const f of ['config.json', 'vocab.txt', 'modules.json', '1_Pooling/config.json']) {
    assert.equal(hub.requests.filter((r) => r === `GET /${ID}/resolve/main/${f}`).length, 1, f);
  }
  assert.equal(hub.requests.filter((r) => r.startsWith('GET /lfs/')).length, 1, 'model.safetensors once');
  // the chosen pair's tokens: a headless checkpoint's shares are mean pooling's 1/n
  const shares = await page.$$eval('#sim-tokens p', (ps) => ps.map((p) => [...p.querySelectorAll('span')].map((s) => Number(s.dataset.weight))));
  assert.equal(shares.length, 2);
  for (const s of shares) for (const w of s) assert.ok(Math.abs(w - 1 / s.length) < 1e-4, JSON.stringify(s));
  assert.match(await page.textContent('#sim-pair'), /mean pooling's own weights \(this checkpoint has no MLM head/);
  // a user types sentences: the new model embeds them
  const typed = ['Jesus wept.', 'And Jesus wept with them.', 'The sea and the dry land.'];
  await page.fill('#sim-text', typed.join('\n'));
  await page.waitForFunction((l) => document.querySelector('#sim-table').dataset.lines === l, JSON.stringify(typed), { timeout: 30_000 });
  assert.deepEqual(await printed(page), await expected(MINILM, typed, 'mean'));
  assert.deepEqual(problemsBesides404s(page, hub.requests), []);
  await page.close();

  // a second visit in the same profile: no request
  const n = hub.requests.length;
  const again = await open(context);
  assert.equal(await load(again), 'Loaded from this browser\'s cache (no download).');
  assert.deepEqual(hub.requests.slice(n), []);
  assert.deepEqual(await printed(again), await expected(MINILM, await lines(again), 'mean'));
  assert.deepEqual(again.problems, []);
  await again.close();
  await context.close();
});

test('Encoders page: a picked folder (CLS pooling) loads with its own pooling; a folder without weights is a message', async () => {
  const context = await browser.newContext();
  const page = await open(context);
  assert.equal(await load(page, () => page.setInputFiles('#encsrc-folder', BGE)), 'Loaded bge-shaped from this computer.');
  assert.equal(await page.textContent('#sim-model'),
    'bge-shaped (dropped folder): bert, 2 layers × 4 heads, hidden 64; cls pooling (from its sentence-transformers files), normalized.');
  await page.waitForFunction(() => document.querySelector('#sim-table').dataset.model.startsWith('bge-shaped'));
  assert.deepEqual(await printed(page), await expected(BGE, await lines(page), 'cls'));
  const shares = await page.$$eval('#sim-tokens p span', (ss) => ss.map((s) => Number(s.dataset.weight)));
  assert.ok(shares.filter((w) => w === 1).length === 2 && shares.filter((w) => w === 0).length === shares.length - 2, JSON.stringify(shares));
  const msg = await load(page, () => page.setInputFiles('#encsrc-folder', BROKEN));
  assert.match(msg, /^Could not load the encoder: a folder with config\.json and model\.safetensors is needed \(got .*config\.json/);
  assert.match(await page.textContent('#sim-model'), /^bge-shaped/, 'the panel keeps its model');
  assert.deepEqual(page.problems, []);
  await page.close();
  await context.close();
});
