// Runs scaled dot-product attention on a GpuContext: pipelines (cached per kernel), pooled
// buffers, a uniform block per dispatch, one submit per piece of the plan (planner.ts).

import { BufferUsage, MAP_READ, SHADER_STAGE_COMPUTE } from './gpu-types.js';
import type { GPUBufferLike, GPUBindGroupLayoutLike, GPUComputePipelineLike, GPUQuerySetLike } from './gpu-types.js';
import { effectiveLimits, WebGPUDeviceLostError } from './device.js';
import type { GpuContext, GpuLimits } from './device.js';
import { COLS, layout, planPieces, type Piece, type PieceLayout } from './planner.js';
import type { AttentionProblem } from '../problem.js';
import {
  attentionWeights as WEIGHTS_WGSL, flashAttention as FLASH_WGSL, maskedScore as MASKED_SCORE_WGSL,
} from './shaders.generated.js';

export interface WebGPUAttentionResult {
  output: Float32Array;    // [B, H, Lq, Dv]
  weights?: Float32Array;  // [B, H, Lq, Lk] when returnWeights
  /** How many pieces the call was split into (1 unless it exceeded a device limit). */
  pieces: number;
  /** GPU time of the kernels in ms (timestamp-query), when asked for and available. */
  gpuTimeMs?: number;
}

export interface RunOptions {
  /** Measure GPU time with timestamp-query when the device has it. */
  timing?: boolean;
  /** Function name used in error messages. */
  fn?: string;
}

const PARAM_WORDS = 24;

// ---------------------------------------------------------------- pipelines

function storageEntry(binding: number, readOnly: boolean) {
  return { binding, visibility: SHADER_STAGE_COMPUTE, buffer: { type: readOnly ? 'read-only-storage' : 'storage' } };
}

function layouts(ctx: GpuContext): { flash: GPUBindGroupLayoutLike; weights: GPUBindGroupLayoutLike } {
  let l = ctx.cache.get('layouts') as { flash: GPUBindGroupLayoutLike; weights: GPUBindGroupLayoutLike } | undefined;
  if (!l) {
    const d = ctx.device;
    const uniform = { binding: 0, visibility: SHADER_STAGE_COMPUTE, buffer: { type: 'uniform' } };
    l = {
      flash: d.createBindGroupLayout({
        label: 'qkv flash',
        entries: [uniform, ...[1, 2, 3, 4, 5].map((b) => storageEntry(b, true)), storageEntry(6, false), storageEntry(7, false)],
      }),
      weights: d.createBindGroupLayout({
        label: 'qkv weights',
        entries: [uniform, ...[1, 2, 3, 4, 5].map((b) => storageEntry(b, true)), storageEntry(6, false)],
      }),
    };
    ctx.cache.set('layouts', l);
  }
  return l;
}

/**
 * The pipeline of a kernel. One per kernel and device: mask presence and column chunks are
 * uniforms, not override constants, because compiling a pipeline costs seconds on software
 * adapters (SwiftShader) and every variant would be compiled again after a device loss.
 */
function pipeline(ctx: GpuContext, kind: 'flash' | 'weights'): Promise<GPUComputePipelineLike> {
  const key = `pipe:${kind}`;
  let p = ctx.cache.get(key) as Promise<GPUComputePipelineLike> | undefined;
  if (!p) {
    const module = ctx.device.createShaderModule({
      code: MASKED_SCORE_WGSL + (kind === 'flash' ? FLASH_WGSL : WEIGHTS_WGSL), label: `qkv ${kind}`,
    });
    const l = layouts(ctx);
    p = ctx.device.createComputePipelineAsync({
      label: key,
      layout: ctx.device.createPipelineLayout({ bindGroupLayouts: [kind === 'flash' ? l.flash : l.weights] }),
      compute: { module, entryPoint: 'main' },
    });
    ctx.cache.set(key, p);
    p.catch(() => { if (ctx.cache.get(key) === p) ctx.cache.delete(key); });
  }
  return p;
}

