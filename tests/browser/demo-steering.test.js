// The model page's Steering panel, read as a person reads it, against qkv in Node on the same
// model: the vector's printed norm = steeringVector's, and the two texts side by side = generate
// from the page's prompt without and with `steer` (the page's seed, temperature, top-k and token
// count); Cancel stops it and a new run works; the URL round trip (a reload runs it again and
// prints the same texts); 390 px wide: nothing of the panel overflows the page.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import * as qkv from 'qkv';
import { ROOT, cancelWhenMoving, hash, launch, openPage } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';

const MODEL = 'tiny-kjv-bpe';
const PROMPT = 'And the LORD said unto Moses,';
const DESKTOP = { width: 1280, height: 1000 };

let server, url, browser, model;
before(async () => {
  ({ server, url } = await serveDemo({ port: 0 }));
  browser = await launch();
  model = await qkv.loadModel(join(ROOT, 'web/models', MODEL));
});
after(async () => { await browser?.close(); server?.close(); model?.dispose(); });

async function open(h, viewport = DESKTOP) {
  const page = await openPage(browser, url + 'index.html' + h, { viewport });
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await page.waitForFunction((k) => document.body.dataset.tokens === String(k), model.tokenizer.encode(PROMPT).length, { timeout: 30_000 });
  return page;
}

/** The page's Generate settings as set in its controls. */
const settings = async (page) => page.evaluate(() => ({
  maxNewTokens: Number(document.querySelector('#max-new').value), temperature: Number(document.querySelector('#temperature').value),
  topK: Number(document.querySelector('#top-k').value), seed: Number(document.querySelector('#seed').value),
}));

/** What Node's qkv gives: the vector's norm and the two continuations' texts. */
async function expected(a, b, layer, scale, o) {
  const vector = await qkv.steeringVector(model, model.tokenizer.encode(a), model.tokenizer.encode(b), { layer });
  const gen = async (extra) => {
    const out = [];
    for await (const step of model.generate(model.tokenizer.encode(PROMPT), { ...o, ...extra })) out.push(step.token);
    return model.tokenizer.decode(out);
  };
  return {
    norm: Math.hypot(...vector), plain: await gen({}), steered: await gen({ steer: [{ layer, vector, scale }] }),
  };
}


async function printed(page) {
  await page.waitForSelector('#steering-panel[data-state=done] #steer-result:not([hidden])', { timeout: 60_000 });
  const line = await page.textContent('#steer-vector');
  const norm = /^‖vector‖ = ([\d.]+) at layer (\d+)/.exec(line);
  assert.ok(norm, line);
  return { norm: Number(norm[1]), layer: Number(norm[2]), plain: await page.textContent('#steer-plain'), steered: await page.textContent('#steer-steered') };
}

test('steering: the plain and steered texts = generate in Node without and with steer; the norm; the URL runs it again', async () => {
  const page = await open(hash({ prompt: PROMPT }));
  const a = 'I love thee', b = 'I hate thee';
  // typed, then Steer at once
  await page.fill('#steer-a', a);
  await page.fill('#steer-b', b);
  await page.selectOption('#steer-layer', '1');
  await page.fill('#steer-scale', '6');
  await page.click('#steer-run');
  const got = await printed(page);
  const o = await settings(page);
  assert.deepEqual(o, { maxNewTokens: 20, temperature: 0.8, topK: 20, seed: 42 }, 'the page\'s Generate defaults');
  const want = await expected(a, b, 1, 6, o);
  assert.equal(got.layer, 1);
  assert.ok(Math.abs(got.norm - want.norm) <= 0.0006, `norm ${got.norm} vs ${want.norm}`);
  assert.equal(got.plain, want.plain);
  assert.equal(got.steered, want.steered);
  assert.notEqual(got.steered, got.plain, 'the vector changes the text');
  assert.match(await page.textContent('#steer-with'), /^with 6 × vector at layer 1$/);

  // the URL: the run's fields; a reload runs it again with the same texts
  const h = new URLSearchParams((await page.evaluate(() => location.hash)).slice(1));
  assert.deepEqual([h.get('steerA'), h.get('steerB'), h.get('steerLayer'), h.get('steerScale')], [a, b, '1', '6']);
  const again = await open('#' + h.toString());
  assert.equal(await again.inputValue('#steer-a'), a);
  assert.deepEqual(await printed(again), got);

  // another seed in the page's controls: both texts follow it
  await again.fill('#seed', '7');
  await again.click('#steer-run');
  const seven = await printed(again);
  const want7 = await expected(a, b, 1, 6, { ...o, seed: 7 });
  assert.equal(seven.plain, want7.plain);
  assert.equal(seven.steered, want7.steered);
  assert.deepEqual([...page.problems, ...again.problems], []);
  await Promise.all([page.close(), again.close()]);
});

test('steering: Cancel stops the generations and Steer works again; 390 px wide it fits the page and is keyboard reachable', async () => {
  const page = await open(hash({ prompt: PROMPT }), { width: 390, height: 844 });
  await page.fill('#max-new', '100');
  await page.click('#steer-run');
  await cancelWhenMoving(page, '#steering-panel', '#steer-bar', '#steer-cancel');
  await page.waitForSelector('#steering-panel[data-state=cancelled]', { timeout: 30_000 });
  assert.match(await page.textContent('#steer-msg'), /^Cancelled after \d+ of 200 tokens/);
  assert.equal(await page.isVisible('#steer-progress'), false);
  // by keyboard: focus the scale, Tab to Steer, Enter
  await page.fill('#max-new', '30');
  await page.focus('#steer-scale');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'steer-run');
  await page.keyboard.press('Enter');
  const got = await printed(page);
  assert.ok(got.plain.length > 0 && got.steered.length > 0);
  const box = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, right: document.querySelector('#steering-panel').getBoundingClientRect().right }));
  assert.ok(box.page <= 390 && box.right <= 390, `the page is ${box.page} px wide, the panel ends at ${box.right}`);
  assert.deepEqual(page.problems, []);
  await page.close();
});
