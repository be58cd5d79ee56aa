/**
 * Activation patching sweeps (docs/residual.md): for every cell (a head, a head at a position, a
 * site at a position) the corrupted run is repeated with that activation from the clean run, and
 * the metric m = logit[correct] - logit[wrong] at the last position is normalised:
 * (m(patched) - m(corrupted)) / (m(clean) - m(corrupted)). The sweep runs in wasm
 * (src/model/patching.hpp), which reuses what a patch cannot change, in calls of bounded size
 * with the event loop let in between (progress, cancel).
 */
import { describe } from '../errors.js';
import { nextTask, optFunction, optSignal } from '../model/cancel.js';
import type { DecoderModel } from '../model/decoder.js';
import { checkOptions } from '../validate.js';
import { HeapScope, wasmError } from '../wasm/heap.js';
import { asDecoder, checkIds } from './decoder-ids.js';

/** What a sweep patches: each value's cell. */
export type PatchingOver = 'heads' | 'headPositions' | 'residPre' | 'attnOut' | 'mlpOut';

/** About how long one wasm call of a sweep runs before the event loop is let in (ms). */
const CALL_MS = 50;

const KINDS: Record<PatchingOver, number> = { heads: 0, headPositions: 1, residPre: 2, attnOut: 3, mlpOut: 4 };

/** Options of {@link activationPatching}. */
export interface ActivationPatchingOptions {
  /** The clean run's token ids. */
  clean: ArrayLike<number>;
  /** The corrupted run's, of the same length. */
  corrupted: ArrayLike<number>;
  /** `[correctId, wrongId]`: the metric is `logit[correct] - logit[wrong]` at the last position. */
  answer: readonly [number, number] | ArrayLike<number>;
  /**
   * 'heads' -> [layers, heads] (the head's output at every position), 'headPositions' ->
   * [layers, heads, T], 'residPre' / 'attnOut' / 'mlpOut' -> [layers, T] (that site at one position).
   */
  over: PatchingOver;
  /** Called with (cells done, cells in all). */
  onProgress?: (done: number, total: number) => void;
  /** Cancels the sweep: it then rejects with `signal.reason`. */
  signal?: AbortSignal;
}

/** What {@link activationPatching} returns. */
export interface ActivationPatchingResult {
  /** The sites swept, as asked. */
  over: PatchingOver;
  /** [layers, heads], [layers, heads, T] or [layers, T]. */
  shape: number[];
  /** Row-major over `shape`: 1 = the clean run's metric, 0 = the corrupted run's. */
  values: Float32Array;
  /** m(clean): the metric `logit[correct] - logit[wrong]` of the clean run (the normalisation's 1). */
  cleanMetric: number;
  /** m(corrupted): the same metric of the corrupted run (the normalisation's 0). */
  corruptedMetric: number;
}

/** Patches each cell of `over` from the clean run into the corrupted one; see {@link ActivationPatchingOptions}. */
export async function activationPatching(model: DecoderModel, options: ActivationPatchingOptions): Promise<ActivationPatchingResult> {
  const fn = 'activationPatching';
  const dec = asDecoder(fn, model);
  const opts = checkOptions(fn, options, ['clean', 'corrupted', 'answer', 'over', 'onProgress', 'signal']);
  const clean = checkIds(fn, 'options.clean', opts.clean, dec);
  const corrupted = checkIds(fn, 'options.corrupted', opts.corrupted, dec);
  if (clean.length !== corrupted.length) {
    throw new RangeError(`${fn}: options.clean has ${clean.length} tokens and options.corrupted ${corrupted.length}: they must have the same length`);
  }
  const over = opts.over as PatchingOver;
  if (typeof over !== 'string' || !(over in KINDS)) {
    throw new TypeError(`${fn}: options.over must be one of ${Object.keys(KINDS).map((k) => `'${k}'`).join(', ')}, got ${describe(opts.over)}`);
  }
  const { m, handle, dims, lastError } = dec._wasm(fn);
  const answer = opts.answer as ArrayLike<unknown> | undefined;
  if (!answer || typeof answer.length !== 'number' || answer.length !== 2) {
    throw new TypeError(`${fn}: options.answer must be [correctId, wrongId], got ${describe(opts.answer)}`);
  }
  const [correct, wrong] = Array.from(answer, (t, i) => {
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t >= dims.vocab) {
      throw new RangeError(`${fn}: options.answer[${i}] = ${describe(t)} is not a token id in [0, ${dims.vocab})`);
    }
    return t;
  });
  const signal = optSignal(fn, opts);
  const onProgress = optFunction<(done: number, total: number) => void>(fn, opts, 'onProgress');
  const T = clean.length;
  const { layers: NL, heads: H } = dims;
  const shape = over === 'heads' ? [NL, H] : over === 'headPositions' ? [NL, H, T] : [NL, T];
  const cells = shape.reduce((a, b) => a * b, 1);
  signal?.throwIfAborted();
  const scope = new HeapScope(m, fn);
  const sweep = handle.sweepBegin(scope.i32(clean, `clean [${T}]`), scope.i32(corrupted, `corrupted [${T}]`), T, correct, wrong);
  try {
    if (!sweep) throw wasmError(fn, lastError());
    const mClean = sweep.cleanMetric();
    const mCorr = sweep.corruptedMetric();
    if (!(Math.abs(mClean - mCorr) > 0)) {
      throw new Error(`${fn}: the clean and corrupted runs give the same metric logit[${correct}] - logit[${wrong}] = ${mClean}: nothing to normalise by`);
    }
    const pOut = scope.alloc(4 * cells, `values [${shape.join(', ')}]`);
    // the first call runs one cell, so progress shows within one patched run whatever the
    // model's size; each later call as many cells as the calls so far say fit in CALL_MS (at
    // most 4 times the last call's), the event loop let in between
    let batch = 1;
    onProgress?.(0, cells);
    for (let begin = 0, end = 0; begin < cells; begin = end) {
      end = Math.min(cells, begin + batch);
      const t0 = performance.now();
      const err = dec._wasm(fn) && sweep.run(KINDS[over], begin, end, pOut);
      if (err) throw wasmError(fn, err);
      const perCell = Math.max(performance.now() - t0, 0.01) / (end - begin);
      batch = Math.max(1, Math.min(4 * (end - begin), Math.floor(CALL_MS / perCell)));
      onProgress?.(end, cells);
      if (end < cells) {
        await nextTask();
        signal?.throwIfAborted();
      }
    }
    const raw = scope.read(pOut, cells);
    const values = new Float32Array(cells);
    for (let i = 0; i < cells; i++) values[i] = (raw[i] - mCorr) / (mClean - mCorr);
    return { over, shape, values, cleanMetric: mClean, corruptedMetric: mCorr };
  } finally {
    sweep?.delete();
    scope.free();
  }
}
