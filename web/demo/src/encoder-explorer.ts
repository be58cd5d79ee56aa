// The model page's tools on the encoders page's fill-mask panel, the same modules: test a head
// (test-head.ts, read at the [MASK]: mask-readout.ts), find heads (effect-scatter.ts, with the
// masked-LM ablation effect), the model view (modelview.ts: click a head to remove it, a cell
// of its enlarged map to block it), raw / rollout / flow (map-mode.ts; flow up to FLOW_MAX
// tokens, with the bar and Cancel) and the view in the URL
// (url-state.ts, with the model page's format). The page (encoders.ts) hands it the sentence's
// raw maps and draws what `shown` gives.
import type { qkv } from './api';
import type { AttnData } from './contract';
import { ForwardProgress, stoppedBy } from './forward-progress';
import { FLOW_MAX, MAP_NOTE, MapCache, flow, type MapMode } from './map-mode';
import { HeadFinder } from './effect-scatter';
import { HeadTest } from './test-head';
import { maskReadout } from './mask-readout';
import { MASK_PANEL } from './test-panel';
import { MASK_PROBES } from './probe-panel';
import { toolsModel } from './encoder-model';
import { ModelView, type Selected } from './modelview';
import { allHeadStats, type HeadStats } from './patterns';
import { writeState, type ViewState } from './url-state';
import { $, message } from './ui';

export const ENCODER_NAME = 'tiny-bert-kjv';
const PAIR_NOTE = 'The test reads the fill-mask sentence\'s [MASK]: turn the sentence pair off to run it.';

export interface EncoderHost {
  model(): qkv.EncoderModel | null;
  /** the sentence's raw maps (null in pair mode: the tools run on the fill-mask sentence) */
  data(): AttnData | null;
  /** draw the views again */
  draw(): void;
}

export class EncoderExplorer {
  sel: Selected = { layer: 0, head: 0 };
  readonly forward = new ForwardProgress();
  readonly test: HeadTest;
  readonly finder: HeadFinder;
  readonly modelView: ModelView;
  private tools: ReturnType<typeof toolsModel> | null = null;
  private of: qkv.EncoderModel | null = null;
  private stats = new WeakMap<AttnData, HeadStats[][]>();
  private maps = new MapCache();
  private flowFor: AttnData | null = null;
  /** the views show a fused map (rollout, or a finished flow) */
  private fusedNow = false;

  constructor(private host: EncoderHost) {
    const model = () => this.toolsOf(host.model());
    const changed = () => host.draw();
    const busy = () => false;
    this.test = new HeadTest({ model, data: host.data, busy, forward: this.forward, changed, readout: maskReadout(host.model), panel: MASK_PANEL });
    this.finder = new HeadFinder({
      model, ids: () => host.data()?.ids ?? null, busy, forward: this.forward, changed,
      select: (layer, head) => this.select(layer, head), said: (r) => said(r, host.model()), unit: 'nats per masked token', panel: MASK_PROBES,
    });
    this.modelView = new ModelView($('#thumbs'), $('#heatmap'), (s) => {
      if (this.test.removeMode && !this.test.mapsAfter && !this.fused) this.test.toggleHead(s.layer, s.head);
      else this.select(s.layer, s.head);
    });
    $('#mask-target').addEventListener('input', () => this.test.schedule());
  }

  /** One adapter per loaded encoder (HeadTest keys its "before" run on the model object). */
  private toolsOf(m: qkv.EncoderModel | null): ReturnType<typeof toolsModel> | null {
    if (m !== this.of) { this.of = m; this.tools = m ? toolsModel(m) : null; }
    return this.tools;
  }

  get view(): 'head' | 'model' { return $<HTMLSelectElement>('#enc-view').value === 'model' ? 'model' : 'head'; }
  get mode(): MapMode { const v = $<HTMLSelectElement>('#enc-map').value; return v === 'rollout' || v === 'flow' ? v : 'raw'; }
  get fused(): boolean { return this.fusedNow; }

  /** What the views draw: `d` (raw or after the test) or its rollout / flow, and the note under the toggle. */
  mapped(d: AttnData): { data: AttnData; note: string } {
    const mode = this.mode, long = d.tokens.length > FLOW_MAX;
    const opt = $<HTMLSelectElement>('#enc-map').querySelector<HTMLOptionElement>('option[value=flow]')!;
    opt.disabled = long;
    opt.textContent = long ? `flow (up to ${FLOW_MAX} tokens)` : 'flow';
    const m = mode === 'flow' && long ? undefined : this.maps.get(d, mode);
    if (!m && mode === 'flow' && !long) this.startFlow(d);
    this.fusedNow = !!m;
    const note = mode === 'raw' ? '' : m ? MAP_NOTE[mode]
      : long ? `Flow is computed for at most ${FLOW_MAX} tokens; these are raw maps.` : 'Computing the flow… (raw maps until it is done)';
    return { data: m?.data ?? d, note };
  }

