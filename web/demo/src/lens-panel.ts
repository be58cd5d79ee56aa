// The logit lens panel (qkv's logitLens, docs/residual.md): Run reads the prompt's residual
// stream at every layer and position through the final norm and the unembedding and draws the
// layers x positions grid (lens-grid.ts). The target each cell reports is the model's own
// prediction at that position (the argmax of its logits there) unless the reader types a token.
// The same panel runs on the model page (a DemoModel: demoLensSource) and on the encoders page
// (the masked-LM through its MLM head, the [MASK] column marked: encoder-lens.ts).
import type { LogitLensOptions, LogitLensResult } from 'qkv';
import type { DemoModel } from './api';
import { renderLensGrid, type LensCellAt } from './lens-grid';
import { PanelProgress, modelTokens, readToken, showStop, writeToken, type Report, type TokenText } from './panel-parts';
import type { ViewState } from './url-state';
import { $, el, message } from './ui';

/** What the lens panel runs on: the sequence, the model's predictions, the lens, its tokenizer. */
export interface LensSource {
  /** the sequence the lens reads now (the text as typed); throws an Error saying why not */
  ids(): number[];
  /** the model's own prediction at every position: the argmax of its logits (ties: the lower id) */
  predictions(ids: number[], signal: AbortSignal): Promise<number[]>;
  /** qkv's logitLens on the model */
  lens(ids: number[], options: LogitLensOptions): Promise<LogitLensResult>;
  tok: TokenText;
  /** the vocabulary's size (a link's target id is checked against it) */
  vocab: number;
  /** what the cells of column t predict: the token after token t (a decoder) or at t (a masked LM) */
  reads: 'after' | 'at';
  /** positions whose column is marked (the [MASK]) */
  marked?(ids: number[]): number[];
}

/** What the panel asks of its page. */
export interface LensHost {
  /** the panel's URL fields changed (the page writes its URL) */
  changed(): void;
  /** the text field the sequence is typed in (a change there makes a drawn grid stale; default #prompt) */
  input?: HTMLInputElement | HTMLTextAreaElement;
}

/** The argmax of each row of `logits` [T, V] (the first of equal values). */
export function argmaxRows(logits: ArrayLike<number>, T: number, V: number): number[] {
  return Array.from({ length: T }, (_t, t) => {
    let best = 0, bestV = -Infinity;
    for (let v = 0; v < V; v++) if (logits[t * V + v] > bestV) { bestV = logits[t * V + v]; best = v; }
    return best;
  });
}

/** The model page's source: the prompt box, the loaded DemoModel's residual tools. */
export function demoLensSource(m: DemoModel): LensSource {
  return {
    ids() {
      const ids = m.tokenizer.encode($<HTMLTextAreaElement>('#prompt').value).slice(-m.dims.positions);
      if (!ids.length) throw new Error(m.hasTokenizer ? 'Type a prompt first.' : 'Type token ids first, e.g. "1 2 3".');
      return ids;
    },
    predictions: async (ids, signal) => argmaxRows(await m.residual.logits(ids, { signal }), ids.length, m.dims.vocab),
    lens: (ids, options) => m.residual.lens(ids, options),
    tok: modelTokens(m),
    vocab: m.dims.vocab,
    reads: 'after',
  };
}

/** The model page's sentence under the heading. */
export const LENS_INTRO = 'Each cell reads the residual stream at one layer (row) and one position (column) through ' +
  'the final norm and the unembedding (qkv\'s logitLens): the token it would predict next there and its probability, ' +
  'shaded. The last row is the model\'s own output: where a column\'s prediction settles is the layer that made it. ' +
  'Hover or focus a cell (arrow keys move) for its top 5 and its KL to the output.';

/** The lens panel: its markup (built in place of a slot), Run, the grid, the URL fields. */
export class LensPanel {
  /** the panel's section (it replaced the slot) */
  readonly panel: HTMLElement;
  readonly #run = el('button', { id: 'lens-run', type: 'button', disabled: true }, 'Run the lens') as HTMLButtonElement;
  readonly #target = el('input', { id: 'lens-target', type: 'text', spellcheck: 'false', autocomplete: 'off', placeholder: 'the model\'s own prediction' }) as HTMLInputElement;
  readonly #note = el('p', { id: 'lens-note', class: 'small', 'aria-live': 'polite' });
  readonly #msg = el('div', { id: 'lens-msg', class: 'msg', hidden: true });
  readonly #grid = el('div', { id: 'lens-grid', class: 'lens-box' });
  readonly #detail = el('p', { id: 'lens-detail', class: 'small mono', 'aria-live': 'polite' });
  readonly #legend = el('p', { class: 'small muted', hidden: true });
  readonly #progress = new PanelProgress('Logit lens progress');
  #source: LensSource | null = null;
  /** the lens was asked for (a run, or a link): its URL field */
  #shown = false;
  /** the target a run used (undefined: the model's own predictions) and the focused position */
  #targetId: number | undefined;
  #pos: number | undefined;
  /** the text the drawn grid read */
  #drawnFor = '';
  readonly #input: HTMLInputElement | HTMLTextAreaElement;

