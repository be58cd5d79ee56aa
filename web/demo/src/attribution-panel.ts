// The direct logit attribution panel (qkv's logitAttribution, docs/residual.md): for the next
// token after a chosen position (default the last; the token default the model's top prediction
// there), or a pair "A rather than B", the final residual's parts, each read out through the
// final norm with its divisor frozen: the heads on a layers x heads grid whose cells select the
// head in the model view, and the parts ranked with their sum beside the forward's logit
// (attribution-view.ts draws both).
import type { LogitAttributionResult } from 'qkv';
import type { DemoModel } from './api';
import { argmaxRows } from './lens-panel';
import { renderHeadGrid, renderPartList, signed, sumDigits } from './attribution-view';
import { PanelProgress, modelTokens, readToken, showStop, writeToken, type TokenText } from './panel-parts';
import type { ViewState } from './url-state';
import { $, el, message } from './ui';

/** What the panel asks of the model page. */
export interface AttributionHost {
  /** show head (layer, head) in the explorer's model view */
  select(layer: number, head: number): void;
  /** the panel's URL fields changed (the page writes its URL) */
  changed(): void;
}

const INTRO = 'The next token\'s logit is a sum of parts of the residual stream: the embeddings, each head, ' +
  'each attention bias and MLP, the final norm\'s bias (qkv\'s logitAttribution; the final norm\'s divisor is the ' +
  'forward\'s, held fixed, so the parts add up). Each head\'s part is drawn on the layers × heads grid (red raises ' +
  'the logit, blue lowers it); the list ranks the largest parts and adds them all up.';

/** The attribution panel: its markup (built in place of a slot), Run, the grid and the list, the URL fields. */
export class AttributionPanel {
  /** the panel's section (it replaced the slot) */
  readonly panel: HTMLElement;
  readonly #pos = el('select', { id: 'attr-pos' }) as HTMLSelectElement;
  readonly #a = el('input', { id: 'attr-a', type: 'text', spellcheck: 'false', autocomplete: 'off', placeholder: 'the top prediction' }) as HTMLInputElement;
  readonly #b = el('input', { id: 'attr-b', type: 'text', spellcheck: 'false', autocomplete: 'off', placeholder: 'none' }) as HTMLInputElement;
  readonly #run = el('button', { id: 'attr-run', type: 'button', disabled: true }, 'Run the attribution') as HTMLButtonElement;
  readonly #note = el('p', { id: 'attr-note', class: 'small', 'aria-live': 'polite' });
  readonly #msg = el('div', { id: 'attr-msg', class: 'msg', hidden: true });
  readonly #what = el('p', { id: 'attr-what' });
  readonly #grid = el('div', { id: 'attr-grid' });
  readonly #detail = el('p', { id: 'attr-detail', class: 'small mono', 'aria-live': 'polite' });
  readonly #parts = el('div', { id: 'attr-parts', class: 'scroll-x' });
  readonly #result = el('div', { id: 'attr-result', 'aria-live': 'polite', hidden: true }, this.#what, this.#grid, this.#detail, this.#parts);
  readonly #progress = new PanelProgress('Attribution progress');
  #model: DemoModel | null = null;
  /** the URL fields of the run shown (or asked for by a link) */
  #ran: { pos: number; a?: number; b?: number } | null = null;
  #listTimer = 0;

