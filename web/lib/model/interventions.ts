/**
 * Interventions on attention heads during a forward pass (docs/interventions.md): a head mask
 * (Hugging Face `head_mask`), attention knockout (Geva et al. 2023), and per-head outputs out
 * (`outputHeadOutputs`) and in (`patchHeadOutputs`: activation patching). Options of every
 * model's forward, checked here and handed to the wasm forward as one plain object
 * (wasm/interventions_arg.hpp), applied in C++ where each layer's attention is computed
 * (src/model/interventions.hpp).
 */
import { describe, fmtShape } from '../errors.js';
import { Tensor } from '../tensor.js';
import { isNumberArray } from '../validate.js';
import type { HeapScope } from '../wasm/heap.js';

/**
 * Multiplies each head's attention probabilities (0 removes the head): [numHeads] (every
 * layer) or [numLayers, numHeads], as a Tensor, a flat Float32Array / number[] (numHeads or
 * numLayers x numHeads values) or a number[][] (numLayers rows of numHeads).
 */
export type HeadMask = Tensor | Float32Array | ArrayLike<number> | ArrayLike<ArrayLike<number>>;

/** Blocks query -> key edges in one layer (every head, or `heads`): their scores become -inf. */
export interface Knockout {
  /** The layer whose attention is blocked, 0-based. */
  layer: number;
  /** Query heads to block in (default: every head). */
  heads?: ArrayLike<number>;
  /**
   * The edges: a bool mask [Lq, Lk] (a Tensor, or a Uint8Array of Lq x Lk; nonzero = blocked)
   * or a list of [query, key] pairs.
   */
  block: Tensor | Uint8Array | ArrayLike<readonly [number, number]>;
}

/** Replaces one head's output rows (before the output projection) during the forward. */
export interface HeadPatch {
  /** The layer, 0-based. */
  layer: number;
  /** The head within the layer, 0-based (a query head). */
  head: number;
  /** Query positions to replace (default: every position). */
  positions?: ArrayLike<number>;
  /**
   * The replacement: positions x Dv values (a Float32Array, number[] or Tensor of that many
   * elements, row by row), or a layer's `headOutputs` Tensor [1, H, L, Dv] from a forward of
   * the same length (head `head`, rows `positions` are read from it).
   */
  values: Tensor | Float32Array | ArrayLike<number>;
}

/** One attention stack's sizes (a decoder, an encoder, or one kind of a seq2seq's attention). */
export interface StackShape {
  layers: number;
  heads: number;
  /** Values per head output row (head_dim). */
  valueDim: number;
}

/** The wasm side's argument (wasm/interventions_arg.hpp): byte addresses, 0 = absent. */
export interface WasmInterventions {
  layers: number; heads: number; length: number; keys: number; valueDim: number;
  headScale: number; blockSlot: number; allow: number; blockCount: number; blockHeads: number;
  outputs: number; patchSlot: number; patch: number; patchRows: number; patchCount: number;
}

/** No intervention: what a plain forward passes. */
export const NO_INTERVENTIONS: Readonly<WasmInterventions> = Object.freeze({
  layers: 0, heads: 0, length: 0, keys: 0, valueDim: 0,
  headScale: 0, blockSlot: 0, allow: 0, blockCount: 0, blockHeads: 1,
  outputs: 0, patchSlot: 0, patch: 0, patchRows: 0, patchCount: 0,
});

/** What one stack's options ask for, checked, for a forward of Lq query rows over Lk keys. */
export interface StackPlan {
  shape: StackShape;
  Lq: number;
  Lk: number;
  headScale: Float32Array | null;
  knockout: { slot: Int32Array; allow: Uint8Array; count: number; heads: number } | null;
  outputs: boolean;
  patch: { slot: Int32Array; values: Float32Array; rows: Uint8Array; count: number } | null;
}

/** The option names of one stack (a seq2seq's decoder: decoderHeadMask, ...). */
export interface StackOptionNames {
  headMask: string;
  knockout?: string;
  patch?: string;
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v);

function intIn(fn: string, what: string, v: unknown, limit: number, noun: string): number {
  if (!isInt(v) || v < 0 || v >= limit) throw new RangeError(`${fn}: ${what} = ${describe(v)} is not ${noun} in [0, ${limit})`);
  return v;
}

