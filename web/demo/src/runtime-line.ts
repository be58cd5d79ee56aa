// The line in every page's header that says how qkv runs here, as a reader sees it: the wasm
// build, the threads a call uses, and why (cross-origin isolation and who provides it), e.g.
//   wasm simd-relaxed-threads · threads: 2 (cross-origin isolated via service worker)
//   wasm simd-threads · threads: 2 (cross-origin isolated by the server's headers)
//   wasm not loaded yet · threads available (cross-origin isolated via service worker)
//   wasm simd-relaxed · 1 thread: not cross-origin isolated (the service worker could not install)
// data-isolation on the element holds the mode as a word (service-worker | server | none); its
// title, the browser's own message where there is one (why the service worker failed).
import { qkv } from './api';
import { isolation, type Isolation } from './isolation';

function isolationText(i: Isolation): string {
  if (i.isolated) return i.by === 'server' ? "cross-origin isolated by the server's headers" : 'cross-origin isolated via service worker';
  return `not cross-origin isolated (${i.why})`;
}

function render(i: Isolation, loadError?: string): void {
  const el = document.querySelector<HTMLElement>('#runtime');
  if (!el) return;
  el.dataset.isolation = i.isolated ? i.by : 'none';
  el.title = !i.isolated && 'detail' in i && i.detail ? i.detail : '';
  const variant = qkv.env.loadedVariant;
  const build = loadError ? `wasm failed to load (${loadError})` : variant ? `wasm ${variant}` : 'wasm not loaded yet';
  if ('reloading' in i) el.textContent = `${build} · ${i.why}`;
  else if (!i.isolated) el.textContent = `${build} · 1 thread: ${isolationText(i)}`;
  else el.textContent = `${build} · ${variant ? `threads: ${qkv.env.threads}` : 'threads available'} (${isolationText(i)})`;
}

/**
 * Shows the line once isolation is decided. load: load the wasm module first (qkv.init, shared
 * with the page's own first call) — not on a page that picks the build itself (the benchmark),
 * which calls this again after each load.
 */
export async function showRuntime({ load = true } = {}): Promise<void> {
  const i = await isolation;
  render(i);
  if (!load || 'reloading' in i) return;
  try {
    await qkv.init();
    render(i);
  } catch (e) {
    render(i, (e as Error)?.message ?? String(e));
  }
}
