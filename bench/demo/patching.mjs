// The model page's Patching panel in headless Chromium, through the built page (build/demo):
//   tiny   tiny-kjv-induction at 64 tokens (32 random words twice; the corrupted prompt with the
//          first copy's words changed; the answer: the first word (what induction predicts) against
//          the corrupted prompt's first word): each sweep (heads, heads x positions, residual stream x
//          positions), the Run button -> the bar shown, -> the first progress the page can paint
//          (the caption after the sweep's first wasm call, and how many cells it ran), -> the map
//          drawn (the frame after it is in the page)
//   gpt2   a GPT-2-small-shaped checkpoint with random weights (bench/model/make_gpt2_small.mjs,
//          made in --dir on first use, ~725 MB, never in the repository), loaded by the page's
//          model menu from a local server, the heads sweep at 16 tokens: the same marks, beside
//          bench/results/model-residual-node.json's 'heads' sweep (Node, 1 thread, CPU time) and
//          the same sweep in Node in this run (simd, 1 thread: wall and CPU time, the same load)
// Wall-clock times in the page (performance.now), the median over --reps runs (gpt2: --gpt2-reps),
// with the machine (CPU, cores, load average before and after) in the JSON.
//
//   node bench/demo/patching.mjs [--reps 5] [--gpt2-reps 1] [--dir /tmp/qkv-gpt2-small] [--skip-gpt2]
//                                [--out bench/results/demo-patching-chromium.json]
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as qkv from 'qkv';
import { ROOT, launch, openPage, serve } from '../../tests/browser/harness.js';

const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const REPS = Number(arg('--reps', 5));
const GPT2_REPS = Number(arg('--gpt2-reps', 1));
const DIR = path.resolve(arg('--dir', process.env.QKV_GPT2_DIR ?? '/tmp/qkv-gpt2-small'));
const SKIP_GPT2 = args.includes('--skip-gpt2');
const OUT = path.resolve(ROOT, arg('--out', 'bench/results/demo-patching-chromium.json'));
const DEMO = path.join(ROOT, 'build/demo');
const GPT2_URL = './models/gpt2-small-bench/';
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };

/** One sweep through the panel: ms from the Run click to each mark (in the page's clock). */
function timeSweep(page, over) {
  return page.evaluate((sweep) => new Promise((ok, fail) => {
    const panel = document.querySelector('#patching-panel'), text = document.querySelector('#patch-bar-text');
    document.querySelector('#patch-sweep').value = sweep;
    const marks = {};
    let t0 = 0;
    const obs = new MutationObserver(() => {
      const now = performance.now() - t0;
      if (marks.bar === undefined && !document.querySelector('#patch-progress').hidden) marks.bar = now;
      const m = /^Sweep: \d+ % \((\d+) of (\d+) cells\)/.exec(text.textContent);
      // the caption as the page can paint it: the first call's cells are done when it first yields
      if (m && marks.firstProgress === undefined) { marks.firstProgress = now; marks.cellsAtFirst = Number(m[1]); marks.cells = Number(m[2]); }
      if (panel.dataset.state === 'done') {
        obs.disconnect();
        requestAnimationFrame(() => { marks.drawn = performance.now() - t0; ok(marks); });
      } else if (panel.dataset.state === 'error' || panel.dataset.state === 'cancelled') {
        obs.disconnect();
        fail(new Error(`the sweep ended ${panel.dataset.state}: ${document.querySelector('#patch-msg').textContent}`));
      }
    });
    obs.observe(panel, { attributes: true, childList: true, subtree: true, characterData: true });
    t0 = performance.now();
    document.querySelector('#patch-run').click();
  }), over);
}

