// Model page: load the tiny GPT (or a dropped or Hub checkpoint: checkpoint-panels.ts), generate
// token by token, and keep the attention explorer (head view, model view, neuron view) in step
// with every token.
// `st` holds the state; update functions change it and call render(), which only draws.
import './style.css';
import { showRuntime } from './runtime-line';
import { settled } from './isolation';
import { $, headColor, message, progress, showToken, yieldToEvents } from './ui';
import { loadModelFromUrl, qkv, type DemoModel } from './api';
import { layerKindText, maxRowSumError, type AttnData } from './contract';
import { renderNotes } from './notes';
import { allHeadStats, badgeClass, CAVEAT, type HeadStats } from './patterns';
import { HeadView } from './headview';
import { ModelView } from './modelview';
import { renderNeuron } from './neuronview';
import { wireExports } from './export-buttons';
import { DEFAULT_MODEL, HUB, MODELS, fillModelSelect } from './models';
import { Shown } from './shown';
import { WORD_RULE } from './words';
import { layerNote } from './layer-kinds';
import { ForwardProgress, stoppedBy } from './forward-progress';
import { fetchQueriesKeys } from './neuron-qk';
import { headline, type ModelOrigin } from './headline';
import { loadHub, wireCheckpointPanels } from './checkpoint-panels';
import { showChat, wireChat, type ChatRun } from './chat';
import { ExplorerTools } from './explorer-tools';
import { modelName, modelUrl, parseState, type ViewState } from './url-state';
import { LensPanel } from './lens-panel';
import { AttributionPanel } from './attribution-panel';
import { GuidePanel } from './guide-panel';
import { PatchingPanel } from './patching-panel';
import { SteeringPanel } from './steering-panel';

type Tab = 'head' | 'model' | 'neuron';

const st = {
  model: null as DemoModel | null,
  data: null as AttnData | null,
  stats: [] as HeadStats[][],
  tab: 'head' as Tab,
  layer: 0,
  heads: [] as boolean[],
  query: -1,
  sel: { layer: 0, head: 0 },
  neuronKey: -1,
  generating: false,
  stopRequested: false,
  qkPending: false,
  /** The text whose queries-and-keys pass the user cancelled: not started again until asked. */
  qkCancelled: null as AttnData | null,
  /** Bumped by every generation: a prompt analysis started before it must not draw after it. */
  epoch: 0,
  /** the model's name in the URL (url-state.ts); undefined for a dropped checkpoint */
  origin: undefined as string | undefined,
};
/** The debounced prompt analysis waiting to run (0 = none). */
let promptTimer = 0;
/** The prompt's forward pass: progress bar, percentage, Cancel. */
const forward = new ForwardProgress();
/** index.html's headline and lead: what the tiny GPTs show (headline.ts). */
const pageHeadline = { title: $('#headline').textContent ?? '', lead: $('#lead').textContent ?? '' };

const headView = new HeadView($('#headview'), (q) => { st.query = q; st.neuronKey = -1; renderControls(); headView.update(viewState()); });
const modelView = new ModelView($('#thumbs'), $('#heatmap'), (s) => { if (!tools.headClick(s)) { st.sel = s; st.layer = s.layer; render(); } });
// test a head, find heads, raw / rollout / flow, the URL (explorer-tools.ts)
const select = (layer: number, head: number) => { st.tab = 'model'; st.layer = layer; st.sel = { layer, head }; render(); };
const tools = new ExplorerTools({
  model: () => st.model, data: () => st.data, stats: () => st.stats, busy: () => st.generating, forward, render: () => render(), select,
});
// the "Follow a prediction" panels (their own modules; their URL fields written with the explorer's)
const mech = { model: () => st.model, prompt: () => $<HTMLTextAreaElement>('#prompt').value, busy: () => st.generating, changed: () => scheduleRender() };
const lens = new LensPanel($('#lens-panel'), mech), attr = new AttributionPanel($('#attribution-panel'), { ...mech, select });
const patching = new PatchingPanel({ ...mech, select });
/** The Generate controls as read: new tokens (1-1000), temperature, top-k, seed. */
const genSettings = () => ({ maxNewTokens: Math.max(1, Math.min(1000, Math.floor(Number($<HTMLInputElement>('#max-new').value) || 20))),
  temperature: Number($<HTMLInputElement>('#temperature').value), topK: Math.max(0, Math.floor(Number($<HTMLInputElement>('#top-k').value) || 0)), seed: Math.floor(Number($<HTMLInputElement>('#seed').value) || 0) });
