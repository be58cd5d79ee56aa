/** What the library needs to know about where it runs. Imports nothing. */

/** True in Node (and not in a browser, a worker or Deno's browser-like globals). */
export const isNode: boolean =
  typeof process === 'object' && typeof process.versions === 'object' && typeof process.versions.node === 'string' &&
  typeof (globalThis as { window?: unknown }).window === 'undefined';

/**
 * Imports a module by a computed specifier (a Node builtin, a wasm loader by URL) without
 * bundlers trying to resolve or bundle it.
 */
export const dynamicImport = (specifier: string): Promise<any> =>
  import(/* @vite-ignore */ /* webpackIgnore: true */ specifier);
