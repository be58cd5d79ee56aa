// The benchmark in a page (served from the repository root, crossOriginIsolated): the same
// code as Node (core.js). ?part=qkv|ort1|ort2|naive&sizes=128,512&quick=1 -> window.__bench.
import { SIZES, benchNaive, benchOrt, benchQkvVariants } from './core.js';

const p = new URLSearchParams(location.search);
const part = p.get('part');
const quick = p.get('quick') === '1';
const sizes = p.get('sizes') ? p.get('sizes').split(',').map(Number) : SIZES;
const el = document.getElementById('log');
const log = (r) => { el.textContent += `${r.impl} t=${r.threads} L=${r.L} causal=${r.causal}: ${r.ms.toFixed(2)} ms\n`; };

async function run() {
  if (part === 'qkv') {
    return benchQkvVariants(await import('/dist/index.js'), { sizes, quick, log });
  }
  if (part.startsWith('ort')) {
    const ort = await import('/node_modules/onnxruntime-web/dist/ort.wasm.min.mjs');
    ort.env.wasm.wasmPaths = '/node_modules/onnxruntime-web/dist/';
    ort.env.wasm.numThreads = Number(part.slice(3));
    return benchOrt(ort, { sizes, quick, log });
  }
  if (part === 'naive') return benchNaive({ sizes, quick, log });
  throw new Error(`unknown part ${part}`);
}

// Start after the load event (the naive loop would otherwise hold the page's load).
await new Promise((ok) => (document.readyState === 'complete' ? ok() : addEventListener('load', ok, { once: true })));
await new Promise((ok) => setTimeout(ok, 0));
run().then((rows) => { window.__bench = { rows }; }, (e) => { window.__bench = { error: String(e?.stack ?? e) }; });
