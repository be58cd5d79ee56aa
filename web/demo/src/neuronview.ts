// Neuron view: the arithmetic of one attention row. For query i of one head: the query vector
// q, a key vector k_j, their elementwise product (which sums to q·k_j), then for every visible
// key: q·k, the scaled score q·k/√d and the softmax weight. q and k are the model's own (qkv's
// forward with outputQueriesKeys); the page renders this view only once it has them. Bars drawn
// with Observable Plot. With the word toggle on, a word row comes first (the merged weights of
// the query's word, words.ts); the arithmetic below stays per token, since q·k exists only
// between tokens: it is drawn for the word's last token. Llama-family q and k are after the
// rotary position embedding (what attention multiplies); with GQA, k is the key head the query
// head shares with its group; a sliding window limits the visible keys. Past MAX_BARS keys (or
// words) the bar charts list the strongest MAX_BARS only, so 1024 tokens stay a screen tall.
import * as Plot from '@observablehq/plot';
import { kvGroup, kvHeadOf, layerKindText, windowOf, type AttnData } from './contract';
import { showToken } from './ui';

/** Bars per chart at most: past this many visible keys only the strongest are listed (1024 bars would be 15k px tall). */
export const MAX_BARS = 40;

export interface NeuronState { layer: number; head: number; query: number; key: number }

/** The word toggle's part: the merged data and the query word. */
export interface NeuronWords { data: AttnData; query: number }

export function renderNeuron(container: HTMLElement, data: AttnData, st: NeuronState, words?: NeuronWords): void {
  const L = data.tokens.length;
  const i = Math.max(0, Math.min(L - 1, st.query < 0 ? L - 1 : st.query));
  const weights = data.attn[st.layer][st.head][i];
  const label = (j: number) => {
    const t = showToken(data.tokens[j]);
    return `${j}:${t.length > 8 ? `${t.slice(0, 7)}…` : t}`; // a cut token says so
  };
  // the visible keys: 0..i, or the last `window` of them
  const win = windowOf(data, st.layer); // data is per token (the word row is apart)
  const first = win ? Math.max(0, i - win + 1) : 0;
  const keys = Array.from({ length: i + 1 - first }, (_v, n) => first + n);
  if (!data.q || !data.k) throw new Error('renderNeuron: the queries and keys are not known yet');
  const Dh = data.headDim;
  const q = data.q[st.layer][st.head].subarray(i * Dh, (i + 1) * Dh);
  const kAll = data.k[st.layer][st.head];
  const dot = (j: number) => { let s = 0; for (let d = 0; d < Dh; d++) s += q[d] * kAll[j * Dh + d]; return s; };
  const rows = keys.map((j) => {
    const p = weights[j] ?? 0;
    const raw = dot(j);
    return { key: label(j), j, raw, scaled: raw * data.scale, p };
  });
  const argmax = rows.reduce((a, b) => (b.p > a.p ? b : a), rows[0]).j;
  const kj = st.key >= first && st.key <= i ? st.key : argmax;
  // the bars: every visible key, or past MAX_BARS the strongest MAX_BARS - 1 and the chosen key, in key order
  const listed = strongest(rows.map((r) => r.p), MAX_BARS - 1).add(kj - first);
  const shownRows = rows.length <= MAX_BARS ? rows : rows.filter((_r, n) => listed.has(n));
  const width = container.clientWidth || 900;
  const narrow = width < 640;
  const barW = narrow ? width - 10 : Math.max(180, Math.floor((width - 30) / 3));
  const barH = 26 + 15 * shownRows.length + 30;
  const yDomain = shownRows.map((r) => r.key);
  const bar = (field: 'raw' | 'scaled' | 'p', title: string, fill: string) => Plot.plot({
    // the softmax plot's weight labels stand right of their bars: room for the longest one
    width: barW, height: barH, marginLeft: 86, marginRight: field === 'p' ? 36 : 14, style: { fontSize: '11px' },
    x: { label: title, grid: true, nice: true, ...(field === 'p' ? { domain: [0, Math.max(0.05, ...shownRows.map((r) => r.p))] } : {}) },
    y: { domain: yDomain, label: null },
    marks: [
      Plot.barX(shownRows, { y: 'key', x: field, fill: (d: { j: number }) => (d.j === kj ? '#f28e2b' : fill), title: (d: { p: number; raw: number; scaled: number }) => `${field}: ${d[field].toFixed(4)}` }),
      Plot.ruleX([0]),
      ...(field === 'p' ? [Plot.text(shownRows, { y: 'key', x: 'p', text: (d: { p: number }) => d.p.toFixed(2), dx: 14, fontSize: 10 })] : []),
    ],
  });
  const figs: HTMLElement[] = [];
  if (words) figs.push(...wordRow(words, st.layer, st.head, width));
  const head = document.createElement('p');
  head.className = 'small';
  head.innerHTML = `Layer ${st.layer}${layerKindText(data, st.layer)}, head ${st.head}, query <b class="mono">${i}: ${escapeHtml(showToken(data.tokens[i]))}</b>. ` +
    `Scale 1/√${Dh} = ${data.scale.toFixed(4)}. Orange: key ${kj}.`;
  figs.push(head);
  const gqa = (data.kvHeads ?? data.nHead) !== data.nHead;
  if (data.rotary || gqa) {
    const note = document.createElement('p');
    note.className = 'small muted rope-note';
    const g = kvHeadOf(data, st.head), [a, b] = kvGroup(data, g);
    note.textContent = [
      data.rotary ? 'q and k are shown after the rotary position embedding (RoPE), as attention multiplies them: q · k depends on the distance between the tokens.' : '',
      gqa ? `k comes from KV head ${g}, which heads ${a}-${b} share (grouped-query attention).` : '',
    ].filter(Boolean).join(' ');
    figs.push(note);
  }
  const k = kAll.subarray(kj * Dh, (kj + 1) * Dh);
  const vec = Array.from({ length: Dh }, (_v, d) => ({ d, q: q[d], k: k[d], qk: q[d] * k[d] }));
  const vw = narrow ? width - 10 : Math.max(180, Math.floor((width - 30) / 3));
  const vplot = (field: 'q' | 'k' | 'qk', title: string, fill: string) => Plot.plot({
    width: vw, height: 140, marginLeft: 36, style: { fontSize: '11px' },
    x: { label: 'dimension', ticks: [] }, y: { label: title, grid: true },
    marks: [Plot.barY(vec, { x: 'd', y: field, fill }), Plot.ruleY([0])],
  });
  const vrow = document.createElement('div');
  vrow.className = 'ncols';
  const rot = data.rotary ? ' after RoPE' : '';
  vrow.append(vplot('q', `q (query ${i})${rot}`, '#2456c8'), vplot('k', `k (key ${kj})${rot}`, '#59a14f'), vplot('qk', `q ⊙ k  (Σ = ${rows[kj - first].raw.toFixed(3)})`, '#b07aa1'));
  figs.push(vrow);
  const brow = document.createElement('div');
  brow.className = 'ncols';
  brow.append(bar('raw', 'q · k →', '#8c8c8c'), bar('scaled', 'q · k / √d →', '#76b7b2'), bar('p', 'softmax →', '#2456c8'));
  figs.push(brow);
  if (shownRows.length < rows.length) {
    const more = document.createElement('p');
    more.className = 'small muted bars-note';
    more.textContent = `The bars list the ${shownRows.length} keys with the largest weights (and the orange key) of the ${rows.length} this query sees, in key order.`;
    figs.push(more);
  }
  const sum = rows.reduce((a, r) => a + r.p, 0);
  const foot = document.createElement('p');
  foot.className = 'small muted';
  foot.textContent = `Σ softmax = ${sum.toFixed(4)} over ${keys.length} visible keys (keys after ${i} are masked: causal` +
    `${first > 0 ? `; keys before ${first} are outside layer ${st.layer}'s window of ${win}` : ''}).`;
  figs.push(foot);
  container.replaceChildren(...figs);
}