/** A Tensor's data, not disposed, or null when `v` is no Tensor. */
function tensorData(fn: string, what: string, v: unknown): Float32Array | Uint8Array | null {
  if (!(v instanceof Tensor)) return null;
  if (v.disposed) throw new Error(`${fn}: ${what} is a disposed Tensor`);
  return v.data;
}

/** headMask -> [layers * heads] scales, or null when absent. */
export function parseHeadMask(fn: string, what: string, v: unknown, s: StackShape): Float32Array | null {
  if (v === undefined || v === null) return null;
  const { layers: NL, heads: H } = s;
  const need = `[${H}] (numHeads) or [${NL}, ${H}] (numLayers, numHeads)`;
  let flat: ArrayLike<number>;
  let shape: readonly number[];
  const td = tensorData(fn, what, v);
  if (td) {
    shape = (v as Tensor).shape;
    flat = td;
    if (!(shape.length === 1 && shape[0] === H) && !(shape.length === 2 && shape[0] === NL && shape[1] === H)) {
      throw new RangeError(`${fn}: ${what} has shape ${fmtShape(shape)}, need ${need}`);
    }
  } else if (Array.isArray(v) && v.length > 0 && v.every((r) => isNumberArray(r))) {
    const rows = v as ArrayLike<number>[];
    if (rows.length !== NL || rows.some((r) => r.length !== H)) {
      throw new RangeError(`${fn}: ${what} is ${rows.length} rows of ${rows.map((r) => r.length).join(', ')} values, need ${need}`);
    }
    flat = rows.flatMap((r) => Array.from(r));
    shape = [NL, H];
  } else if (isNumberArray(v)) {
    flat = v;
    if (v.length !== H && v.length !== NL * H) {
      throw new RangeError(`${fn}: ${what} has ${v.length} values, need ${need} (${H} or ${NL * H} values)`);
    }
    shape = v.length === H ? [H] : [NL, H];
  } else {
    throw new TypeError(`${fn}: ${what} must be a Tensor, a Float32Array or an array (of arrays) of numbers, ${need}; got ${describe(v)}`);
  }
  const out = new Float32Array(NL * H);
  for (let i = 0; i < out.length; i++) {
    const x = Number(flat[shape.length === 1 ? i % H : i]);
    if (!Number.isFinite(x)) throw new RangeError(`${fn}: ${what} holds ${String(flat[i % flat.length])}, not a finite number`);
    out[i] = x;
  }
  return out;
}

/** knockout -> per-layer allow masks (nonzero = may attend), or null when absent or empty. */
export function parseKnockout(fn: string, what: string, v: unknown, s: StackShape, Lq: number, Lk: number): StackPlan['knockout'] {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v)) throw new TypeError(`${fn}: ${what} must be an array of { layer, heads?, block }, got ${describe(v)}`);
  if (v.length === 0) return null;
  const { layers: NL, heads: H } = s;
  const entries = v.map((e: unknown, n) => {
    const at = `${what}[${n}]`;
    if (e === null || typeof e !== 'object') throw new TypeError(`${fn}: ${at} must be { layer, heads?, block }, got ${describe(e)}`);
    const o = e as Record<string, unknown>;
    for (const key of Object.keys(o)) {
      if (!['layer', 'heads', 'block'].includes(key)) throw new Error(`${fn}: ${at} has unknown key '${key}' (known: layer, heads, block)`);
    }
    const layer = intIn(fn, `${at}.layer`, o.layer, NL, 'a layer');
    let heads: number[] | null = null;
    if (o.heads !== undefined) {
      if (!isNumberArray(o.heads) || o.heads.length === 0) throw new TypeError(`${fn}: ${at}.heads must be a non-empty array of head indices, got ${describe(o.heads)}`);
      heads = Array.from(o.heads, (h, i) => intIn(fn, `${at}.heads[${i}]`, h, H, 'a head'));
    }
    return { layer, heads, blocked: blockedCells(fn, `${at}.block`, o.block, Lq, Lk) };
  });
  const slot = new Int32Array(NL).fill(-1);
  let count = 0;
  for (const e of entries) if (slot[e.layer] < 0) slot[e.layer] = count++;
  const Hb = entries.some((e) => e.heads) ? H : 1;
  const per = Lq * Lk;
  const allow = new Uint8Array(count * Hb * per).fill(1);
  for (const e of entries) {
    const heads = Hb === 1 ? [0] : e.heads ?? Array.from({ length: H }, (_, h) => h);
    for (const h of heads) {
      const base = (slot[e.layer] * Hb + h) * per;
      for (const c of e.blocked) allow[base + c] = 0;
    }
  }
  return { slot, allow, count, heads: Hb };
}