  constructor(slot: HTMLElement, private host: AttributionHost) {
    this.panel = el('section', { class: 'tool', id: slot.id, 'aria-labelledby': 'attr-h' },
      el('h3', { id: 'attr-h' }, 'Direct logit attribution'),
      el('p', { class: 'small muted' }, INTRO),
      el('div', { class: 'controls' },
        el('label', { class: 'field' }, el('span', {}, 'The next token after position'), this.#pos),
        el('label', { class: 'field' }, el('span', {}, 'Token A (empty: the model\'s top prediction)'), this.#a),
        el('label', { class: 'field' }, el('span', {}, 'rather than token B (optional)'), this.#b),
        this.#run),
      this.#note, this.#progress.row, this.#msg, this.#result);
    slot.replaceWith(this.panel);
    this.#run.addEventListener('click', () => void this.run());
    for (const f of [this.#a, this.#b]) f.addEventListener('keydown', (e) => { if (e.key === 'Enter') void this.run(); });
    // the positions follow the prompt as it is typed
    $('#prompt').addEventListener('input', () => { clearTimeout(this.#listTimer); this.#listTimer = window.setTimeout(() => this.#positions(), 300); });
  }

  /** The page's model changed: the old result, tokens and position go. */
  setModel(m: DemoModel | null): void {
    this.#progress.cancel();
    this.#model = m;
    this.#run.disabled = !m;
    this.#ran = null;
    writeToken(this.#a, undefined, String); writeToken(this.#b, undefined, String);
    this.#result.hidden = true;
    this.#note.textContent = '';
    message(this.#msg, '');
    delete this.panel.dataset.state;
    this.#positions();
  }

  /** The URL fields: attr=<position> once run, attrA / attrB when typed. */
  state(): Partial<ViewState> {
    const r = this.#ran;
    if (!r) return {};
    return { attr: r.pos, ...(r.a !== undefined ? { attrA: r.a } : {}), ...(r.b !== undefined ? { attrB: r.b } : {}) };
  }

  /** A link's attribution fields: the position and tokens set, and the attribution run when attr is there. */
  async restore(s: ViewState): Promise<void> {
    const m = this.#model;
    if (!m || s.attr === undefined) return;
    const tok = (id: number | undefined) => (id !== undefined && id < m.dims.vocab ? id : undefined);
    writeToken(this.#a, tok(s.attrA), this.#tok().text);
    writeToken(this.#b, tok(s.attrB), this.#tok().text);
    this.#positions();
    this.#pos.value = s.attr < this.#pos.options.length - 1 ? String(s.attr) : '';
    this.#ran = { pos: s.attr, a: tok(s.attrA), b: tok(s.attrB) };
    await this.run();
  }

  #tok(): TokenText { return modelTokens(this.#model!); }

  /** The prompt as typed (the explorer's prompt box), cut to the model's context. */
  #ids(): number[] {
    const m = this.#model!;
    const ids = m.tokenizer.encode($<HTMLTextAreaElement>('#prompt').value).slice(-m.dims.positions);
    if (!ids.length) throw new Error(m.hasTokenizer ? 'Type a prompt first.' : 'Type token ids first, e.g. "1 2 3".');
    return ids;
  }

  /** The position menu: "the last" then every position of the prompt as typed (the choice kept where it still exists). */
  #positions(): void {
    let ids: number[] = [];
    try { if (this.#model) ids = this.#ids(); } catch { /* no prompt: only "the last" */ }
    const keep = this.#pos.value, show = (id: number) => this.#tok().show(id);
    this.#pos.replaceChildren(new Option(ids.length ? `the last (${ids.length - 1}: ${show(ids[ids.length - 1])})` : 'the last', ''),
      ...ids.map((id, t) => new Option(`${t}: ${show(id)}`, String(t))));
    this.#pos.value = keep !== '' && Number(keep) < ids.length ? keep : '';
  }

  /** Runs the attribution on the prompt as typed and draws it. */
  async run(): Promise<void> {
    const m = this.#model;
    if (!m) return;
    const tok = this.#tok();
    let ids: number[], pos: number, a, b;
    try {
      ids = this.#ids();
      this.#positions();
      pos = this.#pos.value === '' ? ids.length - 1 : Number(this.#pos.value);
      a = readToken(this.#a, tok, 'Token A');
      b = readToken(this.#b, tok, 'Token B');
    } catch (e) {
      message(this.#msg, (e as Error).message, 'error');
      this.panel.dataset.state = 'error';
      return;
    }
    message(this.#msg, '');
    this.#note.textContent = [a?.note, b?.note].filter(Boolean).join(' ');
    this.#ran = { pos, a: a?.id, b: b?.id };
    this.host.changed();
    this.panel.dataset.state = 'running';
    try {
      const { result, idA } = await this.#progress.run('Attribution', async (signal, report) => {
        report(null);
        // the model's top prediction after `pos` (the model is causal: the prompt up to pos is enough)
        const idA = a ? a.id : argmaxRows((await m.run(ids.slice(0, pos + 1), false, { signal })).logits, 1, m.dims.vocab)[0];
        if (b && b.id === idA) throw new Error(`token B is token A (${tok.show(idA)}): a logit difference needs two tokens`);
        signal.throwIfAborted();
        const result = await m.residual.attribution(ids, { position: pos, tokens: b ? [idA, b.id] : [idA] });
        return { result, idA };
      });
      if (m !== this.#model) return;
      this.#draw(ids, pos, idA, b?.id, !a, result);
      this.panel.dataset.state = 'done';
    } catch (e) {
      showStop(e, m !== this.#model, this.panel, this.#msg, 'the attribution');
    }
  }

  #draw(ids: number[], pos: number, idA: number, idB: number | undefined, top: boolean, result: LogitAttributionResult): void {
    const m = this.#model!, tok = this.#tok();
    const logit = `logit(${tok.show(idA)})${idB !== undefined ? ` − logit(${tok.show(idB)})` : ''}`;
    let sum = 0;
    for (const p of result.parts) sum += p.value;
    this.#what.textContent = `After position ${pos} (${tok.show(ids[pos])}): ${logit} = ${signed(result.total, sumDigits(sum, result.total))}` +
      `${top ? `; ${tok.show(idA)} is the model's top prediction there` : ''}.`;
    renderHeadGrid(this.#grid, this.#detail, { result, layers: m.dims.layers, heads: m.dims.heads, onHead: (l, h) => this.host.select(l, h) });
    renderPartList(this.#parts, result, logit);
    this.#result.hidden = false;
  }
}
