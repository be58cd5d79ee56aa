// The Steering panel: a vector from two prompts (qkv's steeringVector: the mean resid_pre of A
// minus that of B at a layer), a scale, and two generations from the page's prompt side by side,
// without and with the vector added at that layer (generate's `steer`), with the page's Generate
// settings (tokens, temperature, top-k, seed), so the only difference is the vector. A bar and
// Cancel while generating. Its URL fields: steerA, steerB, steerLayer, steerScale (written once
// it has run; a link with them runs it again).
import type { DemoModel } from './api';
import type { ViewState } from './url-state';
import { $, el, fmt, message, nextFrame, progress } from './ui';

/** What the panel needs from the page. */
export interface SteeringHost {
  /** the loaded model (null while none is) */
  model(): DemoModel | null;
  /** the page's prompt as typed */
  prompt(): string;
  /** the page's Generate settings */
  settings(): { maxNewTokens: number; temperature: number; topK: number; seed: number };
  /** the page is generating (its generation and this panel's share the model's KV cache) */
  busy(): boolean;
  /** the panel's URL fields changed */
  changed(): void;
}

/** Prompts whose difference is one idea, in the King James Bible's words. */
export const STEER_DEFAULTS = { a: 'I love thee, and bless thee', b: 'I hate thee, and curse thee', scale: 4 };

const CANCELLED = new DOMException('The steering was cancelled', 'AbortError');

/**
 * The Steering panel in `#steering-panel`: `setModel` when a model is loaded, `state` for the
 * URL, `restore` to apply a URL's (or the guided example's) fields, `run` for Steer.
 */
export class SteeringPanel {
  readonly #panel: HTMLElement;
  readonly #a: HTMLInputElement;
  readonly #b: HTMLInputElement;
  readonly #layer: HTMLSelectElement;
  readonly #scale: HTMLInputElement;
  readonly #run: HTMLButtonElement;
  #model: DemoModel | null = null;
  #running: AbortController | null = null;
  /** the run shown (for the URL) */
  #shown: { a: string; b: string; layer: number; scale: number } | null = null;

