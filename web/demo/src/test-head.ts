// Test a head: remove heads (qkv's headMask, 0 = removed) or block query -> key cells (qkv's
// knockout: the score is -inf before the softmax, the row renormalises), run the prompt again
// and show the next-token distribution before and after: each run's top-k with probabilities,
// KL(before || after) and the prompt's mean next-token loss (qkv's nextTokenLoss), and, on
// request, the maps after. Both runs go through the page's ForwardProgress (bar, Cancel).
// The heads are chosen by clicking them in the model view with "clicks remove" on; cells by
// clicking them in the enlarged heat map (up to 64 tokens, tokens not words, raw maps).
// Where the distribution is read and which loss is printed is the page's Readout: the model
// page's next token (NEXT_TOKEN), the encoders page's [MASK] (./mask-readout.ts). The panel's
// markup is built here from ./test-panel.ts (one copy for both pages), in the page's words.
import { qkv, type DemoModel, type Interventions } from './api';
import type { AttnData } from './contract';
import { allHeadStats, type HeadStats } from './patterns';
import { stoppedBy, type ForwardProgress } from './forward-progress';
import { NEXT_TOKEN_PANEL, buildTestPanel, type TestPanelWords } from './test-panel';
import { $, message, showToken } from './ui';

export interface Block { layer: number; head: number; q: number; k: number }
const TOP = 5;

/** softmax of logits[o .. o + V) in float64 */
function softmax(x: Float32Array, o: number, V: number): Float64Array {
  let m = -Infinity;
  for (let v = 0; v < V; v++) m = Math.max(m, x[o + v]);
  const p = new Float64Array(V);
  let s = 0;
  for (let v = 0; v < V; v++) s += (p[v] = Math.exp(x[o + v] - m));
  for (let v = 0; v < V; v++) p[v] /= s;
  return p;
}

/** KL(p || q) in nats (q = 0 where p > 0 cannot happen after a softmax of finite logits). */
export function kl(p: Float64Array, q: Float64Array): number {
  let s = 0;
  for (let v = 0; v < p.length; v++) if (p[v] > 0) s += p[v] * Math.log(p[v] / q[v]);
  return s;
}

const topK = (p: Float64Array, k: number) => Array.from(p.keys()).sort((a, b) => p[b] - p[a]).slice(0, k);

interface Run { logits: Float32Array; attn: Float32Array[][][] }

/** What the test needs of a model: its shape and a forward with interventions (DemoModel has both). */
export type TestModel = Pick<DemoModel, 'dims' | 'intervene'>;

/** Where the test compares the two distributions, and the loss it prints. */
export interface Readout {
  /** the table's caption, e.g. "Next token, top 5" */
  caption: string;
  /** the position whose distribution is compared, or a sentence saying why there is none */
  at(ids: readonly number[]): number | string;
  /** the loss of one run (logits [L * V]), or null where none is defined */
  loss(logits: Float32Array, ids: readonly number[], V: number): number | null;
  /** the summary's words for that loss ("the prompt's loss", "nats per token"), or why there is none */
  lossName(): { name: string; unit: string } | string;
  /** what else the loss depends on (a target word): part of the test's key */
  key?(): string;
}

/** The model page's: the next token after the prompt, and the prompt's mean next-token loss. */
export const NEXT_TOKEN: Readout = {
  caption: 'Next token, top 5',
  at: (ids) => ids.length - 1,
  loss: (logits, ids, V) => (ids.length < 2 ? null : qkv.nextTokenLoss(new qkv.Tensor(logits, [1, ids.length, V]), ids)),
  lossName: () => ({ name: 'the prompt\'s loss', unit: 'nats per token' }),
};
export interface TestResult {
  /** the ids and interventions it ran on (stale when either changed) */
  key: string;
  before: Float64Array; after: Float64Array;
  lossBefore: number | null; lossAfter: number | null;
  /** the loss's words, as when it ran */
  lossName: { name: string; unit: string } | string;
  kl: number;
  afterData: AttnData; afterStats: HeadStats[][];
}

export interface TestHost {
  model(): TestModel | null;
  /** the shown text's token data (null before the first run) */
  data(): AttnData | null;
  /** generating: no test runs meanwhile */
  busy(): boolean;
  forward: ForwardProgress;
  /** the result or the choice changed: draw again */
  changed(): void;
  /** default NEXT_TOKEN */
  readout?: Readout;
  /** the panel's words (built in place of #test-panel), default NEXT_TOKEN_PANEL */
  panel?: TestPanelWords;
}

