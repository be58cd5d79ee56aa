// "Find heads": qkv's headProbes on whatever model is loaded (tiny, Hub, dropped), on the
// prompt: each head's previous-token, induction and sink scores, and next-token on a
// bidirectional model (qkv gives a causal model none: 0 by construction, the message says so),
// what its map says; and its ablation effect (the prompt's loss with the head removed minus
// with it: what it does). One forward per head, with the page's progress bar and Cancel.
// Then (1) a probe label per head with its score, e.g. "induction 0.62", beside the pattern
// labels; (2) the map-vs-effect scatter: x = the head's strongest probe score, y = its ablation
// effect as a share of the largest change (of either sign), so a head that does what its map says
// lies near the diagonal; (3) the warning box names the head farthest from the diagonal.
// On an encoder (the encoders page) the effect is qkv's masked-LM one: the change in the
// masked-token loss, the prompt masked BERT-style from seed 0 (docs/interpret.md); the host's
// `said` and `unit` word it. The section's markup is built here from ./probe-panel.ts (one copy
// for both pages), in the page's words.
import * as d3 from 'd3';
import type { DemoModel, qkv } from './api';
import { stoppedBy, type ForwardProgress } from './forward-progress';
import { NEXT_TOKEN_PROBES, buildProbePanel, type ProbePanelWords } from './probe-panel';
import { $, message } from './ui';

type Probe = 'induction' | 'previous token' | 'next token' | 'sink';
export interface ProbeLabel { name: Probe; score: number }
export interface ScatterPoint { layer: number; head: number; label: ProbeLabel; effect: number; share: number; off: number }

/** The head's strongest map probe (next token only where it was measured: not on a causal model). */
export function probeLabel(s: qkv.HeadScore): ProbeLabel {
  const c: ProbeLabel[] = [{ name: 'induction', score: s.induction }, { name: 'previous token', score: s.previousToken }];
  if (s.nextToken !== null) c.push({ name: 'next token', score: s.nextToken });
  c.push({ name: 'sink', score: s.sink });
  return c.reduce((a, b) => (b.score > a.score ? b : a));
}

/** The message's word on the next-token probe where qkv gave none (a causal model). */
export const noNextToken = (r: qkv.HeadProbeResult): string =>
  (r.nextToken === null ? ' No next-token score: the maps are causal, so every head\'s is 0 by construction.' : '');

export const labelText = (l: ProbeLabel): string => `${l.name} ${l.score.toFixed(2)}`;

/** One point per head: x = probe score, y = ablation / the largest |ablation|, off = |x - y|. */
export function scatterPoints(r: qkv.HeadProbeResult): ScatterPoint[] {
  const biggest = Math.max(1e-12, ...r.scores.map((s) => Math.abs(s.ablation ?? 0)));
  return r.scores.map((s) => {
    const label = probeLabel(s), effect = s.ablation ?? 0, share = effect / biggest;
    return { layer: s.layer, head: s.head, label, effect, share, off: Math.abs(label.score - share) };
  });
}

/** What the finder needs of a model (DemoModel has it). */
export type FinderModel = Pick<DemoModel, 'dims' | 'probe'>;

export interface FinderHost {
  model(): FinderModel | null;
  ids(): number[] | null;
  busy(): boolean;
  forward: ForwardProgress;
  changed(): void;
  /** show this head (the model view) */
  select(layer: number, head: number): void;
  /** the message after a run (default: the decoder's, on the prompt's next-token loss) */
  said?(r: qkv.HeadProbeResult, ids: number[] | null): string;
  /** the effect's unit, default 'nats per token' */
  unit?: string;
  /** the section's words (built in place of #probe-panel), default NEXT_TOKEN_PROBES */
  panel?: ProbePanelWords;
}

const W = 340, H = 300, M = { l: 46, r: 12, t: 12, b: 42 };

export class HeadFinder {
  result: qkv.HeadProbeResult | null = null;
  points: ScatterPoint[] = [];
  private of: FinderModel | null = null;
  /** replaced by a newer forward pass: runs again once the page is idle */
  private again = false;

  constructor(private host: FinderHost) {
    buildProbePanel($('#probe-panel'), host.panel ?? NEXT_TOKEN_PROBES);
    $('#find-heads').addEventListener('click', () => void this.run());
  }

  /** The labels of the loaded model's heads, when found on it. */
  labels(): ProbeLabel[][] | null {
    if (!this.result || this.of !== this.host.model()) return null;
    const t: ProbeLabel[][] = [];
    for (const p of this.points) (t[p.layer] ??= [])[p.head] = p.label;
    return t;
  }

  async run(): Promise<void> {
    const m = this.host.model(), msg = $('#probe-msg');
    if (!m || this.host.busy()) return;
    const ids = this.host.ids();
    const text = ids && ids.length >= 2 ? { ids } : {};
    const total = (ids && ids.length >= 2 ? 1 : 0) + 2 + 1 + m.dims.layers * m.dims.heads;
    message(msg, `Probing ${m.dims.layers * m.dims.heads} heads: ${total} forward passes…`);
    document.body.dataset.probes = 'running';
    try {
      const r = await this.host.forward.run('Probes', total, (p) => m.probe({
        ...text, inductionSequences: 2, signal: p.signal, onProgress: (x) => p.onProgress?.(x.done, x.total),
      }), 'forward passes');
      if (m !== this.host.model()) return;
      this.result = r; this.of = m; this.points = scatterPoints(r);
      message(msg, (this.host.said?.(r, ids) ?? `Probed on ${ids && ids.length >= 2 ? `the prompt (${ids.length} tokens)` : 'a random sequence'}; induction on 2 random sequences repeated twice. Loss with every head: ${r.baseLoss?.toFixed(3) ?? '–'} nats per token.`) + noNextToken(r), 'ok');
      document.body.dataset.probes = 'done';
    } catch (e) {
      const stopped = stoppedBy(e);
      document.body.dataset.probes = stopped ?? 'failed';
      if (stopped === 'cancelled') message(msg, 'Cancelled: the heads were not probed. Find heads starts again.', 'info');
      else if (!stopped) message(msg, `The probes failed: ${(e as Error).message}`, 'error');
      else this.again = true; // a newer pass (the prompt's, typed meanwhile) took the bar: run after it
    }
    this.host.changed();
  }

