// Runs scaled dot-product attention on a GpuContext: pipelines (cached per kernel), pooled
// buffers, a uniform block per dispatch, and a planner that splits a call into pieces when a
// buffer would exceed the device's maxStorageBufferBindingSize / maxBufferSize or a dispatch
// would exceed maxComputeWorkgroupsPerDimension (per batch, then per group of heads, then per
// block of query rows), or rejects it with a clear Error when even one piece cannot fit.

import { BufferUsage, MAP_READ, SHADER_STAGE_COMPUTE } from './gpu-types.js';
import type { GPUBufferLike, GPUBindGroupLayoutLike, GPUComputePipelineLike, GPUQuerySetLike } from './gpu-types.js';
import { effectiveLimits, WebGPUDeviceLostError, WebGPULimitError } from './device.js';
import type { GpuContext, GpuLimits } from './device.js';
import {
  attentionWeights as WEIGHTS_WGSL, flashAttention as FLASH_WGSL, maskedScore as MASKED_SCORE_WGSL,
} from './shaders.generated.js';

export type Dims4 = [number, number, number, number];

/** Inputs of one call, already validated by the caller (shapes, lengths, mask dims). */
export interface WebGPUAttentionParams {
  B: number; H: number; Hkv: number; Lq: number; Lk: number; D: number; Dv: number;
  query: Float32Array;   // [B, H, Lq, D]
  key: Float32Array;     // [B, Hkv, Lk, D]
  value: Float32Array;   // [B, Hkv, Lk, Dv]
  boolMask?: { data: Uint8Array; dims: Dims4 };     // each dim full size or 1; nonzero = may attend
  floatMask?: { data: Float32Array; dims: Dims4 };  // each dim full size or 1; added to the scores
  causal: boolean;
  window: number;        // 0 = no window
  scale: number;
  returnWeights: boolean;
}

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

const BQ = 32;         // query rows per flash workgroup
const COLS = 256;      // output columns per flash workgroup
const WT = 16;         // weights block edge
const PARAM_WORDS = 24;

/** One piece of a call: batches [b0, b0+nb), heads [h0, h0+nh), query rows [i0, i0+nq). */
interface Piece { b0: number; nb: number; h0: number; nh: number; i0: number; nq: number }

interface PieceLayout {
  kvh0: number; nkv: number; group: number;
  qOff: number; qLen: number; kOff: number; kLen: number; vOff: number; vLen: number;
  oOff: number; oLen: number; wOff: number; wLen: number; statsLen: number;
  bool?: { off: number; len: number; strides: number[] };
  float?: { off: number; len: number; strides: number[] };
  grid: { flash: [number, number, number]; weights: [number, number, number] };
}

function maskSlice(dims: Dims4, p: Piece) {
  const [mb, mh, mq, mk] = dims;
  const off = (mb === 1 ? 0 : p.b0) * mh * mq * mk + (mh === 1 ? 0 : p.h0) * mq * mk + (mq === 1 ? 0 : p.i0) * mk;
  const nb = mb === 1 ? 1 : p.nb, nh = mh === 1 ? 1 : p.nh, nq = mq === 1 ? 1 : p.nq;
  const len = nb * nh * nq * mk;
  // element strides over the piece's local (b, h, i, j); 0 where the mask broadcasts
  const strides = [nb === 1 ? 0 : nh * nq * mk, nh === 1 ? 0 : nq * mk, nq === 1 ? 0 : mk, mk === 1 ? 0 : 1];
  return { off, len, strides };
}

function layout(a: WebGPUAttentionParams, p: Piece): PieceLayout {
  const group = a.H / a.Hkv;
  let kvh0: number, nkv: number, g: number;
  if (p.nh === 1 && group > 1) { kvh0 = Math.floor(p.h0 / group); nkv = 1; g = 1; }
  else { kvh0 = p.h0 / group; nkv = p.nh / group; g = group; }
  const rows = p.nb * p.nh * p.nq;
  return {
    kvh0, nkv, group: g,
    qOff: ((p.b0 * a.H + p.h0) * a.Lq + p.i0) * a.D, qLen: rows * a.D,
    kOff: (p.b0 * a.Hkv + kvh0) * a.Lk * a.D, kLen: p.nb * nkv * a.Lk * a.D,
    vOff: (p.b0 * a.Hkv + kvh0) * a.Lk * a.Dv, vLen: p.nb * nkv * a.Lk * a.Dv,
    oOff: ((p.b0 * a.H + p.h0) * a.Lq + p.i0) * a.Dv, oLen: rows * a.Dv,
    wOff: ((p.b0 * a.H + p.h0) * a.Lq + p.i0) * a.Lk, wLen: a.returnWeights ? rows * a.Lk : 0,
    statsLen: a.returnWeights ? rows * 2 : 0,
    bool: a.boolMask ? maskSlice(a.boolMask.dims, p) : undefined,
    float: a.floatMask ? maskSlice(a.floatMask.dims, p) : undefined,
    grid: {
      flash: [Math.ceil(p.nq / BQ), p.nh, p.nb * Math.ceil(a.Dv / COLS)],
      weights: [Math.ceil(a.Lk / WT), Math.ceil(p.nq / WT), p.nb * p.nh],
    },
  };
}

