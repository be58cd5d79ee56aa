// Encoders page: a tiny BERT fills in [MASK] as the user types (its bidirectional attention in
// the head view, a sentence-pair mode with segments A and B) and embeds sentences (their cosine
// matrix, ./similarity.ts), and a tiny BART spells numbers
// token by token with its three kinds of attention: encoder self, decoder self (causal) and
// decoder -> encoder (cross), redrawn for every generated word. The similarity panel can take an
// encoder from the Hub or a dropped folder (./encoder-source.ts). The fill-mask panel has the
// model page's tools (./encoder-explorer.ts): test a head, find heads, the model view, the URL.
import './style.css';
import { showRuntime } from './runtime-line';
import { settled } from './isolation';
import { qkv } from './api';
import { $, message, showToken, yieldToEvents } from './ui';
import { HeadView } from './headview';
import { renderHeatmap } from './heatmap';
import type { AttnData } from './contract';
import { rowsOf } from './encoder-model';
import { ENCODER_NAME, EncoderExplorer } from './encoder-explorer';
import { parseState, type ViewState } from './url-state';
import { startSimilarity, useSimilarityModel } from './similarity';
import { wireEncoderSource } from './encoder-source';
import { LensPanel } from './lens-panel';
import { ENCODER_LENS_INTRO, encoderLensSource } from './encoder-lens';

const BERT = './models/tiny-bert-kjv/';
const BART = './models/tiny-numbers/';
const MEAN = -1; // the head <select>'s value for the mean over heads

let bert: qkv.EncoderModel | null = null;
let bart: qkv.Seq2SeqModel | null = null;
const enc = { layer: 0, heads: [] as boolean[], query: -1, seq: 0, rolled: false };
const headView = new HeadView($('#enc-headview'), (q) => { enc.query = q; headView.update(viewState()); });
const viewState = () => ({ layer: enc.layer, heads: enc.rolled ? [true] : enc.heads, query: enc.query });
/** the sentence's raw maps (pair mode: the pair's) and whether they are the fill-mask sentence's */
let shownData: AttnData | null = null;
let single = true;
const ex = new EncoderExplorer({ model: () => bert, data: () => (single ? shownData : null), draw: () => draw() });
/** a link's state, applied once the sentence it names has run */
let restoring: ViewState | null = null;
/** the logit lens over the MLM head, on the fill-mask sentence (its URL fields written with the panel's) */
const lens = new LensPanel($('#enc-lens-panel'), { changed: () => draw(), input: $<HTMLInputElement>('#mask-text') }, ENCODER_LENS_INTRO);

// ---------------------------------------------------------------- 1 · the encoder

let maskTimer = 0;

/** Fill-mask predictions and the attention of the sentence (or the sentence pair). */
async function analyse(): Promise<void> {
  const m = bert;
  if (!m) return;
  const my = ++enc.seq;
  const msg = $('#mask-msg');
  try {
    const pair = $<HTMLInputElement>('#pair').checked;
    let ids: number[], types: number[] | undefined;
    if (pair) {
      const p = m.tokenizer.encodePair!($<HTMLInputElement>('#pair-a').value, $<HTMLInputElement>('#pair-b').value);
      ids = p.ids; types = p.tokenTypeIds;
    } else {
      ids = m.tokenizer.encode($<HTMLInputElement>('#mask-text').value);
    }
    ids = ids.slice(0, m.maxPositions);
    const out = await m.forward(ids, { outputAttentions: true, ...(types ? { tokenTypeIds: types } : {}) });
    let predictions: qkv.FillMaskPrediction[] = [];
    const text = $<HTMLInputElement>('#mask-text').value;
    if (!pair) predictions = await m.fillMask(text, { topK: 5 });
    if (my !== enc.seq) return;
    message(msg, '');
    const list = $('#mask-out');
    list.hidden = pair;
    list.dataset.text = pair ? '' : text; // what the predictions are for
    list.replaceChildren(...predictions.map((p) => {
      const li = document.createElement('li');
      li.dataset.token = p.token;
      li.dataset.score = String(p.score);
      const bar = document.createElement('span'); bar.className = 'bar'; bar.style.width = `${Math.round(200 * p.score)}px`;
      li.append(`${p.token}  ${(100 * p.score).toFixed(1)} %`, bar);
      return li;
    }));
    const tokens = ids.map((id, i) => showToken(m.tokenizer.tokenText(id)) + (types && types[i] === 1 ? '·B' : ''));
    shownData = {
      tokens, ids, promptLength: ids.length, nLayer: m.layers, nHead: m.heads, attn: rowsOf(out.attentions!),
      headDim: Number(m.config.hidden_size ?? m.config.dim ?? 0) / m.heads, scale: 1, bidirectional: true,
    };
    single = !pair;
    if (restoring) { const s = restoring; restoring = null; ex.restore(s); void lens.restore(s); }
    draw();
  } catch (e) {
    if (my === enc.seq) message(msg, (e as Error).message, 'error');
  }
}

