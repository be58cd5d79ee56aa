/**
 * The Embind module as the JS layer sees it (wasm/bindings.cpp, wasm/bindings_model.cpp):
 * argument objects and handles. Addresses are byte offsets into the wasm heap; 0 = absent.
 */

/** Arguments of the `attention` binding and of `KVCache.attend` (bindings.cpp, AttentionArgs). */
export interface WasmAttentionArgs {
  B: number; H: number; Hkv: number; Lq: number; Lk: number; D: number; Dv: number;
  query: number; key: number; value: number; output: number; weights: number;
  /** Always given: the default 1/sqrt(D) is resolved once, in TypeScript. */
  scale: number;
  causal: boolean; window: number;
  boolMask: number; boolMaskDims: [number, number, number, number];
  floatMask: number; floatMaskDims: [number, number, number, number];
  threads: number;
  /** Run the plain-loop C++ reference instead of the fast kernel (tests, benchmarks). */
  reference: boolean;
}

/** Arguments of `MultiHeadAttention.forward` (bindings.cpp, MhaArgs). */
export interface WasmMhaArgs {
  batch: number; lq: number; lk: number;
  query: number; key: number; value: number; output: number; weights: number;
  keyPaddingMask: number; boolAttnMask: number; floatAttnMask: number;
  attnMaskPerHead: boolean; isCausal: boolean; needWeights: boolean; averageAttnWeights: boolean;
  threads: number;
}

/** An Embind object handle. */
export interface EmbindHandle {
  delete(): void;
  isDeleted(): boolean;
}
export interface WasmKVCache extends EmbindHandle {
  append(key: number, value: number, n: number): string;
  attend(args: WasmAttentionArgs): string;
  length(): number;
  capacity(): number;
  clear(): void;
}
export interface WasmMultiHeadAttention extends EmbindHandle {
  forward(args: WasmMhaArgs): string;
}

/** The module: heap views, malloc, and the bound functions and classes. */
export interface QkvModule {
  HEAPU8: Uint8Array;
  HEAPF32: Float32Array;
  _malloc(bytes: number): number;
  _free(ptr: number): void;
  attention(args: WasmAttentionArgs): string;
  /** malloc for any size up to the heap's 4 GB (a bare _malloc refuses 2 GB and more). */
  heapAlloc(bytes: number): number;
  /** The relaxed-SIMD builds' int8 dot for 4-bit weights: set once by the loader (src/matmul/matmul.hpp). */
  setRelaxedInt8Dot(on: boolean): void;
  relaxedInt8Dot(): boolean;
  heapBytes(): number;
  heapInUse(): number;
  lastError(): string;
  KVCache: { create(batch: number, kvHeads: number, capacity: number, headDim: number, valueDim: number): WasmKVCache | null };
  MultiHeadAttention: {
    create(embedDim: number, numHeads: number, inW: number, inB: number, outW: number, outB: number): WasmMultiHeadAttention | null;
  };
  qkvMemory(): WebAssembly.Memory;
  qkvPThread?: { unusedWorkers: unknown[]; runningWorkers: unknown[]; terminateAllThreads(): void };
  [name: string]: unknown;
}