/** Why `l` does not fit the limits, or null when it does. */
function misfit(l: PieceLayout, lim: GpuLimits): string | null {
  const cap = Math.min(lim.maxStorageBufferBindingSize, lim.maxBufferSize);
  const sizes: Array<[string, number]> = [
    ['query', l.qLen * 4], ['key', l.kLen * 4], ['value', l.vLen * 4], ['output', l.oLen * 4],
    ['weights', l.wLen * 4], ['float mask', (l.float?.len ?? 0) * 4], ['bool mask', l.bool?.len ?? 0],
    ['row statistics', l.statsLen * 4],
  ];
  for (const [name, bytes] of sizes) {
    if (bytes > cap) return `${name} needs ${bytes} bytes > ${cap} (min of maxStorageBufferBindingSize, maxBufferSize)`;
  }
  for (const [name, grid] of [['flash', l.grid.flash], ['weights', l.grid.weights]] as const) {
    if (name === 'weights' && l.wLen === 0) continue;
    for (const n of grid) {
      if (n > lim.maxComputeWorkgroupsPerDimension) {
        return `${name} dispatch needs ${n} workgroups in one dimension > maxComputeWorkgroupsPerDimension ${lim.maxComputeWorkgroupsPerDimension}`;
      }
    }
  }
  return null;
}

/** Splits the call into pieces that fit, or throws an Error naming the limit. */
export function planPieces(a: WebGPUAttentionParams, lim: GpuLimits, fn = 'scaledDotProductAttention'): Piece[] {
  const whole: Piece = { b0: 0, nb: a.B, h0: 0, nh: a.H, i0: 0, nq: a.Lq };
  if (!misfit(layout(a, whole), lim)) return [whole];
  const group = a.H / a.Hkv;
  const pieces: Piece[] = [];
  // heads per piece: the most whole kv groups that fit with all query rows, else one head
  let hp = 0;
  for (let k = a.Hkv; k >= 1; k--) {
    if (a.H % (k * group) === 0 && !misfit(layout(a, { b0: 0, nb: 1, h0: 0, nh: k * group, i0: 0, nq: a.Lq }), lim)) { hp = k * group; break; }
  }
  if (hp > 0) {
    for (let b = 0; b < a.B; b++) for (let h = 0; h < a.H; h += hp) pieces.push({ b0: b, nb: 1, h0: h, nh: hp, i0: 0, nq: a.Lq });
    return pieces;
  }
  // one head at a time, query rows in blocks (a multiple of 32) that fit
  let nq = a.Lq;
  let why = misfit(layout(a, { b0: 0, nb: 1, h0: 0, nh: 1, i0: 0, nq }), lim);
  while (why && nq > BQ) {
    nq = Math.max(BQ, Math.ceil(nq / 2 / BQ) * BQ);
    why = misfit(layout(a, { b0: 0, nb: 1, h0: 0, nh: 1, i0: 0, nq }), lim);
  }
  if (why) {
    throw new WebGPULimitError(`${fn}: the request is too large for this WebGPU device even when split per head and ` +
      `per block of ${nq} query row${nq === 1 ? '' : 's'}: ${why} (B=${a.B}, H=${a.H}, Hkv=${a.Hkv}, Lq=${a.Lq}, Lk=${a.Lk}, D=${a.D}, Dv=${a.Dv}); use backend 'wasm'`);
  }
  for (let b = 0; b < a.B; b++) {
    for (let h = 0; h < a.H; h++) {
      for (let i = 0; i < a.Lq; i += nq) pieces.push({ b0: b, nb: 1, h0: h, nh: 1, i0: i, nq: Math.min(nq, a.Lq - i) });
    }
  }
  return pieces;
}

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

function params(a: WebGPUAttentionParams, p: Piece, l: PieceLayout, writeStats: boolean): ArrayBuffer {
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
export async function runAttention(ctx: GpuContext, a: WebGPUAttentionParams, opts: RunOptions = {}): Promise<WebGPUAttentionResult> {
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
      gpuNs += await runPiece(ctx, a, p, lim, flash, wpipe, output, weights, timing, fn);
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

async function runPiece(
  ctx: GpuContext, a: WebGPUAttentionParams, p: Piece, lim: GpuLimits,
  flash: GPUComputePipelineLike, wpipe: GPUComputePipelineLike | null,
  output: Float32Array, weights: Float32Array | undefined, timing: boolean, fn: string,
): Promise<number> {
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
