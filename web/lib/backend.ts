/**
 * Backend choice for attention: the one place that decides between the wasm module and
 * WebGPU. `problem` is fully validated (see AttentionProblem in attention.ts).
 *
 *   'wasm'    the wasm module.
 *   'webgpu'  WebGPU (web/lib/webgpu/); without WebGPU, or when the device is lost during the
 *             call, or the call exceeds the device's limits, the call rejects with a clear Error.
 *   'auto'    WebGPU when attentionWorkSize(problem) = B*H*Lq*Lk*(D+Dv) > env.webgpuThreshold
 *             (default WEBGPU_THRESHOLD, see webgpu/index.ts) and a hardware WebGPU adapter
 *             works here (software adapters such as SwiftShader only with
 *             webgpuConfig.useSoftwareAdapter); the wasm module otherwise, and also when the
 *             WebGPU call fails for a lost device or a device limit (Node has no WebGPU:
 *             'auto' is simply wasm there).
 * lastBackend() says where the last finished call ran.
 */
import type { AttentionOutput, AttentionProblem } from './problem.js';
import { wasmAttention } from './wasm-attention.js';
import {
  webgpuAttention, webgpuAutoEligible,
  WebGPUDeviceLostError, WebGPULimitError, WebGPUUnavailableError,
} from './webgpu/index.js';

/** Where attention runs. */
export type Backend = 'auto' | 'wasm' | 'webgpu';

export const BACKENDS: readonly Backend[] = ['auto', 'wasm', 'webgpu'];

let last: 'wasm' | 'webgpu' | null = null;

/** Where the last finished attention call ran ('wasm' | 'webgpu'), null before any. */
export function lastBackend(): 'wasm' | 'webgpu' | null {
  return last;
}

/** Runs `problem` on the backend the caller asked for. */
export async function dispatchAttention(fn: string, problem: AttentionProblem, backend: Backend): Promise<AttentionOutput> {
  if (backend === 'webgpu') {
    const out = await webgpuAttention(problem, { fn });
    last = 'webgpu';
    return out;
  }
  if (backend === 'auto' && await webgpuAutoEligible(problem)) {
    try {
      const out = await webgpuAttention(problem, { fn });
      last = 'webgpu';
      return out;
    } catch (e) {
      // the WebGPU path could not run this call: the wasm module does
      if (!(e instanceof WebGPUDeviceLostError || e instanceof WebGPUUnavailableError || e instanceof WebGPULimitError)) throw e;
    }
  }
  const out = await wasmAttention(fn, problem);
  last = 'wasm';
  return out;
}
