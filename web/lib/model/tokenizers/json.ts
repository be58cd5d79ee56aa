/**
 * Reading untrusted tokenizer JSON: each accessor checks the type of one field and throws an
 * Error naming the file and the field's path (`tokenizer.json: model.merges[3]: ...`).
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

function kindOf(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v === 'object' ? 'an object' : `${typeof v} ${JSON.stringify(v)?.slice(0, 40)}`;
}

/** A field path within a file, for error messages. */
export class Where {
  constructor(readonly file: string, readonly path: string = '') {}
  key(k: string): Where {
    return new Where(this.file, this.path ? `${this.path}.${k}` : k);
  }
  index(i: number): Where {
    return new Where(this.file, `${this.path}[${i}]`);
  }
  toString(): string {
    return this.path ? `${this.file}: ${this.path}` : this.file;
  }
  error(message: string): Error {
    return new Error(`${this}: ${message}`);
  }
  /** An Error for a component type qkv does not implement. */
  unsupported(what: string, type: string, supported: readonly string[]): Error {
    return new Error(`${this}: ${what} type ${JSON.stringify(type)} is not supported (supported: ${supported.join(', ')})`);
  }
}

export function parseJson(text: string, file: string): Json {
  if (typeof text !== 'string') throw new TypeError(`${file}: expected the file's text, got ${kindOf(text)}`);
  try {
    return JSON.parse(text) as Json;
  } catch (e) {
    throw new SyntaxError(`${file} is not valid JSON: ${(e as Error).message}`);
  }
}

export function asObject(v: unknown, at: Where): JsonObject {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw at.error(`expected an object, got ${kindOf(v)}`);
  return v as JsonObject;
}

export function asArray(v: unknown, at: Where): Json[] {
  if (!Array.isArray(v)) throw at.error(`expected an array, got ${kindOf(v)}`);
  return v as Json[];
}

export function asString(v: unknown, at: Where): string {
  if (typeof v !== 'string') throw at.error(`expected a string, got ${kindOf(v)}`);
  return v;
}

export function asBool(v: unknown, at: Where, fallback?: boolean): boolean {
  if (v === undefined || v === null) {
    if (fallback !== undefined) return fallback;
    throw at.error('expected true or false, got nothing');
  }
  if (typeof v !== 'boolean') throw at.error(`expected true or false, got ${kindOf(v)}`);
  return v;
}

/** A non-negative integer below 2^31 (a token id, a count). */
export function isIndex(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < 2 ** 31;
}

export function asIndex(v: unknown, at: Where, fallback?: number): number {
  if ((v === undefined || v === null) && fallback !== undefined) return fallback;
  if (!isIndex(v)) {
    const tooLarge = typeof v === 'number' && Number.isInteger(v) && v > 0;
    throw at.error(`expected a non-negative integer${tooLarge ? ' below 2^31' : ''}, got ${kindOf(v)}`);
  }
  return v;
}

/** The `type` field of a component (normalizer, pre-tokenizer, model, ...). */
export function typeOf(o: JsonObject, at: Where): string {
  return asString(o.type, at.key('type'));
}

/** A one-character string (Metaspace's replacement, Strip's content). */
export function asChar(v: unknown, at: Where): string {
  const s = asString(v, at);
  if ([...s].length !== 1) throw at.error(`expected one character, got ${JSON.stringify(s)}`);
  return s;
}
