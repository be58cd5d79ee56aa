// The explorer's view in the page's URL (after #), so that reloading restores it and a link
// shared opens it: model, prompt, layer, head, view, map, words, and the test's removed heads
// and blocked cells. Written with history.replaceState on every render (no history entries);
// read once at start. The guided example's step (guide-panel.ts) is `guide`. Example:
//   index.html#model=tiny-kjv-bpe&prompt=In+the+beginning&view=model&layer=1&head=2&map=raw&remove=1.2,0.3&block=1.0:4-0
// model: a site model's folder name (web/models/), or hub:<what the Hub panel's box held> (an id
// or a folder URL, loaded by that panel, with its progress and Cancel);
// a dropped checkpoint cannot be named in a URL (the link then opens the default model).
// The "Follow a prediction" views add theirs: lens=1 (the logit lens was run), lensTarget=<id>
// (absent: the model's own prediction per position), lensPos=<position focused>, attr=<position
// the attribution ran at>, attrA=<id>, attrB=<id> (absent: the top prediction, no B), e.g.
//   index.html#model=tiny-kjv-induction&prompt=...&lens=1&lensPos=5&attr=13&attrA=430&attrB=324
// The Follow-a-prediction panels add theirs: patching (clean, corrupt, sweep, answer=<correct>,<wrong>)
// and steering (steerA, steerB, steerLayer, steerScale), e.g.
//   index.html#model=tiny-kjv-induction&prompt=...&corrupt=...&sweep=heads&answer=430,324&steerA=love&steerB=hate&steerLayer=2&steerScale=4
// The encoders page writes the same fields for its fill-mask panel (view = head or model, the
// prompt is the sentence with [MASK]) and one more, target: the word whose masked-token loss the
// test prints, e.g.
//   encoders.html#model=tiny-bert-kjv&prompt=In+the+beginning+God+created+the+%5BMASK%5D.&view=model&layer=2&head=1&map=raw&remove=2.1&target=heaven
import { MAP_MODES, type MapMode } from './map-mode';
import type { Block } from './test-head';

export type Tab = 'head' | 'model' | 'neuron';
export interface ViewState {
  model?: string;
  prompt?: string;
  tab?: Tab;
  layer?: number;
  head?: number;
  map?: MapMode;
  words?: boolean;
  remove?: [number, number][];
  block?: Block[];
  /** the encoders page: the word that belongs at [MASK] */
  target?: string;
  /** the logit lens was run (lens-panel.ts) */
  lens?: boolean;
  /** the lens's target token id (absent: the model's own prediction at each position) */
  lensTarget?: number;
  /** the lens's focused position */
  lensPos?: number;
  /** the direct logit attribution was run at this position (attribution-panel.ts) */
  attr?: number;
  /** the attribution's token A (absent: the model's top prediction) */
  attrA?: number;
  /** the attribution's token B ("A rather than B"; absent: the logit of A alone) */
  attrB?: number;
  /** the guided example: the step shown (1-4; the walk runs again on load) */
  guide?: number;
  /** patching: the clean prompt (absent = the page's prompt) */
  clean?: string;
  /** patching: the corrupted prompt */
  corrupt?: string;
  /** patching: the sweep that was run and is shown */
  sweep?: PatchSweep;
  /** patching: [correctId, wrongId] (absent = each prompt's top prediction) */
  answer?: [number, number];
  /** steering: prompt A (the vector points from B to A) */
  steerA?: string;
  /** steering: prompt B */
  steerB?: string;
  /** steering: the layer whose resid_pre the vector is read at and added to (present: it was run) */
  steerLayer?: number;
  /** steering: the vector's scale */
  steerScale?: number;
}

/** The patching panel's sweeps (qkv's activationPatching `over`). */
export type PatchSweep = 'heads' | 'headPositions' | 'residPre';
const SWEEPS: PatchSweep[] = ['heads', 'headPositions', 'residPre'];

const int = (s: string | null): number | undefined => (s !== null && /^\d+$/.test(s) ? Number(s) : undefined);

