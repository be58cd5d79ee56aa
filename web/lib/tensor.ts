import { describe, fmtShape } from './errors.js';

/** Element type of a {@link Tensor}: `float32` (Float32Array) or `bool` (Uint8Array, nonzero = true). */
export type DType = 'float32' | 'bool';

/** The data a {@link Tensor} can hold. A Uint8Array is a boolean mask. */
export type TensorData = Float32Array | Uint8Array;

/**
 * A dense row-major array with a shape: `new Tensor(data, shape)`.
 *
 * `data` is a Float32Array (float32) or a Uint8Array (a boolean mask, nonzero = true);
 * its length must be the product of `shape`. The tensor keeps a reference to `data`
 * (no copy). Tensors live in JavaScript memory; {@link Tensor.dispose} drops the data.
 *
 * @example
 * const q = new Tensor(new Float32Array(1 * 8 * 128 * 64), [1, 8, 128, 64]);
 */
export class Tensor {
  #data: TensorData;
  readonly #shape: readonly number[];
  #disposed = false;

  constructor(data: TensorData, shape: readonly number[]) {
    if (!(data instanceof Float32Array) && !(data instanceof Uint8Array)) {
      throw new TypeError(
        `Tensor: data must be a Float32Array (float32) or a Uint8Array (bool mask), got ${describe(data)}`,
      );
    }
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw new TypeError(
        `Tensor: shape must be an array of non-negative integers, got ${Array.isArray(shape) ? fmtShape(shape.map(String) as unknown as number[]) : describe(shape)}`,
      );
    }
    const size = shape.reduce((a, b) => a * b, 1);
    if (size !== data.length) {
      throw new RangeError(
        `Tensor: data has ${data.length} elements but shape ${fmtShape(shape)} needs ${size}`,
      );
    }
    this.#data = data;
    this.#shape = Object.freeze([...shape]);
  }

  /** The elements, row-major. */
  get data(): TensorData {
    return this.#data;
  }

  /** The dimensions (frozen). */
  get shape(): readonly number[] {
    return this.#shape;
  }

  /** `'float32'` for Float32Array data, `'bool'` for Uint8Array data. */
  get dtype(): DType {
    return this.#data instanceof Uint8Array ? 'bool' : 'float32';
  }

  /** Number of elements. */
  get size(): number {
    return this.#data.length;
  }

  /** Number of dimensions. */
  get rank(): number {
    return this.#shape.length;
  }

  /** True after {@link Tensor.dispose}. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /** Drops the data; using the tensor afterwards is an error. */
  dispose(): void {
    this.#disposed = true;
    this.#data = this.#data instanceof Uint8Array ? new Uint8Array(0) : new Float32Array(0);
  }

  /** A one-line summary, e.g. `Tensor(float32, [1, 8, 128, 64])` (`, disposed` once disposed). */
  toString(): string {
    return `Tensor(${this.dtype}, ${fmtShape(this.#shape)}${this.#disposed ? ', disposed' : ''})`;
  }
}