async function startEncoder(): Promise<void> {
  try {
    const m = await qkv.loadModel(BERT);
    if (!(m instanceof qkv.EncoderModel)) throw new Error(`${BERT} is not an encoder`);
    bert = m;
    lens.setSource(encoderLensSource(m, $<HTMLInputElement>('#mask-text')));
    enc.heads = Array.from({ length: m.heads }, () => true);
    $('#enc-layer').replaceChildren(...Array.from({ length: m.layers }, (_v, l) => new Option(String(l), String(l))));
    $('#bert-info').textContent = `tiny-bert-kjv: ${m.architecture}, ${m.layers} layers × ${m.heads} heads, WordPiece vocab ${m.config.vocab_size}.`;
    readLink();
    await analyse();
    await startSimilarity(m, 'tiny-bert-kjv (this page\'s)');
  } catch (e) {
    message($('#mask-msg'), `The encoder could not be loaded: ${(e as Error).message}`, 'error');
  }
}

/** Draws the maps (raw or after the test, or their rollout / flow) in the chosen view, then the tools' panels and the URL. */
function draw(): void {
  const m = bert, raw = shownData;
  if (!m || !raw) return;
  enc.layer = Number($<HTMLSelectElement>('#enc-layer').value || 0);
  ex.sel.layer = enc.layer;
  const data = single ? ex.base(raw) : raw;
  // raw, or the rollout / flow up to this layer (heads fused: one map)
  const mapped = ex.mapped(data), shown = mapped.data;
  enc.rolled = ex.fused;
  const view = ex.view;
  $('#enc-headview').hidden = view !== 'head';
  $('#enc-model').hidden = view !== 'model';
  if (view === 'head') headView.render(shown, viewState());
  else ex.renderModelView(shown);
  $('#enc-map-note').hidden = !mapped.note;
  $('#enc-map-note').textContent = mapped.note;
  // what a reader checks: weight above the diagonal (keys after the query) is used
  let above = 0;
  for (const head of data.attn[enc.layer]) head.forEach((r, i) => { for (let j = i + 1; j < r.length; j++) above += r[j]; });
  const check = $('#enc-check'), L = data.tokens.length;
  check.textContent = `${L} tokens × ${m.heads} heads in layer ${enc.layer}: ${(above / (m.heads * L) * 100).toFixed(0)} % of each query's weight, on average, goes to keys after it (a GPT's would be 0 %).`;
  check.dataset.above = String(above);
  ex.afterDraw({ prompt: $<HTMLInputElement>('#mask-text').value, layer: enc.layer, ...lens.state() });
}

/** A link's view (encoders.html#model=tiny-bert-kjv&prompt=...): the inputs now, the test once the sentence ran. */
function readLink(): void {
  const s = parseState(location.hash);
  if (s.model && s.model !== ENCODER_NAME) return; // the fill-mask panel runs tiny-bert-kjv only
  if (s.prompt !== undefined) $<HTMLInputElement>('#mask-text').value = s.prompt;
  if (s.target !== undefined) $<HTMLInputElement>('#mask-target').value = s.target;
  if (s.tab === 'head' || s.tab === 'model') $<HTMLSelectElement>('#enc-view').value = s.tab;
  if (s.map) $<HTMLSelectElement>('#enc-map').value = s.map;
  if (s.layer !== undefined && bert && s.layer < bert.layers) $<HTMLSelectElement>('#enc-layer').value = String(s.layer);
  restoring = s;
}

// ---------------------------------------------------------------- 2 · the encoder-decoder

/** The chosen head's rows, or the mean over heads. rows[h][q] -> [q] */
function pickHead(rows: Float32Array[][], head: number): Float32Array[] {
  if (head !== MEAN) return rows[head];
  const H = rows.length;
  return rows[0].map((_r, q) => {
    const out = new Float32Array(rows[0][q].length);
    for (let h = 0; h < H; h++) rows[h][q].forEach((w, j) => { out[j] += w / H; });
    return out;
  });
}