const steering = new SteeringPanel({ ...mech, settings: genSettings });
// the guided example (guide-panel.ts): loads its model and types its prompt as a user does; show() applies a step's view fields
const guide = new GuidePanel({ model: () => st.model, busy: () => st.generating, forward, select,
  loadModel: (name) => { $<HTMLSelectElement>('#model').value = modelUrl(name); return pickModel(modelUrl(name)); },
  setPrompt: (text) => { clearTimeout(promptTimer); $<HTMLTextAreaElement>('#prompt').value = text; return analysePrompt(); },
  show: async (s) => {
    tools.test.clear(); tools.restore(s); render();
    if (s.lens) await lens.restore(s);
    if (s.attr !== undefined) await attr.restore(s);
    if (s.sweep) await patching.restore(s);
  } });
// rollout / flow: one fused map per layer
const viewState = () => ({ layer: st.layer, heads: tools.fused ? [true] : st.heads, query: st.query });
// what the views draw: st.data (or tools' maps), or with the word toggle on the same attention merged into words
const shown = new Shown();
const view = () => { const b = tools.shown(); return b && st.model ? shown.get(b.data, b.stats, st.model.tokenizer.tokenBytes) : null; };
/** The URL's view, kept until the model named there has run on the prompt (then restored). */
let restoring: ViewState | null = parseState(location.hash);

$('#caveat').textContent = `How to read these maps: ${CAVEAT}`;

// ---------------------------------------------------------------- rendering

function renderControls(): void {
  const v = view(), d = v?.data, m = st.model;
  const layerSel = $<HTMLSelectElement>('#layer'), headSel = $<HTMLSelectElement>('#head'), qSel = $<HTMLSelectElement>('#query');
  const nL = m?.dims.layers ?? 0, nH = m?.dims.heads ?? 0;
  // each layer's kind beside its number where the model mixes them (Gemma 3: "5 · global")
  const kinds = d ? Array.from({ length: nL }, (_v, l) => layerKindText(d, l)).join('|') : '';
  if (layerSel.options.length !== nL || layerSel.dataset.kinds !== kinds) {
    layerSel.replaceChildren(...Array.from({ length: nL }, (_v, l) => new Option(`${l}${d ? layerKindText(d, l) : ''}`, String(l))));
    layerSel.dataset.kinds = kinds;
  }
  layerSel.value = String(st.layer);
  if (headSel.options.length !== nH) headSel.replaceChildren(...Array.from({ length: nH }, (_v, h) => new Option(String(h), String(h))));
  headSel.value = String(st.sel.head);
  if (d) {
    const L = d.tokens.length;
    const key = d.tokens.join('\u0000'); // tokens or words: rebuilt when they change
    if (qSel.dataset.key !== key) { qSel.replaceChildren(...d.tokens.map((t, i) => new Option(`${i}: ${showToken(t)}`, String(i)))); qSel.dataset.key = key; }
    qSel.value = String(st.query < 0 ? L - 1 : st.query);
  }
  // head chips: colour, pattern label, toggle; with GQA each says its key/value head
  const chips = $('#chips');
  const gqa = !!m && m.dims.kvHeads !== m.dims.heads;
  const chipKey = `${nH}/${m?.dims.kvHeads ?? 0}`;
  if (chips.dataset.key !== chipKey) {
    chips.dataset.key = chipKey;
    const group = m ? nH / m.dims.kvHeads : 1;
    chips.replaceChildren(...Array.from({ length: nH }, (_v, h) => {
      const b = document.createElement('button');
      b.type = 'button'; b.className = 'chip'; b.dataset.head = String(h);
      const kv = gqa ? ` <span class="kv muted">· KV ${Math.floor(h / group)}</span>` : '';
      b.innerHTML = `<span class="dot" style="background:${headColor(h)}"></span><span class="name">head ${h}</span>${kv} <span class="badge"></span>`;
      b.addEventListener('click', () => { st.heads[h] = !st.heads[h]; renderControls(); headView.update(viewState()); });
      return b;
    }));
  }
  [...chips.children].forEach((b, h) => {
    b.setAttribute('aria-pressed', String(st.heads[h] !== false));
    const s = v?.stats[st.layer]?.[h];
    const badge = b.querySelector<HTMLElement>('.badge')!;
    badge.textContent = s ? `${s.label} · ${s.entropy.toFixed(2)} b` : '';
    badge.className = `badge ${s ? badgeClass(s.label) : ''}`;
    b.setAttribute('title', s ? `head ${h}: ${s.label}; mean row entropy ${s.entropy.toFixed(2)} bits` : `head ${h}`);
  });
  renderNotes(d, st.layer);
  document.querySelectorAll<HTMLElement>('.neuron-only').forEach((e) => { e.hidden = st.tab !== 'neuron'; });
  document.querySelectorAll<HTMLElement>('.head-only').forEach((e) => { e.hidden = st.tab !== 'head'; });
  $<HTMLSelectElement>('#model').disabled = st.generating;
  $<HTMLButtonElement>('#export-png').disabled = !d;
  $<HTMLButtonElement>('#export-json').disabled = !d;
}

