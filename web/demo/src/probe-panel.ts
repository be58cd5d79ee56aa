// The "Map vs effect" section's markup (Find heads), one copy for the model page and the
// encoders page (Vite has no HTML includes): each page's HTML holds a <div id="probe-panel">
// where it goes, and effect-scatter.ts builds it there before it wires the button. The ids are
// the ones effect-scatter.ts and the browser tests read (#probe-h, #find-heads, #probe-msg,
// #scatter); the classes and aria attributes are those the pages' HTML had. What differs
// between the pages is the sentence under the heading: what is probed, which scores (the
// encoder's maps have a next-token one) and which loss the ablation effect changes.
import { el } from './ui';

export interface ProbePanelWords {
  /** the sentence under the heading: what is probed, the scores and the ablation effect */
  intro: string;
}

/** The model page's: the prompt's loss with the head removed. */
export const NEXT_TOKEN_PROBES: ProbePanelWords = {
  intro: 'Find heads runs qkv\'s head probes on the loaded model and the prompt: each head\'s ' +
    'previous-token, induction and first-token (sink) scores, read off its maps, and its ablation effect, ' +
    'the prompt\'s loss with the head removed (one forward pass per head).',
};

/** The encoders page's: the next-token score too, and the masked-token loss with the head removed. */
export const MASK_PROBES: ProbePanelWords = {
  intro: 'Find heads runs qkv\'s head probes on the encoder and the sentence: each head\'s ' +
    'previous-token, next-token, induction and first-token (sink) scores, read off its maps, and its ablation effect: ' +
    'the change in the masked-token loss when the head is removed, the sentence masked as BERT was ' +
    'trained (15 % of its words, from a fixed seed; one forward pass per head).',
};

/** Builds the section in place of `slot` and returns it. */
export function buildProbePanel(slot: HTMLElement, words: ProbePanelWords): HTMLElement {
  const panel = el('section', { class: 'tool', id: 'probe-panel', 'aria-labelledby': 'probe-h' },
    el('h3', { id: 'probe-h' }, 'Map vs effect'),
    el('p', { class: 'small muted' }, words.intro),
    // the button, the message and the scatter (effect-scatter.ts fills and shows them)
    el('div', { class: 'controls' }, el('button', { id: 'find-heads', type: 'button', disabled: true }, 'Find heads')),
    el('div', { id: 'probe-msg', class: 'msg', hidden: true }),
    el('div', { id: 'scatter', hidden: true }));
  slot.replaceWith(panel);
  return panel;
}