/** reps sweeps of `over`: the median of each mark. */
async function sweeps(page, over, reps) {
  const runs = [];
  for (let r = 0; r < reps; r++) runs.push(await timeSweep(page, over));
  const pick = (k) => median(runs.map((x) => x[k]));
  return {
    over, tokens: await page.evaluate(() => /Both have (\d+) tokens/.exec(document.querySelector('#patch-tokens').textContent)?.[1]).then(Number),
    cells: runs[0].cells, cells_at_first_progress: runs[0].cellsAtFirst,
    ms_bar: pick('bar'), ms_first_progress: pick('firstProgress'), ms_drawn: pick('drawn'),
    ms_drawn_runs: runs.map((x) => x.drawn),
  };
}

/** Word tokens that encode back to themselves, from a seeded generator. */
function words(tok, vocab, n, seed, avoid = []) {
  const ok = [];
  for (let id = 0; id < vocab; id++) { const t = tok.decode([id]); if (/^ [a-z]{3,}$/.test(t) && tok.encode(t).length === 1 && !avoid.includes(id)) ok.push(id); }
  let s = seed;
  const out = [];
  while (out.length < n) { s = (s * 1103515245 + 12345) % 2147483648; const id = ok[s % ok.length]; if (!out.includes(id)) out.push(id); }
  return out;
}

/** The same heads sweep in Node on this machine now (simd, 1 thread): wall and CPU ms. */
async function nodeHeads(text) {
  qkv.env.variant = 'simd';
  qkv.env.numThreads = 1;
  const m = await qkv.loadModel(path.join(DIR, 'f32'));
  try {
    const o = { clean: m.tokenizer.encode(text), corrupted: m.tokenizer.encode(text.replace('fox', 'cow')), answer: [100, 200], over: 'heads' };
    const t0 = performance.now(), c0 = process.cpuUsage();
    await qkv.activationPatching(m, o);
    const c = process.cpuUsage(c0);
    return { variant: 'simd', threads: 1, tokens: o.clean.length, ms_wall: performance.now() - t0, ms_cpu: (c.user + c.system) / 1000 };
  } finally {
    m.dispose();
  }
}

const machine = () => ({ cpu: os.cpus()[0]?.model, cores: os.cpus().length, loadavg: os.loadavg().map((x) => +x.toFixed(2)) });

