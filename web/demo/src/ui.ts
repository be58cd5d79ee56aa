// Small DOM helpers shared by the pages: element lookup and building, progress bars, messages,
// formatting.
import * as d3 from 'd3';

export function $<T extends Element = HTMLElement>(sel: string, root: ParentNode = document): T {
  const e = root.querySelector<T>(sel);
  if (!e) throw new Error(`demo: element ${sel} not found`);
  return e;
}

/** An element with attributes (true: present, empty) and children (strings become text). */
export function el(tag: string, attrs: Record<string, string | true> = {}, ...children: (Node | string)[]): HTMLElement {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v === true ? '' : v);
  e.append(...children);
  return e;
}

/** Sets a <progress> (value in [0, 1], or null for indeterminate) and its caption. */
export function progress(bar: HTMLProgressElement, value: number | null, caption?: string, label?: HTMLElement): void {
  if (value === null) bar.removeAttribute('value');
  else bar.value = Math.max(0, Math.min(1, value));
  bar.max = 1;
  if (label && caption !== undefined) label.textContent = caption;
}

export type Tone = 'info' | 'ok' | 'error';
/** Shows a message in a role=status/alert element. */
export function message(box: HTMLElement, text: string, tone: Tone = 'info'): void {
  box.textContent = text;
  box.dataset.tone = tone;
  box.hidden = !text;
  box.setAttribute('role', tone === 'error' ? 'alert' : 'status');
}

export const fmt = {
  p: d3.format('.2f'),
  p3: d3.format('.3f'),
  num: (x: number) => (x === -Infinity ? '−∞' : x === Infinity ? '∞' : Math.abs(x) >= 1000 || (x !== 0 && Math.abs(x) < 0.001) ? d3.format('.2~e')(x) : d3.format('.3~f')(x)),
  bytes: (b: number) => (b < 1024 ? `${b} B` : b < 1048576 ? `${d3.format('.3~')(b / 1024)} KiB` : b < 1073741824 ? `${d3.format('.3~')(b / 1048576)} MiB` : `${d3.format('.3~')(b / 1073741824)} GiB`),
  ms: (t: number) => (t < 1 ? `${d3.format('.3~')(t * 1000)} µs` : t < 1000 ? `${d3.format('.3~')(t)} ms` : `${d3.format('.3~')(t / 1000)} s`),
};

/** Sequential colour for attention weights in [0, 1]. */
export const weightColor = d3.scaleSequential(d3.interpolateBlues).domain([0, 1]);
/** One colour per head. */
/** 18 distinct colours (Tableau 10, then Dark 2), so 12- and 16-head models need no repeats. */
const HEAD_COLORS = [...d3.schemeTableau10, ...d3.schemeDark2];
export const headColor = (h: number): string => HEAD_COLORS[h % HEAD_COLORS.length];

/** Text colour readable over a weight cell. */
export const inkOn = (w: number): string => (w > 0.55 ? '#fff' : '#111');

/** Makes a token readable: spaces, newlines and control bytes become visible marks. */
export function showToken(t: string): string {
  if (t === '') return '∅';
  return t.replace(/ /g, '␣').replace(/\n/g, '↵').replace(/\t/g, '⇥').replace(/\r/g, '␍')
    .replace(/[\u0000-\u001f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

/** Waits for the next animation frame (lets the browser paint between chunks of work). */
export const nextFrame = (): Promise<void> => new Promise((ok) => requestAnimationFrame(() => ok()));
/** Yields to the event loop (so a Stop click or progress repaint gets through). */
export const yieldToEvents = (): Promise<void> => new Promise((ok) => setTimeout(ok, 0));

/** Triggers a download of a Blob. */
export function download(blob: Blob, name: string): void {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}