/** maxRowSumError per AttnData (the check reads every weight). */
const rowError = new WeakMap<AttnData, number>();

function render(): void {
  renderControls();
  const v = view(), d = v?.data;
  $('#empty').hidden = !!d;
  for (const t of ['head', 'model', 'neuron'] as Tab[]) {
    $(`#view-${t}`).hidden = st.tab !== t || !d;
    const tab = $(`#tab-${t}`);
    tab.setAttribute('aria-selected', String(st.tab === t));
    tab.tabIndex = st.tab === t ? 0 : -1;
  }
  if (!v || !d) return;
  modelView.cells = tools.cells(!!v.words);
  if (st.tab === 'head') headView.render(d, viewState());
  else if (st.tab === 'model') modelView.render(d, v.stats, { layer: st.sel.layer, head: Math.min(st.sel.head, d.nHead - 1) });
  else renderNeuronView();
  tools.afterRender(st.layer, { model: st.origin, prompt: $<HTMLTextAreaElement>('#prompt').value, tab: st.tab, layer: st.layer, head: st.sel.head, words: shown.words,
    ...lens.state(), ...attr.state(), ...patching.state(), ...steering.state(), ...guide.state() },
    (id) => st.model!.tokenizer.tokenText(id));
  const raw = st.data!; // the row check reads the model's own maps (a removed head's rows are 0)
  let err = rowError.get(raw); // 12 x 12 heads x 1000^2 weights: summed once per text, not on every click
  if (err === undefined) rowError.set(raw, (err = maxRowSumError(raw)));
  const rc = $('#rowcheck');
  rc.textContent = `${raw.nLayer} layers × ${raw.nHead} heads × ${d.tokens.length} ${v.words ? 'words' : 'tokens'}; every row sums to 1 (largest deviation ${err.toExponential(1)}).`;
  rc.dataset.maxRowError = String(err);
}

function renderNeuronView(): void {
  const d = st.data!;
  const box = $('#neuron');
  if (!d.q || !d.k) {
    // fetched once per token sequence, with the progress bar and Cancel (neuron-qk.ts)
    fetchQueriesKeys(box, d, st, forward, () => { if (st.tab === 'neuron' && st.data) renderNeuronView(); }, renderNeuronView);
    return;
  }
  const v = view()!;
  renderNeuron(box, d, { layer: st.layer, head: st.sel.head, query: shown.queryToken(v, st.query), key: v.words ? -1 : st.neuronKey },
    v.words ? { data: v.data, query: st.query } : undefined);
}

