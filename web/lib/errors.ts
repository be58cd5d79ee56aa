/** Formatting shared by every error message: they name the function, the argument and the shapes. */

/** `[2, 3, 4]` */
export function fmtShape(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}

/** A short description of any value, for "got ..." parts of messages. */
export function describe(x: unknown): string {
  if (x === null) return 'null';
  if (x === undefined) return 'undefined';
  if (typeof x === 'string') return JSON.stringify(x.length > 40 ? x.slice(0, 40) + '...' : x);
  if (typeof x === 'number' || typeof x === 'boolean' || typeof x === 'bigint') return String(x);
  if (typeof x === 'function') return 'a function';
  if (Array.isArray(x)) return `an array of length ${x.length}`;
  if (ArrayBuffer.isView(x)) return `${x.constructor.name}(${(x as unknown as ArrayLike<unknown>).length ?? x.byteLength})`;
  const name = (x as object).constructor?.name;
  return name && name !== 'Object' ? `${/^[AEIOU]/.test(name) ? 'an' : 'a'} ${name}` : 'an object';
}

/** Bytes in human units. */
export function fmtBytes(bytes: number): string {
  if (bytes >= 2 ** 30) return `${(bytes / 2 ** 30).toFixed(1)} GiB`;
  if (bytes >= 2 ** 20) return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  if (bytes >= 2 ** 10) return `${(bytes / 2 ** 10).toFixed(1)} KiB`;
  return `${bytes} B`;
}
