// The model page's tools for testing what a map suggests, joined in one place so that the page
// (model-page.ts) only asks: what the views show (raw, rollout or flow; before or after a test),
// whether a click in the model view removes a head, and to draw the panels and the URL after
// each render. The parts: test-head.ts (remove heads / block cells, before and after),
// effect-scatter.ts (find heads: probe labels, map vs effect), map-mode.ts (raw / rollout /
// flow), url-state.ts (the view in the URL).
import type { DemoModel } from './api';
import type { AttnData } from './contract';
import { stoppedBy, type ForwardProgress } from './forward-progress';
import { FLOW_MAX, MAP_NOTE, MapCache, flow, type MapMode, type Mapped } from './map-mode';
import type { HeadStats } from './patterns';
import type { Selected } from './modelview';
import { HeadFinder } from './effect-scatter';
import { HeadTest } from './test-head';
import { writeState, type ViewState } from './url-state';
import { $, message } from './ui';

export interface ToolsHost {
  model(): DemoModel | null;
  data(): AttnData | null;
  stats(): HeadStats[][];
  busy(): boolean;
  forward: ForwardProgress;
  render(): void;
  /** show head (layer, head) in the model view */
  select(layer: number, head: number): void;
}

/** The prompt as typed (a click right after typing probes what was typed), else the shown text. */
function promptIds(host: ToolsHost): number[] | null {
  const m = host.model();
  try {
    return m ? m.tokenizer.encode($<HTMLTextAreaElement>('#prompt').value).slice(-m.dims.positions) : null;
  } catch {
    return host.data()?.ids ?? null;
  }
}

export class ExplorerTools {
  mode: MapMode = 'raw';
  /** true while a link's view waits for its model (the URL keeps the link's state meanwhile) */
  holdUrl = false;
  readonly test: HeadTest;
  readonly finder: HeadFinder;
  private maps = new MapCache();
  private flowFor: AttnData | null = null;

  constructor(private host: ToolsHost) {
    const changed = () => host.render();
    this.test = new HeadTest({ model: host.model, data: host.data, busy: host.busy, forward: host.forward, changed });
    this.finder = new HeadFinder({
      model: host.model, ids: () => promptIds(host), busy: host.busy, forward: host.forward, changed, select: host.select,
    });
    const sel = $<HTMLSelectElement>('#map');
    sel.addEventListener('change', () => { this.mode = sel.value as MapMode; host.render(); });
  }

  /** A new model: nothing removed, raw maps kept as chosen. */
  reset(): void { this.test.clear(); }

  /** The maps rollout / flow fuse the heads: one map per layer. */
  get fused(): boolean { return this.mode !== 'raw' && !!this.mapped(); }

  /** The data before the word toggle: the maps after the test when asked, then rollout / flow. */
  shown(): Mapped | null {
    const d = this.host.data();
    if (!d) return null;
    const r = this.test.mapsAfter ? this.test.current() : null;
    const base: Mapped = r ? { data: r.afterData, stats: r.afterStats } : { data: d, stats: this.host.stats() };
    return this.mapped(base.data) ?? base;
  }

  private mapped(d = this.base()): Mapped | undefined {
    if (!d || this.mode === 'raw') return undefined;
    if (this.mode === 'flow' && d.tokens.length > FLOW_MAX) return undefined;
    const m = this.maps.get(d, this.mode);
    if (!m && this.mode === 'flow') this.startFlow(d);
    return m;
  }

  private base(): AttnData | null {
    const r = this.test.mapsAfter ? this.test.current() : null;
    return r?.afterData ?? this.host.data();
  }

  /** Flow of `d`, every layer, with the bar and Cancel; the page draws it when done. */
  private startFlow(d: AttnData): void {
    if (this.flowFor === d || this.host.forward.busy) return;
    this.flowFor = d;
    const L = d.tokens.length, msg = $('#gen-msg');
    this.host.forward.run('Flow', L * d.nLayer, (p) => flow(d, p.signal!, (a, b) => p.onProgress?.(a, b)), 'rows').then((m) => {
      this.maps.set(d, 'flow', m);
      this.flowFor = null;
      this.host.render();
    }, (e: unknown) => {
      const stopped = stoppedBy(e);
      if (stopped === 'cancelled') { this.mode = 'raw'; message(msg, 'Cancelled: the flow was not computed; the maps are raw attention.', 'info'); }
      else if (!stopped) message(msg, `The flow failed: ${(e as Error).message}`, 'error');
      this.flowFor = null;
      this.host.render();
    });
  }

  /** A click on a head in the model view: removes it when "clicks remove" is on (true: handled). */
  headClick(s: Selected): boolean {
    if (!this.test.removeMode || this.fused || this.test.mapsAfter) return false;
    this.test.toggleHead(s.layer, s.head);
    return true;
  }

  /** The enlarged heat map's cells: clickable (blocking) in remove mode, on raw token maps. */
  cells(words: boolean): { click: (s: Selected, q: number, k: number) => void; marked: (s: Selected, q: number, k: number) => boolean } | null {
    if (words || this.fused || this.test.mapsAfter) return null;
    return {
      click: (s, q, k) => { if (this.test.removeMode) this.test.toggleCell({ layer: s.layer, head: s.head, q, k }); },
      marked: (s, q, k) => this.test.isBlocked(s.layer, s.head, q, k),
    };
  }

  /** After the page's render: the map toggle and its note, the panels, the labels, the URL. */
  afterRender(layer: number, view: ViewState, tokenText: (id: number) => string): void {
    const d = this.host.data(), sel = $<HTMLSelectElement>('#map');
    const flowOpt = sel.querySelector<HTMLOptionElement>('option[value=flow]')!;
    const long = !!d && d.tokens.length > FLOW_MAX;
    flowOpt.disabled = long;
    flowOpt.textContent = long ? `flow (up to ${FLOW_MAX} tokens)` : 'flow';
    sel.value = this.mode;
    const note = $('#map-note'), pending = this.mode !== 'raw' && !this.fused;
    note.hidden = this.mode === 'raw';
    note.textContent = pending
      ? (long && this.mode === 'flow' ? `Flow is computed for at most ${FLOW_MAX} tokens; these are raw maps.` : 'Computing the flow… (raw maps until it is done)')
      : MAP_NOTE[this.mode];
    $('#chips').hidden ||= this.fused;
    this.test.render(tokenText);
    this.test.sync();
    this.finder.render();
    this.finder.decorate($('#chips'), $('#thumbs'), layer, !this.fused && !this.test.mapsAfter);
    this.test.mark($('#thumbs'), !this.fused);
    if (!this.holdUrl) writeState({
      ...view, map: this.mode,
      remove: [...this.test.removed].map((k) => k.split('.').map(Number) as [number, number]),
      block: this.test.blocked,
    });
  }

  /** The URL's test and map (after the model has run on the prompt). */
  restore(s: ViewState): void {
    if (s.map) this.mode = s.map;
    const dims = this.host.model()?.dims, L = this.host.data()?.tokens.length ?? 0;
    if (!dims) return;
    const ok = (l: number, h: number) => l < dims.layers && h < dims.heads;
    for (const [l, h] of s.remove ?? []) if (ok(l, h)) this.test.removed.add(`${l}.${h}`);
    this.test.blocked = (s.block ?? []).filter((b) => ok(b.layer, b.head) && b.q < L && b.k <= b.q);
  }
}