async function main() {
  if (!existsSync(path.join(DEMO, 'index.html'))) throw new Error('patching bench: build the demo first (npx --no-install vite build --config web/demo/vite.config.ts)');
  const before = machine();
  const tiny = await qkv.loadModel(path.join(ROOT, 'web/models/tiny-kjv-induction'));
  const seq = words(tiny.tokenizer, tiny.dims.vocab, 32, 7), other = words(tiny.tokenizer, tiny.dims.vocab, 32, 99, seq);
  const clean = tiny.tokenizer.decode([...seq, ...seq]), corrupt = tiny.tokenizer.decode([...other, ...seq]);
  tiny.dispose();
  if (!SKIP_GPT2 && !existsSync(path.join(DIR, 'f32', 'done'))) {
    execFileSync(process.execPath, [path.join(ROOT, 'bench/model/make_gpt2_small.mjs'), '--out', DIR], { stdio: 'inherit' });
  }
  const { url, close } = await serve({ root: DEMO, mounts: SKIP_GPT2 ? {} : { '/models/gpt2-small-bench/': path.join(DIR, 'f32') } });
  const browser = await launch();
  const result = { what: 'the model page\'s Patching panel in headless Chromium: Run -> bar, first progress event, first cells done, map drawn (ms, wall clock in the page, median)', date: new Date().toISOString() };
  try {
    const page = await openPage(browser, `${url}/index.html#${new URLSearchParams({ model: 'tiny-kjv-induction', prompt: clean, corrupt, answer: `${seq[0]},${other[0]}` })}`, { viewport: { width: 1280, height: 1000 } });
    await page.waitForSelector('body[data-ready=true]', { timeout: 120_000 });
    await page.waitForFunction(() => /as you set them/.test(document.querySelector('#patch-answer').textContent), null, { timeout: 60_000 })
      .catch(async (e) => { throw new Error(`patching bench: the panel's answer line is "${await page.textContent('#patch-answer')}"; its tokens line "${await page.textContent('#patch-tokens')}" (${e.message})`); });
    result.chromium = browser.version();
    result.engine = await page.textContent('#backend');
    result.tiny = [];
    for (const over of ['heads', 'headPositions', 'residPre']) result.tiny.push(await sweeps(page, over, REPS));
    if (!SKIP_GPT2) {
      // the page's model menu with the bench checkpoint as one more entry: the page's own loading path
      await page.evaluate((u) => { const s = document.querySelector('#model'); s.add(new Option('GPT-2 small (random weights)', u)); s.value = u; s.dispatchEvent(new Event('change')); }, GPT2_URL);
      await page.waitForFunction(() => /12 layers/.test(document.querySelector('#model-info').textContent) && document.querySelector('#gen-msg').textContent === '', null, { timeout: 300_000 });
      const text = 'The quick brown fox jumps over the lazy dog and the cat sat on the mat';
      await page.fill('#patch-clean', text);
      await page.fill('#patch-corrupt', text.replace('fox', 'cow'));
      // random weights: both prompts may predict the same token, so the answer is two fixed ids
      await page.fill('#patch-correct', '#100');
      await page.fill('#patch-wrong', '#200');
      await page.press('#patch-wrong', 'Tab');
      result.gpt2 = await sweeps(page, 'heads', GPT2_REPS);
      const node = JSON.parse(readFileSync(path.join(ROOT, 'bench/results/model-residual-node.json'), 'utf8'));
      const heads = node.sweeps.runs.find((r) => r.over === 'heads');
      result.gpt2.node_heads = { ms: heads.ms, cells: heads.cells, tokens: node.sweeps.tokens, clock: node.clock, threads: node.threads, variant: node.variant, machine: node.machine, date: node.date };
      result.gpt2.node_same_run = await nodeHeads(text);
    }
    result.problems = page.problems;
  } finally {
    await browser.close();
    await close();
  }
  result.machine = { ...machine(), loadavg_before: before.loadavg };
  console.log(`\nPatching panel in Chromium (${result.engine}; ${result.machine.cpu}, ${result.machine.cores} cores, load ${before.loadavg.join(' ')} -> ${result.machine.loadavg.join(' ')})`);
  console.log('model               sweep           tokens  cells   bar ms  1st progress ms (cells done)  drawn ms');
  const row = (name, r) => console.log(`${name.padEnd(19)} ${r.over.padEnd(15)} ${String(r.tokens).padStart(6)} ${String(r.cells).padStart(6)} ${r.ms_bar.toFixed(1).padStart(8)} ${r.ms_first_progress.toFixed(1).padStart(16)} (${String(r.cells_at_first_progress).padStart(4)})       ${r.ms_drawn.toFixed(1).padStart(9)}`);
  for (const r of result.tiny) row('tiny-kjv-induction', r);
  if (result.gpt2) {
    row('GPT-2 small', result.gpt2);
    const n = result.gpt2.node_heads;
    console.log(`Node (model-residual-node.json, ${n.threads} thread, ${n.variant}, ${n.clock}): heads sweep at ${n.tokens} tokens ${n.ms.toFixed(0)} ms; page / Node ${(result.gpt2.ms_drawn / n.ms).toFixed(2)}`);
    const s = result.gpt2.node_same_run;
    console.log(`Node in this run (${s.threads} thread, ${s.variant}): ${s.ms_wall.toFixed(0)} ms wall, ${s.ms_cpu.toFixed(0)} ms CPU; page / Node wall ${(result.gpt2.ms_drawn / s.ms_wall).toFixed(2)}`);
  }
  writeFileSync(OUT, JSON.stringify(result, null, 2) + '\n');
  console.log(`wrote ${path.relative(ROOT, OUT)}`);
}

await main();
