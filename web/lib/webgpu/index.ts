// The WebGPU backend of scaledDotProductAttention: what web/lib/backend.ts calls.
//
//   webgpuAvailable()          true when a device with the needed capabilities can be had
//   webgpuAttention(params)    runs one validated call; rejects with WebGPUUnavailableError,
//                              WebGPUDeviceLostError (the next call gets a fresh device) or
//                              WebGPULimitError (too big even split into pieces); under 'auto'
//                              backend.ts then runs the call on WASM
//   webgpuAutoEligible(shape)  whether 'auto' sends this problem to WebGPU (threshold, adapter)
//   attentionWorkSize(shape)   the size 'auto' compares with WEBGPU_THRESHOLD
//
// Kernels: web/shaders/flash_attention.wgsl (output, online softmax) and
// web/shaders/attention_weights.wgsl (returnWeights), embedded at build time by
// tools/webgpu/embed-shaders.mjs into shaders.generated.ts.

import { acquireContext, peekContext, WebGPUUnavailableError } from './device.js';
import { runAttention } from './runner.js';
import type { WebGPUAttentionParams, WebGPUAttentionResult } from './runner.js';

export { WebGPUUnavailableError, WebGPUDeviceLostError, WebGPULimitError, resetWebGPU, setWebGPULimitsForTesting, REQUIRED_LIMITS } from './device.js';
export type { GpuLimits } from './device.js';
export { planPieces } from './runner.js';
export type { WebGPUAttentionParams, WebGPUAttentionResult, Dims4 } from './runner.js';

/**
 * 'auto' runs on WebGPU when attentionWorkSize(shape) > WEBGPU_THRESHOLD and a hardware
 * WebGPU adapter works here; on WASM otherwise. Override at run time with
 * env.webgpuThreshold (webgpuConfig.threshold; Infinity = never WebGPU).
 *
 * 2^25 multiply-adds (B=1, H=8, D=Dv=64: L=256 goes to WebGPU, L=128 stays on WASM). The
 * fixed cost of a WebGPU call (uploads, a submit, a mapAsync readback) is about 0.5-2 ms on
 * hardware adapters; WASM SIMD does 3-6 GFLOP/s per thread on the benchmark machine (15-60
 * with threads on desktops), so 2^25 multiply-adds take it ~1-20 ms: from there on a GPU wins
 * even with a modest kernel, below it WASM's lower latency wins or ties. See
 * bench/webgpu/README.md for the measurements (the crossover on a real GPU is to be confirmed
 * with `node bench/webgpu/run.mjs --gpu`).
 */
export const WEBGPU_THRESHOLD = 2 ** 25;

/**
 * Run-time WebGPU settings.
 *   threshold            'auto' uses WebGPU when attentionWorkSize > threshold (Infinity = never)
 *   useSoftwareAdapter   let 'auto' use a software adapter (SwiftShader, llvmpipe, WARP); off by
 *                        default because those are 10-40x slower than WASM. backend 'webgpu'
 *                        uses whatever adapter there is regardless.
 */
export const webgpuConfig: { threshold: number; useSoftwareAdapter: boolean } = {
  threshold: WEBGPU_THRESHOLD,
  useSoftwareAdapter: false,
};

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
  if (!(attentionWorkSize(s) > webgpuConfig.threshold)) return false;
  try {
    const ctx = await acquireContext();
    return !ctx.software || webgpuConfig.useSoftwareAdapter;
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
  params: WebGPUAttentionParams,
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
