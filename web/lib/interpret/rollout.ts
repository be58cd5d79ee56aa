/**
 * Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", §3):
 * how much of each input token reaches each position at the top, if attention were the only
 * way information moved and the residual stream carried half of it:
 *
 *     A'_l = normalize_rows((1 - residual) fuse_h(A_l) + residual I)     (fuse.ts)
 *     rollout = A'_{N-1} · ... · A'_1 · A'_0
 *
 * rollout[i][j] is the share of input token j in position i after the last layer; each row
 * sums to 1. Decoders (causal maps: the product stays lower triangular, and only that part is
 * computed) and encoders (bidirectional maps) alike.
 */
import { fmtShape } from '../errors.js';
import { Tensor } from '../tensor.js';
import { checkOptions, optBool } from '../validate.js';
import { getModule, loadModule } from '../wasm/loader.js';
import { checkAttentions, fuseLayer, optFusion, optResidual, type HeadFusion } from './fuse.js';
import { multiplyJs } from './products.js';
import { rolloutKernelsOf, rolloutWasm } from './rollout-wasm.js';

/** Options of {@link attentionRollout} and {@link attentionRolloutSync}. */
export interface RolloutOptions {
  /** How each layer's heads are combined: 'mean' (default, the paper's), 'max' or 'min'. */
  fusion?: HeadFusion;
  /** The identity's weight in each layer, for the residual connection: in [0, 1], default 0.5. */
  residual?: number;
  /**
   * false (default): the rollout through every layer, [L, L]. true: the rollout up to each
   * layer, [numLayers, L, L] (entry l = A'_l ... A'_0; the last is the default result).
   */
  cumulative?: boolean;
  /**
   * 'auto' (default): the wasm module's rollout kernels (float32) when the module is loaded and
   * L >= 32, else TypeScript (float64). 'js' or 'wasm' force one ('wasm' needs the module
   * loaded: use the async {@link attentionRollout}, or `await init()` first).
   */
  backend?: 'auto' | 'js' | 'wasm';
}

const KNOWN = ['fusion', 'residual', 'cumulative', 'backend'];

/** Below this L the TypeScript products are as fast as the wasm calls. */
const WASM_FROM = 32;

/**
 * Attention rollout of `attentions` (one Tensor per layer, [1, H, L, L] or [H, L, L], as
 * `model.forward(ids, { outputAttentions: true })` returns them), synchronously. Returns
 * [L, L] (or [numLayers, L, L] with `cumulative`): row i is output position i's mix of the
 * input tokens.
 *
 * @example
 * const { attentions } = await model.forward(ids, { outputAttentions: true });
 * const r = attentionRolloutSync(attentions);       // [L, L]
 * const lastRow = r.data.subarray((L - 1) * L);      // what reaches the last token
 */
export function attentionRolloutSync(attentions: readonly Tensor[], options: RolloutOptions = {}): Tensor {
  const fn = 'attentionRollout';
  const opts = checkOptions(fn, options, KNOWN);
  const fusion = optFusion(fn, opts);
  const residual = optResidual(fn, opts);
  const cumulative = optBool(fn, opts, 'cumulative', false);
  const backend = opts.backend ?? 'auto';
  if (backend !== 'auto' && backend !== 'js' && backend !== 'wasm') {
    throw new TypeError(`${fn}: options.backend must be 'auto', 'js' or 'wasm', got ${String(backend)}`);
  }
  const att = checkAttentions(fn, attentions);
  const { L } = att;
  const NL = att.layers.length;
  const LL = L * L;
  const out = new Float32Array(cumulative ? NL * LL : LL);
  const shape = cumulative ? [NL, L, L] : [L, L];

  const m = getModule();
  const kernels = m ? rolloutKernelsOf(m) : null;
  if (backend === 'wasm' && !kernels) {
    throw new Error(`${fn}: options.backend 'wasm' needs the wasm module loaded (with its rollout kernels); call \`await init()\` first or use the async attentionRollout (attentions ${fmtShape([NL, L, L])})`);
  }
  if (backend === 'wasm' || (backend === 'auto' && kernels !== null && L >= WASM_FROM && NL > 1)) {
    rolloutWasm(m!, kernels!, fn, att, fusion, residual, cumulative, out);
    return new Tensor(out, shape);
  }
  // every layer fused first: whether all are lower triangular decides the product
  let lower = true;
  const fused: Float64Array[] = [];
  for (let l = 0; l < NL; l++) {
    const f = new Float64Array(LL);
    if (!fuseLayer(fn, l, att, fusion, residual, f)) lower = false;
    fused.push(f);
  }
  let R: Float64Array = fused[0];
  if (cumulative) out.set(R, 0);
  let C: Float64Array = new Float64Array(LL);
  for (let l = 1; l < NL; l++) {
    multiplyJs(fused[l], R, C, L, lower);
    [R, C] = [C, R]; // the old R (fused[0] at first) is free to overwrite
    if (cumulative) out.set(R, l * LL);
  }
  if (!cumulative) out.set(R);
  return new Tensor(out, shape);
}

/**
 * Attention rollout (Abnar & Zuidema 2020), loading the wasm module first so the products run
 * in it (see {@link attentionRolloutSync} for the definition and the result).
 */
export async function attentionRollout(attentions: readonly Tensor[], options: RolloutOptions = {}): Promise<Tensor> {
  if ((options as RolloutOptions | undefined)?.backend !== 'js') await loadModule();
  return attentionRolloutSync(attentions, options);
}
