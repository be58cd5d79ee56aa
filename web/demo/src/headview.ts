// Head view (after BertViz): the tokens twice, queries on the left and keys on the right, a
// line from query i to key j for each selected head with opacity = weight, one colour per head.
// Hover (or focus) a token to see only its lines; click a query token to pin it.
// render() builds the labels (SVG) for a new AttnData/layer and the list of links; update()
// redraws the links on a <canvas> under the labels (one draw call per line, no DOM node per
// line, so 12 heads x 512 tokens stay responsive where BertViz's SVG lines stall) and restyles.
// Long sequences keep, per query and head, only the TOP_K strongest links (stated on the page).
// A layer with a sliding window says so over the keys; a focused query's hidden keys are greyed.
import * as d3 from 'd3';
import { hidden, windowOf, type AttnData } from './contract';
import { headColor, showToken } from './ui';

export interface HeadViewState {
  layer: number;
  heads: boolean[];
  /** pinned query position, or -1 */
  query: number;
}

interface Link { h: number; i: number; j: number; w: number }

const MIN_WEIGHT = 0.01; // lines lighter than this are not drawn
const TOP_K = 8;         // above LONG tokens, only the TOP_K strongest links per query and head
const LONG = 128;
/** Canvas pixels at most (a 512-token view is ~10k px tall: no 2x backing store there). */
const MAX_CANVAS_PIXELS = 16e6;

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

export class HeadView {
  private svg: d3.Selection<SVGSVGElement, unknown, null, undefined> | null = null;
  private links: Link[] = [];
  private canvas: HTMLCanvasElement | null = null;
  private geometry = { xL: 0, xR: 0, top: 0, rowH: 20, dpr: 1 };
  private hover: { side: 'q' | 'k'; index: number } | null = null;
  private data: AttnData | null = null;
  private state: HeadViewState | null = null;

  constructor(private container: HTMLElement, private onPin: (q: number) => void) {}

