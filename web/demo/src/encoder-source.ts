// Encoders page: an encoder of one's own for the similarity panel, from a Hub id
// ("sentence-transformers/all-MiniLM-L6-v2", "BAAI/bge-small-en-v1.5", owner/name@revision, a
// Hub resolve URL or a folder URL: hub.ts) through qkv's Hub loading (each file downloaded once,
// with progress and a cancel, kept in Cache Storage), or from a folder dropped on the panel or
// picked (config.json, model.safetensors, vocab.txt or tokenizer.json, and sentence-transformers'
// modules.json and 1_Pooling/config.json when there). Loaded, it replaces the panel's model.
import { qkv } from './api';
import { clearCheckpointCache, hubName, parseHubSource, type HubSource } from './hub';
import { $, message, progress } from './ui';

/** What the panel hands the page: the model and a line saying what it is and where it came from. */
export type UseEncoder = (model: qkv.EncoderModel, label: string) => Promise<void>;

let use: UseEncoder;
let abort: AbortController | null = null;
const mib = (n: number) => (n / 1048576).toFixed(1);

/** Runs one load with the panel's progress bar, message and buttons; `load` gets the signal and onProgress. */
async function withProgress(what: string, load: (signal: AbortSignal, onProgress: (p: qkv.LoadProgress) => void) => Promise<qkv.Model>,
  label: string, done: (downloaded: number) => string): Promise<void> {
  if (abort) return;
  const bar = $<HTMLProgressElement>('#encsrc-bar'), text = $('#encsrc-text'), msg = $('#encsrc-msg');
  const a = (abort = new AbortController());
  const busy = (on: boolean) => {
    $<HTMLButtonElement>('#encsrc-load').disabled = on;
    $<HTMLButtonElement>('#encsrc-cancel').disabled = !on;
  };
  busy(true);
  message(msg, '');
  bar.hidden = false;
  progress(bar, null, `${what}: config.json…`, text);
  let downloaded = 0;
  const onProgress = (p: qkv.LoadProgress) => {
    const f = p.total ? p.loaded / p.total : null;
    if (p.stage === 'download') downloaded++;
    progress(bar, f, `${p.stage === 'download' ? 'downloading' : 'loading'} ${p.file}: ${mib(p.loaded)} MiB${p.total ? ` of ${mib(p.total)} MiB` : ''}`, text);
  };
  try {
    const m = await load(a.signal, onProgress);
    if (!(m instanceof qkv.EncoderModel)) {
      const name = String(m);
      m.dispose();
      throw new Error(`${name} is not an encoder (BERT, DistilBERT, RoBERTa, XLM-RoBERTa); the model page runs decoders`);
    }
    await use(m, label);
    message(msg, done(downloaded), 'ok');
  } catch (e) {
    message(msg, a.signal.aborted ? 'Cancelled.' : `Could not load the encoder: ${(e as Error).message}`, a.signal.aborted ? 'info' : 'error');
  } finally {
    text.textContent = '';
    bar.hidden = true;
    abort = null;
    busy(false);
    document.body.dataset.encsrc = a.signal.aborted ? 'cancelled' : 'done';
  }
}

/** The Hub id (or folder URL) typed in the panel. */
async function loadFromHub(): Promise<void> {
  let source: HubSource;
  try {
    source = parseHubSource($<HTMLInputElement>('#encsrc-id').value);
  } catch {
    message($('#encsrc-msg'), 'Give a Hub id (owner/name, or owner/name@revision) or a folder URL.', 'error');
    return;
  }
  const name = hubName(source);
  const hubUrl = qkv.env.hubUrl;
  await withProgress(name, async (signal, onProgress) => {
    try {
      if (source.kind === 'id' && source.hubUrl) qkv.env.hubUrl = source.hubUrl;
      const options: qkv.LoadOptions = { signal, onProgress };
      if (source.kind === 'id' && source.revision) options.revision = source.revision;
      return await qkv.loadModel(source.kind === 'id' ? source.id : source.url, options);
    } finally {
      qkv.env.hubUrl = hubUrl;
    }
  }, `${name} (${source.kind === 'id' ? 'Hub' : 'folder URL'})`, (downloaded) => (source.kind === 'url'
    ? `Loaded from ${source.url} (a folder URL: not cached; Hub ids are).`
    : downloaded ? 'Downloaded and cached for the next visit.' : 'Loaded from this browser\'s cache (no download).'));
}

/** A file's path as dropped or picked ("minilm/1_Pooling/config.json", or a loose file's name). */
const pathOf = (f: File & { relPath?: string }) => (f.relPath ?? f.webkitRelativePath ?? '') || f.name;

/** The folder all the files are in, when they are all in one ("minilm"), else null. */
function topFolder(files: (File & { relPath?: string })[]): string | null {
  const tops = new Set(files.map((f) => { const p = pathOf(f).split('/').filter(Boolean); return p.length > 1 ? p[0] : ''; }));
  const [top] = tops;
  return tops.size === 1 && top ? top : null;
}

/**
 * A folder's files as loadModel's ModelFiles: config.json, model.safetensors (read by qkv as a
 * stream), the tokenizer (tokenizer.json or vocab.txt, tokenizer_config.json), modules.json and
 * the Pooling module's config.json (the path modules.json names, else 1_Pooling/).
 */