export class HeadTest {
  removed = new Set<string>();
  blocked: Block[] = [];
  result: TestResult | null = null;
  private base: { model: TestModel; key: string; run: Run } | null = null;
  private timer = 0;
  /** the key last run (or tried): a failed or cancelled test is not started again by itself */
  private tried = '';

  constructor(private host: TestHost) {
    buildTestPanel($('#test-panel'), host.panel ?? NEXT_TOKEN_PANEL);
    $('#test-clear').addEventListener('click', () => { this.clear(); this.host.changed(); });
    $('#test-run').addEventListener('click', () => void this.run());
    $('#maps-after').addEventListener('change', () => this.host.changed());
  }

  get removeMode(): boolean { return $<HTMLInputElement>('#remove-mode').checked; }
  get mapsAfter(): boolean { return $<HTMLInputElement>('#maps-after').checked && !!this.current(); }
  get active(): boolean { return this.removed.size > 0 || this.blocked.length > 0; }

  /** Nothing removed or blocked, no result (a choice made again runs again). */
  clear(): void { this.removed.clear(); this.blocked = []; this.result = null; this.tried = ''; }

  toggleHead(layer: number, head: number): void {
    const k = `${layer}.${head}`;
    if (!this.removed.delete(k)) this.removed.add(k);
    this.schedule();
  }

  toggleCell(b: Block): void {
    const n = this.blocked.length;
    this.blocked = this.blocked.filter((x) => !(x.layer === b.layer && x.head === b.head && x.q === b.q && x.k === b.k));
    if (this.blocked.length === n) this.blocked.push(b);
    this.schedule();
  }

  isBlocked(layer: number, head: number, q: number, k: number): boolean {
    return this.blocked.some((x) => x.layer === layer && x.head === head && x.q === q && x.k === k);
  }

  /** qkv's forward options for the chosen heads and cells. */
  interventions(nLayer: number, nHead: number): Interventions {
    const iv: Interventions = {};
    if (this.removed.size) iv.headMask = Array.from({ length: nLayer }, (_l, l) => Array.from({ length: nHead }, (_h, h) => (this.removed.has(`${l}.${h}`) ? 0 : 1)));
    if (this.blocked.length) iv.knockout = this.blocked.map((b) => ({ layer: b.layer, heads: [b.head], block: [[b.q, b.k]] }));
    return iv;
  }

  /** "layer 1 head 2; layer 0 head 3 query 5 → key 0", sorted. */
  describe(): string {
    const heads = [...this.removed].map((k) => k.split('.').map(Number)).sort((a, b) => a[0] - b[0] || a[1] - b[1]).map(([l, h]) => `layer ${l} head ${h}`);
    const cells = this.blocked.map((b) => `layer ${b.layer} head ${b.head}: query ${b.q} → key ${b.k}`);
    return [heads.length ? `Removed: ${heads.join(', ')}.` : '', cells.length ? `Blocked: ${cells.join('; ')}.` : ''].filter(Boolean).join(' ');
  }

  private get readout(): Readout { return this.host.readout ?? NEXT_TOKEN; }

  private key(d: AttnData): string { return `${d.ids.join(',')}|${this.readout.key?.() ?? ''}|${[...this.removed].sort().join(',')}|${this.blocked.map((b) => `${b.layer}.${b.head}:${b.q}>${b.k}`).join(',')}`; }

  /** The result, when it is of the text shown and of the current choice. */
  current(): TestResult | null {
    const d = this.host.data();
    return d && this.result && this.result.key === this.key(d) ? this.result : null;
  }

  /** Runs the test soon (a burst of clicks runs it once). */
  schedule(): void {
    clearTimeout(this.timer);
    this.timer = window.setTimeout(() => void this.run(), 120);
    this.host.changed();
  }

  /** A new text is shown: the test runs again on it when something is removed. */
  sync(): void {
    const d = this.host.data();
    if (d && this.active && this.tried !== this.key(d) && !this.timer && !this.host.busy() && !this.host.forward.busy) this.schedule();
  }

