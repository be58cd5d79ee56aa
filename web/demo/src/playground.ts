// Playground page: scores -> weights (d_k, scale, masks, entropy collapse), the online-softmax
// tiles of the flash kernel, and what a KV cache saves. State lives in `state`; update()
// recomputes the numbers, the render* functions only draw them.
import './style.css';
import { showRuntime } from './runtime-line';
import { settled } from './isolation';
import * as d3 from 'd3';
import * as Plot from '@observablehq/plot';
import { $, fmt } from './ui';
import { renderHeatmap } from './heatmap';
import { allowed, attention, mat, meanEntropy, onlineSoftmax, randn, rng, rowSum, type Mat, type MaskKind, type MaskSpec, type TileState } from './math';
import { sdpa } from './api';

const DV = 4; // values are 4-dimensional so outputs fit on screen
const MAX_WORDS = 12;
const EDIT_MAX_DK = 8;

const state = {
  sentence: '',
  words: [] as string[],
  seed: 1,
  dk: 4,
  scale: true,
  mask: 'bidirectional' as MaskKind,
  window: 3,
  pad: 0,
  edits: new Map<string, number>(), // "q:i:d" -> value
  flashQuery: 0,
  flashTile: 2,
  flashStep: 0,
  kvStep: 4,
};

let Q: Mat, K: Mat, V: Mat;
let spec: MaskSpec;
let weights: Float32Array = new Float32Array(0);
let output: Float32Array = new Float32Array(0);
let backend = '';

function hashWord(w: string): number {
  let h = 2166136261;
  for (let i = 0; i < w.length; i++) h = Math.imul(h ^ w.charCodeAt(i), 16777619);
  return h >>> 0;
}

/** Each distinct word gets its own seeded q, k, v (same word, same vectors: no positions here). */
function embed(words: string[], dk: number, seed: number, salt: number, dims: number): Mat {
  const m = mat(words.length, dims);
  words.forEach((w, i) => {
    const g = randn(rng((hashWord(w) ^ Math.imul(seed + 1, 0x9e3779b1) ^ Math.imul(salt, 0x85ebca6b)) >>> 0));
    for (let d = 0; d < dims; d++) m.data[i * dims + d] = g();
  });
  void dk;
  return m;
}

function buildInputs(): void {
  const words = state.sentence.trim().split(/\s+/).filter(Boolean).slice(0, MAX_WORDS);
  state.words = words.length ? words : ['(empty)'];
  const L = state.words.length;
  Q = embed(state.words, state.dk, state.seed, 1, state.dk);
  K = embed(state.words, state.dk, state.seed, 2, state.dk);
  V = embed(state.words, state.dk, state.seed, 3, DV);
  for (const [key, val] of state.edits) {
    const [m, i, d] = key.split(':');
    const M = m === 'q' ? Q : m === 'k' ? K : V;
    if (+i < M.rows && +d < M.cols) M.data[+i * M.cols + +d] = val;
  }
  const pad = Math.min(state.pad, L - 1);
  spec = { kind: state.mask, window: state.window, padded: state.words.map((_w, j) => j >= L - pad) };
}

const labels = (): string[] => state.words.map((w, j) => (spec.padded[j] ? '[pad]' : w));
const scaleValue = (dk = state.dk): number => (state.scale ? 1 / Math.sqrt(dk) : 1);

let seq = 0;
async function update(): Promise<void> {
  const my = ++seq;
  buildInputs();
  const L = state.words.length;
  let r;
  try {
    r = await sdpa(Q.data, K.data, V.data, L, state.dk, DV, scaleValue(), spec);
  } catch (e) {
    if (my !== seq) return;
    // no silent second implementation: the page says qkv failed and why
    const b = $('#backend');
    b.textContent = `qkv could not compute the weights: ${(e as Error).message}`;
    b.dataset.tone = 'error';
    return;
  }
  if (my !== seq) return; // a newer update superseded this one
  delete $('#backend').dataset.tone;
  weights = r.weights; output = r.output; backend = r.backend;
  state.flashQuery = Math.min(state.flashQuery, L - 1);
  state.kvStep = Math.min(state.kvStep, L - 1);
  renderScores();
  renderEntropyChart();
  renderTables();
  renderFlash();
  renderKv();
  void renderMaskComparison(my);
}