let renderQueued = false;
/** Coalesces renders to one per animation frame while tokens stream in. */
function scheduleRender(): void {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => { renderQueued = false; render(); });
}

// ---------------------------------------------------------------- model + data

function setData(ids: number[], promptLength: number, attn: Float32Array[][][]): void {
  const m = st.model!;
  st.data = {
    tokens: ids.map((id) => m.tokenizer.tokenText(id)), ids: ids.slice(), promptLength,
    nLayer: m.dims.layers, nHead: m.dims.heads, attn, headDim: m.headDim, scale: m.scale,
    kvHeads: m.dims.kvHeads, windows: m.dims.windows, rotary: m.rotary,
  };
  st.stats = allHeadStats(st.data);
  document.body.dataset.tokens = String(ids.length);
}

function renderOutput(ids: number[], promptLength: number): void {
  const m = st.model!;
  const out = $('#output');
  const p = document.createElement('span'); p.className = 'prompt'; p.textContent = m.tokenizer.decode(ids.slice(0, promptLength));
  const n = document.createElement('span'); n.className = 'new';
  // ids without a tokenizer: "1 2 3" then " 4 5"
  n.textContent = (m.hasTokenizer || promptLength === 0 || ids.length === promptLength ? '' : ' ') + m.tokenizer.decode(ids.slice(promptLength));
  out.replaceChildren(p, n);
  out.scrollTop = out.scrollHeight;
}

/** The headline and the line under it follow the loaded model (headline.ts). */
function showHeadline(model: DemoModel, origin: ModelOrigin): void {
  const name = origin.kind === 'hub' ? origin.name : model.name;
  const h = headline({ ...model, name }, origin, pageHeadline);
  $('#headline').textContent = h.title;
  $('#lead').textContent = h.lead;
}

async function useModel(model: DemoModel, origin: ModelOrigin): Promise<void> {
  st.model?.dispose();
  showHeadline(model, origin);
  st.epoch++;
  st.model = model;
  st.origin = origin.kind === 'site' ? modelName(origin.url) : origin.kind === 'hub' ? `hub:${$<HTMLInputElement>('#hub-url').value.trim()}` : undefined;
  tools.reset(); lens.setModel(model); attr.setModel(model); patching.setModel(model); steering.setModel(model); guide.setModel(model);
  st.data = null;
  st.layer = 0; st.sel = { layer: 0, head: 0 }; st.query = -1; st.neuronKey = -1;
  st.heads = Array.from({ length: model.dims.heads }, () => true);
  $('#model-info').textContent = model.info;
  showChat(model);
  // a checkpoint without a tokenizer takes token ids as its prompt
  const note = $('#prompt-note'), prompt = $<HTMLTextAreaElement>('#prompt');
  note.hidden = model.hasTokenizer;
  note.textContent = model.hasTokenizer ? '' : `This checkpoint has no tokenizer: type token ids in [0, ${model.dims.vocab}) separated by spaces, e.g. "1 2 3".`;
  if (!model.hasTokenizer) {
    try { model.tokenizer.encode(prompt.value); } catch { prompt.value = '1 2 3'; }
  }
  $('#backend').textContent = model.engine;
  $<HTMLButtonElement>('#generate').disabled = false;
  $<HTMLButtonElement>('#run').disabled = false;
  render();
  await analysePrompt();
}