  /** The scatter and the warning box's line; nothing before the probes ran on this model. */
  render(): void {
    if (this.again && !this.host.forward.busy && !this.host.busy()) { this.again = false; void this.run(); }
    const box = $('#scatter'), warn = $('#caveat-head');
    const ok = !!this.labels();
    box.hidden = !ok; warn.hidden = !ok;
    $<HTMLButtonElement>('#find-heads').disabled = !this.host.model();
    if (!ok) { box.replaceChildren(); return; }
    const pts = this.points, unit = this.host.unit ?? 'nats per token', far = pts.reduce((a, b) => (b.off > a.off ? b : a));
    const x = d3.scaleLinear().domain([0, 1]).range([M.l, W - M.r]);
    const y = d3.scaleLinear().domain([Math.min(0, d3.min(pts, (p) => p.share) ?? 0), 1]).nice().range([H - M.b, M.t]);
    const svg = d3.create('svg').attr('width', W).attr('height', H).attr('viewBox', `0 0 ${W} ${H}`).attr('role', 'img')
      .attr('aria-label', 'Each head: its strongest probe score (x) against its ablation effect as a share of the largest (y)')
      .attr('font-family', 'system-ui, sans-serif').attr('font-size', 11);
    svg.append('g').attr('class', 'x-axis').attr('transform', `translate(0,${H - M.b})`).call(d3.axisBottom(x).ticks(5));
    svg.append('g').attr('class', 'y-axis').attr('transform', `translate(${M.l},0)`).call(d3.axisLeft(y).ticks(5));
    svg.append('line').attr('class', 'diagonal').attr('x1', x(0)).attr('y1', y(0)).attr('x2', x(1)).attr('y2', y(1))
      .attr('stroke', '#bbb').attr('stroke-dasharray', '4 3');
    svg.append('text').attr('x', (M.l + W - M.r) / 2).attr('y', H - 8).attr('text-anchor', 'middle').text('what its map says: strongest probe score');
    svg.append('text').attr('transform', `translate(12,${(M.t + H - M.b) / 2}) rotate(-90)`).attr('text-anchor', 'middle').text('what removing it does: Δ loss ÷ largest |Δ loss|');
    const g = svg.append('g').attr('class', 'points');
    for (const p of pts) {
      const pg = g.append('g').attr('class', 'point').attr('data-layer', p.layer).attr('data-head', p.head)
        .attr('transform', `translate(${x(p.label.score)},${y(p.share)})`).style('cursor', 'pointer')
        .on('click', () => this.host.select(p.layer, p.head));
      pg.append('circle').attr('r', 5).attr('fill', p === far ? '#d9480f' : '#3b6fb6').attr('fill-opacity', 0.8);
      pg.append('text').attr('x', 7).attr('y', 4).attr('fill', '#333').text(`${p.layer}.${p.head}`);
      pg.append('title').text(`layer ${p.layer} head ${p.head}: ${labelText(p.label)}; removing it: ${p.effect >= 0 ? '+' : '−'}${Math.abs(p.effect).toFixed(4)} ${unit} (${p.share < 0 ? '−' : ''}${Math.abs(Math.round(100 * p.share))} % of the largest change)`);
    }
    const note = document.createElement('p');
    note.className = 'small muted';
    note.textContent = 'Each point is a head ("layer.head"); near the dashed diagonal, the map and the effect agree. Click a point to see the head.';
    box.replaceChildren(svg.node()!, note);
    const says = far.effect < 0 ? 'removing it helps the prediction, whatever its map shows'
      : far.label.score > far.share ? 'its map looks like it matters more than removing it shows' : 'removing it matters more than its map suggests';
    const pct = Math.round(100 * far.share);
    warn.replaceChildren(`The probes' warning: layer ${far.layer} head ${far.head} (${labelText(far.label)}) changes the loss by ` +
      `${far.effect >= 0 ? '+' : '−'}${Math.abs(far.effect).toFixed(4)} ${unit} when removed, ${pct < 0 ? '−' : ''}${Math.abs(pct)} % of the largest change: ${says}. ` +
      'It is the point farthest from the diagonal. ');
    const show = document.createElement('button');
    show.type = 'button'; show.textContent = 'Show this head';
    show.addEventListener('click', () => this.host.select(far.layer, far.head));
    warn.append(show);
  }

  /** The probe label beside each chip (head view) and thumbnail (model view) of the shown layer. */
  decorate(chips: HTMLElement, grid: HTMLElement, layer: number, show: boolean): void {
    const t = show ? this.labels() : null;
    const put = (el: Element, l: ProbeLabel | undefined) => {
      let s = el.querySelector<HTMLElement>('.probe');
      if (!s) { s = document.createElement('span'); s.className = 'badge probe'; el.append(s); }
      s.textContent = l ? labelText(l) : '';
      s.hidden = !l;
    };
    chips.querySelectorAll<HTMLElement>('.chip').forEach((b) => put(b, t?.[layer]?.[Number(b.dataset.head)]));
    grid.querySelectorAll<HTMLElement>('button.thumb').forEach((b) => put(b, t?.[Number(b.dataset.layer)]?.[Number(b.dataset.head)]));
  }
}
