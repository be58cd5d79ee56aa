// The Patching panel: a clean and a corrupted prompt, the answer tokens, and an activation
// patching sweep (qkv's activationPatching, through DemoModel.residual) over the heads, the heads
// at each position, or the residual stream at each position, drawn as a heat map
// (patching-map.ts) with the hottest cell named. The sweep shows a bar and can be cancelled; a
// click on a head's cell shows that head's map in the model view. Its URL fields: clean,
// corrupt, sweep (the sweep shown), answer (set by the reader).
import type { ActivationPatchingResult } from 'qkv';
import type { DemoModel } from './api';
import { cellName, drawPatchMap, hottest } from './patching-map';
import { comparePrompts } from './prompt-pair';
import type { PatchSweep, ViewState } from './url-state';
import { $, el, fmt, message, nextFrame, progress } from './ui';

/** What the panel needs from the page. */
export interface PatchingHost {
  /** the loaded model (null while none is) */
  model(): DemoModel | null;
  /** the page's prompt as typed (the clean prompt until the reader edits it) */
  prompt(): string;
  /** shows head (layer, head) enlarged in the model view */
  select(layer: number, head: number): void;
  /** the panel's URL fields changed */
  changed(): void;
}

const SWEEP_TEXT: Record<PatchSweep, string> = {
  heads: 'heads (each head\'s output, every position)',
  headPositions: 'heads × positions (one head at one position)',
  residPre: 'residual stream × positions (resid_pre of each block)',
};

const CANCELLED = new DOMException('The sweep was cancelled', 'AbortError');

/** The argmax of a Float32Array (the first of equal ones). */
function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/**
 * The Patching panel in `#patching-panel`: `setModel` when a model is loaded, `state` for the
 * URL, `restore` to apply a URL's (or the guided example's) fields, `run` for Run.
 */
export class PatchingPanel {
  readonly #panel: HTMLElement;
  readonly #clean: HTMLTextAreaElement;
  readonly #corrupt: HTMLTextAreaElement;
  readonly #correct: HTMLInputElement;
  readonly #wrong: HTMLInputElement;
  readonly #sweep: HTMLSelectElement;
  readonly #run: HTMLButtonElement;
  readonly #bar: HTMLProgressElement;
  #model: DemoModel | null = null;
  /** the clean prompt follows the page's until the reader edits it */
  #cleanEdited = false;
  /** the answer the reader set; null = each prompt's top prediction */
  #answer: [number, number] | null = null;
  /** each prompt's top prediction, for the ids they were computed on */
  #tops: { key: string; answer: [number, number] } | null = null;
  #running: AbortController | null = null;
  /** the sweep shown (for the URL) */
  #shown: PatchSweep | null = null;
  #topsTimer = 0;
  /** the answer in the two fields (a field left as it shows keeps its id: a token's text alone may encode to another) */
  #shownAnswer: [number, number] | null = null;

