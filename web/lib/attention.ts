/** scaledDotProductAttention: argument checks, then a backend (backend.ts) runs it. */
import { BACKENDS, dispatchAttention, dispatchAttentionSync, type Backend } from './backend.js';
import { describe, fmtShape } from './errors.js';
import type { AttentionOutput, AttentionProblem, AttentionQuery, MaskArg } from './problem.js';
import { Tensor } from './tensor.js';
import { checkOptions, checkTensor, optBool, optInt, pad4, MAX_DIM } from './validate.js';

/** Options of {@link scaledDotProductAttention} (names as PyTorch, camelCase). */
export interface AttentionOptions {
  /**
   * A mask broadcastable to [B, H, Lq, Lk] (rank <= 4, right-aligned; each dim full or 1).
   * Bool (Uint8Array): 1 = may attend. Float (Float32Array): added to the scaled scores.
   */
  attnMask?: Tensor | null;
  /**
   * Query i sees key j iff j <= i + (Lk - Lq) (bottom-right aligned; PyTorch's when Lq == Lk).
   * Unlike PyTorch it may be combined with attnMask and window: all rules apply.
   */
  isCausal?: boolean;
  /** Sliding window w >= 1: additionally j > i + (Lk - Lq) - w. 0 or undefined: no window. */
  window?: number;
  /** Score scale; default 1 / sqrt(D). A finite number >= 0. */
  scale?: number;
  /** Grouped-query attention: H % Hkv == 0, query head h reads kv head floor(h / (H / Hkv)). */
  enableGqa?: boolean;
  /** Also return the softmax probabilities [B, H, Lq, Lk]. */
  returnWeights?: boolean;
  /** 'auto' (default), 'wasm' or 'webgpu'. */
  backend?: Backend;
  /**
   * Write the output into this array (B·H·Lq·Dv floats, row-major [B, H, Lq, Dv]) instead of a
   * new one; the result's `output` Tensor wraps it. Saves an allocation per call in a loop (as
   * PyTorch's `out=`). It may be one of the inputs' arrays: the inputs are read before it is written.
   */
  out?: Float32Array;
}

/** What attention calls return. */
export interface AttentionResult {
  /** [B, H, Lq, Dv] (the query's leading dims). */
  output: Tensor;
  /** [B, H, Lq, Lk] softmax probabilities, with `returnWeights`. */
  weights?: Tensor;
}

const SDPA = 'scaledDotProductAttention';
const SDPA_OPTIONS = ['attnMask', 'isCausal', 'window', 'scale', 'enableGqa', 'returnWeights', 'backend', 'out'] as const;

/** Checks a mask against [B, H, Lq, Lk]; `got` names the call's shapes for messages. */
function checkMask(
  fn: string, name: string, mask: unknown, target: readonly number[], got: string,
): { boolMask?: MaskArg<Uint8Array>; floatMask?: MaskArg<Float32Array> } {
  if (mask === undefined || mask === null) return {};
  const m = checkTensor(fn, name, mask);
  const shape = m.shape;
  const dimsOk = shape.length <= 4 && pad4(shape).every((d, k) => d === 1 || d === target[k]);
  if (!dimsOk) {
    throw new Error(
      `${fn}: ${name} of shape ${fmtShape(shape)} does not broadcast to [B, H, Lq, Lk] = ${fmtShape(target)} ` +
        `(a mask has rank <= 4, aligned right, each dim equal to that size or 1; got ${got})`,
    );
  }
  const arg = { dims: pad4(shape) };
  return m.dtype === 'bool'
    ? { boolMask: { ...arg, data: m.data as Uint8Array } }
    : { floatMask: { ...arg, data: m.data as Float32Array } };
}

/** Checks a scale option (finite and >= 0) and resolves the default 1 / sqrt(D): the one place it is decided. */
function resolveScale(fn: string, v: unknown, D: number, got: string): number {
  if (v === undefined || v === null) return 1 / Math.sqrt(D);
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
    throw new RangeError(`${fn}: options.scale must be a finite number >= 0, got ${describe(v)} (${got})`);
  }
  return v;
}

/** Checks an `out` option: a Float32Array with room for exactly the output [B, H, Lq, Dv]. */
function checkOut(fn: string, v: unknown, s: AttentionSizes, shape: number[], got: string): Float32Array | undefined {
  if (v === undefined || v === null) return undefined;
  const n = s.B * s.H * s.Lq * s.Dv;
  if (!(v instanceof Float32Array) || v.length !== n) {
    const what = v instanceof Float32Array ? `a Float32Array of ${v.length}` : describe(v);
    throw new Error(`${fn}: options.out must be a Float32Array of ${n} floats (output ${fmtShape(shape)}), got ${what} (${got})`);
  }
  return v;
}

/** The sizes of a call, as the kernels see them (rank-4, padded with leading 1s). */
export interface AttentionSizes {
  B: number; H: number; Hkv: number; Lq: number; Lk: number; D: number; Dv: number;
}

/**
 * Checks the options every attention entry point shares (masks, causal, window, scale,
 * enableGqa, returnWeights) against the call's sizes and turns the queries into an
 * {@link AttentionQuery}. `got` describes the call's shapes for every message; `lead` is the
 * query's leading dims (the results keep the query's rank).
 */
