// Head view (after BertViz): the tokens twice, queries on the left and keys on the right, a
// line from query i to key j for each selected head with opacity = weight, one colour per head.
// Hover (or focus) a token to see only its lines; click a query token to pin it.
// Keyboard: the query column is one tab stop (a roving tabindex); the arrow keys, Page Up/Down,
// Home and End move the focus through all the tokens, scrolling the view, and Enter pins.
// The view is virtualised so 12 heads x 1024 tokens stay responsive (BertViz draws every line
// and label and stalls near 512 tokens): a scroll box holds a spacer as tall as all the rows
// (an honest scrollbar), and over its visible part one viewport-sized <canvas> of links and one
// SVG of labels, redrawn on scroll (once per animation frame). Only the rows in and near the
// viewport have label nodes; a line runs at its true geometry and is clipped at the edges, and a
// focused query's keys off-screen are named at the top or bottom edge.
// Long sequences keep, per query and head, only the TOP_K strongest links (stated on the page).
// A layer with a sliding window says so over the keys; a focused query's hidden keys are greyed.
import * as d3 from 'd3';
import { hidden, layerKindText, windowOf, type AttnData } from './contract';
import { headColor, showToken } from './ui';

export interface HeadViewState {
  layer: number;
  heads: boolean[];
  /** pinned query position, or -1 */
  query: number;
}

interface Link { h: number; i: number; j: number; w: number }
type Focus = { side: 'q' | 'k'; index: number } | null;

const MIN_WEIGHT = 0.01; // lines lighter than this are not drawn
const TOP_K = 8;         // above LONG tokens, only the TOP_K strongest links per query and head
const LONG = 128;
const ROW_H = 20;        // px per token row
const TOP = 40;          // px of header over the rows: titles, then the TOP_K note and a pinned query's keys above
const VIEW_H = 600;      // px: the scroll box's height at most
const OVERSCAN = 10;     // label rows kept beyond each edge of the viewport

/** The links of one layer: weights >= MIN_WEIGHT, the strongest TOP_K per row when L > LONG. */
function layerLinks(data: AttnData, layer: number): Link[] {
  const L = data.tokens.length, links: Link[] = [];
  const A = data.attn[layer];
  for (let h = 0; h < data.nHead; h++) for (let i = 0; i < L; i++) {
    const r = A[h][i];
    let row: Link[] = [];
    const last = data.bidirectional ? r.length - 1 : Math.min(i, r.length - 1);
    for (let j = 0; j <= last; j++) if (r[j] >= MIN_WEIGHT) row.push({ h, i, j, w: r[j] });
    if (L > LONG && row.length > TOP_K) row = row.sort((a, b) => b.w - a.w).slice(0, TOP_K);
    links.push(...row);
  }
  return links;
}

const short = (t: string) => { const s = showToken(t); return s.length > 12 ? s.slice(0, 11) + '…' : s; };

export class HeadView {
  private scroller: HTMLDivElement | null = null;
  private svg: d3.Selection<SVGSVGElement, unknown, null, undefined> | null = null;
  private rows: d3.Selection<SVGGElement, unknown, null, undefined> | null = null;
  private canvas: HTMLCanvasElement | null = null;
  private links: Link[] = [];
  /** x of the query / key columns, label width, viewport height, canvas scale, and the viewport's first content y */
  private g = { xL: 0, xR: 0, labelW: 0, width: 0, viewH: 0, dpr: 1, y0: 0 };
  private hover: Focus = null;
  private data: AttnData | null = null;
  private state: HeadViewState | null = null;
  private paintQueued = false;
  /** the pinned query last shown: a newly pinned one off-screen (chosen in the query menu) is scrolled to */
  private shownQuery = -1;
  /** the query row holding the view's one tab stop; its label is kept while it is scrolled away */
  private active = 0;

  constructor(private container: HTMLElement, private onPin: (q: number) => void) {}

