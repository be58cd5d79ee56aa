// The guided example ("Show me an induction head"): one click loads tiny-kjv-induction, types
// a repeated random sequence of words as the prompt, runs it, and walks through four numbered
// steps, each with a short text saying what to look at, its figures computed live with qkv
// (guide-figures.ts) and printed, and a button that shows the matching view: the lens, the
// attribution, the patching sweep, and the head removed by Test a head. The head named is the
// one the figures pick; where the measures pick different heads the panel says so.
// The page gives it a GuideHost: its model, loading a model and typing a prompt the way a user
// does (the model select, the prompt box), and show(state), which applies a view's URL fields
// (the panels' restore, Test a head's `remove`). The step shown is the URL's `guide` field.
import type { DemoModel } from './api';
import type { ForwardProgress } from './forward-progress';
import { GUIDE_MODEL, drawSequence, guideFigures, headName, type GuideFigures, type GuideSequence, type HeadRef } from './guide-figures';
import type { ViewState } from './url-state';
import { $, el, message, progress, showToken } from './ui';

/** What the guide needs of the page. */
export interface GuideHost {
  /** the loaded model (null while none is) */
  model(): DemoModel | null;
  /** loads a site model by folder name, as the model select (and the URL's model=) does */
  loadModel(name: string): Promise<void>;
  /** puts `text` in the prompt box and runs it (the explorer shows it) */
  setPrompt(text: string): Promise<void>;
  /** applies a view's URL fields: the panels' restore, Test a head's `remove` (absent: nothing removed) */
  show(state: ViewState): Promise<void>;
  /** shows head (layer, head) in the explorer's model view */
  select(layer: number, head: number): void;
  /** the page is generating (the guide waits for it to end: both use the model's KV cache) */
  busy(): boolean;
  /** the page's forward pass (its Cancel stops the prompt's pass while the guide types it) */
  forward: ForwardProgress;
}

/** The steps: a title, what to look at, and the button's words. */
const STEPS = [
  { title: 'The lens', say: 'The logit lens reads the stream after each layer as if it were the last. Look at the second copy: how likely is the repeated word after each layer?', button: 'Show the lens' },
  { title: 'The attribution', say: 'Which head writes the answer? Direct logit attribution splits the last position\'s logit of the correct word into what each part of the stream adds.', button: 'Show the attribution' },
  { title: 'The patching sweep', say: 'Corrupt the first copy (other words, same length): nothing then says what comes next. Put each head\'s clean output into the corrupted run: 1 restores the clean answer, 0 changes nothing.', button: 'Show the sweep' },
  { title: 'Removing it', say: 'Test a head removes the head (its output set to 0) and runs the prompt again: the second copy without it.', button: 'Remove it in Test a head' },
];

const signed = (x: number, d: number) => `${x >= 0 ? '+' : '−'}${Math.abs(x).toFixed(d)}`;
const ordinal = (n: number) => `${n}${n % 10 === 1 && n % 100 !== 11 ? 'st' : n % 10 === 2 && n % 100 !== 12 ? 'nd' : n % 10 === 3 && n % 100 !== 13 ? 'rd' : 'th'}`;
const rowLabel = (r: number, L: number) => (r === 0 ? 'the embeddings' : `after layer ${r - 1}${r === L ? ' (the output)' : ''}`);

export class GuidePanel {
  /** the step shown (0: none) */
  private step = 0;
  /** the step a URL asked for, while its walk runs (the URL keeps it meanwhile) */
  private pending = 0;
  private seq: GuideSequence | null = null;
  private figures: GuideFigures | null = null;
  /** the model the figures are of */
  private of: DemoModel | null = null;
  private abort: AbortController | null = null;
  /** the guide is loading its model (setModel then is its own doing) */
  private loading = false;
  /** the walk is typing its prompt (Cancel then stops the page's pass too) */
  private typing = false;
  private readonly root: HTMLElement;