/** Runs the prompt alone so the explorer has something to show before generating. */
async function analysePrompt(): Promise<void> {
  const m = st.model;
  if (!m || st.generating) return;
  let ids: number[];
  try {
    ids = m.tokenizer.encode($<HTMLTextAreaElement>('#prompt').value).slice(-m.dims.positions);
  } catch (e) {
    message($('#gen-msg'), `The prompt: ${(e as Error).message}`, 'error');
    return;
  }
  if ($('#gen-msg').textContent?.startsWith('The prompt:')) message($('#gen-msg'), '');
  if (!ids.length) return;
  const epoch = st.epoch;
  // a long prompt at 12 x 12 heads takes seconds (L x L weights per head): say so while it runs;
  // qkv runs it a chunk of tokens at a time, so the bar moves and Cancel stops it
  const busy = ids.length >= 256 ? `Computing the attention of ${ids.length} tokens (${m.dims.layers} layers × ${m.dims.heads} heads)…` : '';
  if (busy) { message($('#gen-msg'), busy); document.body.dataset.analysing = 'true'; }
  let attn: Float32Array[][][];
  try {
    attn = await forward.attention(m, ids, 'Attention');
  } catch (e) {
    const stopped = stoppedBy(e);
    if (stopped === 'cancelled') message($('#gen-msg'), `Cancelled: the attention of ${ids.length} tokens was not computed. Run (or Generate) computes it again.`, 'info');
    else if (!stopped) message($('#gen-msg'), `The forward pass failed: ${(e as Error).message}`, 'error');
    return; // 'replaced': the newer pass draws
  } finally {
    if (busy && $('#gen-msg').textContent === busy) message($('#gen-msg'), '');
    delete document.body.dataset.analysing;
  }
  // a generation started meanwhile (or the model changed): its text and maps win
  if (epoch !== st.epoch || st.generating || m !== st.model) return;
  setData(ids, ids.length, attn!);
  renderOutput(ids, ids.length);
  if (restoring) restoreView(restoring);
  render();
}

/** The URL's view once its model has run on the prompt: view, layer, head, words, map, the test. */
function restoreView(s: ViewState): void {
  restoring = null;
  tools.holdUrl = false;
  const m = st.model!;
  if (s.tab) st.tab = s.tab;
  if (s.layer !== undefined && s.layer < m.dims.layers) st.layer = s.layer;
  st.sel = { layer: st.layer, head: s.head !== undefined && s.head < m.dims.heads ? s.head : 0 };
  if (s.words) { shown.words = true; $<HTMLInputElement>('#words').checked = true; $('#word-rule').hidden = false; }
  tools.restore(s);
  void lens.restore(s); void attr.restore(s); void guide.restore(s);
  void patching.restore(s).then(() => steering.restore(s));
}

