/**
 * Attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", §4):
 * the layers' attention as a flow network, and the maximum flow from each output position to
 * each input token.
 *
 * The graph is the paper's (get_adjmat / compute_node_flow in github.com/samiraabnar/attention_flow):
 * a node per layer boundary t = 0..N and position p (t = 0: the input tokens); an edge from
 * node (t, i) down to node (t-1, k) with capacity A'_{t-1}[i][k], the residual-augmented,
 * head-fused attention of layer t-1 (fuse.ts; mean fusion and residual 0.5 are the paper's
 * (A + I) / 2). flow[i][j] = the maximum flow from (N, i) to the input node (0, j); each row is
 * then divided by its sum, as the paper's code does (normalize: false keeps the raw values).
 *
 * Exact: Dinic's algorithm (maxflow.ts) for every (i, j) pair, L^2 max-flows over a graph of
 * N L^2 edges, hence the limit L <= 64.
 */
import { describe, fmtShape } from '../errors.js';
import { Tensor } from '../tensor.js';
import { checkOptions, optBool } from '../validate.js';
import { nextTask, optFunction, optSignal } from '../model/cancel.js';
import { checkAttentions, fuseLayer, optFusion, optResidual, type HeadFusion } from './fuse.js';
import { FlowNetwork } from './maxflow.js';

/** The longest sequence attentionFlow takes (L^2 max-flows, each over N L^2 edges). */
export const FLOW_MAX_LENGTH = 64;

/** Options of {@link attentionFlowSync} (and, with progress and cancel, {@link attentionFlow}). */
export interface FlowOptions {
  /** How each layer's heads are combined: 'mean' (default, the paper's), 'max' or 'min'. */
  fusion?: HeadFusion;
  /** The identity's weight in each layer, for the residual connection: in [0, 1], default 0.5. */
  residual?: number;
  /** Divide each output row by its sum, as the paper does (default true). */
  normalize?: boolean;
  /** Flow to the outputs of this layer, 0-based (default the last): uses layers 0..layer. */
  layer?: number;
  /**
   * Output positions to compute (default all, 0..L-1): the result has one row per entry, in
   * this order. Each row costs L max-flows.
   */
  outputs?: readonly number[];
}

/** attentionFlow's options: FlowOptions, with progress and cancel (it yields between rows). */
export interface FlowAsyncOptions extends FlowOptions {
  /** Called with (rows done, rows in all) after each output row. */
  onProgress?: (done: number, total: number) => void;
  /** Cancels between rows: attentionFlow then rejects with signal.reason. */
  signal?: AbortSignal;
}

const KNOWN = ['fusion', 'residual', 'normalize', 'layer', 'outputs'];

/** The network of a call, ready to give one output row at a time. */
interface Prepared {
  outputs: number[];
  L: number;
  row(n: number, out: Float32Array): void;
}

