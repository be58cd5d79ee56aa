// The model page's forward pass with a progress bar, a percentage and a Cancel button: qkv runs
// the prompt a chunk of tokens at a time (forward's signal / onProgress), so the page paints
// between chunks and Cancel stops it within one chunk. One pass at a time: a newer one (the
// prompt changed, Generate) replaces the running one quietly.
import { $, nextFrame, progress } from './ui';
import type { DemoModel, RunProgress } from './api';

/** Passes this short finish at once: no bar (it would only flash). */
const SHOW_FROM_TOKENS = 64;

/** Why a pass ended early: the user's Cancel, or a newer pass that replaced it. */
export type Stopped = 'cancelled' | 'replaced';
const CANCELLED = new DOMException('The forward pass was cancelled', 'AbortError');
const REPLACED = new DOMException('A newer forward pass replaced this one', 'AbortError');

/** 'cancelled' / 'replaced' when `e` is the rejection of a pass stopped by Cancel or by a newer pass; else null. */
export function stoppedBy(e: unknown): Stopped | null {
  return e === CANCELLED ? 'cancelled' : e === REPLACED ? 'replaced' : null;
}

export class ForwardProgress {
  #running: AbortController | null = null;
  readonly #row = $('#fwd');
  readonly #bar = $<HTMLProgressElement>('#fwd-bar');
  readonly #text = $('#fwd-text');

  constructor() {
    $('#fwd-cancel').addEventListener('click', () => this.cancel());
  }

  /** Stops the running pass (it rejects with the Cancel reason); nothing when none runs. */
  cancel(): void {
    this.#running?.abort(CANCELLED);
  }

  /** A pass is running (its bar shown when long). */
  get busy(): boolean {
    return this.#running !== null;
  }

  /** The attention weights of ids, attn[layer][head][q][k], through {@link run}. */
  async attention(m: DemoModel, ids: number[], what: string): Promise<Float32Array[][][]> {
    return (await this.run(what, ids.length, (p) => m.run(ids, true, p))).attn!;
  }

  /**
   * pass({ signal, onProgress }) over `tokens` tokens (or other `unit`s), with the bar captioned
   * "`what`: 42 % (420 of 1000 tokens)" while it runs. Rejects with a reason {@link stoppedBy} recognises when
   * cancelled or replaced. body[data-forward] says 'running', 'done', 'cancelled' (for tests
   * and screen readers' hosts).
   */
  async run<T>(what: string, tokens: number, pass: (p: RunProgress) => Promise<T>, unit = 'tokens'): Promise<T> {
    this.#running?.abort(REPLACED);
    const abort = (this.#running = new AbortController());
    // a pass counted in other units (forward passes, rows of a flow) is always shown
    const show = tokens > SHOW_FROM_TOKENS || unit !== 'tokens';
    const caption = (done: number, total: number) => `${what}: ${Math.floor((100 * done) / total)} % (${done} of ${total} ${unit})`;
    if (show) {
      progress(this.#bar, 0, caption(0, tokens), this.#text);
      this.#row.hidden = false;
    }
    document.body.dataset.forward = 'running';
    try {
      // the bar (and the caller's message) painted before the first chunk; a Cancel meanwhile counts
      await nextFrame();
      await nextFrame();
      const result = await pass({
        signal: abort.signal,
        onProgress: (done, total) => { if (show) progress(this.#bar, done / total, caption(done, total), this.#text); },
      });
      abort.signal.throwIfAborted(); // cancelled while its last chunk ran: the result is dropped, as the user asked
      document.body.dataset.forward = 'done';
      return result;
    } catch (e) {
      if (stoppedBy(e) === 'cancelled') document.body.dataset.forward = 'cancelled';
      throw e;
    } finally {
      if (this.#running === abort) {
        this.#running = null;
        this.#row.hidden = true;
      }
    }
  }
}