/** A block argument as the flat indices q * Lk + k of its blocked cells. */
function blockedCells(fn: string, what: string, b: unknown, Lq: number, Lk: number): number[] {
  const need = `a bool mask [${Lq}, ${Lk}] (queries, keys) or a list of [query, key] pairs`;
  const td = tensorData(fn, what, b);
  const cells: number[] = [];
  if (td || b instanceof Uint8Array) {
    const data = td ?? (b as Uint8Array);
    const shape = td ? (b as Tensor).shape : [data.length];
    const ok = td ? shape.length === 2 && shape[0] === Lq && shape[1] === Lk : data.length === Lq * Lk;
    if (!ok) throw new RangeError(`${fn}: ${what} has shape ${fmtShape(shape)}, need ${need}`);
    for (let i = 0; i < data.length; i++) if (data[i]) cells.push(i);
    return cells;
  }
  if (!Array.isArray(b)) throw new TypeError(`${fn}: ${what} must be ${need}, got ${describe(b)}`);
  b.forEach((p: unknown, i) => {
    if (!isNumberArray(p) || p.length !== 2) throw new TypeError(`${fn}: ${what}[${i}] must be a [query, key] pair, got ${describe(p)}`);
    const q = intIn(fn, `${what}[${i}][0] (query)`, p[0], Lq, 'a query position');
    const k = intIn(fn, `${what}[${i}][1] (key)`, p[1], Lk, 'a key position');
    cells.push(q * Lk + k);
  });
  return cells;
}

/** patchHeadOutputs -> per-layer replacement rows, or null when absent or empty. */
export function parsePatches(fn: string, what: string, v: unknown, s: StackShape, Lq: number): StackPlan['patch'] {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v)) throw new TypeError(`${fn}: ${what} must be an array of { layer, head, positions?, values }, got ${describe(v)}`);
  if (v.length === 0) return null;
  const { layers: NL, heads: H, valueDim: Dv } = s;
  const slot = new Int32Array(NL).fill(-1);
  let count = 0;
  const checked = v.map((e: unknown, n) => {
    const at = `${what}[${n}]`;
    if (e === null || typeof e !== 'object') throw new TypeError(`${fn}: ${at} must be { layer, head, positions?, values }, got ${describe(e)}`);
    const o = e as Record<string, unknown>;
    for (const key of Object.keys(o)) {
      if (!['layer', 'head', 'positions', 'values'].includes(key)) throw new Error(`${fn}: ${at} has unknown key '${key}' (known: layer, head, positions, values)`);
    }
    const layer = intIn(fn, `${at}.layer`, o.layer, NL, 'a layer');
    const head = intIn(fn, `${at}.head`, o.head, H, 'a head');
    let positions: number[];
    if (o.positions === undefined) positions = Array.from({ length: Lq }, (_, i) => i);
    else {
      if (!isNumberArray(o.positions)) throw new TypeError(`${fn}: ${at}.positions must be an array of query positions, got ${describe(o.positions)}`);
      positions = Array.from(o.positions, (p, i) => intIn(fn, `${at}.positions[${i}]`, p, Lq, 'a query position'));
    }
    const P = positions.length;
    // rows: row i of the replacement is at values[rowAt(i) .. + Dv]
    let data: ArrayLike<number>;
    let rowAt: (i: number) => number;
    const td = tensorData(fn, `${at}.values`, o.values);
    const shape = td ? (o.values as Tensor).shape : null;
    const layerShaped = shape && shape.length === 4 && shape[0] === 1 && shape[1] === H && shape[2] === Lq && shape[3] === Dv;
    if (td && layerShaped) {
      data = td;
      rowAt = (i) => (head * Lq + positions[i]) * Dv;
    } else if (td || isNumberArray(o.values)) {
      data = td ?? (o.values as ArrayLike<number>);
      if (data.length !== P * Dv) {
        throw new RangeError(
          `${fn}: ${at}.values has ${shape ? `shape ${fmtShape(shape)} (${data.length} values)` : `${data.length} values`}, need ${P} positions x ${Dv} (head_dim) = ${P * Dv} values, or a layer's headOutputs Tensor ${fmtShape([1, H, Lq, Dv])}`,
        );
      }
      rowAt = (i) => i * Dv;
    } else {
      throw new TypeError(`${fn}: ${at}.values must be a Tensor, a Float32Array or an array of numbers, got ${describe(o.values)}`);
    }
    for (let i = 0; i < data.length; i++) {
      if (!Number.isFinite(Number(data[i]))) throw new RangeError(`${fn}: ${at}.values[${i}] = ${String(data[i])} is not a finite number`);
    }
    if (slot[layer] < 0) slot[layer] = count++;
    return { layer, head, positions, data, rowAt };
  });
  const values = new Float32Array(count * H * Lq * Dv);
  const rows = new Uint8Array(count * H * Lq);
  for (const c of checked) {
    const base = slot[c.layer] * H + c.head;
    c.positions.forEach((p, i) => {
      rows[base * Lq + p] = 1;
      const src = c.rowAt(i);
      for (let d = 0; d < Dv; d++) values[(base * Lq + p) * Dv + d] = Number(c.data[src + d]);
    });
  }
  return { slot, values, rows, count };
}

