/**
 * The residual stream of a decoder during a forward pass (docs/residual.md): hidden states
 * (`outputHiddenStates`), named activations (`outputActivations`, TransformerLens hook names),
 * patches (`patchActivations`) and steering vectors (`steer`). Options checked here and handed
 * to the wasm forward as one plain object (wasm/residual_arg.hpp), applied in C++ at each site
 * (src/model/residual.hpp).
 */
import { describe, fmtShape } from '../errors.js';
import { Tensor } from '../tensor.js';
import { isNumberArray } from '../validate.js';
import type { HeapScope } from '../wasm/heap.js';

/** The five sites of a block, in the order the forward meets them (TransformerLens' names). */
export const RESID_SITES = ['hook_resid_pre', 'hook_attn_out', 'hook_resid_mid', 'hook_mlp_out', 'hook_resid_post'] as const;
/** One of {@link RESID_SITES}. */
export type ResidSite = (typeof RESID_SITES)[number];
/** The final norm's divisor, [1, T, 1]. */
export const FINAL_SCALE = 'ln_final.hook_scale';

/** Replaces one site's rows during the forward (later layers see the patched value). */
export interface ActivationPatch {
  /** A site: `blocks.{l}.hook_resid_pre`, `hook_attn_out`, `hook_resid_mid`, `hook_mlp_out` or `hook_resid_post`. */
  name: string;
  /** Positions to replace (default: every position). */
  positions?: ArrayLike<number>;
  /**
   * The replacement: positions x d_model numbers, row by row (a Float32Array, number[] or a Tensor
   * of that many elements), or a Tensor [1, T, d_model] from a run of the same length, whose rows
   * `positions` are read.
   */
  values: Tensor | Float32Array | ArrayLike<number>;
}

/** Adds `scale * vector` to `blocks.{layer}.hook_resid_pre` (activation addition, Turner et al. 2023). */
export interface SteeringVector {
  /** The block whose input (`blocks.{layer}.hook_resid_pre`) gets the vector. */
  layer: number;
  /** d_model numbers (a Float32Array, number[] or Tensor of d_model elements). */
  vector: Tensor | Float32Array | ArrayLike<number>;
  /** Default 1. */
  scale?: number;
  /** Positions to add it at (default every position; not taken by generate, which steers every one). */
  positions?: ArrayLike<number>;
}

/** The wasm side's argument (wasm/residual_arg.hpp): byte addresses, 0 = absent. */
export interface WasmResidual {
  layers: number; d: number; length: number;
  residPre: number; attnOut: number; residMid: number; mlpOut: number; residPost: number;
  hidden: number; finalResid: number; finalScale: number; subScale: number;
  patchSlot: number; patch: number; patchRows: number; patchCount: number;
  steerCount: number; steerLayer: number; steerVec: number; steerRows: number;
}

/** No hook: what a plain forward passes. */
export const NO_RESIDUAL: Readonly<WasmResidual> = Object.freeze({
  layers: 0, d: 0, length: 0,
  residPre: 0, attnOut: 0, residMid: 0, mlpOut: 0, residPost: 0,
  hidden: 0, finalResid: 0, finalScale: 0, subScale: 0,
  patchSlot: 0, patch: 0, patchRows: 0, patchCount: 0,
  steerCount: 0, steerLayer: 0, steerVec: 0, steerRows: 0,
});

const RECORD_FIELDS = ['residPre', 'attnOut', 'residMid', 'mlpOut', 'residPost'] as const;

/** What the options ask of the residual stream, checked, for a forward of T rows. */
export interface ResidualPlan {
  layers: number;
  d: number;
  T: number;
  hidden: boolean;
  /** Per site, the layers whose activation is returned (empty: none). */
  record: number[][];
  finalScale: boolean;
  patch: { slot: Int32Array; values: Float32Array; rows: Uint8Array; count: number } | null;
  steer: { layer: Int32Array; vec: Float32Array; rows: Uint8Array | null; count: number } | null;
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v);

function intIn(fn: string, what: string, v: unknown, limit: number, noun: string): number {
  if (!isInt(v) || v < 0 || v >= limit) throw new RangeError(`${fn}: ${what} = ${describe(v)} is not ${noun} in [0, ${limit})`);
  return v;
}

