// WebGPU adapter and device acquisition, capability checks and device-loss handling: the one
// place that talks to navigator.gpu. A GpuContext wraps one device and everything created on
// it (pipelines, buffer pool); when the device is lost the context is marked lost and dropped,
// and the next acquireContext() builds a fresh one.

import type { GPUAdapterLike, GPUDeviceLike, GPULike } from './gpu-types.js';
import { BufferPool } from './buffers.js';

/** What every kernel needs; WebGPU's defaults guarantee it, compatibility-mode adapters may not. */
export const REQUIRED_LIMITS = {
  maxComputeInvocationsPerWorkgroup: 256,
  maxComputeWorkgroupSizeX: 256,
  maxComputeWorkgroupStorageSize: 16384,
  maxStorageBuffersPerShaderStage: 7,
} as const;

/** Thrown when WebGPU cannot be used here (no navigator.gpu, no adapter, too few capabilities). */
export class WebGPUUnavailableError extends Error {
  /** Why, in words: navigator.gpu absent, no adapter, or an adapter limit below what the kernels need. */
  readonly reason: string;
  constructor(reason: string, fn?: string) {
    super(`${fn ? `${fn}: options.backend 'webgpu': ` : ''}WebGPU is not available: ${reason}`);
    this.name = 'WebGPUUnavailableError';
    this.reason = reason;
  }
}

/** Thrown when a call cannot fit the device's buffer or dispatch limits even split into pieces. */
export class WebGPULimitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebGPULimitError';
  }
}

/** Thrown by a call whose device was lost (or destroyed) while it ran. The next call gets a new device. */
export class WebGPUDeviceLostError extends Error {
  constructor(fn: string, reason: string) {
    super(`${fn}: the WebGPU device was lost during the call (${reason}); the next call acquires a new device`);
    this.name = 'WebGPUDeviceLostError';
  }
}

export interface GpuLimits {
  maxStorageBufferBindingSize: number;
  maxBufferSize: number;
  maxComputeWorkgroupsPerDimension: number;
}

export interface GpuContext {
  readonly id: number;
  readonly device: GPUDeviceLike;
  readonly adapterInfo: { vendor: string; architecture: string; device: string; description: string };
  readonly limits: GpuLimits;
  readonly timestampQuery: boolean;
  /** A software rasteriser (SwiftShader, llvmpipe/lavapipe, WARP, or a fallback adapter): 'auto' avoids it. */
  readonly software: boolean;
  readonly pool: BufferPool;
  /** Per-context caches owned by the runner (pipelines, layouts). */
  readonly cache: Map<string, unknown>;
  lost: boolean;
  lostReason: string;
  /** Resolves when the device is lost (never rejects). */
  readonly lostPromise: Promise<void>;
}

let current: Promise<GpuContext> | null = null;
let currentCtx: GpuContext | null = null;
let nextId = 1;
// A failed acquisition is remembered for the navigator.gpu object (and its requestAdapter)
// it failed with, so 'auto' does not ask again on every call; stubbing either retries.
let failure: { gpu: unknown; request: unknown; error: WebGPUUnavailableError } | null = null;
let limitOverride: Partial<GpuLimits> | null = null;

function navigatorGpu(): GPULike | undefined {
  const nav = (globalThis as { navigator?: { gpu?: GPULike } }).navigator;
  return nav?.gpu ?? undefined;
}

/** The live context if one exists and is not lost (no acquisition). */
export function peekContext(): GpuContext | null {
  return currentCtx && !currentCtx.lost ? currentCtx : null;
}

/** Resolves to a usable context, creating a device if there is none or the last one was lost. */
export function acquireContext(): Promise<GpuContext> {
  if (currentCtx?.lost) { current = null; currentCtx = null; }
  const gpu = navigatorGpu();
  if (failure && failure.gpu === gpu && failure.request === (gpu as { requestAdapter?: unknown } | undefined)?.requestAdapter) {
    return Promise.reject(failure.error);
  }
  if (!current) {
    const p = createContext(gpu).then(
      (ctx) => { if (current === p) currentCtx = ctx; return ctx; },
      (e: unknown) => {
        if (current === p) current = null;
        if (e instanceof WebGPUUnavailableError) {
          failure = { gpu, request: (gpu as { requestAdapter?: unknown } | undefined)?.requestAdapter, error: e };
        }
        throw e;
      },
    );
    current = p;
  }
  return current;
}

