// The notes above the explorer's views: the model's grouped-query attention and the shown
// layer's kind (a sliding window, or a global layer among windowed ones: layer-kinds.ts), in words.
import { kvGroupsText, windowOf, type AttnData } from './contract';
import { layerNote } from './layer-kinds';
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
  win.dataset.window = String(w);
  const note = d ? layerNote(d, layer) : '';
  win.hidden = !note;
  win.dataset.kind = w ? 'window' : note ? 'global' : '';
  win.textContent = note;
}