async function generate(chat?: ChatRun): Promise<number[]> {
  const m = st.model;
  if (!m || st.generating) return [];
  // a prompt analysis still waiting for its debounce, or still running, must not redraw the
  // prompt alone over the generated text
  clearTimeout(promptTimer);
  st.epoch++;
  const msg = $('#gen-msg');
  message(msg, '');
  const { maxNewTokens: maxNew, temperature, topK, seed } = genSettings();
  let ids: number[];
  try {
    ids = chat ? chat.ids.slice() : m.tokenizer.encode($<HTMLTextAreaElement>('#prompt').value);
  } catch (e) {
    message(msg, `The prompt: ${(e as Error).message}`, 'error');
    return [];
  }
  if (!ids.length) { message(msg, m.hasTokenizer ? 'Type a prompt first.' : 'Type token ids first, e.g. "1 2 3".', 'error'); return []; }
  const P = m.dims.positions;
  const room = P - maxNew;
  if (room < 1) { message(msg, `At most ${P - 1} new tokens fit in this model's context.`, 'error'); return []; }
  // a conversation is not cut (its template's turns would lose their start): it must fit
  if (chat && ids.length > room) { message(msg, `The conversation (${ids.length} tokens) and ${maxNew} new tokens do not fit in this model's context of ${P}: start a new conversation.`, 'error'); return []; }
  if (ids.length > room) { ids = ids.slice(-room); message(msg, `The prompt was cut to its last ${room} tokens to leave room for ${maxNew} new ones.`, 'info'); }
  const promptLength = ids.length;
  st.generating = true; st.stopRequested = false; st.query = -1; st.neuronKey = -1;
  document.body.dataset.generating = 'true';
  $<HTMLButtonElement>('#generate').disabled = true;
  $<HTMLButtonElement>('#run').disabled = true;
  $<HTMLButtonElement>('#stop').disabled = false;
  $('#count').textContent = '0';
  $('#speed').textContent = '–';
  let made = 0;
  try {
    // the prompt's own rows (with progress; Cancel or Stop ends the generation here), then one
    // row per step (the KV cache computes only the new query's row)
    const attn = await forward.attention(m, ids, 'Prompt');
    setData(ids, promptLength, attn);
    scheduleRender();
    const t0 = performance.now();
    // model time = time spent waiting for the next step; the rest is this page drawing
    let modelMs = 0, asked = t0, yielded = t0;
    for await (const step of m.generate(ids, { maxNewTokens: maxNew, temperature, topK, seed })) {
      modelMs += performance.now() - asked;
      const q = step.position - 1; // the query whose row this is
      step.rows.forEach((layer, l) => layer.forEach((row, h) => { attn[l][h][q] = row; }));
      ids = [...ids, step.token];
      made++;
      // the explorer shows the tokens whose rows are known (the newest gets its row next step)
      setData(ids.slice(0, q + 1), promptLength, attn.map((layer) => layer.map((rows) => rows.slice(0, q + 1))));
      renderOutput(ids, promptLength);
      chat?.onReply(ids.slice(promptLength));
      $('#count').textContent = String(made);
      const rate = (ms: number) => (made / (ms / 1000)).toFixed(0);
      $('#speed').textContent = `${rate(modelMs)} tokens/s (${rate(performance.now() - t0)} with drawing)`;
      scheduleRender();
      if (st.stopRequested || chat?.stop.includes(step.token)) break; // a chat reply ends at its end-of-turn token
      // let a frame (render, Stop clicks) through about every 15 ms, not after every token
      if (performance.now() - yielded > 15) {
        await yieldToEvents();
        yielded = performance.now();
      }
      asked = performance.now();
    }
    // one full pass so the last token has its row too (cancelled: the views keep the rows they have)
    let lastRow = true;
    try {
      setData(ids, promptLength, await forward.attention(m, ids, 'Every row'));
    } catch (e) {
      if (!stoppedBy(e)) throw e;
      lastRow = false;
    }
    renderOutput(ids, promptLength);
    message(msg, `${st.stopRequested ? `Stopped after ${made} tokens.` : `Generated ${made} tokens.`}${lastRow ? '' : ' (Cancelled before the last token\'s attention row.)'}`, 'ok');
  } catch (e) {
    if (stoppedBy(e)) message(msg, made ? `Cancelled after ${made} tokens.` : 'Cancelled: nothing was generated. Generate (or Run) starts again.', 'info');
    else message(msg, `Generation failed: ${(e as Error).message}`, 'error');
  } finally {
    st.generating = false;
    document.body.dataset.generating = 'false';
    document.body.dataset.generated = String(made);
    $<HTMLButtonElement>('#generate').disabled = false;
    $<HTMLButtonElement>('#run').disabled = false;
    $<HTMLButtonElement>('#stop').disabled = true;
    render();
  }
  return ids.slice(promptLength);
}

// ---------------------------------------------------------------- controls

function setTab(t: Tab): void { st.tab = t; render(); }

/** The model <select>: loads the chosen model (the page keeps the old one if that fails). */
async function pickModel(url: string): Promise<void> {
  if (url === HUB) { $('#hub').scrollIntoView({ block: 'nearest' }); void loadHub(); return; }
  if (url.startsWith('./encoders.html')) { location.href = url; return; }
  if (st.generating || !url.startsWith('./models/')) return;
  const msg = $('#gen-msg');
  message(msg, `Loading ${url}…`);
  try {
    await useModel(await loadModelFromUrl(url, () => {}), { kind: 'site', url });
    message(msg, '');
  } catch (e) {
    message(msg, `The model could not be loaded: ${(e as Error).message}`, 'error');
  }
}