  async run(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = 0;
    const m = this.host.model(), d = this.host.data(), msg = $('#test-msg');
    if (!m || !d || this.host.busy()) return;
    if (!this.active) { this.result = null; this.host.changed(); return; }
    const ids = d.ids.slice(), key = this.key(d), iv = this.interventions(m.dims.layers, m.dims.heads);
    const baseKey = ids.join(','), at = this.readout.at(ids);
    this.tried = key;
    if (typeof at === 'string') { this.result = null; document.body.dataset.test = 'no-position'; message(msg, at, 'info'); this.host.changed(); return; }
    document.body.dataset.test = 'running';
    try {
      if (this.base?.key !== baseKey || this.base.model !== m) {
        const run = await this.host.forward.run('Before', ids.length, (p) => m.intervene(ids, {}, p));
        this.base = { model: m, key: baseKey, run };
      }
      const before = this.base.run;
      const after = await this.host.forward.run('After', ids.length, (p) => m.intervene(ids, iv, p));
      if (m !== this.host.model()) return;
      const V = m.dims.vocab, ro = this.readout;
      const loss = (r: Run) => ro.loss(r.logits, ids, V);
      const pb = softmax(before.logits, at * V, V), pa = softmax(after.logits, at * V, V);
      const afterData: AttnData = { ...d, attn: after.attn, q: undefined, k: undefined };
      this.result = {
        key, before: pb, after: pa, lossBefore: loss(before), lossAfter: loss(after), lossName: ro.lossName(), kl: kl(pb, pa), afterData, afterStats: allHeadStats(afterData),
      };
      message(msg, '');
      document.body.dataset.test = 'done';
    } catch (e) {
      const stopped = stoppedBy(e);
      document.body.dataset.test = stopped ?? 'failed';
      if (stopped === 'cancelled') message(msg, 'Cancelled: the test did not run. "Run the test" runs it.', 'info');
      else if (!stopped) message(msg, `The test failed: ${(e as Error).message}`, 'error');
      else this.tried = ''; // replaced by a newer pass: runs again when the page is idle (sync)
    }
    this.host.changed();
  }

  /** The panel: what is removed, and the result (before / after top-k, KL, loss). */
  render(tokenText: (id: number) => string): void {
    $('#test-what').textContent = this.describe() || 'Nothing removed or blocked yet.';
    $<HTMLButtonElement>('#test-run').disabled = !this.active;
    $<HTMLButtonElement>('#test-clear').disabled = !this.active;
    const box = $('#test-result'), r = this.current();
    box.hidden = !r;
    if (!r) { box.replaceChildren(); return; }
    const fmtLoss = (x: number | null) => (x === null ? '–' : x.toFixed(3));
    const dl = r.lossBefore !== null && r.lossAfter !== null ? ` (${r.lossAfter - r.lossBefore >= 0 ? '+' : '−'}${Math.abs(r.lossAfter - r.lossBefore).toFixed(3)})` : '';
    const table = document.createElement('table');
    table.className = 'test-table';
    table.innerHTML = `<caption>${this.readout.caption}</caption><thead><tr><th>#</th><th>before</th><th class="num">p</th><th>after</th><th class="num">p</th></tr></thead>`;
    const body = document.createElement('tbody');
    const tb = topK(r.before, TOP), ta = topK(r.after, TOP);
    for (let i = 0; i < TOP; i++) {
      const tr = document.createElement('tr');
      for (const [text, cls] of [[String(i + 1), ''], [showToken(tokenText(tb[i])), 'mono'], [r.before[tb[i]].toFixed(3), 'num'],
        [showToken(tokenText(ta[i])), 'mono'], [r.after[ta[i]].toFixed(3), 'num']]) {
        const td = document.createElement('td');
        td.textContent = text; td.className = cls;
        tr.append(td);
      }
      body.append(tr);
    }
    table.append(body);
    const line = document.createElement('p');
    line.className = 'small test-summary';
    const ln = r.lossName;
    line.textContent = `KL(before ‖ after) = ${r.kl.toFixed(4)} nats · ` +
      (typeof ln === 'string' ? ln : `${ln.name} ${fmtLoss(r.lossBefore)} → ${fmtLoss(r.lossAfter)} ${ln.unit}${dl}`);
    box.replaceChildren(table, line);
  }

  /** Marks the removed heads on the model view's thumbnails (none when they show fused maps). */
  mark(grid: HTMLElement, heads: boolean): void {
    grid.querySelectorAll<HTMLElement>('button.thumb').forEach((b) => {
      const on = heads && this.removed.has(`${b.dataset.layer}.${b.dataset.head}`);
      b.classList.toggle('removed', on);
      b.dataset.removed = String(on);
      // said to a screen reader and on hover too (the model view rewrites both on each render)
      const label = (b.getAttribute('aria-label') ?? '').replace(/; removed by the test$/, '');
      b.setAttribute('aria-label', on ? `${label}; removed by the test` : label);
      b.title = b.title.replace(/ \(removed by the test\)$/, '') + (on ? ' (removed by the test)' : '');
    });
  }
}
