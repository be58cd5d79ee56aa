/**
 * Runtime settings (which wasm build, how many threads, where the files are, when WebGPU
 * takes over) and what was loaded. A leaf: it imports no backend; the backends read it, and
 * the wasm loader and the dispatcher write its read-only state.
 */
import { describe } from './errors.js';

/**
 * The wasm builds: plain wasm, SIMD128, SIMD128 + pthreads, and the two SIMD builds again with
 * relaxed SIMD (the kernels' multiply-adds are f32x4.relaxed_madd, fused where the hardware
 * has FMA; results may differ from the SIMD build's by rounding).
 */
export type Variant = 'scalar' | 'simd' | 'simd-threads' | 'simd-relaxed' | 'simd-relaxed-threads';

/** Whether a build runs pthreads. */
export function isThreaded(v: Variant | null): boolean {
  return v === 'simd-threads' || v === 'simd-relaxed-threads';
}

/** Where an attention call ran. */
export type RanOn = 'wasm' | 'webgpu';

const VARIANTS: readonly string[] = ['auto', 'scalar', 'simd', 'simd-threads', 'simd-relaxed', 'simd-relaxed-threads'];

/**
 * backend 'auto' runs on WebGPU when B*H*Lq*Lk*(D+Dv) exceeds this and a hardware adapter
 * works here. 2^25 multiply-adds (B=1, H=8, D=Dv=64: L=256 goes to WebGPU, L=128 stays on
 * WASM): a WebGPU call costs ~0.5-2 ms of fixed overhead (uploads, a submit, a readback) on
 * hardware adapters, and WASM SIMD takes ~1-20 ms for 2^25 multiply-adds. An estimate to be
 * confirmed on a real GPU (bench/webgpu/README.md).
 */
export const WEBGPU_THRESHOLD = 2 ** 25;

function defaultThreads(): number {
  const hc = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency;
  if (typeof hc === 'number' && hc > 0) return Math.min(4, hc);
  // Node < 21 has no navigator; Node >= 20.16 can reach os synchronously.
  const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => any } }).process;
  try {
    const n = proc?.getBuiltinModule?.('node:os')?.availableParallelism?.();
    if (typeof n === 'number' && n > 0) return Math.min(4, n);
  } catch {
    /* not Node */
  }
  return 4;
}

/**
 * Settings read when the wasm module loads (the first async call or `init()`), and the
 * state of what was loaded.
 */
export interface Env {
  /**
   * Which build to load: `'auto'` (default: SIMD + threads where threads can run — Node, or
   * a crossOriginIsolated page — and numThreads > 1, else SIMD, else scalar; the relaxed-SIMD
   * twin of the SIMD build where the engine validates relaxed SIMD (Chrome 114+, Firefox 120+,
   * Node 22+, Node 20 with --experimental-wasm-relaxed-simd), falling back to the plain SIMD
   * build if it fails to load), or force one. Read at load time; call `dispose()` to reload
   * with another. `loadedVariant` says which one runs.
   */
  variant: 'auto' | Variant;
  /**
   * Threads per call for the threads build; default min(4, hardwareConcurrency). The worker
   * pool is sized from this at load time; raising it later is capped at that size. A call
   * uses fewer when its work is small (each thread gets at least 2^18 multiply-adds).
   */
  numThreads: number;
  /**
   * Where the wasm files are, when not next to the package's JS: a URL/path prefix
   * (`'https://cdn.example/qkv/dist/wasm/'`) or a map from file name (`'qkv-simd.wasm'`) to URL.
   */
  wasmPaths: string | Record<string, string> | undefined;
  /** backend 'auto' sends a call to WebGPU when its work B*H*Lq*Lk*(D+Dv) exceeds this; Infinity = never. */
  webgpuThreshold: number;
  /**
   * Let backend 'auto' use a software WebGPU adapter (SwiftShader, llvmpipe, WARP); off by
   * default because those are 10-40x slower than WASM. backend 'webgpu' uses whatever adapter
   * there is regardless.
   */
  webgpuUseSoftwareAdapter: boolean;
  /**
   * The Hugging Face Hub that `loadModel('owner/name')` reads: files come from
   * `${hubUrl}/owner/name/resolve/<revision>/<file>`. Default 'https://huggingface.co' (a
   * mirror, or a local server in tests, takes its place).
   */
  hubUrl: string;
  /** The build that is loaded, or null before the first load. */
  readonly loadedVariant: Variant | null;
  /** Threads a call uses now (1 unless the threads build is loaded). */
  readonly threads: number;
  /** Where the last finished attention call ran, or null before any. */
  readonly lastBackend: RanOn | null;
}

