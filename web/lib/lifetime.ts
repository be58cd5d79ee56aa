/**
 * Lifetimes of objects that hold wasm memory (KVCache, MultiHeadAttention, ...).
 * `dispose()` frees at once; a FinalizationRegistry frees what users forget once the
 * owner is garbage-collected; the top-level `dispose()` frees everything and unloads.
 */
import type { EmbindHandle } from './wasm/module.js';

/** One tracked handle. */
export interface Tracked<H extends EmbindHandle = EmbindHandle> {
  readonly handle: H;
  released: boolean;
}

interface Entry extends Tracked {
  ref: WeakRef<object>;
}

const entries = new Set<Entry>();

function free(e: Entry): void {
  if (e.released) return;
  e.released = true;
  entries.delete(e);
  try {
    if (!e.handle.isDeleted()) e.handle.delete();
  } catch {
    /* the module is gone already */
  }
}

const registry = new FinalizationRegistry<Entry>(free);

/** Tracks `handle`, owned by `owner`, until released or `owner` is collected. */
export function track<H extends EmbindHandle>(owner: object, handle: H): Tracked<H> {
  const e: Entry = { handle, released: false, ref: new WeakRef(owner) };
  entries.add(e);
  registry.register(owner, e, e);
  return e as unknown as Tracked<H>;
}

/** Frees a tracked handle now (idempotent). */
export function release(t: Tracked): void {
  registry.unregister(t as Entry);
  free(t as Entry);
}

/** Frees every tracked handle (top-level dispose). Returns how many were live. */
export function releaseAll(): number {
  const n = entries.size;
  for (const e of [...entries]) release(e);
  return n;
}

/** How many tracked handles are live (tests). */
export function liveCount(): number {
  return entries.size;
}
