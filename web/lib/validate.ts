/** Input checks shared by the API functions. Every failure is an Error naming fn and argument. */
import { describe, fmtShape } from './errors.js';
import { Tensor, type DType, type TensorData } from './tensor.js';

/** A checked tensor argument. */
export interface Checked<T extends TensorData = TensorData> {
  data: T;
  shape: readonly number[];
  dtype: DType;
}

/**
 * Checks that `x` is a usable tensor: a {@link Tensor} (or any `{ data, shape }` with
 * Float32Array/Uint8Array data whose length matches the shape), not disposed, of `dtype` if given.
 */
export function checkTensor(fn: string, name: string, x: unknown, dtype?: DType): Checked {
  if (x === null || typeof x !== 'object') {
    throw new TypeError(`${fn}: ${name} must be a Tensor, got ${describe(x)}`);
  }
  if (x instanceof Tensor && x.disposed) throw new Error(`${fn}: ${name} is a disposed Tensor`);
  const { data, shape } = x as { data?: unknown; shape?: unknown };
  if (!(data instanceof Float32Array) && !(data instanceof Uint8Array)) {
    throw new TypeError(
      `${fn}: ${name} must be a Tensor with Float32Array (float32) or Uint8Array (bool) data, got ${
        x instanceof Tensor ? 'a Tensor' : describe(x)
      }${data !== undefined ? ` holding ${describe(data)}` : ''}`,
    );
  }
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw new TypeError(`${fn}: ${name}.shape must be an array of non-negative integers, got ${describe(shape)}`);
  }
  const size = shape.reduce((a: number, b: number) => a * b, 1);
  if (size !== data.length) {
    throw new RangeError(`${fn}: ${name} has ${data.length} elements but its shape ${fmtShape(shape)} needs ${size}`);
  }
  const got: DType = data instanceof Uint8Array ? 'bool' : 'float32';
  if (dtype && got !== dtype) {
    throw new TypeError(
      `${fn}: ${name} must be ${dtype === 'float32' ? 'float32 (Float32Array)' : 'bool (Uint8Array)'}, got a ${got} tensor of shape ${fmtShape(shape)}`,
    );
  }
  return { data, shape, dtype: got };
}

/** Checks an options bag: undefined/null or a plain object whose keys are all in `known`. */
export function checkOptions(fn: string, options: unknown, known: readonly string[]): Record<string, unknown> {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object' || Array.isArray(options) || options instanceof Tensor) {
    throw new TypeError(`${fn}: options must be an object, got ${describe(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) {
      throw new Error(`${fn}: unknown option '${key}' (known options: ${known.join(', ')})`);
    }
  }
  return options as Record<string, unknown>;
}

/** An optional boolean option. */
export function optBool(fn: string, opts: Record<string, unknown>, key: string, fallback: boolean): boolean {
  const v = opts[key];
  if (v === undefined) return fallback;
  if (typeof v !== 'boolean') throw new TypeError(`${fn}: options.${key} must be a boolean, got ${describe(v)}`);
  return v;
}

/** An optional integer option in [min, max]. */
export function optInt(fn: string, opts: Record<string, unknown>, key: string, fallback: number, min: number, max: number, note = ''): number {
  const v = opts[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${fn}: options.${key} must be an integer in [${min}, ${max}]${note}, got ${describe(v)}`);
  }
  return v;
}

/** Pads a shape on the left with 1s to rank 4. */
export function pad4(shape: readonly number[]): [number, number, number, number] {
  const s = [1, 1, 1, 1, ...shape].slice(-4);
  return [s[0], s[1], s[2], s[3]];
}

/** Largest value a size may take in a wasm call (int32 in the bindings). */
export const MAX_DIM = 2 ** 31 - 1;

/** Whether `v` is an array or a typed array (not a DataView): what an ids argument may be. */
export function isNumberArray(v: unknown): v is ArrayLike<number> {
  return Array.isArray(v) || (ArrayBuffer.isView(v) && !(v instanceof DataView));
}

/**
 * `a` as an Int32Array, every entry an integer in [0, limit); otherwise a RangeError naming
 * `what[i]` ("is not `noun` in [0, limit)", e.g. noun 'a token id').
 */
export function intsBelow(fn: string, what: string, a: ArrayLike<number>, limit: number, noun: string): Int32Array {
  const out = new Int32Array(a.length);
  for (let i = 0; i < a.length; i++) {
    const x = Number(a[i]);
    if (!Number.isInteger(x) || x < 0 || x >= limit) {
      throw new RangeError(`${fn}: ${what}[${i}] = ${String(a[i])} is not ${noun} in [0, ${limit})`);
    }
    out[i] = x;
  }
  return out;
}
