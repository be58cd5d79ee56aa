// What the attribution panel draws (attribution-panel.ts) from qkv's logitAttribution: each
// head's direct logit attribution on a layers x heads grid (a diverging scale, blue below 0 and
// red above, symmetric around 0; each cell a button that selects the head in the model view), and
// the parts ranked by |value| with the rest summed in one line, then the sum of every part beside
// the forward's logit, both printed to the same digits.
import * as d3 from 'd3';
import type { AttributionPart, LogitAttributionResult } from 'qkv';
import { el } from './ui';

/** Parts listed one by one; the rest are summed in one line. */
export const LISTED_PARTS = 10;
/** Models with more heads than this show the grid's values on hover and focus only. */
const PRINTED_HEADS = 16;

/** A part's name as the library gives it, and what it is: "L2H0 (layer 2, head 0)". */
export function partLabel(name: string): string {
  let m: RegExpExecArray | null;
  if ((m = /^L(\d+)H(\d+)$/.exec(name))) return `${name} (layer ${m[1]}, head ${m[2]})`;
  if ((m = /^L(\d+)\.attn_bias$/.exec(name))) return `${name} (layer ${m[1]}'s attention output bias)`;
  if ((m = /^L(\d+)\.mlp$/.exec(name))) return `${name} (layer ${m[1]}'s MLP)`;
  const fixed: Record<string, string> = {
    embed: 'the token\'s embedding', pos_embed: 'the position\'s embedding', 'ln_final.bias': 'the final norm\'s bias',
  };
  return fixed[name] ? `${name} (${fixed[name]})` : name;
}

/** A value with its sign, to `digits` decimals: "+1.234", "−0.020". */
export function signed(x: number, digits: number): string {
  const s = Math.abs(x).toFixed(digits);
  return Number(s) === 0 ? s : `${x < 0 ? '−' : '+'}${s}`;
}

/**
 * The decimals the sum of the parts and the logit are printed to: 3, or more where the two
 * (equal within float32 rounding) fall on either side of a rounding boundary at 3.
 */
export function sumDigits(sum: number, total: number): number {
  for (let d = 3; d < 7; d++) if (sum.toFixed(d) === total.toFixed(d)) return d;
  return 7;
}

/** Blue (negative) through white to red (positive), symmetric: v in [-max, max]. */
const diverging = (v: number, max: number): string => d3.interpolateRdBu(0.5 - (max > 0 ? v / max : 0) / 2);

/** What the heads' grid draws: the attribution, the model's shape, what a click on a head does. */
export interface AttributionDraw {
  result: LogitAttributionResult;
  layers: number;
  heads: number;
  /** a head's cell clicked (or Enter / Space on it) */
  onHead(layer: number, head: number): void;
}

/** The heads' grid into `box`, their values described in `detail` on hover and focus. */
export function renderHeadGrid(box: HTMLElement, detail: HTMLElement, d: AttributionDraw): void {
  const value = new Map(d.result.parts.map((p) => [p.name, p.value]));
  const at = (l: number, h: number) => value.get(`L${l}H${h}`) ?? 0;
  let max = 0;
  for (let l = 0; l < d.layers; l++) for (let h = 0; h < d.heads; h++) max = Math.max(max, Math.abs(at(l, h)));
  const printed = d.heads <= PRINTED_HEADS;
  const describe = (l: number, h: number) => { detail.textContent = `${partLabel(`L${l}H${h}`)}: ${signed(at(l, h), 3)} of ${signed(d.result.total, 3)}`; };
  const head = el('tr', {}, el('th', { scope: 'col' }, 'layer ╲ head'), ...Array.from({ length: d.heads }, (_v, h) => el('th', { scope: 'col' }, String(h))));
  const rows = Array.from({ length: d.layers }, (_v, l) => el('tr', {}, el('th', { scope: 'row' }, `L${l}`),
    ...Array.from({ length: d.heads }, (_w, h) => {
      const v = at(l, h);
      const b = el('button', {
        type: 'button', class: 'attr-head', 'data-layer': String(l), 'data-head': String(h), 'data-value': String(v),
        style: `background:${diverging(v, max)};color:${max > 0 && Math.abs(v) / max > 0.6 ? '#fff' : '#111'}`,
        'aria-label': `${partLabel(`L${l}H${h}`)}: ${signed(v, 3)}; shows it in the model view`,
      }, printed ? signed(v, 2) : '');
      b.addEventListener('click', () => d.onHead(l, h));
      b.addEventListener('mouseenter', () => describe(l, h));
      b.addEventListener('focus', () => describe(l, h));
      return el('td', {}, b);
    })));
  const scale = el('p', { class: 'small attr-scale' }, el('span', {}, signed(-max, 2)),
    el('span', { class: 'attr-ramp', style: `background:linear-gradient(to right, ${diverging(-max, max)}, ${diverging(0, max)}, ${diverging(max, max)})` }),
    el('span', {}, signed(max, 2)), el('span', { class: 'muted' }, ' each head\'s part of the logit (click a head to see its map)'));
  box.replaceChildren(el('div', { class: 'scroll-x' }, el('table', { class: 'attr-grid', 'aria-label': 'direct logit attribution per head: layers × heads' },
    el('thead', {}, head), el('tbody', {}, ...rows))), scale);
  detail.textContent = '';
}

/** The ranked parts, the rest in one line, and the sum of every part beside the logit. */
export function renderPartList(box: HTMLElement, result: LogitAttributionResult, logitText: string): void {
  const ranked = [...result.parts].sort((a, b) => Math.abs(b.value) - Math.abs(a.value));
  const listed = ranked.slice(0, LISTED_PARTS), rest = ranked.slice(LISTED_PARTS);
  let sum = 0;
  for (const p of result.parts) sum += p.value;
  const digits = sumDigits(sum, result.total);
  const row = (cells: (string | Node)[], cls = '', part?: AttributionPart) => {
    const tr = el('tr', cls ? { class: cls } : {}, ...cells.map((c, i) => el(i === 1 ? 'th' : 'td', i === 1 ? { scope: 'row' } : { class: 'num' }, c)));
    if (part) tr.dataset.part = part.name;
    return tr;
  };
  const restSum = rest.reduce((s, p) => s + p.value, 0);
  const body = [
    ...listed.map((p, i) => row([String(i + 1), partLabel(p.name), signed(p.value, digits)], 'attr-part', p)),
    ...(rest.length ? [row(['', `the other ${rest.length} parts`, signed(restSum, digits)], 'attr-rest')] : []),
  ];
  const foot = [
    row(['', `sum of all ${result.parts.length} parts`, signed(sum, digits)], 'attr-sum'),
    row(['', `${logitText} (the forward's)`, signed(result.total, digits)], 'attr-total'),
  ];
  box.replaceChildren(el('table', { class: 'test-table attr-list', id: 'attr-list' },
    el('caption', {}, `The parts of ${logitText} with the largest |value|`),
    el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, '#'), el('th', { scope: 'col' }, 'part'), el('th', { scope: 'col', class: 'num' }, 'adds'))),
    el('tbody', {}, ...body), el('tfoot', {}, ...foot)));
}