/** Section 4: the sentence through a causal and a bidirectional mask, side by side (both by qkv). */
async function renderMaskComparison(my: number): Promise<void> {
  const L = state.words.length;
  const both = await Promise.all((['causal', 'bidirectional'] as MaskKind[]).map((kind) =>
    sdpa(Q.data, K.data, V.data, L, state.dk, DV, scaleValue(), { ...spec, kind })));
  if (my !== seq) return;
  const sel = $<HTMLSelectElement>('#see-word');
  const pick = Math.min(Math.max(0, Number(sel.value) || 0), L - 1);
  sel.replaceChildren(...labels().map((w, i) => new Option(`${i}: ${w}`, String(i))));
  sel.value = String(pick);
  (['causal', 'bidirectional'] as MaskKind[]).forEach((kind, n) => {
    const W = mat(L, L, both[n].weights);
    const s: MaskSpec = { ...spec, kind };
    renderHeatmap($(n === 0 ? '#cmp-causal' : '#cmp-bidi'), {
      rows: labels(), cols: labels(), value: (i, j) => W.data[i * L + j], masked: (i, j) => !allowed(s, i, j),
      numbers: true, rowSums: true, maxCell: 34, width: 420, highlightRow: pick,
    });
    const seen = labels().filter((_w, j) => allowed(s, pick, j));
    const out = $(n === 0 ? '#see-causal' : '#see-bidi');
    out.textContent = `"${labels()[pick]}" sees ${seen.length} of ${L}: ${seen.join(' ')}`;
    out.dataset.count = String(seen.length);
  });
}

function renderScores(): void {
  const L = state.words.length;
  const W = mat(L, L, weights);
  renderHeatmap($('#matrix'), {
    rows: labels(), cols: labels(), value: (i, j) => W.data[i * L + j],
    masked: (i, j) => !allowed(spec, i, j), numbers: true, rowSums: true, maxCell: 46,
    width: Math.min(640, $('#matrix').clientWidth || 600), highlightRow: state.flashQuery,
    onCell: (i) => { state.flashQuery = i; state.flashStep = 0; renderFlash(); renderScores(); },
  });
  const H = meanEntropy(W);
  const e = $('#entropy');
  e.textContent = H.toFixed(3);
  e.dataset.value = String(H);
  const visible = d3.range(L).filter((i) => d3.range(L).some((j) => allowed(spec, i, j)));
  const maxH = d3.mean(visible, (i) => Math.log2(d3.range(L).filter((j) => allowed(spec, i, j)).length)) ?? 0;
  $('#entropy-max').textContent = `${maxH.toFixed(3)} (uniform)`;
  const sums = d3.range(L).map((i) => rowSum(W.data.subarray(i * L, (i + 1) * L)));
  const live = sums.filter((s) => s > 0);
  $('#rowsums').textContent = live.length ? `${d3.min(live)!.toFixed(4)} … ${d3.max(live)!.toFixed(4)}` : '–';
  const ref = attention(Q, K, V, scaleValue(), spec);
  const diff = d3.max(weights, (w, i) => Math.abs(w - ref.weights.data[i])) ?? 0;
  $('#backend').textContent = `Weights computed by ${backend}; max |Δ| vs the TypeScript reference ${diff.toExponential(1)}. Click a row to follow it below.`;
}

