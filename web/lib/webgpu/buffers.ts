// A pool of GPU buffers reused across calls. A buffer belongs to one call from acquire() to
// release(), so concurrent calls never share one. Sizes are rounded up (a power of two of at
// least 256 bytes, above 64 MiB a multiple of 4 MiB) when that still fits the device, so similar calls hit the same
// buffers; pooled (idle) memory is capped and the oldest idle buffers are destroyed first.

import type { GPUBufferLike, GPUDeviceLike } from './gpu-types.js';

const MIN_SIZE = 256;
const MIB = 1024 * 1024;
/** Idle bytes kept for reuse; more than this is destroyed on release. */
export const POOL_IDLE_BYTES = 256 * 1024 * 1024;

export class BufferPool {
  private idle = new Map<string, GPUBufferLike[]>();
  private order: Array<{ key: string; buffer: GPUBufferLike }> = [];
  private idleBytes = 0;
  private dead = false;

  constructor(private readonly device: GPUDeviceLike) {}

  /** A buffer of at least `bytes` bytes with exactly `usage`; `max` caps the rounding. */
  acquire(bytes: number, usage: number, max: number): GPUBufferLike {
    const want = Math.max(MIN_SIZE, Math.ceil(bytes / 4) * 4);
    // powers of two up to 64 MiB, then multiples of 4 MiB (no 1 GiB buffer for 600 MB)
    let size = want <= 64 * MIB ? 2 ** Math.ceil(Math.log2(want)) : Math.ceil(want / (4 * MIB)) * 4 * MIB;
    if (size > max) size = want;
    const key = `${usage}:${size}`;
    const list = this.idle.get(key);
    const buffer = list?.pop();
    if (buffer) {
      this.idleBytes -= buffer.size;
      const at = this.order.findIndex((e) => e.buffer === buffer);
      if (at >= 0) this.order.splice(at, 1);
      return buffer;
    }
    return this.device.createBuffer({ size, usage, label: `qkv ${key}` });
  }

  /** Returns a buffer for reuse (it must not be mapped or in use by unfinished GPU work). */
  release(buffer: GPUBufferLike, usage: number): void {
    if (this.dead) { buffer.destroy(); return; }
    const key = `${usage}:${buffer.size}`;
    let list = this.idle.get(key);
    if (!list) { list = []; this.idle.set(key, list); }
    list.push(buffer);
    this.order.push({ key, buffer });
    this.idleBytes += buffer.size;
    while (this.idleBytes > POOL_IDLE_BYTES && this.order.length > 0) {
      const old = this.order.shift()!;
      const l = this.idle.get(old.key)!;
      l.splice(l.indexOf(old.buffer), 1);
      this.idleBytes -= old.buffer.size;
      old.buffer.destroy();
    }
  }

  /** Destroys every idle buffer; buffers released later are destroyed (the device is gone). */
  clear(): void {
    this.dead = true;
    for (const e of this.order) e.buffer.destroy();
    this.order = [];
    this.idle.clear();
    this.idleBytes = 0;
  }

  get idleByteCount(): number { return this.idleBytes; }
}