async function spell(): Promise<void> {
  const m = bart;
  if (!m) return;
  const go = $<HTMLButtonElement>('#s2s-go');
  go.disabled = true;
  document.body.dataset.spelling = 'true';
  try {
    const input = $<HTMLInputElement>('#s2s-in').value.trim();
    const src = m.tokenizer.encode(input);
    const srcLabels = src.map((id) => showToken(m.tokenizer.tokenText(id)));
    const layer = Number($<HTMLSelectElement>('#s2s-layer').value), head = Number($<HTMLSelectElement>('#s2s-head').value);
    const outLabels: string[] = [];
    const self: Float32Array[][] = [], cross: Float32Array[][] = []; // [step] -> [head] rows
    let encRows: Float32Array[][] = [];
    let text = '';
    for await (const s of m.generate(src, { maxNewTokens: m.config.max_position_embeddings, temperature: 0, outputAttentions: true })) {
      if (!encRows.length) encRows = rowsOf([s.encoderAttentions![layer]])[0];
      const split = (t: qkv.Tensor) => { const [H, P] = t.shape; const d = t.data as Float32Array; return Array.from({ length: H }, (_h, h) => d.slice(h * P, (h + 1) * P)); };
      self.push(split(s.decoderAttentions![layer]));
      cross.push(split(s.crossAttentions![layer]));
      outLabels.push(s.done ? '[end]' : showToken(m.tokenizer.tokenText(s.token)));
      text += s.text;
      $('#s2s-out').textContent = text.trim();
      const H = self[0].length;
      const byHead = (steps: Float32Array[][]) => Array.from({ length: H }, (_h, h) => steps.map((st) => st[h]));
      const decRows = pickHead(byHead(self), head), crossRows = pickHead(byHead(cross), head);
      const decKeys = ['[start]', ...outLabels.slice(0, -1)];
      renderHeatmap($('#s2s-enc'), { rows: srcLabels, cols: srcLabels, value: (i, j) => pickHead(encRows, head)[i][j], rowSums: true, maxCell: 30, numbers: false });
      renderHeatmap($('#s2s-dec'), { rows: outLabels, cols: decKeys, value: (i, j) => decRows[i][j] ?? 0, masked: (i, j) => j > i, rowSums: true, maxCell: 30, numbers: false });
      renderHeatmap($('#s2s-cross'), { rows: outLabels, cols: srcLabels, value: (i, j) => crossRows[i][j], rowSums: true, maxCell: 30, numbers: false });
      await yieldToEvents();
    }
    document.body.dataset.spelled = text.trim();
  } catch (e) {
    $('#s2s-out').textContent = `Failed: ${(e as Error).message}`;
  } finally {
    go.disabled = false;
    document.body.dataset.spelling = 'false';
  }
}

async function startSeq2Seq(): Promise<void> {
  try {
    const m = await qkv.loadModel(BART);
    if (!(m instanceof qkv.Seq2SeqModel)) throw new Error(`${BART} is not an encoder-decoder`);
    bart = m;
    const c = m.config;
    const layers = c.decoder_layers, heads = c.decoder_attention_heads;
    $('#s2s-layer').replaceChildren(...Array.from({ length: layers }, (_v, l) => new Option(String(l), String(l))));
    $<HTMLSelectElement>('#s2s-layer').value = String(layers - 1);
    $('#s2s-head').replaceChildren(new Option('mean of heads', String(MEAN)), ...Array.from({ length: heads }, (_v, h) => new Option(String(h), String(h))));
    $('#s2s-info').textContent = `tiny-numbers: ${c.model_type}, ${c.encoder_layers} + ${layers} layers × ${heads} heads, d_model ${c.d_model}. The last layer's cross-attention is the aligned one.`;
    $<HTMLButtonElement>('#s2s-go').disabled = false;
    await spell();
  } catch (e) {
    $('#s2s-info').textContent = `The encoder-decoder could not be loaded: ${(e as Error).message}`;
  }
}

// ---------------------------------------------------------------- wiring

function wire(): void {
  const later = () => { clearTimeout(maskTimer); maskTimer = window.setTimeout(() => void analyse(), 150); };
  for (const id of ['#mask-text', '#pair-a', '#pair-b']) $(id).addEventListener('input', later);
  $('#pair').addEventListener('change', () => { $('#pair-inputs').hidden = !$<HTMLInputElement>('#pair').checked; enc.query = -1; void analyse(); });
  $('#enc-layer').addEventListener('change', () => draw());
  for (const id of ['#enc-map', '#enc-view']) $(id).addEventListener('change', () => draw());
  $('#s2s-go').addEventListener('click', () => void spell());
  $('#s2s-in').addEventListener('keydown', (e) => { if (e.key === 'Enter') void spell(); });
  for (const id of ['#s2s-layer', '#s2s-head']) $(id).addEventListener('change', () => void spell());
  // a Hub or dropped encoder replaces the similarity panel's (the fill-mask panel keeps tiny-bert-kjv)
  wireEncoderSource((m, label) => useSimilarityModel(m, label, bert ?? undefined));
}

async function start(): Promise<void> {
  void showRuntime();
  wire();
  await settled;
  await Promise.all([startEncoder(), startSeq2Seq()]);
  document.body.dataset.ready = 'true';
}

void start();
