// Model view: every layer x head as a thumbnail heat map (canvas, coloured with d3's scale),
// with its entropy and pattern label; choosing one opens a labelled heat map of that head.
// Past THUMB_MAX tokens a thumbnail is max-pooled (a 1024-token head is 128 x 128 pixels), and
// thumbnails are painted once per analysed text, not again when a head is chosen.
// Keys a query cannot see (after it; outside a layer's sliding window) are grey when their weight
// is 0, so a window shows as a band; a layer with a window and a head's key/value head (GQA) are
// written on the grid's labels.
import * as d3 from 'd3';
import { hidden, kvHeadOf, layerKindText, type AttnData } from './contract';
import { badgeClass, PATTERN_NOTE, type HeadStats } from './patterns';
import { renderHeatmap } from './heatmap';
import { showToken } from './ui';

export interface Selected { layer: number; head: number }

const colorCache = d3.range(256).map((i) => d3.color(d3.interpolateBlues(i / 255))!.rgb());
/** A hidden key with weight 0 (the heat map's masked grey). */
export const HIDDEN_RGB = d3.rgb('#eeeeee');

/** A thumbnail's side in pixels at most: longer sequences are max-pooled into it. */
export const THUMB_MAX = 128;

/** The pixel (block) index of each of L positions in an n-pixel thumbnail. */
const blockOf = (L: number, n: number): Int32Array => Int32Array.from({ length: L }, (_v, i) => Math.floor((i * n) / L));

/**
 * One layer's mask for its thumbnails, n x n with n = min(L, THUMB_MAX): 1 where every
 * (query, key) of the pixel's block is hidden (after the query, outside a sliding window).
 * Shared by the layer's heads, so the hidden test runs L x L times per layer, not per head.
 */
export function thumbMask(L: number, isHidden: (i: number, j: number) => boolean): Uint8Array {
  const n = Math.min(L, THUMB_MAX), b = blockOf(L, n);
  const mask = new Uint8Array(n * n).fill(1);
  for (let i = 0; i < L; i++) for (let j = 0; j < L; j++) if (!isHidden(i, j)) mask[b[i] * n + b[j]] = 0;
  return mask;
}

/**
 * Paints one head's L x L weights into a canvas of n x n pixels, n = min(L, THUMB_MAX): one pixel
 * per weight up to THUMB_MAX tokens, beyond that each pixel shows the largest weight of its
 * block of queries x keys (max-pooled, so a strong weight never disappears). A pixel whose
 * block is all hidden (mask from thumbMask) is grey when its weights are 0 (a weight there,
 * which would be a bug, is drawn).
 */
