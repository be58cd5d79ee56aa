// The WebGPU backend of scaledDotProductAttention: what web/lib/backend.ts calls.
//
//   webgpuAvailable()          true when a device with the needed capabilities can be had
//   webgpuAttention(params)    runs one validated call; rejects with WebGPUUnavailableError,
//                              WebGPUDeviceLostError (the next call gets a fresh device) or
//                              WebGPULimitError (too big even split into pieces); under 'auto'
//                              backend.ts then runs the call on WASM
//   webgpuAutoEligible(shape)  whether 'auto' sends this problem to WebGPU (env.webgpuThreshold,
//                              env.webgpuUseSoftwareAdapter)
//   attentionWorkSize(shape)   the size 'auto' compares with env.webgpuThreshold
//
// Kernels: shaders/flash_attention.wgsl (output, online softmax) and
// shaders/attention_weights.wgsl (returnWeights), both after shaders/masked_score.wgsl,
// embedded at build time by tools/webgpu/embed-shaders.mjs into shaders.generated.ts.

import { env } from '../env.js';
import type { AttentionProblem } from '../problem.js';
import { acquireContext, peekContext, WebGPUUnavailableError } from './device.js';
import { runAttention, type WebGPUAttentionResult } from './runner.js';

export { WebGPUUnavailableError, WebGPUDeviceLostError, WebGPULimitError, resetWebGPU, setWebGPULimitsForTesting, REQUIRED_LIMITS } from './device.js';
export type { GpuLimits } from './device.js';
export { planPieces, type Dims4 } from './planner.js';
export type { WebGPUAttentionResult } from './runner.js';

/** Multiply-adds of one call, B*H*Lq*Lk*(D+Dv): QK^T plus PV, masks and causality ignored. */
export function attentionWorkSize(s: { B: number; H: number; Lq: number; Lk: number; D: number; Dv: number }): number {
  return s.B * s.H * s.Lq * s.Lk * (s.D + s.Dv);
}

/**
 * Whether 'auto' runs this problem on WebGPU: above the threshold, and WebGPU works here with
 * a hardware adapter (or useSoftwareAdapter). Never rejects; acquires a device only above the
 * threshold.
 */
export async function webgpuAutoEligible(s: { B: number; H: number; Lq: number; Lk: number; D: number; Dv: number }): Promise<boolean> {
  if (!(attentionWorkSize(s) > env.webgpuThreshold)) return false;
  try {
    const ctx = await acquireContext();
    return !ctx.software || env.webgpuUseSoftwareAdapter;
  } catch {
    return false;
  }
}

/** True when WebGPU can run qkv's kernels here (acquires, and keeps, the device). Never rejects. */
export async function webgpuAvailable(): Promise<boolean> {
  try {
    await acquireContext();
    return true;
  } catch {
    return false;
  }
}

/** Runs attention on WebGPU. `params` must already be validated (shapes, lengths, mask dims). */
export async function webgpuAttention(
  params: AttentionProblem,
  options: { timing?: boolean; fn?: string } = {},
): Promise<WebGPUAttentionResult> {
  let ctx;
  try {
    ctx = await acquireContext();
  } catch (e) {
    if (e instanceof WebGPUUnavailableError && options.fn) throw new WebGPUUnavailableError(e.reason, options.fn);
    throw e;
  }
  return runAttention(ctx, params, options);
}

/** Adapter description and device limits of the current device (acquiring one), for benchmarks and bug reports. */
export async function webgpuInfo(): Promise<{
  adapter: { vendor: string; architecture: string; device: string; description: string };
  limits: { maxStorageBufferBindingSize: number; maxBufferSize: number; maxComputeWorkgroupsPerDimension: number };
  timestampQuery: boolean;
  software: boolean;
}> {
  const ctx = await acquireContext();
  return { adapter: ctx.adapterInfo, limits: ctx.limits, timestampQuery: ctx.timestampQuery, software: ctx.software };
}

/** The current device, if any (tests destroy it to simulate loss; benchmarks reuse it). */
export function currentWebGPUDevice(): unknown {
  return peekContext()?.device ?? null;
}

/** Why WebGPU is unavailable, or null when it is available. */
export async function webgpuUnavailableReason(): Promise<string | null> {
  try {
    await acquireContext();
    return null;
  } catch (e) {
    return e instanceof WebGPUUnavailableError ? e.message : String((e as Error)?.message ?? e);
  }
}
