// The planner of a WebGPU attention call: where each piece's slices lie in the inputs and
// outputs, and how to split a call whose buffers or dispatches exceed the device's limits
// (per batch, then per group of heads, then per block of query rows), or a clear
// WebGPULimitError when even one piece cannot fit. Pure arithmetic: no GPU calls.
import type { AttentionProblem } from '../problem.js';
import { WebGPULimitError, type GpuLimits } from './device.js';

export type Dims4 = [number, number, number, number];

export const BQ = 32;         // query rows per flash workgroup
export const COLS = 256;      // output columns per flash workgroup
export const WT = 16;         // weights block edge

/** One piece of a call: batches [b0, b0+nb), heads [h0, h0+nh), query rows [i0, i0+nq). */
export interface Piece { b0: number; nb: number; h0: number; nh: number; i0: number; nq: number }

export interface PieceLayout {
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

export function layout(a: AttentionProblem, p: Piece): PieceLayout {
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
export function planPieces(a: AttentionProblem, lim: GpuLimits, fn = 'scaledDotProductAttention'): Piece[] {
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
