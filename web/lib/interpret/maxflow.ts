/**
 * Maximum flow on a directed graph with float capacities: Dinic's algorithm (breadth-first
 * levels, then a blocking flow along them: depth-first pushes with current-arc pointers). One network is built
 * once and answers many (source, sink) questions: each call starts again from the capacities.
 *
 * Floating point: a residual capacity at or below `eps` counts as saturated, so every
 * augmentation moves more than eps and the algorithm ends; the value found is within
 * (number of edges) * eps of the exact maximum.
 */

/** A graph given as edges (from, to, capacity > 0), ready for repeated max-flow queries. */
export class FlowNetwork {
  readonly nodes: number;
  /** CSR: the arcs of node u are start[u] .. start[u + 1] - 1 (forward and reverse arcs). */
  readonly #start: Int32Array;
  readonly #to: Int32Array;
  /** Arc e's partner (the reverse arc). */
  readonly #rev: Int32Array;
  readonly #cap: Float64Array;
  readonly #res: Float64Array;
  readonly #level: Int32Array;
  readonly #arc: Int32Array;
  readonly #queue: Int32Array;
  readonly #eps: number;

  constructor(nodes: number, from: Int32Array, to: Int32Array, cap: Float64Array, eps = 1e-13) {
    const m = from.length;
    this.nodes = nodes;
    this.#eps = eps;
    const start = new Int32Array(nodes + 1);
    for (let e = 0; e < m; e++) {
      start[from[e] + 1]++;
      start[to[e] + 1]++;
    }
    for (let u = 0; u < nodes; u++) start[u + 1] += start[u];
    const fill = start.slice(0, nodes);
    this.#to = new Int32Array(2 * m);
    this.#rev = new Int32Array(2 * m);
    this.#cap = new Float64Array(2 * m);
    for (let e = 0; e < m; e++) {
      const a = fill[from[e]]++;
      const b = fill[to[e]]++;
      this.#to[a] = to[e];
      this.#cap[a] = cap[e];
      this.#to[b] = from[e];
      this.#cap[b] = 0;
      this.#rev[a] = b;
      this.#rev[b] = a;
    }
    this.#start = start;
    this.#res = new Float64Array(2 * m);
    this.#level = new Int32Array(nodes);
    this.#arc = new Int32Array(nodes);
    this.#queue = new Int32Array(nodes);
  }

  /**
   * The maximum flow from s to t. `allowed` (optional, one byte per node): nodes the flow may
   * use; nodes that cannot lie on an s-t path may be left out to save time (the value is the same).
   */
  maxFlow(s: number, t: number, allowed?: Uint8Array): number {
    if (s === t) return Infinity;
    const res = this.#res;
    res.set(this.#cap);
    let total = 0;
    while (this.#levels(s, t, allowed)) {
      this.#arc.set(this.#start.subarray(0, this.nodes));
      total += this.#push(s, t, Infinity);
    }
    return total;
  }

  /** Breadth-first levels from s over arcs with residual capacity; true when t is reached. */
  #levels(s: number, t: number, allowed?: Uint8Array): boolean {
    const level = this.#level, q = this.#queue, start = this.#start, to = this.#to, res = this.#res, eps = this.#eps;
    level.fill(-1);
    level[s] = 0;
    let head = 0, tail = 0;
    q[tail++] = s;
    while (head < tail) {
      const u = q[head++];
      const lu = level[u] + 1;
      for (let e = start[u], end = start[u + 1]; e < end; e++) {
        const v = to[e];
        if (level[v] < 0 && res[e] > eps && (allowed === undefined || allowed[v] !== 0)) {
          level[v] = lu;
          if (v === t) return true; // nothing deeper than t is on a shortest path
          q[tail++] = v;
        }
      }
    }
    return false;
  }

  /**
   * A blocking flow along the levels, depth-first from u with at most f to push: pushes down
   * one arc after another (current-arc pointers skip arcs already saturated or dead) until f is
   * used or u is blocked. Returns what it pushed.
   */
  #push(u: number, t: number, f: number): number {
    if (u === t) return f;
    const arc = this.#arc, end = this.#start[u + 1], to = this.#to, res = this.#res, level = this.#level, eps = this.#eps;
    const next = level[u] + 1;
    let pushed = 0;
    for (; arc[u] < end; arc[u]++) {
      const e = arc[u];
      const v = to[e];
      if (res[e] > eps && level[v] === next) {
        const want = f - pushed;
        const d = this.#push(v, t, want < res[e] ? want : res[e]);
        if (d > 0) {
          res[e] -= d;
          res[this.#rev[e]] += d;
          pushed += d;
          if (f - pushed <= eps) return pushed; // this arc may have room left: keep it current
        }
      }
    }
    level[u] = -1; // blocked: nothing more gets through u in this phase
    return pushed;
  }
}
