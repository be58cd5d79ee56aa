// The patching panel's heat map: one cell per value of an activationPatching sweep, as an HTML
// table (rows and columns labelled, one tab stop and the arrow keys between the cells, a cell's
// value shown on hover and on focus, the table scrolling inside its own box on a narrow screen).
// The colour is diverging around 0:
// blue where the patch restores the clean metric (1), white where it changes nothing (0), red
// where it pushes the metric past the corrupted run's.
import * as d3 from 'd3';
import type { ActivationPatchingResult } from 'qkv';
import { el, fmt, showToken } from './ui';

/** One cell of a sweep: its layer, head (heads sweeps) and position (the x positions sweeps). */
export interface PatchCell { layer: number; head?: number; pos?: number; value: number }

/** Blue (1) through white (0) to red (-1), clamped. */
const color = d3.scaleDiverging(d3.interpolateRdBu).domain([-1, 0, 1]).clamp(true);
const ink = (v: number): string => (Math.abs(v) > 0.6 ? '#fff' : '#111');

/** The cell at flat index i of a result (row-major over its shape). */
export function cellAt(r: ActivationPatchingResult, i: number): PatchCell {
  const value = r.values[i];
  if (r.over === 'heads') return { layer: Math.floor(i / r.shape[1]), head: i % r.shape[1], value };
  if (r.over === 'headPositions') {
    const [, H, T] = r.shape;
    return { layer: Math.floor(i / (H * T)), head: Math.floor(i / T) % H, pos: i % T, value };
  }
  return { layer: Math.floor(i / r.shape[1]), pos: i % r.shape[1], value };
}

/** The largest value's cell (the first of equal ones). */
export function hottest(r: ActivationPatchingResult): PatchCell {
  let best = 0;
  for (let i = 1; i < r.values.length; i++) if (r.values[i] > r.values[best]) best = i;
  return cellAt(r, best);
}

/** A cell's name as the panel prints it: "L2H0", "L2H0 at 5 ␣Moses", "resid_pre L1 at 5 ␣Moses". */
export function cellName(c: PatchCell, tokens: string[]): string {
  const at = c.pos === undefined ? '' : ` at ${c.pos} ${showToken(tokens[c.pos] ?? '')}`;
  return c.head === undefined ? `resid_pre L${c.layer}${at}` : `L${c.layer}H${c.head}${at}`;
}

/**
 * Draws `r` into `box` (replacing what was there): rows are layers ('heads', 'residPre') or
 * layer x head ('headPositions'), columns heads or the clean prompt's tokens. `detail` shows the
 * hovered or focused cell; `open` is called on a click (or Enter) on a cell that names a head.
 */
export function drawPatchMap(box: HTMLElement, r: ActivationPatchingResult, tokens: string[], detail: HTMLElement,
  open: (layer: number, head: number) => void): void {
  const [L, second] = r.shape;
  const H = r.over === 'residPre' ? 0 : second;
  const rows = r.over === 'headPositions' ? L * H : L;
  const cols = r.over === 'heads' ? H : tokens.length;
  const rowName = (i: number) => (r.over === 'headPositions' ? `L${Math.floor(i / H)}H${i % H}` : `L${i}`);
  const colName = (j: number) => (r.over === 'heads' ? `H${j}` : `${j} ${showToken(tokens[j] ?? '')}`);
  const numbers = r.over === 'heads';
  const table = el('table', { class: 'patch-map', 'data-over': r.over });
  const caption = r.over === 'heads' ? 'rows: layers; columns: heads'
    : r.over === 'headPositions' ? 'rows: layer and head; columns: the position patched (the clean prompt\'s tokens)'
      : 'rows: layers (resid_pre of each block); columns: the position patched (the clean prompt\'s tokens)';
  table.append(el('caption', {}, caption));
  const head = el('tr', {}, el('th', { scope: 'col' }, ''));
  for (let j = 0; j < cols; j++) head.append(el('th', { scope: 'col', class: r.over === 'heads' ? '' : 'tok' }, colName(j)));
  const body = el('tbody');
  for (let i = 0; i < rows; i++) {
    const tr = el('tr', {}, el('th', { scope: 'row' }, rowName(i)));
    for (let j = 0; j < cols; j++) {
      const index = i * cols + j;
      const c = cellAt(r, index);
      const name = cellName(c, tokens);
      const td = el('td', { tabindex: index === 0 ? '0' : '-1', 'data-index': String(index), 'aria-label': `${name}: ${fmt.p(c.value)}`, title: `${name}: ${fmt.p(c.value)}` },
        numbers ? fmt.p(c.value) : '');
      td.style.background = color(c.value);
      td.style.color = ink(c.value);
      if (c.head !== undefined) td.classList.add('opens');
      tr.append(td);
    }
    body.append(tr);
  }
  table.append(el('thead', {}, head), body);
  const show = (e: Event) => {
    const td = (e.target as HTMLElement).closest<HTMLElement>('td[data-index]');
    if (!td) return;
    const c = cellAt(r, Number(td.dataset.index));
    detail.textContent = `${cellName(c, tokens)}: ${fmt.p3(c.value)} of the clean metric` +
      (c.head !== undefined ? ' (click or Enter: its map in the model view)' : '');
  };
  const pick = (e: Event) => {
    const td = (e.target as HTMLElement).closest<HTMLElement>('td[data-index]');
    const c = td && cellAt(r, Number(td.dataset.index));
    if (c && c.head !== undefined) open(c.layer, c.head);
  };
  table.addEventListener('mouseover', show);
  table.addEventListener('focusin', show);
  table.addEventListener('click', pick);
  // one tab stop: the arrow keys move between the cells (the one focused keeps tabindex 0)
  const cells = [...body.querySelectorAll<HTMLElement>('td[data-index]')];
  const move: Record<string, [number, number]> = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
  table.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); pick(e); return; }
    const td = (e.target as HTMLElement).closest<HTMLElement>('td[data-index]'), d = move[e.key];
    if (!td || !d) return;
    const at = Number(td.dataset.index), i = Math.floor(at / cols) + d[0], j = (at % cols) + d[1];
    if (i < 0 || i >= rows || j < 0 || j >= cols) return;
    e.preventDefault();
    td.tabIndex = -1;
    cells[i * cols + j].tabIndex = 0;
    cells[i * cols + j].focus();
  });
  box.replaceChildren(table);
}