function renderEntropyChart(): void {
  const data: { dk: number; H: number; scaled: string }[] = [];
  const L = state.words.length;
  for (let p = 0; p <= 9; p++) {
    const dk = 2 ** p;
    const q = embed(state.words, dk, state.seed, 1, dk), k = embed(state.words, dk, state.seed, 2, dk), v = embed(state.words, dk, state.seed, 3, DV);
    for (const scaled of [true, false]) {
      const W = attention(q, k, v, scaled ? 1 / Math.sqrt(dk) : 1, spec).weights;
      data.push({ dk, H: meanEntropy(W), scaled: scaled ? 'with 1/√d_k' : 'without scale' });
    }
  }
  const cur = { dk: state.dk, H: meanEntropy(mat(L, L, weights)) };
  const width = Math.min(520, $('#entropy-chart').clientWidth || 480);
  const chart = Plot.plot({
    width, height: 240, marginLeft: 44,
    x: { type: 'log', base: 2, label: 'd_k', ticks: [1, 4, 16, 64, 256] },
    y: { label: 'mean row entropy (bits)', domain: [0, Math.max(0.5, d3.max(data, (d) => d.H)!)], grid: true },
    color: { legend: true, domain: ['with 1/√d_k', 'without scale'], range: ['#2456c8', '#d1495b'] },
    marks: [
      Plot.line(data, { x: 'dk', y: 'H', stroke: 'scaled', strokeWidth: 2 }),
      Plot.dot(data, { x: 'dk', y: 'H', stroke: 'scaled', r: 2.5 }),
      Plot.dot([cur], { x: 'dk', y: 'H', r: 6, stroke: '#111', strokeWidth: 2 }),
      Plot.text([cur], { x: 'dk', y: 'H', text: () => 'now', dy: -12, fontWeight: 'bold' }),
    ],
  });
  $('#entropy-chart').replaceChildren(chart);
}

function renderTables(): void {
  const box = $('#qkv-tables');
  const editable = state.dk <= EDIT_MAX_DK;
  $('#qkv-note').textContent = editable
    ? 'Type a number to change an entry; the matrix, entropy and the tiles below follow.'
    : `d_k = ${state.dk}: showing the first ${EDIT_MAX_DK} dimensions read-only. Lower d_k to ${EDIT_MAX_DK} or less to edit.`;
  box.replaceChildren();
  for (const [name, M] of [['q', Q], ['k', K], ['v', V]] as const) {
    const t = document.createElement('table');
    t.className = 'data';
    t.createCaption().textContent = name.toUpperCase() + (name === 'v' ? ` (d_v = ${DV})` : ` (d_k = ${state.dk})`);
    const dims = Math.min(M.cols, EDIT_MAX_DK);
    const head = t.createTHead().insertRow();
    head.insertCell().textContent = '';
    for (let d = 0; d < dims; d++) { const th = document.createElement('th'); th.textContent = String(d); head.append(th); }
    const body = t.createTBody();
    state.words.forEach((w, i) => {
      const tr = body.insertRow();
      tr.insertCell().textContent = w;
      for (let d = 0; d < dims; d++) {
        const td = tr.insertCell();
        const val = M.data[i * M.cols + d];
        if (editable || name === 'v') {
          const inp = document.createElement('input');
          inp.type = 'number'; inp.step = '0.1'; inp.value = val.toFixed(2);
          inp.setAttribute('aria-label', `${name.toUpperCase()}[${w}, ${d}]`);
          inp.addEventListener('change', () => {
            const x = Number(inp.value);
            if (Number.isFinite(x)) { state.edits.set(`${name}:${i}:${d}`, x); void update(); }
          });
          td.append(inp);
        } else td.textContent = val.toFixed(2);
      }
    });
    box.append(t);
  }
}

function flashStates(): { states: TileState[]; exact: Float32Array } {
  const i = state.flashQuery;
  const exact = output.subarray(i * DV, (i + 1) * DV);
  return { states: onlineSoftmax(Q, K, V, i, scaleValue(), spec, state.flashTile, exact), exact };
}