function prepare(fn: string, attentions: readonly Tensor[], opts: Record<string, unknown>): Prepared {
  const fusion = optFusion(fn, opts);
  const residual = optResidual(fn, opts);
  const normalize = optBool(fn, opts, 'normalize', true);
  const att = checkAttentions(fn, attentions);
  const { L } = att;
  const NLall = att.layers.length;
  if (L > FLOW_MAX_LENGTH) {
    const s = (attentions[0] as { shape: readonly number[] }).shape;
    throw new RangeError(`${fn}: attentions[0] has shape ${fmtShape(s)}: L = ${L} is more than ${FLOW_MAX_LENGTH} (exact flow runs L^2 max-flows); use attentionRollout, or pass fewer tokens`);
  }
  const layerOpt = opts.layer ?? NLall - 1;
  if (typeof layerOpt !== 'number' || !Number.isInteger(layerOpt) || layerOpt < 0 || layerOpt >= NLall) {
    throw new RangeError(`${fn}: options.layer must be an integer in [0, ${NLall - 1}] (attentions has ${NLall} layers), got ${describe(opts.layer)}`);
  }
  let outputs: number[];
  if (opts.outputs === undefined) {
    outputs = Array.from({ length: L }, (_, i) => i);
  } else {
    const o = opts.outputs;
    if (!Array.isArray(o) || !o.every((p) => Number.isInteger(p) && p >= 0 && p < L)) {
      throw new RangeError(`${fn}: options.outputs must be an array of positions in [0, ${L - 1}] (L = ${L}), got ${describe(o)}`);
    }
    outputs = o as number[];
  }
  const N = layerOpt + 1;
  const LL = L * L;

  // the network: node (t, p) = t * L + p; edges (t, i) -> (t - 1, k), capacity A'_{t-1}[i][k]
  const fused = new Float64Array(LL);
  const from: number[] = [], to: number[] = [], cap: number[] = [];
  const layersFused: Float64Array[] = [];
  for (let l = 0; l < N; l++) {
    fuseLayer(fn, l, att, fusion, residual, fused);
    layersFused.push(fused.slice());
    const t = l + 1;
    for (let i = 0; i < L; i++) {
      for (let k = 0; k < L; k++) {
        const c = fused[i * L + k];
        if (c > 0) {
          from.push(t * L + i);
          to.push((t - 1) * L + k);
          cap.push(c);
        }
      }
    }
  }
  const nodes = (N + 1) * L;
  const net = new FlowNetwork(nodes, Int32Array.from(from), Int32Array.from(to), Float64Array.from(cap));

  // for each input token j, the nodes that can reach it (only they can carry flow to it)
  const reaches: Uint8Array[] = [];
  for (let j = 0; j < L; j++) {
    const r = new Uint8Array(nodes);
    r[j] = 1;
    for (let t = 1; t <= N; t++) {
      const A = layersFused[t - 1];
      const below = (t - 1) * L;
      for (let i = 0; i < L; i++) {
        const row = i * L;
        for (let k = 0; k < L; k++) {
          if (r[below + k] && A[row + k] > 0) {
            r[t * L + i] = 1;
            break;
          }
        }
      }
    }
    reaches.push(r);
  }

  const values = new Float64Array(L);
  return {
    outputs, L,
    row(n, out) {
      const s = N * L + outputs[n];
      let sum = 0;
      for (let j = 0; j < L; j++) {
        values[j] = reaches[j][s] ? net.maxFlow(s, j, reaches[j]) : 0;
        sum += values[j];
      }
      const scale = normalize && sum > 0 ? 1 / sum : 1;
      for (let j = 0; j < L; j++) out[n * L + j] = values[j] * scale;
    },
  };
}

/**
 * Attention flow of `attentions` (one Tensor per layer, [1, H, L, L] or [H, L, L], L <= 64),
 * synchronously. Returns [L, L] (or [outputs.length, L]): row i holds, for each input token j,
 * the maximum flow from output position i to token j through the attention graph (each row
 * normalized to sum 1 unless normalize is false). A whole map at L = 64 can take seconds
 * (bidirectional maps); {@link attentionFlow} yields between rows, with progress and cancel.
 *
 * @example
 * const { attentions } = await model.forward(ids, { outputAttentions: true });
 * const f = attentionFlowSync(attentions);          // [L, L]
 */
export function attentionFlowSync(attentions: readonly Tensor[], options: FlowOptions = {}): Tensor {
  const fn = 'attentionFlowSync';
  const p = prepare(fn, attentions, checkOptions(fn, options, KNOWN));
  const out = new Float32Array(p.outputs.length * p.L);
  for (let n = 0; n < p.outputs.length; n++) p.row(n, out);
  return new Tensor(out, [p.outputs.length, p.L]);
}

/**
 * Attention flow (see {@link attentionFlowSync} for the definition and the result), a row at a
 * time with a yield to the event loop between rows: `onProgress(rows done, rows)` after each,
 * `signal` checked between them.
 *
 * @example
 * const f = await attentionFlow(attentions, { onProgress: (d, n) => bar.value = d / n });
 */
export async function attentionFlow(attentions: readonly Tensor[], options: FlowAsyncOptions = {}): Promise<Tensor> {
  const fn = 'attentionFlow';
  const opts = checkOptions(fn, options, [...KNOWN, 'onProgress', 'signal']);
  const signal = optSignal(fn, opts);
  const onProgress = optFunction<(done: number, total: number) => void>(fn, opts, 'onProgress');
  signal?.throwIfAborted();
  const p = prepare(fn, attentions, opts);
  const out = new Float32Array(p.outputs.length * p.L);
  for (let n = 0; n < p.outputs.length; n++) {
    p.row(n, out);
    onProgress?.(n + 1, p.outputs.length);
    await nextTask();
    signal?.throwIfAborted();
  }
  return new Tensor(out, [p.outputs.length, p.L]);
}
