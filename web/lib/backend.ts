/**
 * Backend choice for attention: the one place that decides between the wasm module and
 * WebGPU, for the async and the sync entry points alike. `problem` is fully validated.
 *
 *   'wasm'    the wasm module.
 *   'webgpu'  WebGPU (web/lib/webgpu/); without WebGPU, or when the device is lost during the
 *             call, or the call exceeds the device's limits, the call rejects with a clear Error.
 *             Synchronous calls cannot use it (WebGPU is asynchronous): an Error.
 *   'auto'    WebGPU when attentionWorkSize(problem) = B*H*Lq*Lk*(D+Dv) > env.webgpuThreshold
 *             and a hardware WebGPU adapter works here (software adapters such as SwiftShader
 *             only with env.webgpuUseSoftwareAdapter); the wasm module otherwise, and also when
 *             the WebGPU call fails for a lost device or a device limit (Node has no WebGPU:
 *             'auto' is simply wasm there). Synchronous calls: the wasm module.
 * env.lastBackend says where the last finished call ran.
 */
import { runtime } from './env.js';
import type { AttentionOutput, AttentionProblem } from './problem.js';
import { runWasmAttention } from './wasm/attention.js';
import { loadModule, requireModule } from './wasm/loader.js';
import {
  webgpuAttention, webgpuAutoEligible,
  WebGPUDeviceLostError, WebGPULimitError, WebGPUUnavailableError,
} from './webgpu/index.js';

/** Where attention runs. */
export type Backend = 'auto' | 'wasm' | 'webgpu';

export const BACKENDS: readonly Backend[] = ['auto', 'wasm', 'webgpu'];

/** Where the last finished attention call ran ('wasm' | 'webgpu'), null before any (also env.lastBackend). */
export function lastBackend(): 'wasm' | 'webgpu' | null {
  return runtime.lastBackend;
}

function onWasm(fn: string, problem: AttentionProblem): AttentionOutput {
  const out = runWasmAttention(fn, requireModule(fn), problem, problem);
  runtime.lastBackend = 'wasm';
  return out;
}

/** Runs `problem` on the backend the caller asked for. */
export async function dispatchAttention(fn: string, problem: AttentionProblem, backend: Backend): Promise<AttentionOutput> {
  if (backend === 'webgpu' || (backend === 'auto' && await webgpuAutoEligible(problem))) {
    try {
      const out = await webgpuAttention(problem, { fn });
      runtime.lastBackend = 'webgpu';
      return out;
    } catch (e) {
      // under 'auto', a call WebGPU could not run goes to the wasm module
      const fallback = e instanceof WebGPUDeviceLostError || e instanceof WebGPUUnavailableError || e instanceof WebGPULimitError;
      if (backend === 'webgpu' || !fallback) throw e;
    }
  }
  await loadModule();
  return onWasm(fn, problem);
}

/** The synchronous path: the wasm module, which must be loaded (`await init()`). */
export function dispatchAttentionSync(fn: string, problem: AttentionProblem, backend: Backend): AttentionOutput {
  if (backend === 'webgpu') throw new Error(`${fn}: options.backend 'webgpu' is asynchronous; use scaledDotProductAttention`);
  return onWasm(fn, problem);
}
