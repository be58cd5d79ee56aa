// The model page's two ways to bring a checkpoint of one's own: files dropped on the page (or
// picked), and the Hub panel (a Hub id through qkv's Hub loading and its cache, or a folder URL).
// Both show progress and end in the page's useModel; the Hub load can be cancelled.
import { $, message, progress } from './ui';
import { CheckpointError, loadModelFromFiles, loadModelFromHub, qkv, readDroppedFiles, type DemoModel } from './api';
import { HUB, showDropped } from './models';
import { clearCheckpointCache, HUB_GPT2, hubName, parseHubSource, type HubSource } from './hub';
import { type HubWeights, weightLabels } from './weight-labels';
import type { ModelOrigin } from './headline';
import { filesOfDrop, filesOfFolder } from './dropped-folder';

/** What the panels need of the page. */
export interface CheckpointHost {
  generating(): boolean;
  hasModel(): boolean;
  useModel(model: DemoModel, origin: ModelOrigin): Promise<void>;
}

let host: CheckpointHost;

/** Wires the drop zone, the file picker and the Hub panel to `page`. */
export function wireCheckpointPanels(page: CheckpointHost): void {
  host = page;
  wireDrop();
  wireHub();
}

// ---------------------------------------------------------------- drop a checkpoint

async function loadDropped(files: File[]): Promise<void> {
  const bar = $<HTMLProgressElement>('#drop-bar'), text = $('#drop-text'), msg = $('#drop-msg');
  if (host.generating()) { message(msg, 'Stop the generation first.', 'error'); return; }
  message(msg, '');
  bar.hidden = false;
  progress(bar, 0, 'reading files…', text);
  try {
    const onProgress = (f: number | null, what: string) => progress(bar, f, what, text);
    const ck = await readDroppedFiles(files, onProgress);
    await host.useModel(await loadModelFromFiles(ck, onProgress), { kind: 'dropped', files: files.map((f) => f.name) });
    showDropped($<HTMLSelectElement>('#model'), ck.name);
    progress(bar, 1, '', text);
    message(msg, `Loaded ${ck.name}. The explorer now shows its heads.`, 'ok');
  } catch (e) {
    const known = e instanceof CheckpointError;
    message(msg, known ? (e as Error).message : `Could not load the checkpoint: ${(e as Error).message}`, 'error');
    text.textContent = '';
  } finally {
    bar.hidden = true;
  }
}

function wireDrop(): void {
  const zone = $('#dropzone');
  const over = (on: boolean) => zone.classList.toggle('over', on);
  document.addEventListener('dragover', (e) => { e.preventDefault(); over(true); });
  document.addEventListener('dragleave', (e) => { if (!e.relatedTarget) over(false); });
  document.addEventListener('drop', (e) => {
    e.preventDefault(); over(false);
    void filesOfDrop(e.dataTransfer).then(loadDropped);
  });
  const input = $<HTMLInputElement>('#files');
  input.addEventListener('change', () => { void loadDropped([...(input.files ?? [])]); input.value = ''; });
  const folder = $<HTMLInputElement>('#folder');
  folder.addEventListener('change', () => { void loadDropped(filesOfFolder(folder.files)); folder.value = ''; });
}

// ---------------------------------------------------------------- a checkpoint from the Hub

let hubAbort: AbortController | null = null;

/**
 * Loads the panel's checkpoint: a Hub id or Hub URL through qkv's Hub loading (downloaded into
 * Cache Storage, or read from it), another folder URL by loadModel(url); Cancel aborts it.
 */
