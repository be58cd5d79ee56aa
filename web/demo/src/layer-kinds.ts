// A model's layer kinds in words, for the notes above the views and the headline: Gemma 3's
// local (sliding-window) and global layers, Mistral's window on every layer, Qwen's windows from
// max_window_layers on. The per-layer label (" · window W", " · global") is contract.ts's
// layerKindText, shared by every view.
import { windowOf, type AttnData } from './contract';

/**
 * The note over the views for the shown layer: its window (the keys a query sees), or, in a
 * model that mixes windowed and full layers, that this one is global. '' for a model without
 * windows.
 */
export function layerNote(d: AttnData, layer: number): string {
  const w = windowOf(d, layer);
  if (w) return `Layer ${layer}: window ${w}. Each query sees itself and the ${w - 1} tokens before it; keys further back are hidden (no lines, grey in the maps).`;
  const windowed = (d.windows ?? []).filter((x) => x > 0);
  if (!windowed.length) return '';
  return `Layer ${layer}: global. Each query sees every token before it; ${layerMix(d.windows ?? [])}.`;
}

/**
 * How the layers mix, e.g. "5 local layers (window 512) for each global one: layers 5, 11 are
 * global" (Gemma 3's 5:1), or "layers 1-3 have a window of 4" ('' when no layer has a window).
 */
export function layerMix(windows: readonly number[]): string {
  const local = windows.flatMap((w, l) => (w ? [l] : [])), global = windows.flatMap((w, l) => (w ? [] : [l]));
  if (!local.length) return '';
  const w = windows[local[0]];
  if (!global.length) return `every layer has a window of ${w}`;
  const per = local.length / global.length, s = (n: number) => (n > 1 ? 's' : '');
  const ratio = Number.isInteger(per) ? `${per} local layer${s(per)} (window ${w}) for each global one` : `${local.length} local layers (window ${w}), ${global.length} global`;
  return `${ratio}: layer${global.length > 1 ? 's' : ''} ${global.join(', ')} ${global.length > 1 ? 'are' : 'is'} global`;
}

/** Headline words for a model that mixes local and global layers: " · 5 local : 1 global" ('' otherwise). */
export function mixTag(windows: readonly number[]): string {
  const local = windows.filter((w) => w > 0).length, global = windows.length - local;
  return local && global ? `${local} local : ${global} global layers` : '';
}
