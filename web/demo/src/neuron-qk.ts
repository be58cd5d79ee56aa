// The neuron view's queries and keys: qkv's forward with outputQueriesKeys, fetched once per
// token sequence, with the progress bar and Cancel, and not while another pass runs (its end
// draws the view again). Until they are in, the neuron box says what is happening.
import type { DemoModel } from './api';
import type { AttnData } from './contract';
import { stoppedBy, type ForwardProgress } from './forward-progress';

/** What the fetch reads and sets of the model page's state. */
export interface QkState {
  model: DemoModel | null;
  data: AttnData | null;
  /** A fetch is running. */
  qkPending: boolean;
  /** The text whose fetch the user cancelled: not started again until asked. */
  qkCancelled: AttnData | null;
}

/** A line of the neuron box: 'info' (muted) or 'error'. */
function note(text: string, tone: 'info' | 'error'): HTMLParagraphElement {
  const p = document.createElement('p');
  p.className = tone === 'error' ? 'small' : 'small muted';
  p.dataset.tone = tone;
  p.textContent = text;
  return p;
}

/**
 * Fetches the queries and keys of `d` (which has none yet) for the neuron view in `box`, or says
 * that a fetch is under way. When they arrive they are stored on st.data if it still holds the
 * same tokens, and `arrived` runs; after a Cancel, the box offers a button that runs `retry`.
 */
export function fetchQueriesKeys(box: HTMLElement, d: AttnData, st: QkState, forward: ForwardProgress,
  arrived: () => void, retry: () => void): void {
  if (st.model && !st.qkPending && !forward.busy && st.qkCancelled !== d) {
    st.qkPending = true;
    const ids = d.ids.slice(), m = st.model;
    box.replaceChildren(note('Computing the queries and keys…', 'info'));
    forward.run('Queries and keys', ids.length, (p) => m.queriesKeys(ids, p)).then((qk) => {
      st.qkPending = false;
      const cur = st.data;
      if (cur && cur.ids.length === ids.length && cur.ids.every((id, i) => id === ids[i])) { cur.q = qk.q; cur.k = qk.k; }
      arrived();
    }, (e: unknown) => {
      st.qkPending = false;
      const stopped = stoppedBy(e);
      if (stopped === 'replaced') return; // a newer pass (a new prompt) draws this view when it ends
      if (stopped === 'cancelled') {
        st.qkCancelled = d;
        const again = document.createElement('button');
        again.type = 'button';
        again.textContent = 'Compute them';
        again.addEventListener('click', () => { st.qkCancelled = null; retry(); });
        const p = note(`Cancelled: the queries and keys of ${ids.length} tokens were not computed. `, 'info');
        p.append(again);
        box.replaceChildren(p);
      } else {
        box.replaceChildren(note(`Could not get the queries and keys from qkv: ${(e as Error).message}`, 'error'));
      }
    });
  } else if (!box.querySelector('[data-tone]')) {
    box.replaceChildren(note('Computing the queries and keys…', 'info'));
  }
}