async function createContext(gpu: GPULike | undefined): Promise<GpuContext> {
  if (!gpu || typeof gpu.requestAdapter !== 'function') {
    throw new WebGPUUnavailableError('navigator.gpu is absent (this browser or runtime has no WebGPU)');
  }
  let adapter: GPUAdapterLike | null = null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  } catch (e) {
    throw new WebGPUUnavailableError(`navigator.gpu.requestAdapter() threw: ${(e as Error)?.message ?? e}`);
  }
  if (!adapter) throw new WebGPUUnavailableError('navigator.gpu.requestAdapter() returned null (no usable GPU adapter)');
  for (const [name, need] of Object.entries(REQUIRED_LIMITS)) {
    const have = Number(adapter.limits[name]);
    if (!(have >= need)) {
      throw new WebGPUUnavailableError(`the adapter's ${name} is ${have}, qkv's kernels need ${need}`);
    }
  }
  const requiredFeatures: string[] = [];
  const timestampQuery = adapter.features.has('timestamp-query');
  if (timestampQuery) requiredFeatures.push('timestamp-query');
  // Ask for the adapter's largest buffers (the defaults are 128 / 256 MiB).
  const requiredLimits: Record<string, number> = {
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
    maxBufferSize: adapter.limits.maxBufferSize,
  };
  let device: GPUDeviceLike;
  try {
    device = await adapter.requestDevice({ requiredFeatures, requiredLimits, label: 'qkv' });
  } catch (e) {
    throw new WebGPUUnavailableError(`adapter.requestDevice() failed: ${(e as Error)?.message ?? e}`);
  }
  const info = adapter.info ?? {};
  const software = isSoftwareAdapter(adapter);
  const ctx: GpuContext = {
    id: nextId++,
    device,
    adapterInfo: {
      vendor: info.vendor ?? '', architecture: info.architecture ?? '',
      device: info.device ?? '', description: info.description ?? '',
    },
    limits: {
      maxStorageBufferBindingSize: device.limits.maxStorageBufferBindingSize,
      maxBufferSize: device.limits.maxBufferSize,
      maxComputeWorkgroupsPerDimension: device.limits.maxComputeWorkgroupsPerDimension,
    },
    timestampQuery,
    software,
    pool: new BufferPool(device),
    cache: new Map(),
    lost: false,
    lostReason: '',
    lostPromise: Promise.resolve(),
  };
  const markLost = (reason: string) => {
    if (!ctx.lost) {
      ctx.lost = true;
      ctx.lostReason = reason;
      ctx.pool.clear();
      ctx.cache.clear();
    }
    if (currentCtx === ctx) { currentCtx = null; current = null; }
  };
  (ctx as { lostPromise: Promise<void> }).lostPromise = device.lost.then((info) => {
    markLost(`${info.reason || 'unknown'}${info.message ? `: ${info.message}` : ''}`);
  });
  // device.lost resolves only a task or more after destroy(); mark the context at once so a
  // call made right after someone destroys the device gets a fresh one instead of failing.
  const destroy = device.destroy.bind(device);
  try {
    Object.defineProperty(device, 'destroy', {
      configurable: true,
      value: () => { markLost('destroyed: device.destroy() was called'); destroy(); },
    });
  } catch { /* a frozen device object: losses are then seen through device.lost only */ }
  return ctx;
}

/**
 * Whether an adapter is a CPU emulation of a GPU. On those the kernels run far slower than the
 * wasm build (bench/webgpu: SwiftShader is 10-40x slower), so 'auto' does not use them.
 */
export function isSoftwareAdapter(adapter: GPUAdapterLike): boolean {
  const info = (adapter.info ?? {}) as { isFallbackAdapter?: boolean } & Record<string, unknown>;
  if (info.isFallbackAdapter === true || (adapter as { isFallbackAdapter?: boolean }).isFallbackAdapter === true) return true;
  const text = ['vendor', 'architecture', 'device', 'description'].map((k) => String(info[k] ?? '')).join(' ').toLowerCase();
  return /swiftshader|llvmpipe|lavapipe|softpipe|microsoft basic render|\bwarp\b/.test(text);
}

/** The limits the runner plans with: the device's, or smaller ones set by setWebGPULimitsForTesting. */
export function effectiveLimits(ctx: GpuContext): GpuLimits {
  const l = ctx.limits;
  const o = limitOverride ?? {};
  return {
    maxStorageBufferBindingSize: Math.min(l.maxStorageBufferBindingSize, o.maxStorageBufferBindingSize ?? Infinity),
    maxBufferSize: Math.min(l.maxBufferSize, o.maxBufferSize ?? Infinity),
    maxComputeWorkgroupsPerDimension: Math.min(l.maxComputeWorkgroupsPerDimension, o.maxComputeWorkgroupsPerDimension ?? Infinity),
  };
}

/** Test hook: pretend the device has smaller limits (null restores the device's own). */
export function setWebGPULimitsForTesting(limits: Partial<GpuLimits> | null): void {
  limitOverride = limits;
}

/** Drops the cached device (destroying it) and any remembered failure; the next call starts afresh. */
export function resetWebGPU(): void {
  const ctx = currentCtx;
  current = null;
  currentCtx = null;
  failure = null;
  if (ctx && !ctx.lost) ctx.device.destroy();
}