export async function loadHub(): Promise<void> {
  const bar = $<HTMLProgressElement>('#hub-bar'), text = $('#hub-text'), msg = $('#hub-msg');
  if (hubAbort) return;
  if (host.generating()) { message(msg, 'Stop the generation first.', 'error'); return; }
  let source: HubSource;
  try {
    source = parseHubSource($<HTMLInputElement>('#hub-url').value);
  } catch {
    message(msg, 'Give a Hub id (owner/name, or owner/name@revision) or a folder URL.', 'error');
    return;
  }
  const weights = $<HTMLSelectElement>('#hub-weights').value as HubWeights;
  const weightsWords = { int8: '8-bit', int4: '4-bit', auto: 'as stored' };
  const abort = (hubAbort = new AbortController());
  const buttons = (busy: boolean) => {
    $<HTMLButtonElement>('#hub-load').disabled = busy;
    $<HTMLButtonElement>('#hub-cancel').disabled = !busy;
    $<HTMLButtonElement>('#generate').disabled = busy || !host.hasModel();
    $<HTMLButtonElement>('#run').disabled = busy || !host.hasModel();
  };
  buttons(true);
  message(msg, '');
  bar.hidden = false;
  const mib = (n: number) => (n / 1048576).toFixed(1);
  let downloaded = 0;
  const onProgress = (p: qkv.LoadProgress) => {
    const f = p.total ? p.loaded / p.total : null;
    if (p.stage === 'download') {
      downloaded++;
      progress(bar, f, `downloading ${p.file}: ${mib(p.loaded)} MiB${p.total ? ` of ${mib(p.total)} MiB` : ''}`, text);
    } else {
      progress(bar, f, `${p.file} into qkv (${weightsWords[weights]}): ${mib(p.loaded)} MiB`, text);
    }
  };
  progress(bar, null, `${hubName(source)}: config.json…`, text);
  const hubUrl = qkv.env.hubUrl;
  try {
    if (source.kind === 'id' && source.hubUrl) qkv.env.hubUrl = source.hubUrl;
    const options: qkv.LoadOptions = { weights, signal: abort.signal, onProgress };
    if (source.kind === 'id' && source.revision) options.revision = source.revision;
    if (source.kind === 'id' && source.file) options.file = source.file;  // one GGUF file of the repository
    const model = await loadModelFromHub(source.kind === 'id' ? source.id : source.url, `${hubName(source)} (Hub)`, options);
    const where = source.kind === 'id'
      ? `${(source.hubUrl ?? qkv.env.hubUrl).replace(/\/$/, '')}/${source.id}${source.revision ? `@${source.revision}` : ''}`
      : source.url;
    await host.useModel(model, { kind: 'hub', url: where, name: hubName(source), weights });
    // what the choice took, measured (a decoder reports it; the weights are converted as they stream)
    const mem = model.memory();
    $('#hub-memory').textContent =
      `Its weights (${weightsWords[weights]}, ${mem.dtype}) take ${mib(mem.weights)} MiB; this page's wasm memory is ${mib(mem.wasmHeap)} MiB.`;
    const sel = $<HTMLSelectElement>('#model');
    sel.value = HUB;
    text.textContent = '';
    message(msg, source.kind === 'url' ? `Loaded from ${source.url} (a folder URL: not cached; Hub ids are).`
      : downloaded ? 'Downloaded and cached for the next visit.' : 'Loaded from this browser\'s cache (no download).', 'ok');
  } catch (e) {
    text.textContent = '';
    message(msg, abort.signal.aborted ? 'Cancelled.' : `Could not load the checkpoint: ${(e as Error).message}`, abort.signal.aborted ? 'info' : 'error');
  } finally {
    qkv.env.hubUrl = hubUrl;
    hubAbort = null;
    bar.hidden = true;
    buttons(false);
    document.body.dataset.hub = abort.signal.aborted ? 'cancelled' : 'done';
  }
}

function wireHub(): void {
  const params = new URLSearchParams(location.search);
  // ?hubUrl= : another Hub host (a mirror; the tests' local Hub)
  const host = params.get('hubUrl');
  if (host) qkv.env.hubUrl = host;
  const url = $<HTMLInputElement>('#hub-url');
  url.value = params.get('hub') ?? HUB_GPT2;
  // each weight choice's label says the memory it takes for the checkpoint typed (weight-labels.ts)
  const relabel = () => {
    let source: HubSource | null = null;
    try {
      source = parseHubSource(url.value);
    } catch { /* not a source yet: no id */ }
    const labels = weightLabels(source?.kind === 'id' ? source.id : null, HUB_GPT2);
    for (const o of $<HTMLSelectElement>('#hub-weights').options) o.textContent = labels[o.value as HubWeights];
  };
  relabel();
  url.addEventListener('input', relabel);
  $('#hub-load').addEventListener('click', () => void loadHub());
  $('#hub-cancel').addEventListener('click', () => hubAbort?.abort());
  $('#hub-clear').addEventListener('click', async () => {
    message($('#hub-msg'), (await clearCheckpointCache()) ? 'The cached checkpoint files are gone.' : 'Nothing was cached.', 'info');
  });
}