// ---------------------------------------------------------------- running

const STORAGE_IN = BufferUsage.STORAGE | BufferUsage.COPY_DST;
const STORAGE_OUT = BufferUsage.STORAGE | BufferUsage.COPY_SRC;
const UNIFORM = BufferUsage.UNIFORM | BufferUsage.COPY_DST;
const READBACK = BufferUsage.MAP_READ | BufferUsage.COPY_DST;

function params(a: AttentionProblem, p: Piece, l: PieceLayout, writeStats: boolean): ArrayBuffer {
  const buf = new ArrayBuffer(PARAM_WORDS * 4);
  const u = new Uint32Array(buf), i = new Int32Array(buf), f = new Float32Array(buf);
  u[0] = p.nh; u[1] = l.nkv; u[2] = p.nq; u[3] = a.Lk;
  u[4] = a.D; u[5] = a.Dv; u[6] = l.group; u[7] = a.causal ? 1 : 0;
  i[8] = a.Lk - a.Lq + p.i0; i[9] = a.window > 0 ? a.window : 0; f[10] = a.scale; u[11] = writeStats ? 1 : 0;
  const bs = l.bool?.strides ?? [0, 0, 0, 0], fs = l.float?.strides ?? [0, 0, 0, 0];
  u[12] = bs[0]; u[13] = bs[1]; u[14] = bs[2]; u[15] = bs[3];
  u[16] = fs[0]; u[17] = fs[1]; u[18] = fs[2]; u[19] = fs[3];
  u[20] = Math.ceil(a.Dv / COLS);
  u[21] = a.boolMask ? 1 : 0;
  u[22] = a.floatMask ? 1 : 0;
  u[23] = Math.min(4, Math.ceil(Math.min(a.Dv, COLS) / 64));
  return buf;
}

/** Runs one validated call on ctx. Rejects with WebGPUDeviceLostError if the device is lost meanwhile. */
export async function runAttention(ctx: GpuContext, a: AttentionProblem, opts: RunOptions = {}): Promise<WebGPUAttentionResult> {
  const fn = opts.fn ?? 'scaledDotProductAttention';
  const lim = effectiveLimits(ctx);
  const pieces = planPieces(a, lim, fn);
  const output = new Float32Array(a.B * a.H * a.Lq * a.Dv);
  const weights = a.returnWeights ? new Float32Array(a.B * a.H * a.Lq * a.Lk) : undefined;
  const timing = !!opts.timing && ctx.timestampQuery;
  let gpuNs = 0;
  try {
    const [flash, wpipe] = await Promise.all([
      pipeline(ctx, 'flash'),
      a.returnWeights ? pipeline(ctx, 'weights') : Promise.resolve(null),
    ]);
    for (const p of pieces) {
      if (ctx.lost) break;
      gpuNs += await runPiece({ ctx, problem: a, piece: p, limits: lim, flash, wpipe, output, weights, timing, fn });
    }
    if (ctx.lost) throw new WebGPUDeviceLostError(fn, ctx.lostReason);
  } catch (e) {
    if (e instanceof WebGPUDeviceLostError) throw e;
    // A lost device shows up as rejected mapAsync / pipeline creation: say so clearly.
    const lost = ctx.lost || await Promise.race([ctx.lostPromise.then(() => true), new Promise<boolean>((ok) => setTimeout(() => ok(false), 100))]);
    if (lost) throw new WebGPUDeviceLostError(fn, ctx.lostReason);
    throw e;
  }
  const res: WebGPUAttentionResult = { output, pieces: pieces.length };
  if (weights) res.weights = weights;
  if (timing) res.gpuTimeMs = gpuNs / 1e6;
  return res;
}

/** One piece of a call and where its results go. */
interface PieceRun {
  ctx: GpuContext;
  problem: AttentionProblem;
  piece: Piece;
  limits: GpuLimits;
  flash: GPUComputePipelineLike;
  /** the weights pipeline, with returnWeights */
  wpipe: GPUComputePipelineLike | null;
  /** [B, H, Lq, Dv], the whole call's */
  output: Float32Array;
  /** [B, H, Lq, Lk], the whole call's, with returnWeights */
  weights: Float32Array | undefined;
  timing: boolean;
  fn: string;
}