export function paintThumb(canvas: HTMLCanvasElement, rows: Float32Array[], mask?: Uint8Array): void {
  const L = rows.length, n = Math.min(L, THUMB_MAX), b = blockOf(L, n);
  canvas.width = n; canvas.height = n;
  const ctx = canvas.getContext('2d')!;
  const img = ctx.createImageData(n, n);
  // the largest weight of each block, n x n (a row shorter than L has zeros after its end)
  const pool = new Float32Array(n * n);
  for (let i = 0; i < L; i++) {
    const r = rows[i], o = b[i] * n, m = Math.min(L, r.length);
    for (let j = 0; j < m; j++) if (r[j] > pool[o + b[j]]) pool[o + b[j]] = r[j];
  }
  // colour: sqrt(weight) on d3's Blues (as the heat map), grey for a hidden block without weight
  for (let o = 0; o < n * n; o++) {
    const w = pool[o];
    const c = w === 0 && mask?.[o] ? HIDDEN_RGB : colorCache[Math.max(0, Math.min(255, Math.round(Math.sqrt(w) * 255)))];
    img.data[4 * o] = c.r; img.data[4 * o + 1] = c.g; img.data[4 * o + 2] = c.b; img.data[4 * o + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
}

export class ModelView {
  private buttons: HTMLButtonElement[][] = [];
  private shape = '';
  /** the data whose thumbnails are painted (choosing a head does not repaint 144 of them) */
  private painted: AttnData | null = null;

  /** clicks on the enlarged map's cells, and the cells to mark (the model page's blocked cells); null: none */
  cells: { click: (s: Selected, q: number, k: number) => void; marked: (s: Selected, q: number, k: number) => boolean } | null = null;

  constructor(private grid: HTMLElement, private detail: HTMLElement, private onSelect: (s: Selected) => void) {}

  /** Builds the grid when the model shape changes; repaints thumbnails and labels otherwise. */
  render(data: AttnData, stats: HeadStats[][], sel: Selected): void {
    const shape = `${data.nLayer}x${data.nHead}/${data.kvHeads ?? data.nHead}/${data.windows?.join(',') ?? ''}`;
    if (shape !== this.shape) {
      this.shape = shape;
      this.painted = null;
      this.grid.replaceChildren();
      // a few heads (rollout / flow's one fused map per layer) keep thumbnail size, not the full width
      this.grid.style.gridTemplateColumns = `auto repeat(${data.nHead}, minmax(0, ${data.nHead < 4 ? '160px' : '1fr'}))`;
      const corner = document.createElement('span');
      this.grid.append(corner);
      for (let h = 0; h < data.nHead; h++) { const s = document.createElement('span'); s.className = 'small muted export-text'; s.style.textAlign = 'center'; s.textContent = (data.kvHeads ?? data.nHead) !== data.nHead ? `head ${h} · KV ${kvHeadOf(data, h)}` : `head ${h}`; this.grid.append(s); }
      this.buttons = [];
      for (let l = 0; l < data.nLayer; l++) {
        const lab = document.createElement('span');
        lab.className = 'small muted export-text'; lab.style.alignSelf = 'center'; lab.textContent = `layer ${l}${layerKindText(data, l)}`;
        this.grid.append(lab);
        const row: HTMLButtonElement[] = [];
        for (let h = 0; h < data.nHead; h++) {
          const b = document.createElement('button');
          b.type = 'button'; b.className = 'thumb';
          b.dataset.layer = String(l); b.dataset.head = String(h);
          b.innerHTML = '<canvas></canvas><span class="tag export-text"></span><span class="ent num export-text"></span>';
          b.addEventListener('click', () => this.onSelect({ layer: l, head: h }));
          row.push(b);
          this.grid.append(b);
        }
        this.buttons.push(row);
      }
    }
    const t0 = performance.now();
    const repaint = this.painted !== data;
    this.painted = data;
    for (let l = 0; l < data.nLayer; l++) {
      const mask = repaint ? thumbMask(data.tokens.length, (i, j) => hidden(data, l, i, j)) : undefined;
      for (let h = 0; h < data.nHead; h++) {
        const b = this.buttons[l][h], s = stats[l][h];
        if (mask) paintThumb(b.querySelector('canvas')!, data.attn[l][h], mask);
        const tag = b.querySelector<HTMLElement>('.tag')!;
        tag.textContent = s.label;
        tag.className = `tag badge ${badgeClass(s.label)}`;
        b.querySelector('.ent')!.textContent = `H ${s.entropy.toFixed(2)} b`;
        b.setAttribute('aria-pressed', String(l === sel.layer && h === sel.head));
        b.setAttribute('aria-label', `layer ${l} head ${h}: ${s.label}, mean entropy ${s.entropy.toFixed(2)} bits`);
        b.title = `layer ${l}, head ${h}: ${s.label} (${PATTERN_NOTE[s.label]}); previous ${s.prev.toFixed(2)}, ${s.next > 0 ? `next ${s.next.toFixed(2)}, ` : ''}first ${s.sink.toFixed(2)}, self ${s.self.toFixed(2)}`;
      }
    }
    const t1 = performance.now();
    this.renderDetail(data, stats, sel);
    // the time of the thumbnails and of the enlarged head, for the record (tests read them)
    this.grid.dataset.thumbsMs = (t1 - t0).toFixed(1);
    this.grid.dataset.detailMs = (performance.now() - t1).toFixed(1);
  }

  renderDetail(data: AttnData, stats: HeadStats[][], sel: Selected): void {
    const rows = data.attn[sel.layer][sel.head], s = stats[sel.layer][sel.head];
    const labels = data.tokens.map((t) => { const x = showToken(t); return x.length > 10 ? x.slice(0, 9) + '…' : x; });
    renderHeatmap(this.detail, {
      rows: labels, cols: labels, value: (i, j) => rows[i][j] ?? 0, masked: (i, j) => hidden(data, sel.layer, i, j),
      numbers: true, rowSums: true, maxCell: 34, width: Math.min(760, this.detail.clientWidth || 700),
      onCell: this.cells ? (i, j) => this.cells!.click(sel, i, j) : undefined,
      marked: this.cells ? (i, j) => this.cells!.marked(sel, i, j) : undefined,
      title: `layer ${sel.layer} · head ${sel.head}${(data.kvHeads ?? data.nHead) !== data.nHead ? ` (KV head ${kvHeadOf(data, sel.head)})` : ''}` +
        `${layerKindText(data, sel.layer)} · ${s.label} · mean entropy ${s.entropy.toFixed(2)} bits`,
    });
  }
}
