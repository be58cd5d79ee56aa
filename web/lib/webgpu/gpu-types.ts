// The small part of the WebGPU API the runner uses, typed structurally so the package needs
// neither @webgpu/types nor a DOM lib that has WebGPU (TypeScript's lib.dom has none), and its
// shipped .d.ts files reference nothing outside the package.

export interface GPUSupportedLimitsLike {
  readonly [name: string]: number | unknown;
  readonly maxStorageBufferBindingSize: number;
  readonly maxBufferSize: number;
  readonly maxComputeWorkgroupsPerDimension: number;
  readonly maxComputeInvocationsPerWorkgroup: number;
  readonly maxComputeWorkgroupStorageSize: number;
  readonly maxStorageBuffersPerShaderStage: number;
  readonly maxComputeWorkgroupSizeX: number;
}

export interface GPUAdapterInfoLike {
  readonly vendor?: string;
  readonly architecture?: string;
  readonly device?: string;
  readonly description?: string;
}

export interface GPULike {
  requestAdapter(options?: { powerPreference?: 'low-power' | 'high-performance' }): Promise<GPUAdapterLike | null>;
}

export interface GPUAdapterLike {
  readonly features: ReadonlySet<string>;
  readonly limits: GPUSupportedLimitsLike;
  readonly info?: GPUAdapterInfoLike;
  requestDevice(descriptor?: {
    requiredFeatures?: string[];
    requiredLimits?: Record<string, number>;
    label?: string;
  }): Promise<GPUDeviceLike>;
}

export interface GPUDeviceLostInfoLike {
  readonly reason: string;
  readonly message: string;
}

export interface GPUErrorLike {
  readonly message: string;
}

export interface GPUBufferLike {
  readonly size: number;
  mapAsync(mode: number, offset?: number, size?: number): Promise<void>;
  getMappedRange(offset?: number, size?: number): ArrayBuffer;
  unmap(): void;
  destroy(): void;
}

export type GPUBindGroupLayoutLike = object;
export type GPUBindGroupLike = object;
export type GPUShaderModuleLike = object;
export type GPUQuerySetLike = { destroy(): void };

export interface GPUComputePipelineLike {
  getBindGroupLayout(index: number): GPUBindGroupLayoutLike;
}

export interface GPUComputePassLike {
  setPipeline(p: GPUComputePipelineLike): void;
  setBindGroup(index: number, group: GPUBindGroupLike): void;
  dispatchWorkgroups(x: number, y?: number, z?: number): void;
  end(): void;
}

export interface GPUCommandEncoderLike {
  beginComputePass(descriptor?: {
    label?: string;
    timestampWrites?: { querySet: GPUQuerySetLike; beginningOfPassWriteIndex?: number; endOfPassWriteIndex?: number };
  }): GPUComputePassLike;
  copyBufferToBuffer(src: GPUBufferLike, srcOffset: number, dst: GPUBufferLike, dstOffset: number, size: number): void;
  resolveQuerySet(q: GPUQuerySetLike, first: number, count: number, dst: GPUBufferLike, offset: number): void;
  finish(): object;
}

export interface GPUQueueLike {
  writeBuffer(buffer: GPUBufferLike, offset: number, data: ArrayBufferView | ArrayBuffer, dataOffset?: number, size?: number): void;
  submit(commands: object[]): void;
  onSubmittedWorkDone(): Promise<void>;
}

export interface GPUDeviceLike {
  readonly features: ReadonlySet<string>;
  readonly limits: GPUSupportedLimitsLike;
  readonly queue: GPUQueueLike;
  readonly lost: Promise<GPUDeviceLostInfoLike>;
  destroy(): void;
  createBuffer(descriptor: { size: number; usage: number; label?: string; mappedAtCreation?: boolean }): GPUBufferLike;
  createShaderModule(descriptor: { code: string; label?: string }): GPUShaderModuleLike;
  createBindGroupLayout(descriptor: { entries: object[]; label?: string }): GPUBindGroupLayoutLike;
  createPipelineLayout(descriptor: { bindGroupLayouts: GPUBindGroupLayoutLike[] }): object;
  createComputePipelineAsync(descriptor: {
    layout: object;
    label?: string;
    compute: { module: GPUShaderModuleLike; entryPoint: string; constants?: Record<string, number> };
  }): Promise<GPUComputePipelineLike>;
  createBindGroup(descriptor: { layout: GPUBindGroupLayoutLike; entries: object[] }): GPUBindGroupLike;
  createCommandEncoder(): GPUCommandEncoderLike;
  createQuerySet(descriptor: { type: 'timestamp'; count: number }): GPUQuerySetLike;
  pushErrorScope(filter: 'validation' | 'out-of-memory' | 'internal'): void;
  popErrorScope(): Promise<GPUErrorLike | null>;
}

/** GPUBufferUsage / GPUMapMode / GPUShaderStage values (not globals in every environment). */
export const BufferUsage = {
  MAP_READ: 0x0001,
  COPY_SRC: 0x0004,
  COPY_DST: 0x0008,
  UNIFORM: 0x0040,
  STORAGE: 0x0080,
  QUERY_RESOLVE: 0x0200,
} as const;
export const MAP_READ = 0x0001;
export const SHADER_STAGE_COMPUTE = 0x4;
