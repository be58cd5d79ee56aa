// Parts the "Follow a prediction" panels share (lens-panel.ts, attribution-panel.ts): a field
// where the reader types a token (a word is encoded and its first token used, and the panel says
// so; a link's token id is shown as its text and kept as that id), and a run with a progress bar
// and Cancel that appears only when the run takes longer than a glance.
import type { DemoModel } from './api';
import { el, message, progress, showToken } from './ui';

/** Encodes and shows tokens: the loaded model's tokenizer, as the panels see it. */
export interface TokenText {
  encode(text: string): number[];
  /** one token as the page shows it (showToken of its text) */
  show(id: number): string;
  /** one token's text as a field holds it */
  text(id: number): string;
}

/** The loaded model's tokens as the fields read them (a word without a prompt's special tokens) and show them. */
export function modelTokens(m: DemoModel): TokenText {
  return {
    encode: (text) => m.residual.encodeWord(text) ?? m.tokenizer.encode(text),
    show: (id) => showToken(m.tokenizer.tokenText(id)),
    text: (id) => (m.hasTokenizer ? m.tokenizer.tokenText(id) : String(id)),
  };
}

/** A token read from a field: its id, and a note when the text was more than one token. */
export interface PickedToken { id: number; note: string }

/**
 * The token in `input`: null when it is empty; the id a link set (kept while the text is the
 * one shown for it); else the first token of the text as encoded. Throws an Error naming the
 * field when the text encodes to no token.
 */
export function readToken(input: HTMLInputElement, tok: TokenText, what: string): PickedToken | null {
  const text = input.value;
  if (text.trim() === '') return null;
  if (input.dataset.id !== undefined && input.dataset.text === text) return { id: Number(input.dataset.id), note: '' };
  const ids = tok.encode(text);
  if (!ids.length) throw new Error(`${what}: “${text}” encodes to no token`);
  const note = ids.length > 1
    ? `${what}: “${text}” is ${ids.length} tokens (${ids.map((id) => tok.show(id)).join(' ')}); the first, ${tok.show(ids[0])} (id ${ids[0]}), is used.`
    : '';
  return { id: ids[0], note };
}

/** Puts token `id` in `input` (a link's token): its text shown, the id kept while that text stays. */
export function writeToken(input: HTMLInputElement, id: number | undefined, text: (id: number) => string): void {
  if (id === undefined) {
    input.value = '';
    delete input.dataset.id; delete input.dataset.text;
    return;
  }
  input.value = text(id);
  input.dataset.id = String(id);
  input.dataset.text = input.value;
}

/** Progress reported by a run: (done, total) of its steps, or null while it cannot say. */
export type Report = (done: number | null, total?: number) => void;

/** A run's bar, caption and Cancel, shown once the run has taken SHOW_AFTER_MS. */
export class PanelProgress {
  /** a run shorter than this shows no bar (it would only flash) */
  static readonly SHOW_AFTER_MS = 300;
  /** the bar, caption and Cancel (the panel places it) */
  readonly row: HTMLElement;
  readonly #bar = el('progress', { max: '1', 'aria-label': 'progress' }) as HTMLProgressElement;
  readonly #text = el('span', { class: 'small', 'aria-live': 'polite' });
  readonly #cancel = el('button', { type: 'button' }, 'Cancel') as HTMLButtonElement;
  #running: AbortController | null = null;

  constructor(label: string) {
    this.#bar.setAttribute('aria-label', label);
    this.row = el('div', { class: 'fwd', hidden: true }, this.#bar, this.#text, this.#cancel);
    this.#cancel.addEventListener('click', () => this.cancel());
  }

  /** Stops the running run (its promise rejects with an AbortError). */
  cancel(): void { this.#running?.abort(new DOMException('Cancelled', 'AbortError')); }

  /** A run is in progress. */
  get busy(): boolean { return this.#running !== null; }

  /**
   * body(signal, report) with the bar captioned "`what`: 42 %" (shown after SHOW_AFTER_MS); a
   * newer run replaces this one (its promise rejects with an AbortError named 'replaced').
   */
  async run<T>(what: string, body: (signal: AbortSignal, report: Report) => Promise<T>): Promise<T> {
    this.#running?.abort(new DOMException('Replaced by a newer run', 'AbortError'));
    const abort = (this.#running = new AbortController());
    let last: [number | null, number] = [null, 1];
    const draw = () => {
      const [done, total] = last;
      progress(this.#bar, done === null ? null : done / total, done === null ? `${what}…` : `${what}: ${Math.floor((100 * done) / total)} %`, this.#text);
    };
    const timer = setTimeout(() => { draw(); this.row.hidden = false; }, PanelProgress.SHOW_AFTER_MS);
    try {
      const out = await body(abort.signal, (done, total = 1) => { last = [done, total]; if (!this.row.hidden) draw(); });
      abort.signal.throwIfAborted();
      return out;
    } finally {
      clearTimeout(timer);
      if (this.#running === abort) { this.#running = null; this.row.hidden = true; }
    }
  }
}

/** Whether `e` is a run's cancellation ('cancelled'), its replacement by a newer run ('replaced'), or neither (null). */
function stopReason(e: unknown): 'cancelled' | 'replaced' | null {
  if (!(e instanceof DOMException) || e.name !== 'AbortError') return null;
  return e.message.startsWith('Replaced') ? 'replaced' : 'cancelled';
}

/**
 * Shows why a panel's run (`what`: "the lens") ended without a result: cancelled (an info line),
 * or failed (an error line), and sets the panel's data-state. Nothing for a run a newer one
 * replaced, or one whose model has changed (`stale`): the newer run draws.
 */
export function showStop(e: unknown, stale: boolean, panel: HTMLElement, msg: HTMLElement, what: string): void {
  const why = stopReason(e);
  if (why === 'replaced' || stale) return;
  panel.dataset.state = why ?? 'error';
  if (why === 'cancelled') message(msg, `Cancelled: ${what} was not computed. Run computes it again.`, 'info');
  else message(msg, `${what[0].toUpperCase()}${what.slice(1)} failed: ${(e as Error).message}`, 'error');
}