  constructor(private host: PatchingHost) {
    const area = (id: string, label: string, placeholder = '') => el('label', { class: 'field' }, el('span', {}, label),
      el('textarea', { id, rows: '2', spellcheck: 'false', placeholder }));
    const input = (id: string, label: string) => el('label', { class: 'small' }, `${label} `, el('input', { id, type: 'text', size: '12', spellcheck: 'false' }));
    const panel = el('section', { class: 'tool', id: 'patching-panel', 'aria-labelledby': 'patch-h' },
      el('h3', { id: 'patch-h' }, 'Patching: which parts carry the difference?'),
      el('p', { class: 'small muted' }, 'Run the corrupted prompt again with one activation taken from the clean run, for every ' +
        'head (or head and position, or residual stream and position), and measure m = logit[correct] − logit[wrong] at the ' +
        'last position: 1 means that part alone restores the clean answer, 0 that it changes nothing.'),
      area('patch-clean', 'Clean prompt (the page\'s prompt until you edit it)'),
      area('patch-corrupt', 'Corrupted prompt (the clean one with a word changed)', 'the clean prompt with a word changed'),
      el('p', { id: 'patch-tokens', class: 'small', 'aria-live': 'polite' }),
      el('div', { class: 'controls' }, input('patch-correct', 'correct answer'), input('patch-wrong', 'wrong answer'),
        el('button', { id: 'patch-tops', type: 'button' }, 'each prompt\'s top prediction')),
      el('p', { id: 'patch-answer', class: 'small muted', 'aria-live': 'polite' }),
      el('div', { class: 'controls' },
        el('label', { class: 'small' }, 'sweep ', el('select', { id: 'patch-sweep' },
          ...Object.entries(SWEEP_TEXT).map(([v, t]) => new Option(t, v)))),
        el('button', { id: 'patch-run', type: 'button', disabled: true }, 'Run the sweep')),
      el('div', { id: 'patch-progress', class: 'controls', hidden: true },
        el('progress', { id: 'patch-bar', max: '1', value: '0' }), el('span', { id: 'patch-bar-text', class: 'small' }),
        el('button', { id: 'patch-cancel', type: 'button' }, 'Cancel')),
      el('div', { id: 'patch-msg', class: 'msg', hidden: true }),
      el('div', { id: 'patch-result', hidden: true },
        el('p', { id: 'patch-metrics', class: 'small' }),
        el('p', { id: 'patch-hottest' }),
        el('div', { id: 'patch-map', class: 'patch-scroll' }),
        el('p', { id: 'patch-cell', class: 'small mono', 'aria-live': 'polite' }, 'Hover over or focus a cell for its value.'),
        el('p', { class: 'small muted' }, 'Blue: the patch restores the clean metric (1); white: no change (0); red: it pushes ' +
          'the metric further from the clean one.')));
    $('#patching-panel').replaceWith(panel);
    this.#panel = panel;
    this.#clean = $<HTMLTextAreaElement>('#patch-clean', panel);
    this.#corrupt = $<HTMLTextAreaElement>('#patch-corrupt', panel);
    this.#correct = $<HTMLInputElement>('#patch-correct', panel);
    this.#wrong = $<HTMLInputElement>('#patch-wrong', panel);
    this.#sweep = $<HTMLSelectElement>('#patch-sweep', panel);
    this.#run = $<HTMLButtonElement>('#patch-run', panel);
    this.#bar = $<HTMLProgressElement>('#patch-bar', panel);
    this.#clean.addEventListener('input', () => { this.#cleanEdited = true; this.#promptsChanged(); });
    this.#corrupt.addEventListener('input', () => this.#promptsChanged());
    for (const box of [this.#clean, this.#corrupt]) box.addEventListener('change', () => host.changed());
    $('#prompt').addEventListener('input', () => { if (!this.#cleanEdited) { this.#clean.value = host.prompt(); this.#promptsChanged(); } });
    for (const box of [this.#correct, this.#wrong]) box.addEventListener('change', () => this.#answerTyped());
    $('#patch-tops', panel).addEventListener('click', () => { this.#answer = null; this.#promptsChanged(); host.changed(); });
    this.#run.addEventListener('click', () => void this.run());
    $('#patch-cancel', panel).addEventListener('click', () => this.#running?.abort(CANCELLED));
    this.#clean.value = host.prompt();
  }

  /** A new model (or none): results and answers cleared, the prompts kept. */
  setModel(model: DemoModel | null): void {
    this.#running?.abort(CANCELLED);
    this.#model = model;
    this.#answer = null;
    this.#tops = null;
    this.#clear();
    if (!this.#cleanEdited) this.#clean.value = this.host.prompt();
    this.#promptsChanged();
  }

  /** The URL fields: clean (when edited), corrupt, answer (when set), sweep (when shown). */
  state(): Partial<ViewState> {
    const s: Partial<ViewState> = {};
    if (this.#cleanEdited) s.clean = this.#clean.value;
    if (this.#corrupt.value) s.corrupt = this.#corrupt.value;
    if (this.#answer) s.answer = [...this.#answer];
    if (this.#shown) s.sweep = this.#shown;
    return s;
  }

  /** Applies the URL fields; runs the sweep when `sweep` is there. */
  async restore(s: ViewState): Promise<void> {
    this.#cleanEdited = s.clean !== undefined;
    this.#clean.value = s.clean ?? this.host.prompt();
    this.#corrupt.value = s.corrupt ?? '';
    const vocab = this.#model?.dims.vocab ?? 0;
    this.#answer = s.answer && s.answer.every((id) => id < vocab) ? [...s.answer] : null;
    if (s.sweep) this.#sweep.value = s.sweep;
    this.#clear();
    this.#promptsChanged();
    if (s.sweep) await this.run();
  }

  /** The clean and corrupted ids, or null (with the message said) when they cannot be swept. */
  #pair(): { clean: number[]; corrupt: number[] } | null {
    const m = this.#model, note = $('#patch-tokens', this.#panel);
    if (!m) { note.textContent = ''; return null; }
    if (!this.#clean.value || !this.#corrupt.value) {
      note.textContent = 'Type a corrupted prompt: the clean one with a word changed, of the same number of tokens.';
      return null;
    }
    let clean: number[], corrupt: number[];
    try {
      clean = m.tokenizer.encode(this.#clean.value);
      corrupt = m.tokenizer.encode(this.#corrupt.value);
    } catch (e) {
      note.textContent = `The prompts: ${(e as Error).message}`;
      return null;
    }
    const P = m.dims.positions;
    if (Math.max(clean.length, corrupt.length) > P) {
      note.textContent = `The prompts have ${clean.length} and ${corrupt.length} tokens; this model reads at most ${P}.`;
      return null;
    }
    const pair = comparePrompts(clean, corrupt, (id) => m.tokenizer.tokenText(id));
    note.textContent = pair.text;
    return pair.sweepable ? { clean, corrupt } : null;
  }

  /** The prompts changed: their token counts said, Run enabled or not, the default answers updated. */
  #promptsChanged(): void {
    const pair = this.#pair();
    this.#run.disabled = !pair || !!this.#running;
    clearTimeout(this.#topsTimer);
    if (this.#answer) { this.#showAnswer(this.#answer); return; }
    if (!pair) { this.#correct.value = ''; this.#wrong.value = ''; this.#shownAnswer = null; $('#patch-answer', this.#panel).textContent = ''; return; }
    this.#topsTimer = window.setTimeout(() => void this.#defaults(pair.clean, pair.corrupt).then((a) => { if (!this.#answer) this.#showAnswer(a); }, () => {}), 200);
  }

  /** Each prompt's top prediction at its last position: [clean's (correct), corrupted's (wrong)]. */
  async #defaults(clean: number[], corrupt: number[]): Promise<[number, number]> {
    const m = this.#model!, key = `${clean.join(',')}|${corrupt.join(',')}`;
    if (this.#tops?.key === key) return this.#tops.answer;
    const answer: [number, number] = [argmax((await m.run(clean, false)).logits), argmax((await m.run(corrupt, false)).logits)];
    if (m === this.#model) this.#tops = { key, answer };
    return answer;
  }

  /** The answer in the two fields and the line under them. */
  #showAnswer([c, w]: [number, number]): void {
    const tok = this.#model!.tokenizer;
    this.#shownAnswer = [c, w];
    this.#correct.value = tok.tokenText(c);
    this.#wrong.value = tok.tokenText(w);
    const line = `correct '${tok.tokenText(c)}' (id ${c}), wrong '${tok.tokenText(w)}' (id ${w})` +
      (this.#answer ? ', as you set them.' : ': each prompt\'s top prediction.');
    $('#patch-answer', this.#panel).textContent = c === w
      ? `Both prompts predict '${tok.tokenText(c)}' (id ${c}): the metric needs two different tokens; type a wrong answer (a token, or #id).`
      : line;
  }

  /** The reader typed an answer: a token's text (one token) or #id in each field. */
  #answerTyped(): void {
    const m = this.#model;
    if (!m) return;
    const parse = (s: string, what: string, shown?: number): number => {
      if (shown !== undefined && s === m.tokenizer.tokenText(shown)) return shown;
      const id = /^#(\d+)$/.exec(s.trim());
      if (id) {
        if (Number(id[1]) < m.dims.vocab) return Number(id[1]);
        throw new Error(`the ${what} answer ${s} is not a token id in [0, ${m.dims.vocab})`);
      }
      const ids = m.tokenizer.encode(s);
      if (ids.length !== 1) throw new Error(`the ${what} answer '${s}' is ${ids.length} tokens, not one (type #id for a token by its id)`);
      return ids[0];
    };
    try {
      this.#answer = [parse(this.#correct.value, 'correct', this.#shownAnswer?.[0]), parse(this.#wrong.value, 'wrong', this.#shownAnswer?.[1])];
      this.#showAnswer(this.#answer);
      message($('#patch-msg', this.#panel), '');
      this.host.changed();
    } catch (e) {
      message($('#patch-msg', this.#panel), `The answer: ${(e as Error).message}`, 'error');
    }
  }

  #clear(): void {
    this.#shown = null;
    $('#patch-result', this.#panel).hidden = true;
    message($('#patch-msg', this.#panel), '');
    delete this.#panel.dataset.state;
  }

  /** Runs the chosen sweep on the prompts as typed, with the bar and Cancel, and draws it. */
  async run(): Promise<void> {
    const m = this.#model, msg = $('#patch-msg', this.#panel);
    if (!m || this.#running) return;
    const pair = this.#pair();
    if (!pair) { message(msg, $('#patch-tokens', this.#panel).textContent ?? '', 'error'); return; }
    const over = this.#sweep.value as PatchSweep;
    const abort = (this.#running = new AbortController());
    this.#clear();
    this.#run.disabled = true;
    this.#panel.dataset.state = 'running';
    const row = $('#patch-progress', this.#panel), text = $('#patch-bar-text', this.#panel);
    const caption = (done: number, total: number) => `Sweep: ${Math.floor((100 * done) / total)} % (${done} of ${total} cells)`;
    progress(this.#bar, 0, 'Sweep: starting…', text);
    row.hidden = false;
    let done = 0, total = 0;
    try {
      const answer = this.#answer ?? await this.#defaults(pair.clean, pair.corrupt);
      if (!this.#answer) this.#showAnswer(answer);
      if (answer[0] === answer[1]) throw new Error(`the correct and wrong answers are the same token (id ${answer[0]}): type a wrong answer`);
      await nextFrame(); // the bar painted before the first layer's cells
      abort.signal.throwIfAborted();
      const r = await m.residual.patching({
        clean: pair.clean, corrupted: pair.corrupt, answer, over, signal: abort.signal,
        onProgress: (d, t) => { done = d; total = t; progress(this.#bar, d / t, caption(d, t), text); },
      });
      abort.signal.throwIfAborted();
      this.#draw(r, pair.clean, answer);
      this.#panel.dataset.state = 'done';
    } catch (e) {
      if (abort.signal.aborted && abort.signal.reason === CANCELLED) {
        message(msg, `Cancelled after ${done} of ${total || '?'} cells: no map drawn. Run the sweep starts again.`, 'info');
        this.#panel.dataset.state = 'cancelled';
      } else if (!abort.signal.aborted) {
        message(msg, `The sweep failed: ${(e as Error).message}`, 'error');
        this.#panel.dataset.state = 'error';
      }
    } finally {
      this.#running = null;
      row.hidden = true;
      this.#run.disabled = !this.#pair();
      this.host.changed();
    }
  }

  /** The metrics, the hottest cell and the map. */
  #draw(r: ActivationPatchingResult, clean: number[], [c, w]: [number, number]): void {
    const tok = this.#model!.tokenizer, tokens = clean.map((id) => tok.tokenText(id));
    $('#patch-metrics', this.#panel).textContent = `m = logit['${tok.tokenText(c)}'] − logit['${tok.tokenText(w)}'] at the last position: ` +
      `m(clean) = ${fmt.p3(r.cleanMetric)}, m(corrupted) = ${fmt.p3(r.corruptedMetric)}; ${SWEEP_TEXT[r.over as PatchSweep]}, ${r.values.length} cells.`;
    const hot = hottest(r);
    $('#patch-hottest', this.#panel).textContent = `hottest: ${cellName(hot, tokens)}, ${fmt.p(hot.value)} of the clean metric`;
    const detail = $('#patch-cell', this.#panel);
    drawPatchMap($('#patch-map', this.#panel), r, tokens, detail, (layer, head) => {
      this.host.select(layer, head);
      document.querySelector('#explorer, #view-model')?.scrollIntoView({ block: 'nearest' });
    });
    $('#patch-result', this.#panel).hidden = false;
    this.#shown = r.over as PatchSweep;
  }
}