export function describeAttention(
  fn: string, s: AttentionSizes, query: Float32Array, opts: Record<string, unknown>, got: string, lead: number[],
): AttentionQuery {
  const fail = (what: string): never => {
    throw new Error(`${fn}: ${what} (${got})`);
  };
  const enableGqa = optBool(fn, opts, 'enableGqa', false);
  if (s.Hkv !== s.H) {
    if (!enableGqa) fail(`key/value have ${s.Hkv} heads but query has ${s.H}; pass enableGqa: true for grouped-query attention`);
    if (s.H % s.Hkv !== 0) fail(`enableGqa: query heads (${s.H}) must be a multiple of key/value heads (${s.Hkv})`);
  }
  return {
    ...s,
    query,
    ...checkMask(fn, 'options.attnMask', opts.attnMask, [s.B, s.H, s.Lq, s.Lk], got),
    causal: optBool(fn, opts, 'isCausal', false),
    window: optInt(fn, opts, 'window', 0, 0, MAX_DIM, ' (0 = no window)'),
    scale: resolveScale(fn, opts.scale, s.D, got),
    returnWeights: optBool(fn, opts, 'returnWeights', false),
    out: checkOut(fn, opts.out, s, [...lead, s.Lq, s.Dv], got),
    outputShape: [...lead, s.Lq, s.Dv],
    weightsShape: [...lead, s.Lq, s.Lk],
  };
}

/**
 * Validates a scaledDotProductAttention call into an {@link AttentionProblem} and the backend asked for.
 * @internal
 */
export function prepareAttention(
  fn: string, query: unknown, key: unknown, value: unknown, options: unknown,
): { problem: AttentionProblem; backend: Backend } {
  const q = checkTensor(fn, 'query', query, 'float32');
  const k = checkTensor(fn, 'key', key, 'float32');
  const v = checkTensor(fn, 'value', value, 'float32');
  const got = `got query ${fmtShape(q.shape)}, key ${fmtShape(k.shape)}, value ${fmtShape(v.shape)}`;
  const opts = checkOptions(fn, options, SDPA_OPTIONS);
  const rank = q.shape.length;
  if (rank < 2 || rank > 4 || k.shape.length !== rank || v.shape.length !== rank) {
    throw new Error(`${fn}: query, key and value must have the same rank, 2 to 4 ([B, H, L, D] in full) (${got})`);
  }
  const [B, H, Lq, D] = pad4(q.shape);
  const [Bk, Hkv, Lk, Dk] = pad4(k.shape);
  const [Bv, Hv, Lv, Dv] = pad4(v.shape);
  const fail = (what: string): never => {
    throw new Error(`${fn}: ${what} (${got})`);
  };
  for (const [name, s] of [['query', q.shape], ['key', k.shape], ['value', v.shape]] as const) {
    if (s.some((d) => d === 0)) fail(`${name} has an empty dimension`);
    if (s.some((d) => d > MAX_DIM)) fail(`${name} has a dimension above ${MAX_DIM}`);
  }
  if (Bk !== B || Bv !== B) fail('key and value must have the batch size of query');
  if (Dk !== D) fail(`key's last dim (${Dk}) must equal query's last dim D (${D})`);
  if (Hv !== Hkv) fail(`value must have the heads of key (${Hkv}), got ${Hv}`);
  if (Lv !== Lk) fail(`value must have the length of key (${Lk}), got ${Lv}`);
  const backend = opts.backend ?? 'auto';
  if (!BACKENDS.includes(backend as Backend)) {
    throw new Error(`${fn}: options.backend must be one of ${BACKENDS.map((b) => `'${b}'`).join(', ')}, got ${describe(backend)}`);
  }
  const described = describeAttention(
    fn, { B, H, Hkv, Lq, Lk, D, Dv }, q.data as Float32Array, opts, got, q.shape.slice(0, rank - 2),
  );
  return {
    backend: backend as Backend,
    problem: { ...described, key: k.data as Float32Array, value: v.data as Float32Array },
  };
}

/** Wraps a backend's arrays as Tensors of the query's rank (the output in `out` when the caller gave one). */
export function toResult(p: AttentionQuery, out: AttentionOutput): AttentionResult {
  if (p.out && out.output !== p.out) p.out.set(out.output);
  const result: AttentionResult = { output: new Tensor(p.out ?? out.output, p.outputShape) };
  if (p.returnWeights && out.weights) result.weights = new Tensor(out.weights, p.weightsShape);
  return result;
}

/**
 * Scaled dot-product attention, as PyTorch's `F.scaled_dot_product_attention`:
 * `softmax(scale * Q K^T + mask) V` with causal/window rules, masks and GQA.
 *
 * query [B, H, Lq, D], key [B, Hkv, Lk, D], value [B, Hkv, Lk, Dv] (float32, row-major;
 * rank 2 or 3 are read as [.., L, D] with leading 1s) -> output [B, H, Lq, Dv].
 * Rows no key may attend to give output 0 and weights 0.
 *
 * @throws Error (naming the argument and the shapes) on any invalid input;
 *   RangeError when the call cannot fit in the wasm heap (the module keeps working).
 */
export async function scaledDotProductAttention(
  query: Tensor, key: Tensor, value: Tensor, options?: AttentionOptions,
): Promise<AttentionResult> {
  const { problem, backend } = prepareAttention(SDPA, query, key, value, options);
  return toResult(problem, await dispatchAttention(SDPA, problem, backend));
}

/**
 * The synchronous wasm path of {@link scaledDotProductAttention} (same arguments;
 * `backend` must be 'auto' or 'wasm'). The module must be loaded: `await init()` first.
 */
export function scaledDotProductAttentionSync(
  query: Tensor, key: Tensor, value: Tensor, options?: AttentionOptions,
): AttentionResult {
  const fn = 'scaledDotProductAttentionSync';
  const { problem, backend } = prepareAttention(fn, query, key, value, options);
  return toResult(problem, dispatchAttentionSync(fn, problem, backend));
}

