// Head view (after BertViz): the tokens twice, queries on the left and keys on the right, a
// line from query i to key j for each selected head with opacity = weight, one colour per head.
// Hover (or focus) a token to see only its lines; click a query token to pin it.
// render() builds the SVG for a new AttnData/layer; update() only restyles (hover, heads).
import * as d3 from 'd3';
import type { AttnData } from './contract';
import { headColor, showToken } from './ui';

export interface HeadViewState {
  layer: number;
  heads: boolean[];
  /** pinned query position, or -1 */
  query: number;
}

interface Link { h: number; i: number; j: number; w: number }

const MIN_WEIGHT = 0.01; // lines lighter than this are not drawn

export class HeadView {
  private svg: d3.Selection<SVGSVGElement, unknown, null, undefined> | null = null;
  private links: d3.Selection<SVGLineElement, Link, SVGGElement, unknown> | null = null;
  private hover: { side: 'q' | 'k'; index: number } | null = null;
  private data: AttnData | null = null;
  private state: HeadViewState | null = null;

  constructor(private container: HTMLElement, private onPin: (q: number) => void) {}

  render(data: AttnData, state: HeadViewState): void {
    this.data = data; this.state = state;
    const L = data.tokens.length, H = data.nHead;
    const rowH = 20, top = 24;
    const width = Math.max(300, Math.min(560, this.container.clientWidth || 560));
    const labelW = Math.min(110, 14 + 8 * (d3.max(data.tokens, (t) => showToken(t).length) ?? 4));
    const xL = labelW, xR = width - labelW - H * 7;
    const height = top + L * rowH + 8;
    const svg = d3.create('svg').attr('width', width).attr('height', height).attr('viewBox', `0 0 ${width} ${height}`)
      .attr('font-family', 'ui-monospace, DejaVu Sans Mono, monospace').attr('font-size', 13).style('background', '#fff');
    svg.append('text').attr('x', 4).attr('y', 14).attr('font-size', 11).attr('fill', '#666').attr('font-family', 'system-ui, sans-serif').text('query');
    svg.append('text').attr('x', xR + 4).attr('y', 14).attr('font-size', 11).attr('fill', '#666').attr('font-family', 'system-ui, sans-serif').text('key');

    const links: Link[] = [];
    const A = data.attn[state.layer];
    for (let h = 0; h < H; h++) for (let i = 0; i < L; i++) {
      const r = A[h][i];
      for (let j = 0; j <= Math.min(i, r.length - 1); j++) if (r[j] >= MIN_WEIGHT) links.push({ h, i, j, w: r[j] });
    }
    const y = (i: number) => top + i * rowH + rowH / 2;
    this.links = svg.append('g').attr('class', 'links').attr('stroke-width', 2).selectAll<SVGLineElement, Link>('line').data(links).join('line')
      .attr('x1', xL + 4).attr('x2', xR - 4).attr('y1', (d) => y(d.i)).attr('y2', (d) => y(d.j)).attr('stroke', (d) => headColor(d.h));
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
        .text((t) => { const s = showToken(t); return s.length > 12 ? s.slice(0, 11) + '…' : s; }));
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
    this.svg.attr('data-xr', xR);
    this.container.replaceChildren(svg.node()!);
    this.update(state);
  }

  setHover(h: { side: 'q' | 'k'; index: number } | null): void {
    this.hover = h;
    if (this.state) this.update(this.state);
  }

  /** Restyles for the current heads / hover / pinned query without rebuilding. */
  update(state: HeadViewState): void {
    this.state = state;
    if (!this.svg || !this.links || !this.data) return;
    const focus = this.hover ?? (state.query >= 0 ? { side: 'q' as const, index: state.query } : null);
    let visible = 0;
    this.links.attr('stroke-opacity', (d) => {
      const on = state.heads[d.h] && (!focus || (focus.side === 'q' ? d.i === focus.index : d.j === focus.index));
      if (on) visible++;
      return on ? Math.min(1, d.w * (focus ? 1 : 0.9)) : 0;
    }).attr('display', (d) => (state.heads[d.h] && (!focus || (focus.side === 'q' ? d.i === focus.index : d.j === focus.index)) ? null : 'none'));
    this.svg.attr('data-visible-lines', visible);
    this.svg.selectAll<SVGGElement, string>('.tokens-q > g').select('rect.bg')
      .attr('fill', (_t, i) => (focus?.side === 'q' && focus.index === i ? '#ffe9b8' : state.query === i ? '#e7eefc' : 'transparent'));
    this.svg.selectAll<SVGGElement, string>('.tokens-k > g').select('rect.bg')
      .attr('fill', (_t, j) => (focus?.side === 'k' && focus.index === j ? '#ffe9b8' : 'transparent'));
    // weight boxes: one small square per selected head next to each key, for the focused query
    const boxes = this.svg.select<SVGGElement>('g.boxes');
    boxes.selectAll('*').remove();
    if (focus?.side === 'q') {
      const xR = Number(this.svg.attr('data-xr'));
      const labelW = Number(this.svg.attr('width')) - xR - this.data.nHead * 7;
      const A = this.data.attn[state.layer];
      const rowH = 20, top = 24;
      for (let h = 0; h < this.data.nHead; h++) {
        if (!state.heads[h]) continue;
        const r = A[h][focus.index];
        for (let j = 0; j <= focus.index; j++) {
          boxes.append('rect').attr('x', xR + labelW - 2 + h * 7).attr('y', top + j * rowH + 4).attr('width', 6).attr('height', rowH - 8)
            .attr('fill', headColor(h)).attr('fill-opacity', Math.max(0.04, r[j] ?? 0))
            .append('title').text(`head ${h}: ${(r[j] ?? 0).toFixed(3)}`);
        }
      }
    }
  }
}