  /** Flow of `d`, every layer, with the bar and Cancel; the page draws it when done. */
  private startFlow(d: AttnData): void {
    if (this.flowFor === d || this.forward.busy) return;
    this.flowFor = d;
    const L = d.tokens.length, msg = $('#mask-msg');
    this.forward.run('Flow', L * d.nLayer, (p) => flow(d, p.signal!, (a, b) => p.onProgress?.(a, b)), 'rows').then((m) => {
      this.maps.set(d, 'flow', m);
      this.flowFor = null;
      this.host.draw();
    }, (e: unknown) => {
      const stopped = stoppedBy(e);
      if (stopped === 'cancelled') {
        $<HTMLSelectElement>('#enc-map').value = 'raw';
        message(msg, 'Cancelled: the flow was not computed; the maps are raw attention.', 'info');
      } else if (!stopped) message(msg, `The flow failed: ${(e as Error).message}`, 'error');
      this.flowFor = null;
      this.host.draw();
    });
  }

  select(layer: number, head: number): void {
    this.sel = { layer, head };
    $<HTMLSelectElement>('#enc-view').value = 'model';
    $<HTMLSelectElement>('#enc-layer').value = String(layer);
    this.host.draw();
  }

  /** The raw maps to draw: the sentence's, or those after the test when "show the maps after" is on. */
  base(raw: AttnData): AttnData {
    const r = this.test.mapsAfter ? this.test.current() : null;
    return r?.afterData ?? raw;
  }

  private statsOf(d: AttnData): HeadStats[][] {
    let s = this.stats.get(d);
    if (!s) this.stats.set(d, (s = allHeadStats(d)));
    return s;
  }

  /** The model view of `shown` (raw, after, or rollout's one map per layer), cells clickable on raw maps. */
  renderModelView(shown: AttnData): void {
    const plain = !this.fused && !this.test.mapsAfter;
    const sel = { layer: Math.min(this.sel.layer, shown.nLayer - 1), head: Math.min(this.sel.head, shown.nHead - 1) };
    this.modelView.cells = plain ? {
      click: (s, q, k) => { if (this.test.removeMode) this.test.toggleCell({ layer: s.layer, head: s.head, q, k }); },
      marked: (s, q, k) => this.test.isBlocked(s.layer, s.head, q, k),
    } : null;
    this.modelView.render(shown, this.statsOf(shown), sel);
  }

  /** After the page drew: the panels, the probe labels, the removed heads' marks, the URL. */
  afterDraw(view: ViewState): void {
    const plain = !this.fused && !this.test.mapsAfter;
    this.test.render((id) => this.host.model()?.tokenizer.tokenText(id) ?? String(id));
    // pair mode: no test (said while it lasts)
    const msg = $('#test-msg');
    if (!this.host.data() && this.test.active) message(msg, PAIR_NOTE, 'info');
    else if (msg.textContent === PAIR_NOTE) message(msg, '');
    this.test.sync();
    this.finder.render();
    this.finder.decorate($('#thumbs'), $('#thumbs'), this.sel.layer, plain);
    this.test.mark($('#thumbs'), !this.fused);
    writeState({
      ...view, model: ENCODER_NAME, tab: this.view, head: this.sel.head, map: this.mode,
      remove: [...this.test.removed].map((k) => k.split('.').map(Number) as [number, number]),
      block: this.test.blocked, target: $<HTMLInputElement>('#mask-target').value,
    });
  }

  /** A link's test and view (after the sentence has run): only heads and cells the model has. */
  restore(s: ViewState): void {
    const m = this.host.model(), L = this.host.data()?.tokens.length ?? 0;
    if (!m) return;
    const ok = (l: number, h: number) => l < m.layers && h < m.heads;
    if (s.head !== undefined && s.head < m.heads) this.sel = { layer: this.sel.layer, head: s.head };
    for (const [l, h] of s.remove ?? []) if (ok(l, h)) this.test.removed.add(`${l}.${h}`);
    // bidirectional: any key of the sentence
    this.test.blocked = (s.block ?? []).filter((b) => ok(b.layer, b.head) && b.q < L && b.k < L);
    if (this.test.active) this.test.schedule();
  }
}

/** The finder's message: what the effect was measured on. */
function said(r: qkv.HeadProbeResult, m: qkv.EncoderModel | null): string {
  const masked = (r.ablationTargets[0] ?? []).map(([, id]) => `“${m?.tokenizer.token(id) ?? id}”`).join(', ');
  return `Probed on the sentence (${r.ids[0].length} tokens); induction on 2 random sequences repeated twice. ` +
    `Ablation: the masked-token loss of ${masked || 'no token'} (masked BERT-style from seed 0), with every head ` +
    `${r.baseLoss?.toFixed(3) ?? '–'} nats per masked token.`;
}
