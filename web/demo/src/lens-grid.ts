// The logit lens drawn as a layers x positions grid (lens-panel.ts on the model page and the
// encoders page): a row per layer (the embeddings, the input of each later block, the model's
// own output), a column per token; each cell prints the lens's top token there, its probability
// small under it, and with a target the target's probability and rank, shaded by the top token's
// probability on the page's weight scale. One cell is in the tab order at a time (arrow keys,
// Home / End move); hovering over or focusing a cell writes its top 5 and KL to the output into the
// details line.
import type { LogitLensResult } from 'qkv';
import { el, fmt, inkOn, showToken, weightColor } from './ui';

/** A cell of the grid: the layer (row, 0 = the embeddings) and the position (column). */
export interface LensCellAt { layer: number; pos: number }

/** What the grid draws: the lens, the headings, the target, the focused cell. */
export interface LensGridSpec {
  result: LogitLensResult;
  /** the input token at each position (the column headings), as the tokenizer shows it */
  columns: string[];
  /** the target followed at each position (its text), when the lens ran with one */
  target?: string[];
  /** what a column's cells predict: the token after the column's token (a decoder) or at it (a masked LM) */
  reads: 'after' | 'at';
  /** columns drawn marked (the encoders page's [MASK]) */
  marked?: ReadonlySet<number>;
  /** the cell in the tab order and described in the details line (null: the output row's last cell) */
  focus: LensCellAt | null;
  /** a cell focused (click or keyboard) */
  onFocus(cell: LensCellAt): void;
}

/** A row's short name: embed, L1 in, ..., output. */
export function lensRowName(layer: number, numLayers: number): string {
  return layer === 0 ? 'embed' : layer === numLayers ? 'output' : `L${layer} in`;
}

/** A row's long name (its heading's title, the details line). */
function rowTitle(layer: number, numLayers: number): string {
  if (layer === 0) return 'the embeddings (the input of block 0)';
  if (layer === numLayers) return 'the model\'s output (after the last block)';
  return `the input of block ${layer} (after block${layer > 1 ? `s 0–${layer - 1}` : ' 0'})`;
}

/** The details of one cell: the row, the position, the top 5 with probabilities, the target, KL. */
export function lensDetail(spec: LensGridSpec, at: LensCellAt): string {
  const { result } = spec;
  const cell = result.layers[at.layer][at.pos];
  const top = cell.top.map((t) => `${showToken(t.token)} ${fmt.p3(t.p)}`).join(' · ');
  const target = spec.target && cell.targetP !== undefined
    ? `; target ${spec.target[at.pos]} ${fmt.p3(cell.targetP)} (rank ${cell.targetRank! + 1})` : '';
  return `${lensRowName(at.layer, result.numLayers)}, position ${at.pos} (${spec.reads} ${spec.columns[at.pos]}): ` +
    `top ${cell.top.length} ${top}${target}; KL to the output ${fmt.p3(cell.kl)} nats`;
}

/** Draws the grid into `box` (replacing what was there) and the details of the focused cell into `detail`. */
export function renderLensGrid(box: HTMLElement, detail: HTMLElement, spec: LensGridSpec): void {
  const { result } = spec, NL = result.numLayers, T = result.positions;
  const focus = spec.focus ?? { layer: NL, pos: T - 1 };
  const cells: HTMLTableCellElement[][] = [];
  const describe = (at: LensCellAt) => { detail.textContent = lensDetail(spec, at); };
  // the column headings: the input token at each position
  const head = el('tr', {}, el('th', { scope: 'col', class: 'lens-corner' }, 'layer ╲ token'),
    ...spec.columns.map((c, t) => el('th', {
      scope: 'col', class: spec.marked?.has(t) ? 'lens-col marked' : 'lens-col', title: `position ${t}: ${c}`,
    }, el('span', { class: 'lens-pos' }, String(t)), el('span', { class: 'lens-tok' }, c))));
  const rows = result.layers.map((row, l) => {
    cells[l] = [];
    return el('tr', {}, el('th', { scope: 'row', title: rowTitle(l, NL) }, lensRowName(l, NL)), ...row.map((cell, t) => {
      const p = cell.top[0].p;
      const td = el('td', {
        class: spec.marked?.has(t) ? 'lens-cell marked' : 'lens-cell', tabindex: l === focus.layer && t === focus.pos ? '0' : '-1',
        'data-layer': String(l), 'data-pos': String(t), style: `background:${weightColor(p)};color:${inkOn(p)}`,
      }, el('span', { class: 'lens-tok' }, showToken(cell.top[0].token)), el('span', { class: 'lens-p' }, fmt.p(p))) as HTMLTableCellElement;
      if (spec.target && cell.targetP !== undefined) {
        td.append(el('span', { class: 'lens-t', title: `target ${spec.target[t]}: probability, rank` }, `${fmt.p(cell.targetP)} · #${cell.targetRank! + 1}`));
      }
      td.setAttribute('aria-label', lensDetail(spec, { layer: l, pos: t }));
      cells[l][t] = td;
      return td;
    }));
  });
  const table = el('table', { class: 'lens-grid', role: 'grid', 'aria-label': 'logit lens: layers × positions' },
    el('thead', {}, head), el('tbody', {}, ...rows));
  // the pointer moving over a cell describes it (not the browser's own mouse events when the
  // page moves under a still pointer: the keyboard's cell stays described); leaving the grid
  // describes the focused cell again
  let current = focus, at = '';
  table.addEventListener('mousemove', (e) => {
    const td = (e.target as Element).closest<HTMLElement>('td.lens-cell');
    const here = `${e.screenX},${e.screenY}`;
    if (!td || here === at) return;
    at = here;
    describe({ layer: Number(td.dataset.layer), pos: Number(td.dataset.pos) });
  });
  table.addEventListener('mouseleave', () => describe(current));
  const move = (at: LensCellAt) => {
    cells[current.layer][current.pos].tabIndex = -1;
    current = at;
    const td = cells[at.layer][at.pos];
    td.tabIndex = 0;
    if (document.activeElement !== td) td.focus();
  };
  table.addEventListener('focusin', (e) => {
    const td = (e.target as Element).closest<HTMLElement>('td.lens-cell');
    if (!td) return;
    const at = { layer: Number(td.dataset.layer), pos: Number(td.dataset.pos) };
    if (at.layer !== current.layer || at.pos !== current.pos) move(at);
    describe(at);
    spec.onFocus(at);
  });
  table.addEventListener('keydown', (e) => {
    const { layer, pos } = current;
    const to: Record<string, LensCellAt> = {
      ArrowUp: { layer: Math.max(0, layer - 1), pos }, ArrowDown: { layer: Math.min(NL, layer + 1), pos },
      ArrowLeft: { layer, pos: Math.max(0, pos - 1) }, ArrowRight: { layer, pos: Math.min(T - 1, pos + 1) },
      Home: { layer, pos: 0 }, End: { layer, pos: T - 1 },
    };
    if (!to[e.key]) return;
    e.preventDefault();
    move(to[e.key]);
  });
  box.replaceChildren(table);
  describe(focus);
  // the focused cell in view (a long prompt's grid scrolls inside its box)
  const td = cells[focus.layer][focus.pos];
  box.scrollLeft = Math.max(0, td.offsetLeft - box.clientWidth / 2);
}