function wire(): void {
  const modelSel = $<HTMLSelectElement>('#model');
  fillModelSelect(modelSel);
  modelSel.addEventListener('change', () => void pickModel(modelSel.value));
  $('#word-rule').textContent = WORD_RULE;
  $('#words').addEventListener('change', () => {
    shown.words = $<HTMLInputElement>('#words').checked;
    st.query = -1; st.neuronKey = -1; // positions count words or tokens: a pinned one no longer applies
    $('#word-rule').hidden = !shown.words;
    render();
  });
  $('#generate').addEventListener('click', () => void generate());
  wireChat({ generating: () => st.generating, run: generate, stop: () => { st.stopRequested = true; forward.cancel(); } });
  $('#stop').addEventListener('click', () => { st.stopRequested = true; forward.cancel(); });
  $('#run').addEventListener('click', () => { clearTimeout(promptTimer); void analysePrompt(); });
  $('#prompt').addEventListener('keydown', (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) void generate(); });
  $('#prompt').addEventListener('input', () => { clearTimeout(promptTimer); promptTimer = window.setTimeout(() => void analysePrompt(), 300); });
  const temp = $<HTMLInputElement>('#temperature');
  temp.addEventListener('input', () => { $('#temperature-out').textContent = Number(temp.value).toFixed(2); });
  const tabs: Tab[] = ['head', 'model', 'neuron'];
  tabs.forEach((t, n) => {
    const el = $(`#tab-${t}`);
    el.addEventListener('click', () => setTab(t));
    el.addEventListener('keydown', (e) => {
      if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft') return;
      const next = tabs[(n + (e.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length];
      setTab(next); $(`#tab-${next}`).focus();
    });
  });
  $('#layer').addEventListener('change', () => { st.layer = Number($<HTMLSelectElement>('#layer').value); st.sel = { ...st.sel, layer: st.layer }; render(); });
  $('#head').addEventListener('change', () => { st.sel = { ...st.sel, head: Number($<HTMLSelectElement>('#head').value) }; st.neuronKey = -1; render(); });
  $('#query').addEventListener('change', () => { st.query = Number($<HTMLSelectElement>('#query').value); st.neuronKey = -1; render(); });
  wireExports(() => ({ tab: st.tab, layer: st.layer, head: st.sel.head, model: st.model, data: st.data }));
  let resize = 0;
  window.addEventListener('resize', () => { clearTimeout(resize); resize = window.setTimeout(render, 150); });
  wireCheckpointPanels({ generating: () => st.generating, hasModel: () => !!st.model, useModel });
}

async function start(): Promise<void> {
  void showRuntime();
  wire();
  render();
  await settled;
  const bar = $<HTMLProgressElement>('#load-bar'), text = $('#load-text');
  // a link's model: a site model, or a Hub id (loaded by the Hub panel after the default one)
  if (restoring?.prompt !== undefined) $<HTMLTextAreaElement>('#prompt').value = restoring.prompt;
  const hub = restoring?.model?.startsWith('hub:') ? restoring.model.slice(4) : null;
  const url = restoring?.model && !hub && MODELS.some((c) => c.url === modelUrl(restoring!.model!)) ? modelUrl(restoring.model) : DEFAULT_MODEL;
  $<HTMLSelectElement>('#model').value = url;
  try {
    const saved = restoring;
    if (hub) { restoring = null; tools.holdUrl = true; } // the view is restored when the Hub model has run
    await useModel(await loadModelFromUrl(url, (f, what) => progress(bar, f, what, text)), { kind: 'site', url });
    if (hub) {
      restoring = saved; $<HTMLInputElement>('#hub-url').value = hub;
      // not loaded (failed, cancelled): the page keeps the default model and writes its own URL
      void loadHub().finally(() => { if (restoring === saved) { restoring = null; tools.holdUrl = false; render(); } });
    }
    progress(bar, 1, 'Model ready.', text);
    $('#load').hidden = true;
  } catch (e) {
    progress(bar, 0, '', text);
    $('#load').hidden = true;
    message($('#gen-msg'), `The model could not be loaded: ${(e as Error).message}`, 'error');
  }
  document.body.dataset.ready = 'true';
}

void start();