export async function encoderFiles(files: (File & { relPath?: string })[]): Promise<{ source: qkv.ModelFiles; name: string }> {
  const top = topFolder(files);
  const byPath = new Map(files.map((f) => [top ? pathOf(f).split('/').filter(Boolean).slice(1).join('/') : pathOf(f).replace(/^\/+/, ''), f]));
  const at = (p: string) => byPath.get(p);
  const config = at('config.json'), weights = at('model.safetensors') ?? files.find((f) => f.name.endsWith('.safetensors'));
  if (!config || !weights) {
    throw new Error(`a folder with config.json and model.safetensors is needed (got ${[...byPath.keys()].join(', ') || 'no files'})`);
  }
  const source: qkv.ModelFiles = { config: await config.text(), weights };
  const text = async (p: string) => at(p)?.text();
  const tokenizer = await text('tokenizer.json'), vocabTxt = await text('vocab.txt'), tokenizerConfig = await text('tokenizer_config.json');
  if (tokenizer !== undefined) source.tokenizer = tokenizer;
  else if (vocabTxt !== undefined) source.vocabTxt = vocabTxt;
  if (tokenizerConfig !== undefined) source.tokenizerConfig = tokenizerConfig;
  const modules = await text('modules.json');
  if (modules !== undefined) {
    source.modules = modules;
    let dir = '1_Pooling';
    try {
      const m = (JSON.parse(modules) as { type?: string; path?: string }[]).find((x) => x.type === 'sentence_transformers.models.Pooling');
      if (m?.path) dir = m.path.replace(/\/+$/, '');
    } catch { /* qkv's loader names the damaged file */ }
    const pooling = await text(`${dir}/config.json`);
    if (pooling !== undefined) source.pooling = pooling;
  }
  return { source, name: top ?? 'dropped folder' };
}

/** Every file under a dropped directory entry, each with its path from the drop. */
async function entryFiles(entry: FileSystemEntry): Promise<(File & { relPath: string })[]> {
  if (entry.isFile) {
    const f = await new Promise<File>((ok, no) => (entry as FileSystemFileEntry).file(ok, no));
    return [Object.assign(f, { relPath: entry.fullPath.replace(/^\//, '') })];
  }
  const reader = (entry as FileSystemDirectoryEntry).createReader();
  const all: FileSystemEntry[] = [];
  for (;;) {  // readEntries answers in batches, an empty one at the end
    const batch = await new Promise<FileSystemEntry[]>((ok, no) => reader.readEntries(ok, no));
    if (!batch.length) break;
    all.push(...batch);
  }
  return (await Promise.all(all.map(entryFiles))).flat();
}

async function loadFolder(files: (File & { relPath?: string })[]): Promise<void> {
  let picked: { source: qkv.ModelFiles; name: string };
  try {
    picked = await encoderFiles(files);
  } catch (e) {
    message($('#encsrc-msg'), `Could not load the encoder: ${(e as Error).message}`, 'error');
    document.body.dataset.encsrc = 'done';
    return;
  }
  await withProgress(picked.name, (signal, onProgress) => qkv.loadModel(picked.source, { signal, onProgress }),
    `${picked.name} (dropped folder)`, () => `Loaded ${picked.name} from this computer.`);
}

/** Wires the panel; `useModel` puts a loaded encoder into the similarity panel. */
export function wireEncoderSource(useModel: UseEncoder): void {
  use = useModel;
  const params = new URLSearchParams(location.search);
  const hub = params.get('hubUrl');  // another Hub host (a mirror; the tests' local Hub)
  if (hub) qkv.env.hubUrl = hub;
  $<HTMLInputElement>('#encsrc-id').value = params.get('encoder') ?? 'sentence-transformers/all-MiniLM-L6-v2';
  $('#encsrc-load').addEventListener('click', () => void loadFromHub());
  $('#encsrc-id').addEventListener('keydown', (e) => { if ((e as KeyboardEvent).key === 'Enter') void loadFromHub(); });
  $('#encsrc-cancel').addEventListener('click', () => abort?.abort());
  $('#encsrc-clear').addEventListener('click', async () => {
    message($('#encsrc-msg'), (await clearCheckpointCache()) ? 'The cached checkpoint files are gone.' : 'Nothing was cached.', 'info');
  });
  const input = $<HTMLInputElement>('#encsrc-folder');
  input.addEventListener('change', () => { void loadFolder([...(input.files ?? [])]); input.value = ''; });
  const zone = $('#encsrc-drop');
  zone.addEventListener('dragover', (e) => { e.preventDefault(); zone.classList.add('over'); });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (e) => {
    e.preventDefault();
    zone.classList.remove('over');
    const items = [...(e.dataTransfer?.items ?? [])].map((i) => i.webkitGetAsEntry?.()).filter((x): x is FileSystemEntry => !!x);
    const loose = [...(e.dataTransfer?.files ?? [])];
    void (async () => loadFolder(items.length ? (await Promise.all(items.map(entryFiles))).flat() : loose))();
  });
}