/** The query word's merged row: one bar per key word (sum over its tokens, mean over the query word's tokens). */
function wordRow(w: NeuronWords, layer: number, head: number, width: number): HTMLElement[] {
  const a = Math.max(0, Math.min(w.data.tokens.length - 1, w.query < 0 ? w.data.tokens.length - 1 : w.query));
  const r = w.data.attn[layer][head][a];
  const all = Array.from({ length: a + 1 }, (_v, b) => ({ key: `${b}:${showToken(w.data.tokens[b]).slice(0, 12)}`, p: r[b] ?? 0 }));
  const listed = strongest(all.map((x) => x.p), MAX_BARS);
  const rows = all.length <= MAX_BARS ? all : all.filter((_x, b) => listed.has(b));
  const p = document.createElement('p');
  p.className = 'small';
  p.innerHTML = `Word <b class="mono">${a}: ${escapeHtml(showToken(w.data.tokens[a]))}</b>: its weights summed over each key word's tokens ` +
    `and averaged over its own tokens${rows.length < all.length ? ` (the ${rows.length} strongest of ${all.length} key words)` : ''}. Below: the arithmetic of its last token, since q · k exists only between tokens.`;
  const plot = Plot.plot({
    width: Math.min(width - 10, 560), height: 26 + 15 * rows.length + 30, marginLeft: 110, marginRight: 30, style: { fontSize: '11px' },
    x: { label: 'word weight →', grid: true, domain: [0, Math.max(0.05, ...rows.map((x) => x.p))] },
    y: { domain: rows.map((x) => x.key), label: null },
    marks: [
      Plot.barX(rows, { y: 'key', x: 'p', fill: '#2456c8', title: (d: { p: number }) => d.p.toFixed(4) }),
      Plot.ruleX([0]),
      Plot.text(rows, { y: 'key', x: 'p', text: (d: { p: number }) => d.p.toFixed(2), dx: 14, fontSize: 10 }),
    ],
  });
  const box = document.createElement('div');
  box.className = 'word-row';
  box.append(plot);
  return [p, box];
}

/** The indices of the n largest values. */
function strongest(values: number[], n: number): Set<number> {
  return new Set(values.map((v, i) => [v, i]).sort((x, y) => y[0] - x[0]).slice(0, n).map((x) => x[1]));
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
}