  constructor(slot: HTMLElement, private host: LensHost, intro = LENS_INTRO) {
    this.#input = host.input ?? $<HTMLTextAreaElement>('#prompt');
    this.panel = el('section', { class: 'tool', id: slot.id, 'aria-labelledby': `${slot.id}-h` },
      el('h3', { id: `${slot.id}-h` }, 'Logit lens'),
      el('p', { class: 'small muted' }, intro),
      el('div', { class: 'controls' },
        el('label', { class: 'field' }, el('span', {}, 'Target token (empty: the model\'s own prediction at each position)'), this.#target),
        this.#run),
      this.#note, this.#progress.row, this.#msg, this.#legend, this.#grid, this.#detail);
    slot.replaceWith(this.panel);
    this.#run.addEventListener('click', () => void this.run());
    this.#target.addEventListener('keydown', (e) => { if (e.key === 'Enter') void this.run(); });
    this.#input.addEventListener('input', () => this.#stale());
  }

  /** The page's model changed: the old grid and target go. */
  setModel(m: DemoModel | null): void { this.setSource(m ? demoLensSource(m) : null); }

  /** The panel's model changed (any source): the old grid and target go. */
  setSource(s: LensSource | null): void {
    this.#progress.cancel();
    this.#source = s;
    this.#run.disabled = !s;
    this.#shown = false; this.#pos = undefined; this.#targetId = undefined;
    writeToken(this.#target, undefined, String);
    this.#clear();
  }

  /** The URL fields: lens=1 once run, the target's id when one was typed, the focused position. */
  state(): Partial<ViewState> {
    if (!this.#shown) return {};
    return { lens: true, ...(this.#targetId !== undefined ? { lensTarget: this.#targetId } : {}), ...(this.#pos !== undefined ? { lensPos: this.#pos } : {}) };
  }

  /** A link's lens fields: the target and position set, and the lens run when lens=1. */
  async restore(s: ViewState): Promise<void> {
    const src = this.#source;
    if (!src || !s.lens) return;
    const target = s.lensTarget !== undefined && s.lensTarget < src.vocab ? s.lensTarget : undefined;
    writeToken(this.#target, target, src.tok.text);
    this.#shown = true;
    this.#pos = s.lensPos;
    await this.run();
  }

  /** Runs the lens on the text as typed and draws the grid. */
  async run(): Promise<void> {
    const src = this.#source;
    if (!src) return;
    let ids: number[], picked;
    try {
      ids = src.ids();
      picked = readToken(this.#target, src.tok, 'The target');
    } catch (e) {
      message(this.#msg, (e as Error).message, 'error');
      this.panel.dataset.state = 'error';
      return;
    }
    message(this.#msg, '');
    this.#note.textContent = picked?.note ?? '';
    this.#shown = true;
    this.#targetId = picked?.id;
    if (this.#pos !== undefined && this.#pos >= ids.length) this.#pos = undefined;
    this.host.changed();
    this.panel.dataset.state = 'running';
    try {
      const { result, target } = await this.#progress.run('Logit lens', async (signal, report: Report) => {
        // the model's own prediction at each position (one forward), unless a token was typed
        report(null);
        const target = picked ? picked.id : await src.predictions(ids, signal);
        const result = await src.lens(ids, { topK: 5, target, signal, onProgress: (d, t) => report(d, t) });
        return { result, target };
      });
      if (src !== this.#source) return;
      this.#draw(ids, result, target);
      this.panel.dataset.state = 'done';
    } catch (e) {
      showStop(e, src !== this.#source, this.panel, this.#msg, 'the lens');
    }
  }

  #draw(ids: number[], result: LogitLensResult, target: number | number[]): void {
    const src = this.#source!;
    const columns = ids.map((id) => src.tok.show(id));
    const targets = typeof target === 'number' ? ids.map(() => src.tok.show(target)) : target.map((id) => src.tok.show(id));
    const marked = new Set(src.marked?.(ids) ?? []);
    const NL = result.numLayers;
    this.#legend.hidden = false;
    this.#legend.textContent = `Rows: the embeddings, the input of each block, the model's output; column t: the prediction ${src.reads === 'after' ? 'after' : 'at'} token t. ` +
      `Each cell: the top token, its probability (the shade), then the target's probability · its rank (#1 = the most probable). ` +
      `Target: ${typeof target === 'number' ? `${targets[0]} (id ${target}) at every position` : 'the model\'s own prediction at each position (the output row\'s top token)'}.`;
    renderLensGrid(this.#grid, this.#detail, {
      result, columns, target: targets, marked, reads: src.reads,
      focus: this.#pos !== undefined ? { layer: NL, pos: this.#pos } : null,
      onFocus: (at: LensCellAt) => { if (at.pos !== this.#pos) { this.#pos = at.pos; this.host.changed(); } },
    });
    this.#drawnFor = this.#textNow();
  }

  #textNow(): string { return this.#input.value; }

  /** The text changed under a drawn grid: says so (Run reads the new text). */
  #stale(): void {
    if (!this.#grid.firstChild) return;
    const stale = this.#textNow() !== this.#drawnFor;
    this.#note.textContent = stale ? 'The text changed since the lens ran: Run reads it again.' : '';
  }

  #clear(): void {
    this.#grid.replaceChildren();
    this.#detail.textContent = '';
    this.#legend.hidden = true;
    this.#note.textContent = '';
    message(this.#msg, '');
    delete this.panel.dataset.state;
  }
}