/** Every activation name of a model with `layers` blocks, in order. */
export function activationNames(layers: number): string[] {
  const names: string[] = [];
  for (let l = 0; l < layers; l++) for (const s of RESID_SITES) names.push(`blocks.${l}.${s}`);
  names.push(FINAL_SCALE);
  return names;
}

/** Whether `name` matches `pattern` ('*' matches one dot-separated segment). */
export function matchesName(pattern: string, name: string): boolean {
  const p = pattern.split('.');
  const n = name.split('.');
  return p.length === n.length && p.every((seg, i) => seg === '*' || seg === n[i]);
}

/** A site name -> [site index, layer], or null when it is not one of the five `blocks.*` names. */
export function parseSiteName(name: string, layers: number): [number, number] | null {
  const m = /^blocks\.(\d+)\.(hook_[a-z_]+)$/.exec(name);
  if (!m) return null;
  const site = (RESID_SITES as readonly string[]).indexOf(m[2]);
  const layer = Number(m[1]);
  if (site < 0 || layer >= layers || String(layer) !== m[1]) return null;
  return [site, layer];
}

/** A Float32Array of a Tensor's or an array's numbers, each finite. */
function numbers(fn: string, what: string, v: unknown): { data: Float32Array; shape: readonly number[] | null } {
  let data: ArrayLike<number>;
  let shape: readonly number[] | null = null;
  if (v instanceof Tensor) {
    if (v.disposed) throw new Error(`${fn}: ${what} is a disposed Tensor`);
    data = v.data;
    shape = v.shape;
  } else if (isNumberArray(v)) {
    data = v;
  } else {
    throw new TypeError(`${fn}: ${what} must be a Tensor, a Float32Array or an array of numbers, got ${describe(v)}`);
  }
  const out = Float32Array.from(data, Number);
  for (let i = 0; i < out.length; i++) {
    if (!Number.isFinite(out[i])) throw new RangeError(`${fn}: ${what}[${i}] = ${String(data[i])} is not a finite number`);
  }
  return { data: out, shape };
}

function positionsOf(fn: string, what: string, v: unknown, T: number): number[] {
  if (v === undefined) return Array.from({ length: T }, (_, i) => i);
  if (!isNumberArray(v)) throw new TypeError(`${fn}: ${what} must be an array of positions, got ${describe(v)}`);
  return Array.from(v, (p, i) => intIn(fn, `${what}[${i}]`, p, T, 'a position'));
}

function checkKeys(fn: string, at: string, o: Record<string, unknown>, known: string[]): void {
  for (const key of Object.keys(o)) {
    if (!known.includes(key)) throw new Error(`${fn}: ${at} has unknown key '${key}' (known: ${known.join(', ')})`);
  }
}

/** outputActivations -> per site the layers asked for, and whether ln_final.hook_scale is. */
function parseActivations(fn: string, v: unknown, layers: number): { record: number[][]; finalScale: boolean } {
  const record: number[][] = RESID_SITES.map(() => []);
  if (v === undefined || v === false) return { record, finalScale: false };
  const all = activationNames(layers);
  let picked: string[];
  if (v === true) picked = all;
  else if (Array.isArray(v) && v.every((s) => typeof s === 'string')) {
    const set = new Set<string>();
    for (const pattern of v as string[]) {
      const hits = all.filter((n) => matchesName(pattern, n));
      if (hits.length === 0) {
        throw new Error(`${fn}: options.outputActivations names '${pattern}', which matches no activation of this model (blocks.{0..${layers - 1}}.{${RESID_SITES.join(', ')}}, ${FINAL_SCALE}; '*' matches one segment)`);
      }
      for (const h of hits) set.add(h);
    }
    picked = all.filter((n) => set.has(n));
  } else {
    throw new TypeError(`${fn}: options.outputActivations must be true or an array of names, got ${describe(v)}`);
  }
  let finalScale = false;
  for (const name of picked) {
    if (name === FINAL_SCALE) finalScale = true;
    else {
      const [site, layer] = parseSiteName(name, layers)!;
      record[site].push(layer);
    }
  }
  return { record, finalScale };
}