  render(data: AttnData, state: HeadViewState): void {
    this.data = data; this.state = state;
    const L = data.tokens.length, H = data.nHead;
    // long sequences get thinner rows (every few labels shown) so the view stays a few screens
    // tall: a 700-token view at 20 px a row is 14,000 px of canvas and SVG to rasterise
    const rowH = L <= 64 ? 20 : Math.max(4, Math.min(20, Math.floor(1600 / L))), top = 24;
    const labelEvery = Math.ceil(14 / rowH);
    const width = Math.max(300, Math.min(560, this.container.clientWidth || 560));
    const labelW = Math.min(110, 14 + 8 * (d3.max(data.tokens, (t) => showToken(t).length) ?? 4));
    const xL = labelW, xR = width - labelW - H * 7;
    const height = top + L * rowH + 8;
    // the labels' SVG is transparent over the links' canvas (both exported, canvas first)
    const svg = d3.create('svg').attr('width', width).attr('height', height).attr('viewBox', `0 0 ${width} ${height}`)
      .attr('font-family', 'ui-monospace, DejaVu Sans Mono, monospace').attr('font-size', 13)
      .style('position', 'absolute').style('left', '0').style('top', '0');
    svg.append('text').attr('x', 4).attr('y', 14).attr('font-size', 11).attr('fill', '#666').attr('font-family', 'system-ui, sans-serif').text('query');
    svg.append('text').attr('x', xR + 4).attr('y', 14).attr('font-size', 11).attr('fill', '#666').attr('font-family', 'system-ui, sans-serif')
      .text(L > LONG ? `key (the ${TOP_K} strongest lines per query and head)` : 'key');
    // a sliding window: said over the lines (a query's hidden keys are grey when it is focused)
    const win = windowOf(data, state.layer);
    if (win) {
      svg.append('text').attr('class', 'window-title').attr('x', (xL + xR) / 2).attr('y', 14).attr('text-anchor', 'middle')
        .attr('font-size', 11).attr('fill', '#666').attr('font-family', 'system-ui, sans-serif')
        .text(`window ${win}: each query sees its last ${win} keys`);
    }
    const canvas = document.createElement('canvas');
    const dpr = Math.min(window.devicePixelRatio || 1, Math.max(1, Math.sqrt(MAX_CANVAS_PIXELS / (width * height))));
    canvas.width = Math.round(width * dpr); canvas.height = Math.round(height * dpr);
    Object.assign(canvas.style, { position: 'absolute', left: '0', top: '0', width: `${width}px`, height: `${height}px` });
    this.canvas = canvas;
    this.geometry = { xL, xR, top, rowH, dpr };
    this.links = layerLinks(data, state.layer);
    const y = (i: number) => top + i * rowH + rowH / 2;
    // per-head weight boxes next to the keys (shown while a query is hovered or pinned)
    svg.append('g').attr('class', 'boxes');

    const tokenGroup = (side: 'q' | 'k') => svg.append('g').attr('class', `tokens-${side}`).selectAll('g').data(data.tokens).join('g')
      .attr('transform', (_t, i) => `translate(${side === 'q' ? xL : xR},${y(i)})`)
      .attr('tabindex', side === 'q' ? 0 : -1)
      .attr('role', side === 'q' ? 'button' : null)
      .attr('aria-label', (t, i) => `${side === 'q' ? 'query' : 'key'} ${i}: ${showToken(t)}`)
      .style('outline', 'none')
      .call((g) => g.append('rect').attr('x', side === 'q' ? -labelW + 4 : 0).attr('y', -rowH / 2 + 1).attr('width', labelW - 6).attr('height', rowH - 2).attr('rx', 3)
        .attr('fill', 'transparent').attr('class', 'bg'))
      .call((g) => g.append('text').attr('x', side === 'q' ? -4 : 4).attr('y', 4.5).attr('text-anchor', side === 'q' ? 'end' : 'start')
        .attr('fill', (_t, i) => (i >= data.promptLength ? '#17693a' : '#1b1b1f'))
        .attr('font-size', rowH < 14 ? 11 : null)
        .text((t, i) => { if (i % labelEvery) return ''; const s = showToken(t); return s.length > 12 ? s.slice(0, 11) + '…' : s; }));
    const view = this;
    const qs = tokenGroup('q'), ks = tokenGroup('k');
    qs.each(function (_t, i) {
        d3.select(this).on('mouseenter focus', () => view.setHover({ side: 'q', index: i }))
          .on('mouseleave blur', () => view.setHover(null))
          .on('click', () => view.onPin(view.state!.query === i ? -1 : i))
          .on('keydown', (e: KeyboardEvent) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); view.onPin(view.state!.query === i ? -1 : i); } });
      });
    ks.each(function (_t, j) {
      d3.select(this).on('mouseenter', () => view.setHover({ side: 'k', index: j })).on('mouseleave', () => view.setHover(null));
    });
    this.svg = svg as unknown as d3.Selection<SVGSVGElement, unknown, null, undefined>;
    // the geometry, for tests that read the canvas: line i -> j runs from (xL + 4, y(i)) to (xR - 4, y(j))
    this.svg.attr('data-xr', xR).attr('data-xl', xL).attr('data-top', top).attr('data-row-h', rowH).attr('data-dpr', dpr);
    const stack = document.createElement('div');
    Object.assign(stack.style, { position: 'relative', width: `${width}px`, height: `${height}px`, background: '#fff' });
    stack.append(canvas, svg.node()!);
    this.container.replaceChildren(stack);
    this.update(state);
  }

  /**
   * Draws the links of the selected heads (only the focused token's when one is focused);
   * returns how many. Lines are stroked in batches, one path per head and opacity step (16
   * steps): one stroke per line costs seconds at 12 heads x 700 tokens, a batch milliseconds.
   */
  private drawLinks(state: HeadViewState, focus: { side: 'q' | 'k'; index: number } | null): number {
    const c = this.canvas!, ctx = c.getContext('2d')!;
    const { xL, xR, top, rowH, dpr } = this.geometry;
    const y = (i: number) => top + i * rowH + rowH / 2;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, c.width, c.height);
    ctx.lineWidth = 2;
    const STEPS = 16;
    const batches = new Map<number, Link[]>(); // head * STEPS + opacity step -> links
    let n = 0;
    for (const d of this.links) {
      if (!state.heads[d.h] || (focus && (focus.side === 'q' ? d.i !== focus.index : d.j !== focus.index))) continue;
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

  setHover(h: { side: 'q' | 'k'; index: number } | null): void {
    this.hover = h;
    if (this.state) this.update(this.state);
  }

  /** Restyles for the current heads / hover / pinned query without rebuilding. */
  update(state: HeadViewState): void {
    this.state = state;
    if (!this.svg || !this.canvas || !this.data) return;
    const focus = this.hover ?? (state.query >= 0 ? { side: 'q' as const, index: state.query } : null);
    const visible = this.drawLinks(state, focus);
    this.svg.attr('data-visible-lines', visible);
    this.svg.selectAll<SVGGElement, string>('.tokens-q > g').select('rect.bg')
      .attr('fill', (_t, i) => (focus?.side === 'q' && focus.index === i ? '#ffe9b8' : state.query === i ? '#e7eefc' : 'transparent'));
    // keys the focused query cannot see in this layer (causal, window) are grey
    const data = this.data;
    this.svg.selectAll<SVGGElement, string>('.tokens-k > g').select('rect.bg')
      .attr('fill', (_t, j) => (focus?.side === 'k' && focus.index === j ? '#ffe9b8'
        : focus?.side === 'q' && windowOf(data, state.layer) && hidden(data, state.layer, focus.index, j) ? '#eeeeee' : 'transparent'));
    // weight boxes: one small square per selected head next to each key, for the focused query
    const boxes = this.svg.select<SVGGElement>('g.boxes');
    boxes.selectAll('*').remove();
    if (focus?.side === 'q') {
      const xR = Number(this.svg.attr('data-xr'));
      const labelW = Number(this.svg.attr('width')) - xR - this.data.nHead * 7;
      const A = this.data.attn[state.layer];
      const { rowH, top } = this.geometry;
      for (let h = 0; h < this.data.nHead; h++) {
        if (!state.heads[h]) continue;
        const r = A[h][focus.index];
        for (let j = 0; j <= (this.data.bidirectional ? r.length - 1 : focus.index); j++) {
          if (hidden(this.data, state.layer, focus.index, j)) continue;
          boxes.append('rect').attr('x', xR + labelW - 2 + h * 7).attr('y', top + j * rowH + 4).attr('width', 6).attr('height', Math.max(1, rowH - 8))
            .attr('fill', headColor(h)).attr('fill-opacity', Math.max(0.04, r[j] ?? 0))
            .append('title').text(`head ${h}: ${(r[j] ?? 0).toFixed(3)}`);
        }
      }
    }
  }
}