/** Uploads, dispatches and reads back one piece; returns its GPU time in ns (0 without timing). */
async function runPiece(run: PieceRun): Promise<number> {
  const { ctx, problem: a, piece: p, limits: lim, flash, wpipe, output, weights, timing, fn } = run;
  const d = ctx.device, pool = ctx.pool;
  const l = layout(a, p);
  const cap = Math.min(lim.maxStorageBufferBindingSize, lim.maxBufferSize);
  const held: Array<[GPUBufferLike, number]> = [];
  const get = (bytes: number, usage: number, max = cap) => { const b = pool.acquire(bytes, usage, max); held.push([b, usage]); return b; };
  const mapped: GPUBufferLike[] = [];
  const withWeights = !!wpipe && l.wLen > 0;
  let querySet: GPUQuerySetLike | null = null;

  d.pushErrorScope('out-of-memory');
  d.pushErrorScope('validation');
  // ---- synchronous from here to the pops, so concurrent calls' error scopes cannot interleave
  const uFlash = get(PARAM_WORDS * 4, UNIFORM);
  d.queue.writeBuffer(uFlash, 0, params(a, p, l, withWeights));
  const q = get(l.qLen * 4, STORAGE_IN);
  d.queue.writeBuffer(q, 0, a.query, l.qOff, l.qLen);
  const k = get(l.kLen * 4, STORAGE_IN);
  d.queue.writeBuffer(k, 0, a.key, l.kOff, l.kLen);
  const v = get(l.vLen * 4, STORAGE_IN);
  d.queue.writeBuffer(v, 0, a.value, l.vOff, l.vLen);
  let bm: GPUBufferLike, fm: GPUBufferLike;
  if (a.boolMask && l.bool) {
    const padded = new Uint8Array(Math.ceil(l.bool.len / 4) * 4);
    padded.set(a.boolMask.data.subarray(l.bool.off, l.bool.off + l.bool.len));
    bm = get(padded.byteLength, STORAGE_IN);
    d.queue.writeBuffer(bm, 0, padded);
  } else {
    bm = get(16, STORAGE_IN);
  }
  if (a.floatMask && l.float) {
    fm = get(l.float.len * 4, STORAGE_IN);
    d.queue.writeBuffer(fm, 0, a.floatMask.data, l.float.off, l.float.len);
  } else {
    fm = get(16, STORAGE_IN);
  }
  const out = get(l.oLen * 4, STORAGE_OUT);
  const stats = get(Math.max(16, l.statsLen * 4), BufferUsage.STORAGE);
  const whole = (b: GPUBufferLike, bytes: number) => ({ buffer: b, offset: 0, size: Math.max(16, Math.ceil(bytes / 4) * 4) });
  // resources in binding order (0, 1, ...), as the shaders declare them
  const bind = (layout: GPUBindGroupLayoutLike, resources: ReturnType<typeof whole>[]) =>
    d.createBindGroup({ layout, entries: resources.map((resource, binding) => ({ binding, resource })) });
  const uniforms = { buffer: uFlash, offset: 0, size: PARAM_WORDS * 4 };
  const masks = [whole(bm, l.bool?.len ?? 16), whole(fm, (l.float?.len ?? 4) * 4)];
  const bgFlash = bind(layouts(ctx).flash, [
    uniforms, whole(q, l.qLen * 4), whole(k, l.kLen * 4), whole(v, l.vLen * 4), ...masks, whole(out, l.oLen * 4),
    whole(stats, l.statsLen * 4),
  ]);
  let w: GPUBufferLike | null = null;
  let bgWeights = null;
  if (withWeights) {
    w = get(l.wLen * 4, STORAGE_OUT);
    bgWeights = bind(layouts(ctx).weights, [
      uniforms, whole(q, l.qLen * 4), whole(k, l.kLen * 4), whole(stats, l.statsLen * 4), ...masks, whole(w, l.wLen * 4),
    ]);
  }
  let tsResolve: GPUBufferLike | null = null, tsRead: GPUBufferLike | null = null;
  if (timing) {
    querySet = d.createQuerySet({ type: 'timestamp', count: 4 });
    tsResolve = get(32, BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC, lim.maxBufferSize);
    tsRead = get(32, READBACK, lim.maxBufferSize);
  }
  const enc = d.createCommandEncoder();
  const pass = enc.beginComputePass(querySet ? { timestampWrites: { querySet, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } } : {});
  pass.setPipeline(flash);
  pass.setBindGroup(0, bgFlash);
  pass.dispatchWorkgroups(...l.grid.flash);
  pass.end();
  if (withWeights && wpipe && bgWeights) {
    const pass2 = enc.beginComputePass(querySet ? { timestampWrites: { querySet, beginningOfPassWriteIndex: 2, endOfPassWriteIndex: 3 } } : {});
    pass2.setPipeline(wpipe);
    pass2.setBindGroup(0, bgWeights);
    pass2.dispatchWorkgroups(...l.grid.weights);
    pass2.end();
  }
  const outRead = get(l.oLen * 4, READBACK, lim.maxBufferSize);
  enc.copyBufferToBuffer(out, 0, outRead, 0, l.oLen * 4);
  let wRead: GPUBufferLike | null = null;
  if (w) {
    wRead = get(l.wLen * 4, READBACK, lim.maxBufferSize);
    enc.copyBufferToBuffer(w, 0, wRead, 0, l.wLen * 4);
  }
  if (querySet && tsResolve && tsRead) {
    enc.resolveQuerySet(querySet, 0, withWeights ? 4 : 2, tsResolve, 0);
    enc.copyBufferToBuffer(tsResolve, 0, tsRead, 0, 32);
  }
  d.queue.submit([enc.finish()]);
  const validation = d.popErrorScope();
  const oom = d.popErrorScope();
  // ---- end of the synchronous part

  let gpuNs = 0;
  try {
    const maps: Array<Promise<void>> = [];
    const track = (b: GPUBufferLike, bytes: number) => maps.push(b.mapAsync(MAP_READ, 0, bytes).then(() => { mapped.push(b); }));
    track(outRead, l.oLen * 4);
    if (wRead) track(wRead, l.wLen * 4);
    if (tsRead) track(tsRead, 32);
    const allMaps = Promise.all(maps);
    allMaps.catch(() => { /* reported below, or superseded by a scope error */ });
    const [verr, merr] = await Promise.all([validation.catch(() => null), oom.catch(() => null)]);
    if (verr) throw new Error(`${fn}: WebGPU validation error (this is a bug in qkv's WebGPU runner): ${verr.message}`);
    if (merr) throw new Error(`${fn}: WebGPU out of memory: ${merr.message}`);
    await allMaps;
    if (ctx.lost) throw new WebGPUDeviceLostError(fn, ctx.lostReason);
    output.set(new Float32Array(outRead.getMappedRange(0, l.oLen * 4)), l.oOff);
    if (wRead && weights) weights.set(new Float32Array(wRead.getMappedRange(0, l.wLen * 4)), l.wOff);
    if (tsRead) {
      const t = new BigUint64Array(tsRead.getMappedRange(0, 32));
      gpuNs = Number(t[1] - t[0]) + (withWeights ? Number(t[3] - t[2]) : 0);
    }
  } finally {
    for (const b of mapped) { try { b.unmap(); } catch { /* lost device */ } }
    // wait for every map to settle before buffers go back to the pool
    if (mapped.length < (wRead ? 2 : 1) + (tsRead ? 1 : 0)) {
      for (const [b] of held) { try { b.destroy(); } catch { /* ignore */ } }
    } else {
      for (const [b, usage] of held) pool.release(b, usage);
    }
    querySet?.destroy();
  }
  return gpuNs;
}