function parsePatches(fn: string, v: unknown, layers: number, d: number, T: number): ResidualPlan['patch'] {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v)) throw new TypeError(`${fn}: options.patchActivations must be an array of { name, positions?, values }, got ${describe(v)}`);
  if (v.length === 0) return null;
  const slot = new Int32Array(RESID_SITES.length * layers).fill(-1);
  let count = 0;
  const checked = v.map((e: unknown, n) => {
    const at = `options.patchActivations[${n}]`;
    if (e === null || typeof e !== 'object') throw new TypeError(`${fn}: ${at} must be { name, positions?, values }, got ${describe(e)}`);
    const o = e as Record<string, unknown>;
    checkKeys(fn, at, o, ['name', 'positions', 'values']);
    const parsed = typeof o.name === 'string' ? parseSiteName(o.name, layers) : null;
    if (!parsed) {
      throw new Error(`${fn}: ${at}.name = ${describe(o.name)} is not a site of this model (blocks.{0..${layers - 1}}.{${RESID_SITES.join(', ')}})`);
    }
    const positions = positionsOf(fn, `${at}.positions`, o.positions, T);
    const { data, shape } = numbers(fn, `${at}.values`, o.values);
    const whole = shape && shape.length === 3 && shape[0] === 1 && shape[1] === T && shape[2] === d;
    if (!whole && data.length !== positions.length * d) {
      throw new RangeError(
        `${fn}: ${at}.values has ${shape ? `shape ${fmtShape(shape)} (${data.length} values)` : `${data.length} values`}, need ${positions.length} positions x ${d} (d_model) = ${positions.length * d} values, or a Tensor ${fmtShape([1, T, d])} from a run of the same length`,
      );
    }
    const [site, layer] = parsed;
    const k = site * layers + layer;
    if (slot[k] < 0) slot[k] = count++;
    return { k, positions, data, rowAt: (i: number) => (whole ? positions[i] : i) * d };
  });
  const values = new Float32Array(count * T * d);
  const rows = new Uint8Array(count * T);
  for (const c of checked) {
    const base = slot[c.k] * T;
    c.positions.forEach((p, i) => {
      rows[base + p] = 1;
      values.set(c.data.subarray(c.rowAt(i), c.rowAt(i) + d), (base + p) * d);
    });
  }
  return { slot, values, rows, count };
}

/** steer -> entries (layer, scaled vector, rows or null = every row), or null when absent or empty. */
export function parseSteer(fn: string, v: unknown, layers: number, d: number, T: number | null): ResidualPlan['steer'] {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v)) throw new TypeError(`${fn}: options.steer must be an array of { layer, vector, scale?, positions? }, got ${describe(v)}`);
  if (v.length === 0) return null;
  const n = v.length;
  const layer = new Int32Array(n);
  const vec = new Float32Array(n * d);
  const anyPositions = v.some((e) => e && typeof e === 'object' && (e as Record<string, unknown>).positions !== undefined);
  const rows = anyPositions && T !== null ? new Uint8Array(n * T) : null;
  v.forEach((e: unknown, i) => {
    const at = `options.steer[${i}]`;
    if (e === null || typeof e !== 'object') throw new TypeError(`${fn}: ${at} must be { layer, vector, scale?, positions? }, got ${describe(e)}`);
    const o = e as Record<string, unknown>;
    checkKeys(fn, at, o, ['layer', 'vector', 'scale', 'positions']);
    layer[i] = intIn(fn, `${at}.layer`, o.layer, layers, 'a layer');
    const { data } = numbers(fn, `${at}.vector`, o.vector);
    if (data.length !== d) throw new RangeError(`${fn}: ${at}.vector has ${data.length} values, need d_model = ${d}`);
    const scale = o.scale ?? 1;
    if (typeof scale !== 'number' || !Number.isFinite(scale)) throw new TypeError(`${fn}: ${at}.scale must be a finite number, got ${describe(o.scale)}`);
    for (let j = 0; j < d; j++) vec[i * d + j] = scale * data[j];
    if (o.positions !== undefined && T === null) {
      throw new Error(`${fn}: ${at}.positions is not taken here: generate steers every position (prompt and generated)`);
    }
    if (rows && T !== null) for (const p of positionsOf(fn, `${at}.positions`, o.positions, T)) rows[i * T + p] = 1;
  });
  return { layer, vec, rows, count: n };
}