  render(data: AttnData, state: HeadViewState): void {
    const t0 = performance.now();
    const keepScroll = this.scroller?.scrollTop ?? 0;
    this.data = data; this.state = state;
    const L = data.tokens.length, H = data.nHead;
    const width = Math.max(300, Math.min(560, this.container.clientWidth || 560));
    const labelW = Math.min(110, 14 + 8 * (d3.max(data.tokens, (t) => showToken(t).length) ?? 4));
    const xL = labelW, xR = width - labelW - H * 7;
    const height = TOP + L * ROW_H + 8;                 // all the rows: the spacer's height
    const viewH = Math.min(VIEW_H, height);              // what is drawn at a time
    const dpr = window.devicePixelRatio || 1;
    this.g = { xL, xR, labelW, width, viewH, dpr, y0: 0 };
    this.active = Math.max(0, Math.min(L - 1, state.query >= 0 ? state.query : this.active));
    this.links = layerLinks(data, state.layer);

    // scroll box > spacer (full height) > canvas + SVG, both viewport-sized, moved to scrollTop
    const scroller = document.createElement('div');
    scroller.className = 'headview-scroll';
    Object.assign(scroller.style, { position: 'relative', width: `${width + (height > viewH ? 16 : 0)}px`, height: `${viewH}px`, overflowY: height > viewH ? 'auto' : 'hidden', overflowX: 'hidden' });
    const spacer = document.createElement('div');
    Object.assign(spacer.style, { position: 'relative', width: `${width}px`, height: `${height}px`, background: '#fff' });
    const canvas = document.createElement('canvas');
    canvas.width = Math.round(width * dpr); canvas.height = Math.round(viewH * dpr);
    Object.assign(canvas.style, { position: 'absolute', left: '0', top: '0', width: `${width}px`, height: `${viewH}px` });
    const svg = d3.create('svg').attr('width', width).attr('height', viewH).attr('viewBox', `0 0 ${width} ${viewH}`)
      .attr('font-family', 'ui-monospace, DejaVu Sans Mono, monospace').attr('font-size', 13)
      .style('position', 'absolute').style('left', '0').style('top', '0');
    // rows (moved by -y0) with the per-head weight boxes, then a header that stays on top
    this.rows = svg.append('g').attr('class', 'rows') as unknown as d3.Selection<SVGGElement, unknown, null, undefined>;
    this.rows.append('g').attr('class', 'tokens-q');
    this.rows.append('g').attr('class', 'tokens-k');
    this.rows.append('g').attr('class', 'boxes');
    const header = svg.append('g').attr('class', 'header').attr('font-size', 11).attr('fill', '#666').attr('font-family', 'system-ui, sans-serif');
    header.append('rect').attr('width', width).attr('height', TOP - 2).attr('fill', '#fff');
    header.append('text').attr('x', 4).attr('y', 14).text('query');
    header.append('text').attr('x', xR + 4).attr('y', 14).text('key');
    if (L > LONG) header.append('text').attr('class', 'topk-note').attr('x', xL + 8).attr('y', 31)
      .style('font', '10px system-ui, sans-serif').text(`the ${TOP_K} strongest lines per query and head`);
    // a sliding window: said over the lines (a query's hidden keys are grey when it is focused)
    const win = windowOf(data, state.layer);
    if (win) header.append('text').attr('class', 'window-title').attr('x', (xL + xR) / 2).attr('y', 14).attr('text-anchor', 'middle').text(`window ${win}: each query sees its last ${win} keys`);
    // a full-attention layer of a model that also has windowed ones (Gemma 3's global layers)
    else if (layerKindText(data, state.layer)) header.append('text').attr('class', 'global-title').attr('x', (xL + xR) / 2).attr('y', 14).attr('text-anchor', 'middle').text('global: each query sees every key before it');
    svg.append('g').attr('class', 'offscreen'); // over the header: a focused query's keys off-screen
    // the geometry, for tests that read the canvas: line i -> j runs from (xL + 4, y(i)) to
    // (xR - 4, y(j)) with y(i) = top + i * rowH + rowH / 2 in content px; the canvas starts at data-y0
    svg.attr('data-xr', xR).attr('data-xl', xL).attr('data-top', TOP).attr('data-row-h', ROW_H).attr('data-dpr', dpr).attr('data-tokens', L);
    spacer.append(canvas, svg.node()!);
    scroller.append(spacer);
    this.container.replaceChildren(scroller);
    this.scroller = scroller; this.canvas = canvas;
    this.svg = svg as unknown as d3.Selection<SVGSVGElement, unknown, null, undefined>;
    scroller.scrollTop = keepScroll;
    scroller.addEventListener('scroll', () => {
      if (this.paintQueued) return;
      this.paintQueued = true;
      requestAnimationFrame(() => { this.paintQueued = false; if (this.scroller === scroller) this.paint(); });
    }, { passive: true });
    this.paint();
    // how long building the view took (links + first paint), for the record (the long-views test reads it)
    svg.attr('data-render-ms', (performance.now() - t0).toFixed(1));
  }