/**
 * The plan of one stack from the options (names: which option keys), or null when it asks
 * for nothing. `rowsAllowed`: false where only a head mask is taken (generation).
 */
export function stackPlan(
  fn: string, opts: Record<string, unknown>, names: StackOptionNames, outputs: boolean, s: StackShape, Lq: number, Lk: number,
): StackPlan | null {
  const headScale = parseHeadMask(fn, `options.${names.headMask}`, opts[names.headMask], s);
  const knockout = names.knockout ? parseKnockout(fn, `options.${names.knockout}`, opts[names.knockout], s, Lq, Lk) : null;
  const patch = names.patch ? parsePatches(fn, `options.${names.patch}`, opts[names.patch], s, Lq) : null;
  if (!headScale && !knockout && !patch && !outputs) return null;
  return { shape: s, Lq, Lk, headScale, knockout, outputs, patch };
}

/** The plan's buffers copied into the heap (freed with `scope`); `outputs`: where head outputs go, or 0. */
export function toWasm(scope: HeapScope, plan: StackPlan | null): { arg: WasmInterventions; outputs: number } {
  if (!plan) return { arg: NO_INTERVENTIONS, outputs: 0 };
  const { layers: NL, heads: H, valueDim: Dv } = plan.shape;
  const { Lq, Lk, knockout: k, patch: p } = plan;
  const outputs = plan.outputs ? scope.alloc(4 * NL * H * Lq * Dv, `head outputs ${fmtShape([NL, 1, H, Lq, Dv])}`) : 0;
  const arg: WasmInterventions = {
    ...NO_INTERVENTIONS,
    layers: NL, heads: H, length: Lq, keys: Lk, valueDim: Dv,
    headScale: plan.headScale ? scope.f32(plan.headScale, `headMask [${NL}, ${H}]`) : 0,
    outputs,
  };
  if (k) {
    arg.blockSlot = scope.i32(k.slot, `knockout layers [${NL}]`);
    arg.allow = scope.u8(k.allow, `knockout masks ${fmtShape([k.count, k.heads, Lq, Lk])}`);
    arg.blockCount = k.count;
    arg.blockHeads = k.heads;
  }
  if (p) {
    arg.patchSlot = scope.i32(p.slot, `patch layers [${NL}]`);
    arg.patch = scope.f32(p.values, `patch values ${fmtShape([p.count, H, Lq, Dv])}`);
    arg.patchRows = scope.u8(p.rows, `patch rows ${fmtShape([p.count, H, Lq])}`);
    arg.patchCount = p.count;
  }
  return { arg, outputs };
}

/** Head outputs [NL, H, Lq, Dv] in the heap -> one Tensor [1, H, Lq, Dv] per layer. */
export function readHeadOutputs(scope: HeapScope, ptr: number, plan: StackPlan): Tensor[] {
  const { layers: NL, heads: H, valueDim: Dv } = plan.shape;
  const per = H * plan.Lq * Dv;
  const out: Tensor[] = [];
  for (let l = 0; l < NL; l++) out.push(new Tensor(scope.read(ptr + 4 * l * per, per), [1, H, plan.Lq, Dv]));
  return out;
}
