// One generation at a time per model, and a newer one supersedes an older one.
//
// A generation holds the model's KV cache and a few wasm buffers between its steps. An
// iterator that is dropped (a view replaced by another, a loop that never finishes) never
// resumes, so it can never release them itself: a model that waited for it would stay locked
// until dispose(). Instead, starting a generation (or a chunked forward, which runs through
// the same cache) ends the one before: its buffers are freed at once, and the old iterator's
// next call to next() returns { done: true }.

/** `f` made safe to call more than once (it runs the first time only). */
export function once(f: () => void): () => void {
  let done = false;
  return () => {
    if (!done) (done = true), f();
  };
}

/** The running generation of one model: a ticket per generation and how to free its buffers. */
export class GenerationSlot {
  #current = 0;
  #issued = 0;
  #release: (() => void) | null = null;

  /**
   * Starts a generation, ending the one before (its release runs now). `release` frees this
   * one's buffers and must be safe to call twice (see {@link once}). Returns its ticket.
   */
  begin(release: () => void): number {
    this.supersede();
    this.#release = release;
    this.#current = ++this.#issued;
    return this.#current;
  }

  /** False once a newer generation (or a chunked forward) has taken the model. */
  holds(ticket: number): boolean {
    return this.#current === ticket;
  }

  /** True while a generation holds the model (running, or suspended at a step). */
  get active(): boolean {
    return this.#current !== 0;
  }

  /** The generation `ticket` has ended by itself (the caller frees its buffers). */
  end(ticket: number): void {
    if (this.#current !== ticket) return;
    this.#release = null;
    this.#current = 0;
  }

  /** Ends the running generation, if any: frees its buffers; its iterator then returns done. */
  supersede(): void {
    const release = this.#release;
    this.#release = null;
    this.#current = 0;
    release?.();
  }
}