  /** Moves the canvas and labels to the scrolled viewport and draws its rows and links. */
  private paint(): void {
    if (!this.scroller || !this.data || !this.state) return;
    const t0 = performance.now();
    const L = this.data.tokens.length, { viewH } = this.g;
    const y0 = this.scroller.scrollTop;
    this.g.y0 = y0;
    // the rows whose labels exist: the visible ones and OVERSCAN on each side
    const first = Math.max(0, Math.floor((y0 - TOP) / ROW_H) - OVERSCAN);
    const last = Math.min(L, Math.ceil((y0 + viewH - TOP) / ROW_H) + OVERSCAN);
    this.canvas!.style.top = `${y0}px`;
    this.svg!.style('top', `${y0}px`).attr('data-y0', y0).attr('data-first', first).attr('data-last', last);
    this.rows!.attr('transform', `translate(0,${-y0})`);
    this.labels('q', first, last);
    this.labels('k', first, last);
    this.update(this.state);
    this.svg!.attr('data-paint-ms', (performance.now() - t0).toFixed(1));
  }

  /**
   * The label rows [first, last) of one side (joined by index: rows already drawn stay), and
   * the active query's row wherever it is, so that the tab stop (and a focus on it) survives scrolling.
   */
  private labels(side: 'q' | 'k', first: number, last: number): void {
    const data = this.data!, { xL, xR, labelW } = this.g, view = this;
    const y = (i: number) => TOP + i * ROW_H + ROW_H / 2;
    const rows = d3.range(first, last), a = this.active;
    if (side === 'q' && a < first) rows.unshift(a);
    if (side === 'q' && a >= last) rows.push(a);
    this.rows!.select(`g.tokens-${side}`).selectAll<SVGGElement, number>(':scope > g').data(rows, (i) => i)
      .join((enter) => {
        const g = enter.append('g')
          .attr('transform', (i) => `translate(${side === 'q' ? xL : xR},${y(i)})`)
          .attr('data-index', (i) => i)
          .attr('role', side === 'q' ? 'button' : null)
          .attr('aria-label', (i) => `${side === 'q' ? 'query' : 'key'} ${i}: ${showToken(data.tokens[i])}`)
          .style('outline', 'none');
        g.append('rect').attr('class', 'bg').attr('x', side === 'q' ? -labelW + 4 : 0).attr('y', -ROW_H / 2 + 1).attr('width', labelW - 6).attr('height', ROW_H - 2).attr('rx', 3).attr('fill', 'transparent');
        g.append('text').attr('x', side === 'q' ? -4 : 4).attr('y', 4.5).attr('text-anchor', side === 'q' ? 'end' : 'start')
          .attr('fill', (i) => (i >= data.promptLength ? '#17693a' : '#1b1b1f')).text((i) => short(data.tokens[i]));
        if (side === 'q') {
          g.on('mouseenter focus', (_e, i) => view.setHover({ side: 'q', index: i }))
            .on('mouseleave blur', () => view.setHover(null))
            .on('click', (_e, i) => view.onPin(view.state!.query === i ? -1 : i))
            .on('keydown', (e: KeyboardEvent, i) => view.onKey(e, i));
        } else {
          g.on('mouseenter', (_e, j) => view.setHover({ side: 'k', index: j })).on('mouseleave', () => view.setHover(null));
        }
        return g;
      })
      .attr('tabindex', (i) => (side === 'q' && i === a ? 0 : -1))
      .order();
  }