  constructor(private host: SteeringHost) {
    const text = (id: string, label: string, value: string) => el('label', { class: 'field' }, el('span', {}, label),
      el('input', { id, type: 'text', spellcheck: 'false', value }));
    const panel = el('section', { class: 'tool', id: 'steering-panel', 'aria-labelledby': 'steer-h' },
      el('h3', { id: 'steer-h' }, 'Steering: add a direction to the stream'),
      el('p', { class: 'small muted' }, 'The vector is the mean residual stream (resid_pre) of prompt A minus that of prompt B at ' +
        'a layer. Generating from the page\'s prompt with scale × vector added there at every position, beside the same ' +
        'generation without it (the same seed, temperature and top-k as Generate), shows what that direction does.'),
      text('steer-a', 'Prompt A (towards)', STEER_DEFAULTS.a),
      text('steer-b', 'Prompt B (away from)', STEER_DEFAULTS.b),
      el('div', { class: 'controls' },
        el('label', { class: 'small' }, 'layer ', el('select', { id: 'steer-layer' })),
        el('label', { class: 'small' }, 'scale ', el('input', { id: 'steer-scale', type: 'number', step: '0.5', value: String(STEER_DEFAULTS.scale) })),
        el('button', { id: 'steer-run', type: 'button', disabled: true }, 'Steer')),
      el('div', { id: 'steer-progress', class: 'controls', hidden: true },
        el('progress', { id: 'steer-bar', max: '1', value: '0' }), el('span', { id: 'steer-bar-text', class: 'small' }),
        el('button', { id: 'steer-cancel', type: 'button' }, 'Cancel')),
      el('div', { id: 'steer-msg', class: 'msg', hidden: true }),
      el('div', { id: 'steer-result', hidden: true },
        el('p', { id: 'steer-vector', class: 'small' }),
        el('div', { class: 'steer-pair' },
          el('figure', {}, el('figcaption', { class: 'small' }, 'without'), el('p', { id: 'steer-plain', class: 'steer-text mono' })),
          el('figure', {}, el('figcaption', { id: 'steer-with', class: 'small' }, 'with'), el('p', { id: 'steer-steered', class: 'steer-text mono' })))));
    $('#steering-panel').replaceWith(panel);
    this.#panel = panel;
    this.#a = $<HTMLInputElement>('#steer-a', panel);
    this.#b = $<HTMLInputElement>('#steer-b', panel);
    this.#layer = $<HTMLSelectElement>('#steer-layer', panel);
    this.#scale = $<HTMLInputElement>('#steer-scale', panel);
    this.#run = $<HTMLButtonElement>('#steer-run', panel);
    this.#run.addEventListener('click', () => void this.run());
    $('#steer-cancel', panel).addEventListener('click', () => this.#running?.abort(CANCELLED));
  }

  /** A new model (or none): its layers in the select (the middle one chosen), results cleared. */
  setModel(model: DemoModel | null): void {
    this.#running?.abort(CANCELLED);
    this.#model = model;
    const L = model?.dims.layers ?? 0;
    this.#layer.replaceChildren(...Array.from({ length: L }, (_v, l) => new Option(String(l), String(l))));
    this.#layer.value = String(Math.floor(L / 2));
    this.#clear();
    this.#run.disabled = !model;
  }

  /** The URL fields of the run shown. */
  state(): Partial<ViewState> {
    const s = this.#shown;
    return s ? { steerA: s.a, steerB: s.b, steerLayer: s.layer, steerScale: s.scale } : {};
  }

  /** Applies the URL fields; runs when steerLayer is there (it was run). */
  async restore(s: ViewState): Promise<void> {
    this.#a.value = s.steerA ?? STEER_DEFAULTS.a;
    this.#b.value = s.steerB ?? STEER_DEFAULTS.b;
    this.#scale.value = String(s.steerScale ?? STEER_DEFAULTS.scale);
    const L = this.#model?.dims.layers ?? 0;
    if (s.steerLayer !== undefined && s.steerLayer < L) this.#layer.value = String(s.steerLayer);
    this.#clear();
    if (s.steerLayer !== undefined && s.steerLayer < L) await this.run();
  }

  #clear(): void {
    this.#shown = null;
    $('#steer-result', this.#panel).hidden = true;
    message($('#steer-msg', this.#panel), '');
    delete this.#panel.dataset.state;
  }

  /** The vector, then the two generations, with the bar and Cancel. */
  async run(): Promise<void> {
    const m = this.#model, msg = $('#steer-msg', this.#panel);
    if (!m || this.#running) return;
    if (this.host.busy()) { message(msg, 'The page is generating: Steer runs after it (both use the model\'s cache).', 'info'); return; }
    const layer = Number(this.#layer.value), scale = Number(this.#scale.value);
    const a = this.#a.value, b = this.#b.value;
    const o = this.host.settings();
    const abort = (this.#running = new AbortController());
    this.#clear();
    this.#run.disabled = true;
    this.#panel.dataset.state = 'running';
    const row = $('#steer-progress', this.#panel), bar = $<HTMLProgressElement>('#steer-bar', this.#panel), text = $('#steer-bar-text', this.#panel);
    const total = 2 * o.maxNewTokens;
    const caption = (done: number) => `Generating: ${done} of ${total} tokens (without, then with the vector)`;
    progress(bar, 0, caption(0), text);
    row.hidden = false;
    let done = 0;
    try {
      if (!Number.isFinite(scale)) throw new Error(`the scale "${this.#scale.value}" is not a number`);
      const enc = (s: string, what: string) => {
        const ids = m.tokenizer.encode(s);
        if (!ids.length) throw new Error(`${what} is empty: type a few words`);
        return ids.slice(-m.dims.positions);
      };
      const idsA = enc(a, 'prompt A'), idsB = enc(b, 'prompt B');
      let ids = enc(this.host.prompt(), 'the page\'s prompt');
      const room = m.dims.positions - o.maxNewTokens;
      if (room < 1) throw new Error(`${o.maxNewTokens} new tokens do not fit in this model's context of ${m.dims.positions}`);
      ids = ids.slice(-room);
      await nextFrame(); // the bar painted first
      const vector = await m.residual.steeringVector(idsA, idsB, layer);
      abort.signal.throwIfAborted();
      const step = (base: number) => ({ signal: abort.signal, onProgress: (d: number) => { done = base + d; progress(bar, done / total, caption(done), text); } });
      const plain = await m.residual.generate(ids, o, step(0));
      const steered = await m.residual.generate(ids, { ...o, steer: [{ layer, vector, scale }] }, step(o.maxNewTokens));
      abort.signal.throwIfAborted();
      let norm = 0;
      for (const x of vector) norm += x * x;
      $('#steer-vector', this.#panel).textContent = `‖vector‖ = ${fmt.p3(Math.sqrt(norm))} at layer ${layer} (resid_pre of A minus B, ` +
        `${idsA.length} and ${idsB.length} tokens); ${plain.length} and ${steered.length} tokens, seed ${o.seed}, temperature ${o.temperature}, top-k ${o.topK}.`;
      $('#steer-with', this.#panel).textContent = `with ${scale} × vector at layer ${layer}`;
      $('#steer-plain', this.#panel).textContent = m.tokenizer.decode(plain);
      $('#steer-steered', this.#panel).textContent = m.tokenizer.decode(steered);
      $('#steer-result', this.#panel).hidden = false;
      this.#shown = { a, b, layer, scale };
      this.#panel.dataset.state = 'done';
    } catch (e) {
      if (abort.signal.aborted && abort.signal.reason === CANCELLED) {
        message(msg, `Cancelled after ${done} of ${total} tokens. Steer starts again.`, 'info');
        this.#panel.dataset.state = 'cancelled';
      } else if (!abort.signal.aborted) {
        message(msg, `Steering failed: ${(e as Error).message}`, 'error');
        this.#panel.dataset.state = 'error';
      }
    } finally {
      this.#running = null;
      row.hidden = true;
      this.#run.disabled = !this.#model;
      this.host.changed();
    }
  }
}