/** What the wasm loader and the dispatcher report (written only by them). @internal */
export const runtime = {
  loadedVariant: null as Variant | null,
  /** pthread workers of the loaded module (0 without threads) */
  poolSize: 0,
  lastBackend: null as RanOn | null,
};

class EnvImpl implements Env {
  #variant: 'auto' | Variant = 'auto';
  #numThreads = defaultThreads();
  #wasmPaths: string | Record<string, string> | undefined = undefined;
  #webgpuThreshold = WEBGPU_THRESHOLD;
  #webgpuUseSoftwareAdapter = false;
  #hubUrl = 'https://huggingface.co';

  get variant(): 'auto' | Variant {
    return this.#variant;
  }
  set variant(v: 'auto' | Variant) {
    if (!VARIANTS.includes(v as string)) {
      throw new Error(`env.variant: must be one of ${VARIANTS.map((x) => `'${x}'`).join(', ')}, got ${describe(v)}`);
    }
    this.#variant = v;
  }

  get numThreads(): number {
    return this.#numThreads;
  }
  set numThreads(n: number) {
    if (!Number.isInteger(n) || n < 1 || n > 64) {
      throw new Error(`env.numThreads: must be an integer in [1, 64], got ${describe(n)}`);
    }
    this.#numThreads = n;
  }

  get wasmPaths(): string | Record<string, string> | undefined {
    return this.#wasmPaths;
  }
  set wasmPaths(p: string | Record<string, string> | undefined) {
    if (p !== undefined && typeof p !== 'string' && (typeof p !== 'object' || p === null)) {
      throw new Error(`env.wasmPaths: must be a string prefix or an object mapping file names to URLs, got ${describe(p)}`);
    }
    this.#wasmPaths = p;
  }

  get webgpuThreshold(): number {
    return this.#webgpuThreshold;
  }
  set webgpuThreshold(n: number) {
    if (typeof n !== 'number' || Number.isNaN(n) || n < 0) {
      throw new Error(`env.webgpuThreshold: must be a number >= 0 (Infinity = never WebGPU), got ${describe(n)}`);
    }
    this.#webgpuThreshold = n;
  }

  get webgpuUseSoftwareAdapter(): boolean {
    return this.#webgpuUseSoftwareAdapter;
  }
  set webgpuUseSoftwareAdapter(on: boolean) {
    if (typeof on !== 'boolean') throw new Error(`env.webgpuUseSoftwareAdapter: must be a boolean, got ${describe(on)}`);
    this.#webgpuUseSoftwareAdapter = on;
  }

  get hubUrl(): string {
    return this.#hubUrl;
  }
  set hubUrl(u: string) {
    if (typeof u !== 'string' || !/^https?:\/\/[^/]/i.test(u)) throw new Error(`env.hubUrl: must be an http(s) URL such as 'https://huggingface.co', got ${describe(u)}`);
    this.#hubUrl = u.replace(/\/+$/, '');
  }

  get loadedVariant(): Variant | null {
    return runtime.loadedVariant;
  }

  get threads(): number {
    if (!isThreaded(runtime.loadedVariant)) return 1;
    return Math.max(1, Math.min(this.#numThreads, runtime.poolSize + 1));
  }

  get lastBackend(): RanOn | null {
    return runtime.lastBackend;
  }
}

/** The runtime settings. */
export const env: Env = new EnvImpl();