function renderFlash(): void {
  const L = state.words.length;
  const sel = $<HTMLSelectElement>('#fq');
  if (sel.options.length !== L || [...sel.options].some((o, i) => o.text !== `${i}: ${state.words[i]}`)) {
    sel.replaceChildren(...state.words.map((w, i) => new Option(`${i}: ${w}`, String(i))));
  }
  sel.value = String(state.flashQuery);
  const { states, exact } = flashStates();
  state.flashStep = Math.min(state.flashStep, states.length);
  const s = state.flashStep;
  const i = state.flashQuery;
  // tile track: which keys have been consumed
  const cur = s > 0 ? states[s - 1] : null;
  $('#ftrack').replaceChildren(...labels().map((w, j) => {
    const span = document.createElement('span');
    span.textContent = w;
    if (!allowed(spec, i, j)) span.classList.add('masked');
    if (cur && j >= cur.start && j < cur.end) span.classList.add('current');
    else if (cur && j < cur.start) span.classList.add('done');
    return span;
  }));
  const t = $<HTMLTableElement>('#ftable');
  const dimsShown = Math.min(DV, 3);
  const head = `<thead><tr><th>after tile</th><th>keys</th><th>m</th><th>e^(m_old−m)</th><th>ℓ</th>${d3.range(dimsShown).map((d) => `<th>out[${d}]</th>`).join('')}<th>max |out − exact|</th></tr></thead>`;
  const rows = states.slice(0, s).map((st, n) => `<tr class="${n === s - 1 ? 'active' : ''}"><td>${n + 1}</td><td>${st.start}–${st.end - 1}</td><td>${fmt.num(st.m)}</td><td>${st.mPrev === -Infinity ? '–' : fmt.num(st.rescale)}</td><td>${fmt.num(st.l)}</td>${st.out.slice(0, dimsShown).map((x) => `<td>${x.toFixed(4)}</td>`).join('')}<td>${st.err.toExponential(2)}</td></tr>`);
  const exactRow = `<tr><td colspan="5"><b>exact</b> (softmax · V from qkv)</td>${Array.from(exact.slice(0, dimsShown), (x) => `<td><b>${x.toFixed(4)}</b></td>`).join('')}<td></td></tr>`;
  t.innerHTML = head + '<tbody>' + (rows.length ? rows.join('') : `<tr><td colspan="${6 + dimsShown}" class="muted">Press Step to consume the first tile.</td></tr>`) + exactRow + '</tbody>';
  const data = states.slice(0, s).map((st, n) => ({ step: n + 1, err: st.err }));
  $('#fchart').replaceChildren(Plot.plot({
    width: Math.min(460, $('#fchart').clientWidth || 420), height: 180, marginLeft: 50,
    x: { label: 'tiles consumed', domain: [0.5, states.length + 0.5], ticks: states.length <= 12 ? d3.range(1, states.length + 1) : undefined, tickFormat: 'd' },
    y: { label: 'max |out − exact|', grid: true, domain: [0, Math.max(1e-6, d3.max(states, (st) => st.err) ?? 1)] },
    marks: [Plot.ruleY([0]), Plot.line(data, { x: 'step', y: 'err', stroke: '#2456c8' }), Plot.dot(data, { x: 'step', y: 'err', fill: '#2456c8' })],
  }));
  const held = state.flashTile + 2 + DV;
  $('#fmem').textContent = `Held for this query at any moment: ${state.flashTile} logits + m + ℓ + ${DV} accumulators = ${held} numbers. ` +
    `The full score matrix would be L × L = ${L * L} numbers per head (${fmt.bytes(4 * 16384 * 16384)} at L = 16384).`;
  $<HTMLButtonElement>('#fstep').disabled = s >= states.length;
  $<HTMLButtonElement>('#fall').disabled = s >= states.length;
  $<HTMLButtonElement>('#fback').disabled = s === 0;
}