/** The state in a hash ('#model=...'); fields that do not parse are left out. */
export function parseState(hash: string): ViewState {
  const p = new URLSearchParams(hash.replace(/^#/, ''));
  const s: ViewState = {};
  const model = p.get('model');
  // a site model's folder name, or hub: and what the Hub panel's box takes (an id, a folder URL)
  if (model && (/^[\w.-]+$/.test(model) ? !model.includes('..') : /^hub:\S+$/.test(model))) s.model = model;
  if (p.has('prompt')) s.prompt = p.get('prompt')!;
  const tab = p.get('view');
  if (tab === 'head' || tab === 'model' || tab === 'neuron') s.tab = tab;
  s.layer = int(p.get('layer'));
  s.head = int(p.get('head'));
  const map = p.get('map') as MapMode;
  if (MAP_MODES.includes(map)) s.map = map;
  if (p.has('words')) s.words = p.get('words') === '1';
  const remove = p.get('remove');
  if (remove) s.remove = remove.split(',').map((x) => x.split('.').map(Number) as [number, number]).filter((x) => x.length === 2 && x.every(Number.isInteger));
  const block = p.get('block');
  if (block) {
    s.block = block.split(',').flatMap((x) => {
      const m = /^(\d+)\.(\d+):(\d+)-(\d+)$/.exec(x);
      return m ? [{ layer: +m[1], head: +m[2], q: +m[3], k: +m[4] }] : [];
    });
  }
  if (p.has('target')) s.target = p.get('target')!;
  if (p.get('lens') === '1') s.lens = true;
  s.lensTarget = int(p.get('lensTarget'));
  s.lensPos = int(p.get('lensPos'));
  s.attr = int(p.get('attr'));
  s.attrA = int(p.get('attrA'));
  s.attrB = int(p.get('attrB'));
  s.guide = int(p.get('guide'));
  if (p.has('clean')) s.clean = p.get('clean')!;
  if (p.has('corrupt')) s.corrupt = p.get('corrupt')!;
  const sweep = p.get('sweep') as PatchSweep;
  if (SWEEPS.includes(sweep)) s.sweep = sweep;
  const answer = (p.get('answer') ?? '').split(',');
  if (answer.length === 2 && answer.every((x) => /^\d+$/.test(x))) s.answer = answer.map(Number) as [number, number];
  if (p.has('steerA')) s.steerA = p.get('steerA')!;
  if (p.has('steerB')) s.steerB = p.get('steerB')!;
  s.steerLayer = int(p.get('steerLayer'));
  const scale = Number(p.get('steerScale') ?? NaN);
  if (p.get('steerScale') && Number.isFinite(scale)) s.steerScale = scale;
  for (const k of Object.keys(s) as (keyof ViewState)[]) if (s[k] === undefined) delete s[k];
  return s;
}

/** The hash for a state (without '#'), in a fixed order. */
export function formatState(s: ViewState): string {
  const p = new URLSearchParams();
  if (s.model) p.set('model', s.model);
  if (s.prompt !== undefined) p.set('prompt', s.prompt);
  if (s.tab) p.set('view', s.tab);
  if (s.layer !== undefined) p.set('layer', String(s.layer));
  if (s.head !== undefined) p.set('head', String(s.head));
  if (s.map) p.set('map', s.map);
  if (s.words) p.set('words', '1');
  if (s.remove?.length) p.set('remove', s.remove.map(([l, h]) => `${l}.${h}`).join(','));
  if (s.block?.length) p.set('block', s.block.map((b) => `${b.layer}.${b.head}:${b.q}-${b.k}`).join(','));
  if (s.target !== undefined) p.set('target', s.target);
  if (s.lens) p.set('lens', '1');
  if (s.lensTarget !== undefined) p.set('lensTarget', String(s.lensTarget));
  if (s.lensPos !== undefined) p.set('lensPos', String(s.lensPos));
  if (s.attr !== undefined) p.set('attr', String(s.attr));
  if (s.attrA !== undefined) p.set('attrA', String(s.attrA));
  if (s.attrB !== undefined) p.set('attrB', String(s.attrB));
  if (s.guide !== undefined) p.set('guide', String(s.guide));
  if (s.clean !== undefined) p.set('clean', s.clean);
  if (s.corrupt !== undefined) p.set('corrupt', s.corrupt);
  if (s.sweep) p.set('sweep', s.sweep);
  if (s.answer) p.set('answer', s.answer.join(','));
  if (s.steerA !== undefined) p.set('steerA', s.steerA);
  if (s.steerB !== undefined) p.set('steerB', s.steerB);
  if (s.steerLayer !== undefined) p.set('steerLayer', String(s.steerLayer));
  if (s.steerScale !== undefined) p.set('steerScale', String(s.steerScale));
  return p.toString();
}

/** The URL's model field for a site model folder ('./models/tiny-kjv/' -> 'tiny-kjv') and back. */
export const modelName = (url: string): string => url.replace(/\/$/, '').split('/').pop() ?? url;
export const modelUrl = (name: string): string => `./models/${name}/`;

/** Puts the state in the address bar when it changed (replaceState: no new history entry). */
export function writeState(s: ViewState): void {
  const hash = formatState(s);
  if (location.hash.replace(/^#/, '') === hash) return;
  history.replaceState(history.state, '', `${location.pathname}${location.search}#${hash}`);
}