  constructor(private host: GuideHost) {
    const slot = $('#guide-panel');
    this.root = el('section', { class: 'tool guide', id: 'guide-panel', 'aria-labelledby': 'guide-h' },
      el('h3', { id: 'guide-h' }, 'A guided example: an induction head'),
      el('p', { class: 'small muted' }, 'An induction head copies: after "… A B … A" it predicts "B". One click loads ' +
        `${GUIDE_MODEL}, types a random sequence of words twice (the second copy one word short) and follows the ` +
        'prediction of the repeated words through four measures, each computed here with qkv.'),
      el('div', { class: 'controls' },
        el('button', { id: 'guide-run', type: 'button' }, 'Show me an induction head'),
        el('span', { id: 'guide-progress', class: 'guide-progress', hidden: true },
          el('progress', { id: 'guide-bar', max: '1' }), ' ', el('span', { id: 'guide-text', class: 'small' }), ' ',
          el('button', { id: 'guide-cancel', type: 'button' }, 'Cancel'))),
      el('div', { id: 'guide-msg', class: 'msg', hidden: true }),
      el('div', { id: 'guide-body', hidden: true },
        el('p', { class: 'small' }, 'The prompt: ', el('q', { id: 'guide-prompt', class: 'mono' })),
        el('p', { id: 'guide-verdict', class: 'small', 'aria-live': 'polite' }),
        el('ol', { id: 'guide-steps', class: 'guide-steps' })));
    slot.replaceWith(this.root);
    $('#guide-run', this.root).addEventListener('click', () => void this.run(1));
    $('#guide-cancel', this.root).addEventListener('click', () => this.cancel());
  }

  /** A model was loaded: the figures (of another model) are cleared, a walk started meanwhile is stopped. */
  setModel(model: DemoModel | null): void {
    if (this.loading) return;
    this.cancel();
    if (model !== this.of) this.clear();
  }

  /** The URL's field: the step shown, while the guide's prompt is the page's. */
  state(): { guide?: number } {
    if (this.pending) return { guide: this.pending };
    const ours = !!this.seq && $<HTMLTextAreaElement>('#prompt').value === this.seq.text && this.host.model() === this.of;
    return this.step > 0 && ours ? { guide: this.step } : {};
  }

  /** The URL's `guide=<step>`: runs the walk and shows that step. */
  async restore(s: ViewState & { guide?: number }): Promise<void> {
    if (s.guide === undefined || s.guide < 1 || s.guide > STEPS.length) return;
    this.pending = s.guide;
    await this.run(s.guide);
  }

  /** Stops a running walk (its figures are not drawn). */
  cancel(): void {
    if (!this.abort) return;
    this.abort.abort(new DOMException('The guided example was cancelled', 'AbortError'));
    if (this.typing) this.host.forward.cancel();
  }

  private clear(): void {
    this.step = 0; this.seq = null; this.figures = null; this.of = null;
    $('#guide-body', this.root).hidden = true;
    delete this.root.dataset.ids; delete this.root.dataset.step;
  }

  /** Loads the model if needed, types the prompt, computes every step's figures, then shows step `step`. */
  async run(step: number): Promise<void> {
    this.cancel();
    if (this.host.busy()) { message($('#guide-msg', this.root), 'The page is generating: Stop it (or let it end), then start the guided example.', 'info'); return; }
    const abort = (this.abort = new AbortController()), signal = abort.signal;
    const msg = $('#guide-msg', this.root), bar = $<HTMLProgressElement>('#guide-bar', this.root), text = $('#guide-text', this.root);
    const say = (f: number, what: string) => progress(bar, f, `${what}: ${Math.floor(100 * f)} %`, text);
    this.root.dataset.guide = 'running';
    $('#guide-progress', this.root).hidden = false;
    $<HTMLButtonElement>('#guide-run', this.root).disabled = true;
    message(msg, '');
    try {
      if (this.host.model()?.name !== GUIDE_MODEL) {
        say(0, `Loading ${GUIDE_MODEL}`);
        this.loading = true;
        try { await this.host.loadModel(GUIDE_MODEL); } finally { this.loading = false; }
        signal.throwIfAborted();
      }
      const m = this.host.model();
      if (!m || m.name !== GUIDE_MODEL) throw new Error(`the guide runs on ${GUIDE_MODEL}, which did not load (the message above says why)`);
      const seq = drawSequence(m.tokenizer, m.dims.vocab);
      say(0, 'Running the prompt');
      this.typing = true;
      try { await this.host.setPrompt(seq.text); } finally { this.typing = false; }
      signal.throwIfAborted();
      const figures = await guideFigures(m, seq, signal, (done, total, what) => say(done / total, `Computing ${what}`));
      if (m !== this.host.model()) return;
      this.seq = seq; this.figures = figures; this.of = m;
      this.draw(m, seq, figures);
      this.root.dataset.guide = 'done';
    } catch (e) {
      if (signal.aborted) {
        this.root.dataset.guide = 'cancelled';
        if (this.abort === abort) message(msg, 'Cancelled: the guided example stopped. "Show me an induction head" starts it again.', 'info');
      } else {
        this.root.dataset.guide = 'failed';
        message(msg, `The guided example failed: ${(e as Error).message}`, 'error');
      }
      return;
    } finally {
      if (this.abort === abort) {
        this.abort = null; this.pending = 0;
        $('#guide-progress', this.root).hidden = true;
        $<HTMLButtonElement>('#guide-run', this.root).disabled = false;
      }
    }
    await this.go(step);
  }