function renderKv(): void {
  const L = state.words.length;
  const t = state.kvStep;
  const slider = $<HTMLInputElement>('#kvt');
  slider.max = String(L - 1);
  slider.value = String(t);
  $('#kvt-out').textContent = `${t}: "${state.words[t]}"`;
  const cell = Math.max(18, Math.min(44, Math.floor(((($('#kvdiag').clientWidth || 500) - 70) / L))));
  const rowsY = { tok: 30, q: 58, k: 58 + cell + 8, v: 58 + 2 * (cell + 8), w: 58 + 3 * (cell + 8) };
  const width = 70 + L * cell + 4, height = rowsY.w + cell + 26;
  const svg = d3.create('svg').attr('width', width).attr('height', height).attr('font-size', 11).attr('font-family', 'ui-monospace, DejaVu Sans Mono, monospace');
  const g = svg.append('g').attr('transform', 'translate(66,0)');
  g.selectAll('text.tok').data(state.words).join('text').attr('class', 'tok')
    .attr('transform', (_w, j) => `translate(${j * cell + cell / 2 + 3},${rowsY.tok + 12}) rotate(-40)`)
    .attr('fill', (_w, j) => (j > t ? '#bbb' : '#111')).text((w) => w);
  const causalRow = attention(Q, K, V, scaleValue(), { kind: 'causal', window: 0, padded: spec.padded }).weights;
  const rowsDef: [string, number, (j: number) => string][] = [
    ['q', rowsY.q, (j) => (j === t ? '#f28e2b' : j < t ? '#fff' : '#fafafa')],
    ['k', rowsY.k, (j) => (j === t ? '#f28e2b' : j < t ? '#a0cbe8' : '#fafafa')],
    ['v', rowsY.v, (j) => (j === t ? '#f28e2b' : j < t ? '#a0cbe8' : '#fafafa')],
  ];
  for (const [name, y, fill] of rowsDef) {
    svg.append('text').attr('x', 8).attr('y', y + cell / 2 + 4).attr('font-weight', 600).text(name);
    g.selectAll(`rect.${name}`).data(state.words).join('rect').attr('class', name)
      .attr('x', (_w, j) => j * cell).attr('y', y).attr('width', cell - 2).attr('height', cell - 2).attr('rx', 3)
      .attr('fill', (_w, j) => fill(j)).attr('stroke', (_w, j) => (j > t ? '#e4e4e4' : '#777'))
      .attr('stroke-dasharray', (_w, j) => (name === 'q' && j < t ? '3,2' : null));
  }
  svg.append('text').attr('x', 8).attr('y', rowsY.w + cell / 2 + 4).attr('font-weight', 600).text('p');
  g.selectAll('rect.w').data(state.words).join('rect').attr('class', 'w')
    .attr('x', (_w, j) => j * cell).attr('y', rowsY.w).attr('width', cell - 2).attr('height', cell - 2)
    .attr('fill', (_w, j) => (j <= t ? d3.interpolateBlues(causalRow.data[t * L + j]) : '#fafafa')).attr('stroke', '#ddd');
  const legend = svg.append('g').attr('transform', `translate(8,${height - 8})`).attr('font-family', 'system-ui, sans-serif');
  [['#f28e2b', 'computed this step'], ['#a0cbe8', 'read from the cache'], ['#fff', 'not needed']].forEach(([c, s], n) => {
    const x = n * 150;
    legend.append('rect').attr('x', x).attr('y', -10).attr('width', 11).attr('height', 11).attr('fill', c).attr('stroke', '#777');
    legend.append('text').attr('x', x + 15).attr('y', 0).text(s);
  });
  $('#kvdiag').replaceChildren(svg.node()!);

  // cumulative work, with and without the cache (per layer and head)
  const data = d3.range(L).flatMap((s) => [
    { step: s, work: ((s + 1) * (s + 2)) / 2, how: 'with KV cache' },
    { step: s, work: d3.sum(d3.range(s + 1), (u) => (u + 1) * (u + 1)), how: 'recompute prefix' },
  ]);
  $('#kvchart').replaceChildren(Plot.plot({
    width: Math.min(460, $('#kvchart').clientWidth || 420), height: 190, marginLeft: 50,
    x: { label: 'generation step' }, y: { label: 'q·k products so far', grid: true },
    color: { legend: true, domain: ['with KV cache', 'recompute prefix'], range: ['#2456c8', '#d1495b'] },
    marks: [Plot.line(data, { x: 'step', y: 'work', stroke: 'how', strokeWidth: 2 }), Plot.ruleX([t], { stroke: '#f28e2b' })],
  }));
  $('#kvtext').textContent = `Step ${t}: with a cache, 1 new k and v and ${t + 1} q·k products; ` +
    `without, ${t + 1} k and v and ${(t + 1) * (t + 1)} q·k products. The cache costs memory instead: ` +
    `2 × layers × heads × ${t + 1} × d floats, growing by one row per token.`;
}