  /** A key on query row i: Enter / Space pin it; arrows, Page Up/Down, Home, End move the focus. */
  private onKey(e: KeyboardEvent, i: number): void {
    if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      this.onPin(this.state!.query === i ? -1 : i);
      return;
    }
    const L = this.data!.tokens.length, page = Math.max(1, Math.floor((this.g.viewH - TOP) / ROW_H) - 1);
    const to = { ArrowDown: i + 1, ArrowUp: i - 1, PageDown: i + page, PageUp: i - page, Home: 0, End: L - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    this.focusQuery(Math.max(0, Math.min(L - 1, to)));
  }

  /** Makes query row i the tab stop, scrolls it into the viewport (below the header) and focuses it. */
  private focusQuery(i: number): void {
    const scroller = this.scroller!, { viewH } = this.g, yq = TOP + i * ROW_H;
    this.active = i;
    if (yq < scroller.scrollTop + TOP) scroller.scrollTop = yq - TOP;
    else if (yq + ROW_H > scroller.scrollTop + viewH) scroller.scrollTop = yq + ROW_H - viewH;
    this.paint(); // now, so the row's label exists to take the focus
    this.rows!.select<SVGGElement>(`.tokens-q > g[data-index="${i}"]`).node()?.focus();
  }

  /**
   * Draws the links of the selected heads that cross the viewport (only the focused token's
   * when one is focused); returns how many. Lines are stroked in batches, one path per head and
   * opacity step (16 steps): one stroke per line costs seconds at 12 heads x 700 tokens.
   */
  private drawLinks(state: HeadViewState, focus: Focus): number {
    const c = this.canvas!, ctx = c.getContext('2d')!;
    const { xL, xR, dpr, y0, viewH } = this.g;
    const y = (i: number) => TOP + i * ROW_H + ROW_H / 2;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, c.width, c.height);
    ctx.setTransform(dpr, 0, 0, dpr, 0, -y0 * dpr); // content coordinates
    ctx.lineWidth = 2;
    const STEPS = 16;
    const batches = new Map<number, Link[]>(); // head * STEPS + opacity step -> links
    let n = 0;
    for (const d of this.links) {
      if (!state.heads[d.h] || (focus && (focus.side === 'q' ? d.i !== focus.index : d.j !== focus.index))) continue;
      const ya = y(d.i), yb = y(d.j);
      if (Math.max(ya, yb) < y0 || Math.min(ya, yb) > y0 + viewH) continue; // does not cross the viewport
      const step = Math.max(1, Math.round(Math.min(1, d.w * (focus ? 1 : 0.9)) * (STEPS - 1)));
      const key = d.h * STEPS + step;
      let b = batches.get(key);
      if (!b) batches.set(key, (b = []));
      b.push(d);
      n++;
    }
    for (const [key, links] of batches) {
      ctx.globalAlpha = (key % STEPS) / (STEPS - 1);
      ctx.strokeStyle = headColor(Math.floor(key / STEPS));
      ctx.beginPath();
      for (const d of links) {
        ctx.moveTo(xL + 4, y(d.i));
        ctx.lineTo(xR - 4, y(d.j));
      }
      ctx.stroke();
    }
    ctx.globalAlpha = 1;
    return n;
  }

  /** A focused query's strongest keys above / below the viewport, named at that edge. */
  private offscreenKeys(state: HeadViewState, focus: Focus): void {
    const layer = this.svg!.select('g.offscreen');
    layer.selectAll('*').remove();
    if (focus?.side !== 'q') return;
    const { xR, y0, viewH } = this.g, data = this.data!;
    const y = (i: number) => TOP + i * ROW_H + ROW_H / 2;
    const above = new Map<number, number>(), below = new Map<number, number>(); // key -> strongest weight over heads
    for (const d of this.links) {
      if (d.i !== focus.index || !state.heads[d.h]) continue;
      const side = y(d.j) < y0 + TOP ? above : y(d.j) > y0 + viewH ? below : null;
      if (side) side.set(d.j, Math.max(side.get(d.j) ?? 0, d.w));
    }
    // the strongest 2 keys (and how many more) at the right edge: above in the header, below on a white band
    const say = (m: Map<number, number>, arrow: string, yy: number, cls: string) => {
      if (!m.size) return;
      const top = [...m].sort((a, b) => b[1] - a[1]).slice(0, 2);
      if (cls === 'below') layer.append('rect').attr('x', xR - 60).attr('y', viewH - 17).attr('width', this.g.width - xR + 60).attr('height', 17).attr('fill', '#fff');
      layer.append('text').attr('class', `offscreen-keys ${cls}`).attr('x', this.g.width - 2).attr('y', yy).attr('text-anchor', 'end').attr('fill', '#5a3e00')
        .style('font', '10px system-ui, sans-serif')
        .text(`${arrow} ${top.map(([j, w]) => `${j}:${short(data.tokens[j])} ${w.toFixed(2)}`).join(', ')}${m.size > 2 ? ` +${m.size - 2}` : ''}`);
    };
    say(above, '↑', 31, 'above');
    say(below, '↓', viewH - 4, 'below');
  }

  setHover(h: Focus): void {
    this.hover = h;
    if (this.state) this.update(this.state);
  }

  /** Restyles for the current heads / hover / pinned query without rebuilding. */
  update(state: HeadViewState): void {
    this.state = state;
    if (!this.svg || !this.canvas || !this.data || !this.rows || !this.scroller) return;
    if (state.query !== this.shownQuery) {
      this.shownQuery = state.query;
      const yq = TOP + state.query * ROW_H, { y0, viewH } = this.g;
      if (state.query >= 0) {
        this.active = state.query; // a pinned query is the tab stop
        if (yq < y0 + TOP || yq + ROW_H > y0 + viewH) this.scroller.scrollTop = yq - viewH / 2;
        this.paint(); // at the (new) scrollTop: its labels and tab stop, then this update again
        return;
      }
    }
    const focus: Focus = this.hover ?? (state.query >= 0 ? { side: 'q', index: state.query } : null);
    const visible = this.drawLinks(state, focus);
    this.svg.attr('data-visible-lines', visible);
    this.offscreenKeys(state, focus);
    this.rows.selectAll<SVGGElement, number>('.tokens-q > g').select('rect.bg')
      .attr('fill', (i) => (focus?.side === 'q' && focus.index === i ? '#ffe9b8' : state.query === i ? '#e7eefc' : 'transparent'));
    // keys the focused query cannot see in this layer (causal, window) are grey
    const data = this.data;
    this.rows.selectAll<SVGGElement, number>('.tokens-k > g').select('rect.bg')
      .attr('fill', (j) => (focus?.side === 'k' && focus.index === j ? '#ffe9b8'
        : focus?.side === 'q' && windowOf(data, state.layer) && hidden(data, state.layer, focus.index, j) ? '#eeeeee' : 'transparent'));
    // weight boxes: one small square per selected head next to each key in the viewport, for the focused query
    const boxes = this.rows.select<SVGGElement>('g.boxes');
    boxes.selectAll('*').remove();
    if (focus?.side === 'q') {
      const { xR, labelW, y0, viewH } = this.g;
      const A = data.attn[state.layer];
      const first = Math.max(0, Math.floor((y0 - TOP) / ROW_H)), lastSeen = Math.ceil((y0 + viewH - TOP) / ROW_H);
      for (let h = 0; h < data.nHead; h++) {
        if (!state.heads[h]) continue;
        const r = A[h][focus.index];
        const last = Math.min(lastSeen, data.bidirectional ? r.length - 1 : focus.index);
        for (let j = first; j <= last; j++) {
          if (hidden(data, state.layer, focus.index, j)) continue;
          boxes.append('rect').attr('x', xR + labelW - 2 + h * 7).attr('y', TOP + j * ROW_H + 4).attr('width', 6).attr('height', ROW_H - 8)
            .attr('fill', headColor(h)).attr('fill-opacity', Math.max(0.04, r[j] ?? 0))
            .append('title').text(`head ${h}: ${(r[j] ?? 0).toFixed(3)}`);
        }
      }
    }
  }
}