/**
 * The plan of a forward of T rows from the options, or null when it asks for nothing. `hidden`:
 * outputHiddenStates checked by the caller.
 */
export function residualPlan(fn: string, opts: Record<string, unknown>, hidden: boolean, layers: number, d: number, T: number): ResidualPlan | null {
  const { record, finalScale } = parseActivations(fn, opts.outputActivations, layers);
  const patch = parsePatches(fn, opts.patchActivations, layers, d, T);
  const steer = parseSteer(fn, opts.steer, layers, d, T);
  if (!hidden && !finalScale && record.every((r) => r.length === 0) && !patch && !steer) return null;
  return { layers, d, T, hidden, record, finalScale, patch, steer };
}

/** The plan's buffers in the heap (freed with `scope`) and the argument that points at them. */
export function residualToWasm(scope: HeapScope, plan: ResidualPlan | null): WasmResidual {
  if (!plan) return NO_RESIDUAL;
  const { layers: NL, d, T } = plan;
  const arg: WasmResidual = { ...NO_RESIDUAL, layers: NL, d, length: T };
  plan.record.forEach((ls, s) => {
    if (ls.length) arg[RECORD_FIELDS[s]] = scope.alloc(4 * NL * T * d, `${RESID_SITES[s]} ${fmtShape([NL, 1, T, d])}`);
  });
  if (plan.hidden) arg.hidden = scope.alloc(4 * (NL + 1) * T * d, `hidden states ${fmtShape([NL + 1, 1, T, d])}`);
  if (plan.finalScale) arg.finalScale = scope.alloc(4 * T, `${FINAL_SCALE} [1, ${T}, 1]`);
  const p = plan.patch;
  if (p) {
    arg.patchSlot = scope.i32(p.slot, `patch sites [${p.slot.length}]`);
    arg.patch = scope.f32(p.values, `patch values ${fmtShape([p.count, T, d])}`);
    arg.patchRows = scope.u8(p.rows, `patch rows ${fmtShape([p.count, T])}`);
    arg.patchCount = p.count;
  }
  const st = plan.steer;
  if (st) {
    arg.steerCount = st.count;
    arg.steerLayer = scope.i32(st.layer, `steer layers [${st.count}]`);
    arg.steerVec = scope.f32(st.vec, `steer vectors ${fmtShape([st.count, d])}`);
    if (st.rows) arg.steerRows = scope.u8(st.rows, `steer rows ${fmtShape([st.count, T])}`);
  }
  return arg;
}

/** What a forward returns of the residual stream. */
export interface ResidualOutputs {
  hiddenStates?: Tensor[];
  activations?: Record<string, Tensor>;
}

/** The records in the heap -> hiddenStates (numLayers + 1 Tensors [1, T, d]) and activations. */
export function readResidual(scope: HeapScope, arg: WasmResidual, plan: ResidualPlan): ResidualOutputs {
  const { layers: NL, d, T } = plan;
  const per = T * d;
  const out: ResidualOutputs = {};
  if (plan.hidden) {
    out.hiddenStates = [];
    for (let l = 0; l <= NL; l++) out.hiddenStates.push(new Tensor(scope.read(arg.hidden + 4 * l * per, per), [1, T, d]));
  }
  if (plan.finalScale || plan.record.some((r) => r.length)) {
    const acts: Record<string, Tensor> = {};
    for (let l = 0; l < NL; l++) {
      plan.record.forEach((ls, s) => {
        if (ls.includes(l)) acts[`blocks.${l}.${RESID_SITES[s]}`] = new Tensor(scope.read(arg[RECORD_FIELDS[s]] + 4 * l * per, per), [1, T, d]);
      });
    }
    if (plan.finalScale) acts[FINAL_SCALE] = new Tensor(scope.read(arg.finalScale, T), [1, T, 1]);
    out.activations = acts;
  }
  return out;
}