  /** Shows step n (1-based): its view through the host, and marks it in the list. */
  async go(n: number): Promise<void> {
    const f = this.figures, seq = this.seq;
    if (!f || !seq) return;
    this.step = n;
    this.root.dataset.step = String(n);
    this.root.querySelectorAll<HTMLElement>('#guide-steps > li').forEach((li, k) => {
      li.classList.toggle('current', k + 1 === n);
      if (k + 1 === n) li.setAttribute('aria-current', 'step'); else li.removeAttribute('aria-current');
    });
    const last = seq.ids.length - 1, attrHead = f.attribution.heads[0];
    const views: [ViewState, HeadRef][] = [
      [{ lens: true, lensPos: last }, f.patching.hottest],
      [{ attr: last, attrA: f.attribution.token }, attrHead],
      [{ clean: seq.text, corrupt: seq.corruptedText, sweep: 'heads', answer: f.patching.answer }, f.patching.hottest],
      [{ remove: [[f.removal.head.layer, f.removal.head.head]] }, f.removal.head],
    ];
    const [state, head] = views[n - 1];
    this.host.select(head.layer, head.head);
    await this.host.show(state);
  }

  /** The prompt, the verdict and the four steps with their figures. */
  private draw(m: DemoModel, seq: GuideSequence, f: GuideFigures): void {
    const tok = (id: number) => `"${showToken(m.tokenizer.tokenText(id))}"`;
    const L = m.dims.layers, H = m.dims.heads, last = seq.ids.length - 1;
    this.root.dataset.ids = seq.ids.join(',');
    this.root.dataset.corrupted = seq.corrupted.join(',');
    $('#guide-prompt', this.root).textContent = seq.text;
    const { lens, attribution: at, patching: pa, removal: rm } = f;
    const attrHead = at.heads[0], hot = pa.hottest, top = rm.rises[0];
    const same = (a: HeadRef, b: HeadRef) => a.layer === b.layer && a.head === b.head;

    // what the figures say together: the head named, and where the measures disagree
    const hotRank = at.heads.findIndex((h) => same(h, hot));
    const verdict = [same(attrHead, hot)
      ? `The attribution and the patching pick the same head: ${headName(hot)}.`
      : `The patching picks ${headName(hot)}; the attribution ranks ${headName(attrHead)} first (${signed(attrHead.value, 2)})` +
        `${hotRank > 0 ? ` and ${headName(hot)} ${ordinal(hotRank + 1)} (${signed(at.heads[hotRank].value, 2)})` : ''}: ` +
        'direct attribution counts only what a head writes straight into the logit, not what it changes through the later layers. Step 4 removes the patching\'s head.'];
    if (lens.rise - 1 !== hot.layer) verdict.push(`The lens's largest rise is in layer ${lens.rise - 1}, not in ${headName(hot)}'s layer ${hot.layer}.`);
    if (!same(top, hot)) verdict.push(`Removing ${headName(top)} raises the second copy's loss most (${signed(top.delta, 3)} nats/token), more than ${headName(hot)}.`);
    $('#guide-verdict', this.root).textContent = verdict.join(' ');

    // step 1: per read-out, the correct word's mean probability and how often it is the top token
    const lensTable = el('table', { class: 'test-table guide-lens' },
      el('caption', {}, `The correct next word on the second copy (${seq.positions.length} positions)`),
      el('thead', {}, el('tr', {}, el('th', {}, 'read'), el('th', { class: 'num' }, 'mean p'), el('th', { class: 'num' }, 'top-1'))),
      el('tbody', {}, ...lens.rows.map((r, k) => el('tr', { 'data-row': String(k) },
        el('th', {}, rowLabel(k, L)), el('td', { class: 'num' }, r.meanP.toFixed(3)), el('td', { class: 'num' }, `${r.top1} of ${seq.positions.length}`)))));
    const before = lens.rows[lens.rise - 1].meanP, after = lens.rows[lens.rise].meanP;
    const lensSay = `The largest rise is in layer ${lens.rise - 1}: ${before.toFixed(3)} → ${after.toFixed(3)}.`;

    // step 2: the head with the largest direct part
    const attrSay = `At position ${last} (${tok(seq.ids[last])}, next ${tok(at.token)}), ${headName(attrHead)} adds ${signed(attrHead.value, 2)} ` +
      `to the logit of ${tok(at.token)} (the logit: ${at.total.toFixed(2)}). Next: ${at.heads.slice(1, 3).map((h) => `${headName(h)} ${signed(h.value, 2)}`).join(', ')}.`;

    // step 3: the hottest cell, and the whole heads grid
    const grid = el('table', { class: 'test-table guide-sweep' },
      el('caption', {}, 'Patching each head (rows: layers, columns: heads)'),
      el('thead', {}, el('tr', {}, el('th', {}, 'layer'), ...Array.from({ length: H }, (_v, h) => el('th', { class: 'num' }, `H${h}`)))),
      el('tbody', {}, ...Array.from({ length: L }, (_v, l) => el('tr', {}, el('th', {}, `L${l}`),
        ...Array.from({ length: H }, (_w, h) => el('td', { class: `num${l === hot.layer && h === hot.head ? ' hot' : ''}` }, pa.values[l * H + h].toFixed(2)))))));
    const patchSay = `Hottest cell: ${headName(hot)} = ${hot.value.toFixed(2)}. The metric, logit ${tok(pa.answer[0])} − logit ${tok(pa.answer[1])}: ` +
      `clean ${pa.cleanMetric.toFixed(2)}, corrupted ${pa.corruptedMetric.toFixed(2)}. The corrupted prompt: `;

    // step 4: the loss and the last word's probability with and without the head
    const others = rm.rises.filter((r) => !same(r, rm.head));
    const removeSay = `Without ${headName(rm.head)} the second copy's loss goes from ${rm.lossWith.toFixed(3)} to ${rm.lossWithout.toFixed(3)} nats/token ` +
      `(${signed(rm.lossWithout - rm.lossWith, 3)}) and p(${tok(at.token)}) at the last position from ${rm.pWith.toFixed(3)} to ${rm.pWithout.toFixed(3)}. ` +
      `Removing any other single head: at most ${signed(others[0].delta, 3)} (${headName(others[0])}).`;

    const figures = [
      [el('p', { class: 'small guide-fig' }, lensSay), el('div', { class: 'guide-scroll' }, lensTable)],
      [el('p', { class: 'small guide-fig' }, attrSay)],
      [el('p', { class: 'small guide-fig' }, patchSay, el('q', { class: 'mono guide-corrupt' }, seq.corruptedText)), el('div', { class: 'guide-scroll' }, grid)],
      [el('p', { class: 'small guide-fig' }, removeSay)],
    ];
    $('#guide-steps', this.root).replaceChildren(...STEPS.map((s, k) => {
      const b = el('button', { type: 'button', class: 'guide-show' }, s.button);
      b.addEventListener('click', () => void this.go(k + 1));
      return el('li', { 'data-step': String(k + 1) }, el('h4', {}, s.title), el('p', { class: 'small muted' }, s.say), ...figures[k], b);
    }));
    $('#guide-body', this.root).hidden = false;
  }
}