function readControls(): void {
  state.sentence = $<HTMLInputElement>('#sentence').value;
  state.seed = Math.max(0, Math.floor(Number($<HTMLInputElement>('#seed').value) || 0));
  state.dk = 2 ** Number($<HTMLInputElement>('#dk').value);
  state.scale = $<HTMLInputElement>('#scale').checked;
  state.mask = ($<HTMLInputElement>('input[name=mask]:checked').value as MaskKind);
  state.window = Number($<HTMLInputElement>('#window').value);
  state.pad = Number($<HTMLInputElement>('#pad').value);
  $('#dk-out').textContent = String(state.dk);
  $('#window-out').textContent = String(state.window);
  $('#pad-out').textContent = String(state.pad);
  const n = Math.max(1, Math.min(MAX_WORDS, state.sentence.trim().split(/\s+/).filter(Boolean).length));
  $<HTMLInputElement>('#pad').max = String(n - 1);
  $<HTMLInputElement>('#window').max = String(n);
}

function wire(): void {
  $('#see-word').addEventListener('change', () => void renderMaskComparison(seq));
  const resetEdits = () => state.edits.clear();
  const onChange = (sel: string, ev: string, structural: boolean) => $(sel).addEventListener(ev, () => {
    readControls();
    if (structural) { resetEdits(); state.flashStep = 0; }
    void update();
  });
  onChange('#sentence', 'input', true);
  onChange('#seed', 'input', true);
  onChange('#dk', 'input', true);
  onChange('#scale', 'change', false);
  document.querySelectorAll('input[name=mask]').forEach((r) => r.addEventListener('change', () => { readControls(); state.flashStep = 0; void update(); }));
  onChange('#window', 'input', false);
  onChange('#pad', 'input', false);
  $('#qkv-reset').addEventListener('click', () => { resetEdits(); void update(); });
  $('#fq').addEventListener('change', () => { state.flashQuery = Number($<HTMLSelectElement>('#fq').value); state.flashStep = 0; renderFlash(); renderScores(); });
  $('#ftile').addEventListener('change', () => { state.flashTile = Number($<HTMLSelectElement>('#ftile').value); state.flashStep = 0; renderFlash(); });
  $('#fstep').addEventListener('click', () => { state.flashStep++; renderFlash(); });
  $('#fback').addEventListener('click', () => { state.flashStep = Math.max(0, state.flashStep - 1); renderFlash(); });
  $('#fall').addEventListener('click', () => { state.flashStep = Number.MAX_SAFE_INTEGER; renderFlash(); });
  $('#freset').addEventListener('click', () => { state.flashStep = 0; renderFlash(); });
  $('#kvt').addEventListener('input', () => { state.kvStep = Number($<HTMLInputElement>('#kvt').value); renderKv(); });
  let resize = 0;
  window.addEventListener('resize', () => { clearTimeout(resize); resize = window.setTimeout(() => { renderScores(); renderEntropyChart(); renderFlash(); renderKv(); }, 150); });
}

void showRuntime();
readControls();
wire();
void settled.then(update).then(() => document.body.setAttribute('data-ready', 'true'));
