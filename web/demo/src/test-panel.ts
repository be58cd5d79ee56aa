// The "Test a head" panel's markup, one copy for the model page and the encoders page (Vite has
// no HTML includes): each page's HTML holds a <div id="test-panel"> where it goes, and
// test-head.ts builds it there before it wires the buttons. The ids are the ones test-head.ts,
// the pages and the browser tests read; the labels and aria attributes are those the pages'
// HTML had. What differs between the pages is the sentence under the heading and, on the
// encoders page, the field for the word whose masked-token loss is printed (mask-readout.ts).
import { el } from './ui';

export interface TestPanelWords {
  /** the sentence under the heading: the question, and what runs again */
  intro: string;
  /** the field for the word whose loss is printed (#mask-target), where the page has one */
  target?: { label: string; value: string };
}

/** The model page's: the next token after the prompt. */
export const NEXT_TOKEN_PANEL: TestPanelWords = {
  intro: 'Does the prediction depend on what a map shows? Remove heads, or block query → key cells, and the prompt runs again: the next token before and after.',
};

/** The encoders page's: the prediction at the [MASK], and the word that belongs there. */
export const MASK_PANEL: TestPanelWords = {
  intro: 'Does the filled word depend on what a map shows? Remove heads, or block query → key cells, and the sentence runs again: the prediction at the [MASK] before and after.',
  target: { label: 'The word that belongs at [MASK] (for the loss)', value: 'heaven' },
};

/** Builds the panel in place of `slot` and returns it. */
export function buildTestPanel(slot: HTMLElement, words: TestPanelWords): HTMLElement {
  const check = (id: string) => el('input', { id, type: 'checkbox' });
  const panel = el('section', { class: 'tool', id: 'test-panel', 'aria-labelledby': 'test-h' },
    el('h3', { id: 'test-h' }, 'Test a head'),
    el('p', { class: 'small muted' }, words.intro),
    // the mode a click in the model view is in
    el('label', { class: 'small' }, check('remove-mode'), ' clicks remove: a click on a head in the model view removes it ' +
      '(again: puts it back), a click on a cell of its enlarged map blocks that query → key edge'));
  // the encoders page's target word
  if (words.target) {
    panel.append(el('label', { class: 'field' }, el('span', {}, words.target.label),
      el('input', { id: 'mask-target', type: 'text', spellcheck: 'false', value: words.target.value })));
  }
  // what is removed, the buttons, the message and the result
  panel.append(
    el('p', { id: 'test-what', class: 'small', 'aria-live': 'polite' }),
    el('div', { class: 'controls' },
      el('button', { id: 'test-run', type: 'button', disabled: true }, 'Run the test'),
      el('button', { id: 'test-clear', type: 'button', disabled: true }, 'Clear'),
      el('label', { class: 'small' }, check('maps-after'), ' show the maps after')),
    el('div', { id: 'test-msg', class: 'msg', hidden: true }),
    el('div', { id: 'test-result', 'aria-live': 'polite', hidden: true }));
  slot.replaceWith(panel);
  return panel;
}
