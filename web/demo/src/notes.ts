// The notes above the explorer's views: the model's grouped-query attention and the shown
// layer's sliding window, in words.
import { kvGroupsText, windowOf, type AttnData } from './contract';
import { $ } from './ui';

/**
 * The model's grouped-query attention (which query heads share a key/value head) and the shown
 * layer's sliding window, in words, above the views.
 */
export function renderNotes(d: AttnData | undefined, layer: number): void {
  const gqa = $('#gqa'), win = $('#window-note');
  const groups = d ? kvGroupsText(d) : '';
  gqa.hidden = !groups;
  gqa.textContent = groups ? `Grouped-query attention, ${d!.nHead} query heads over ${d!.kvHeads} key/value heads: ${groups}.` : '';
  const w = d ? windowOf(d, layer) : 0;
  win.hidden = !w;
  win.dataset.window = String(w);
  win.textContent = w
    ? `Layer ${layer}: window ${w}. Each query sees itself and the ${w - 1} tokens before it; keys further back are hidden (no lines, grey in the maps).`
    : '';
}
