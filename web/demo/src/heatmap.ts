// A labelled attention heat map (d3, SVG): rows = queries, columns = keys, optional numbers in
// the cells, masked cells hatched, and each row's sum at the right. Used by the playground and
// the model page's enlarged head. Past CELL_NODES cells (a 512-token head has 262k) the cells
// are one image, painted a pixel per cell, instead of an SVG node each.
import * as d3 from 'd3';
import { inkOn, weightColor } from './ui';

export interface HeatmapSpec {
  rows: string[];
  cols: string[];
  /** weight at (query i, key j) */
  value: (i: number, j: number) => number;
  /** true where the mask forbids (i, j) */
  masked?: (i: number, j: number) => boolean;
  /** print values in cells when they fit */
  numbers?: boolean;
  /** append a Σ column */
  rowSums?: boolean;
  /** upper bound for the cell size in px */
  maxCell?: number;
  /** width available, px */
  width?: number;
  title?: string;
  highlightRow?: number;
  onCell?: (i: number, j: number) => void;
  /** cells drawn with a red cross (the model page's blocked cells) */
  marked?: (i: number, j: number) => boolean;
}

let patternId = 0;
const CELL_NODES = 64 * 64;

/** The cells as one PNG data URL, a pixel per cell (masked cells light grey). */
function cellsImage(spec: HeatmapSpec, nr: number, nc: number): string {
  const c = document.createElement('canvas');
  c.width = nc; c.height = nr;
  const ctx = c.getContext('2d')!;
  const img = ctx.createImageData(nc, nr);
  // 256 colour steps, looked up (parsing a colour string per cell costs ~1 s at 1000 x 1000)
  const steps = d3.range(256).map((k) => d3.rgb(weightColor(k / 255))), grey = d3.rgb('#eeeeee');
  for (let i = 0; i < nr; i++) for (let j = 0; j < nc; j++) {
    const v = spec.value(i, j);
    const rgb = spec.masked?.(i, j) ? grey : steps[v > 0 ? Math.min(255, Math.round(v * 255)) : 0];
    const o = (i * nc + j) * 4;
    img.data[o] = rgb.r; img.data[o + 1] = rgb.g; img.data[o + 2] = rgb.b; img.data[o + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
  return c.toDataURL('image/png');
}

export function renderHeatmap(container: HTMLElement, spec: HeatmapSpec): SVGSVGElement {
  const nr = spec.rows.length, nc = spec.cols.length;
  const maxLabel = (xs: string[]) => d3.max(xs, (s) => s.length) ?? 1;
  // wide enough for the 'query ↓  key →' corner label
  const left = Math.max(84, Math.min(120, 12 + 7.5 * maxLabel(spec.rows)));
  const top = Math.min(110, 12 + 6.5 * maxLabel(spec.cols)) + (spec.title ? 20 : 0);
  const sumW = spec.rowSums ? 52 : 0;
  const avail = (spec.width ?? (container.clientWidth || 600)) - left - sumW - 8;
  const cell = Math.max(4, Math.min(spec.maxCell ?? 44, Math.floor(avail / Math.max(1, nc))));
  const width = left + cell * nc + sumW + 8, height = top + cell * nr + 6;
  const showNum = spec.numbers !== false && cell >= 30;
  const labelEvery = cell >= 11 ? 1 : Math.ceil(11 / cell);

  const svg = d3.create('svg').attr('width', width).attr('height', height).attr('viewBox', `0 0 ${width} ${height}`)
    .attr('font-family', 'ui-monospace, DejaVu Sans Mono, monospace').attr('font-size', 12)
    .style('background', '#fff');
  const pid = `hatch${++patternId}`;
  svg.append('defs').append('pattern').attr('id', pid).attr('width', 6).attr('height', 6)
    .attr('patternUnits', 'userSpaceOnUse').attr('patternTransform', 'rotate(45)')
    .call((p) => { p.append('rect').attr('width', 6).attr('height', 6).attr('fill', '#f1f1f1'); p.append('line').attr('y2', 6).attr('stroke', '#c8c8c8').attr('stroke-width', 2); });
  if (spec.title) svg.append('text').attr('x', 4).attr('y', 14).attr('font-weight', 600).attr('font-family', 'system-ui, sans-serif').text(spec.title);

  const g = svg.append('g').attr('transform', `translate(${left},${top})`);
  if (nr * nc > CELL_NODES) {
    g.append('image').attr('href', cellsImage(spec, nr, nc)).attr('width', nc * cell).attr('height', nr * cell)
      .attr('preserveAspectRatio', 'none').style('image-rendering', 'pixelated');
  } else {
    const cells: { i: number; j: number; w: number; m: boolean }[] = [];
    for (let i = 0; i < nr; i++) for (let j = 0; j < nc; j++) cells.push({ i, j, w: spec.value(i, j), m: spec.masked?.(i, j) ?? false });

    const cellSel = g.selectAll('g.cell').data(cells).join('g').attr('class', 'cell')
      .attr('transform', (d) => `translate(${d.j * cell},${d.i * cell})`);
    cellSel.append('rect').attr('width', cell - (cell > 8 ? 1 : 0)).attr('height', cell - (cell > 8 ? 1 : 0))
      .attr('fill', (d) => (d.m ? `url(#${pid})` : weightColor(d.w)))
      .append('title').text((d) => `${spec.rows[d.i]} → ${spec.cols[d.j]}: ${d.m ? 'masked' : d.w.toFixed(4)}`);
    if (showNum) {
      cellSel.filter((d) => !d.m).append('text').attr('x', cell / 2 - 0.5).attr('y', cell / 2 + 4).attr('text-anchor', 'middle')
        .attr('font-size', Math.min(12, cell / 3)).attr('fill', (d) => inkOn(d.w)).attr('pointer-events', 'none')
        .text((d) => (d.w >= 0.995 ? '1' : d.w < 0.005 ? '0' : d.w.toFixed(2).replace(/^0/, '')));
    }
    if (spec.marked) {
      const c = cell - (cell > 8 ? 1 : 0);
      cellSel.filter((d) => spec.marked!(d.i, d.j)).attr('data-marked', 'true').append('path').attr('d', `M2,2L${c - 2},${c - 2}M${c - 2},2L2,${c - 2}`)
        .attr('stroke', '#d9480f').attr('stroke-width', 2).attr('pointer-events', 'none');
    }
    if (spec.onCell) cellSel.style('cursor', 'pointer').on('click', (_e, d) => spec.onCell!(d.i, d.j));
  }
  if (spec.highlightRow !== undefined && spec.highlightRow >= 0 && spec.highlightRow < nr) {
    g.append('rect').attr('x', -1).attr('y', spec.highlightRow * cell - 1).attr('width', nc * cell + 1).attr('height', cell + 1)
      .attr('fill', 'none').attr('stroke', '#e07b00').attr('stroke-width', 2);
  }
  // labels
  g.append('g').selectAll('text').data(spec.rows).join('text')
    .attr('x', -5).attr('y', (_d, i) => i * cell + cell / 2 + 4).attr('text-anchor', 'end')
    .attr('font-size', Math.min(12, Math.max(8, cell * 0.8)))
    .text((d, i) => (i % labelEvery === 0 ? d : ''));
  g.append('g').selectAll('text').data(spec.cols).join('text')
    .attr('transform', (_d, j) => `translate(${j * cell + cell / 2 + 4},-5) rotate(-60)`)
    .attr('font-size', Math.min(12, Math.max(8, cell * 0.8)))
    .text((d, j) => (j % labelEvery === 0 ? d : ''));
  svg.append('text').attr('x', left - 5).attr('y', top - 4).attr('text-anchor', 'end').attr('font-size', 10).attr('fill', '#777')
    .attr('font-family', 'system-ui, sans-serif').text('query ↓  key →');
  if (spec.rowSums) {
    const sums = d3.range(nr).map((i) => d3.sum(d3.range(nc), (j) => ((spec.masked?.(i, j)) ? 0 : spec.value(i, j))));
    svg.append('text').attr('x', left + nc * cell + 8).attr('y', top - 6).attr('font-size', 11).attr('fill', '#555').text('Σ row');
    svg.append('g').selectAll('text').data(sums).join('text')
      .attr('class', 'rowsum').attr('data-sum', (s) => s)
      .attr('x', left + nc * cell + 8).attr('y', (_d, i) => top + i * cell + cell / 2 + 4)
      .attr('font-size', Math.min(12, Math.max(8, cell * 0.8)))
      .attr('fill', (s) => (Math.abs(s - 1) < 1e-3 ? '#17693a' : '#999'))
      .text((s) => s.toFixed(3));
  }
  const node = svg.node()!;
  container.replaceChildren(node);
  return node;
}
