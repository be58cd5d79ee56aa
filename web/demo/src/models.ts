// The models the page offers (web/models/, served at ./models/): the BPE one first, whose tokens
// are mostly whole words, then the same model fine-tuned to have an induction head, then the
// byte-level one. All are GPT-2s trained on the KJV (tools/model/README.md). Then GPT-2 small
// from the Hugging Face Hub (hub.ts).
export interface ModelChoice { url: string; label: string }
/** The select's value for the Hub checkpoint (loaded by the Hub panel, hub.ts). */
export const HUB = 'hub';

export const MODELS: ModelChoice[] = [
  { url: './models/tiny-kjv-bpe/', label: 'tiny-kjv-bpe · BPE tokens (3000)' },
  { url: './models/tiny-kjv-induction/', label: 'tiny-kjv-induction · BPE tokens, an induction head' },
  { url: './models/tiny-kjv/', label: 'tiny-kjv · byte tokens (256)' },
  { url: HUB, label: 'GPT-2 small (124M) · Hugging Face Hub' },
  // the encoder and the encoder-decoder have their own page (both kinds of attention side by side)
  { url: './encoders.html#mlm-h', label: 'tiny-bert-kjv · encoder, fill-mask (Encoders page)' },
  { url: './encoders.html#s2s-h', label: 'tiny-numbers · encoder-decoder, cross-attention (Encoders page)' },
];
export const DEFAULT_MODEL = MODELS[0].url;
const DROPPED = 'dropped';

/** Fills the model <select> with MODELS, the default selected. */
export function fillModelSelect(sel: HTMLSelectElement): void {
  sel.replaceChildren(...MODELS.map((m) => new Option(m.label, m.url)));
  sel.value = DEFAULT_MODEL;
}

/** Shows a dropped checkpoint as the select's current entry (choosing a listed model reloads it). */
export function showDropped(sel: HTMLSelectElement, name: string): void {
  let opt = [...sel.options].find((o) => o.value === DROPPED);
  if (!opt) { opt = new Option('', DROPPED); sel.append(opt); }
  opt.textContent = `${name} (dropped)`;
  sel.value = DROPPED;
}
