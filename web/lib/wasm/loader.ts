/**
 * Loading the wasm module (one of five builds) in Node and in browsers. The module is
 * loaded once, on first use, and shared.
 *
 * Files (dist/wasm/): `qkv-<variant>.mjs` (browser/bundler loader, ES module),
 * `qkv-<variant>.node.cjs` (Node loader, CommonJS), `qkv-<variant>.wasm`, and for the threads
 * build the pthread worker scripts. Browsers fetch the .wasm from a URL (streaming
 * compilation); Node reads it with fs and hands it over as `wasmBinary` — nothing goes to the
 * network at run time.
 */
import { env, isThreaded, runtime, type Variant } from '../env.js';
import { dynamicImport, isNode } from '../platform.js';
import type { QkvModule } from './module.js';

/** Whether wasm threads can run here: Node, or a crossOriginIsolated page/worker. */
export function threadsSupported(): boolean {
  if (typeof SharedArrayBuffer === 'undefined' || typeof Atomics === 'undefined') return false;
  if (isNode) return true;
  return (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated === true;
}

// (module (func (result v128) i32.const 0 i32x4.splat i32x4.add ...)) — the classic SIMD probe.
const SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11,
]);

/** Whether this engine runs WebAssembly SIMD128. */
export function simdSupported(): boolean {
  try {
    return WebAssembly.validate(SIMD_PROBE);
  } catch {
    return false;
  }
}

// (module (func (result v128)
//   i32.const 0 i32x4.splat  i32.const 0 i32x4.splat  i32.const 0 i32x4.splat
//   f32x4.relaxed_madd))                                   ;; 0xfd 0x85 0x02 (LEB 0x105)
const RELAXED_SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, // magic, version
  1, 5, 1, 96, 0, 1, 123, // type section: () -> v128
  3, 2, 1, 0, // function section: one function of type 0
  10, 19, 1, 17, 0, // code section: one body of 17 bytes, no locals
  65, 0, 253, 17, 65, 0, 253, 17, 65, 0, 253, 17, // 3 x (i32.const 0, i32x4.splat)
  253, 133, 2, 11, // f32x4.relaxed_madd, end
]);

/** Whether this engine runs WebAssembly relaxed SIMD (the probe's f32x4.relaxed_madd validates). */
export function relaxedSimdSupported(): boolean {
  try {
    return WebAssembly.validate(RELAXED_SIMD_PROBE);
  } catch {
    return false;
  }
}

// mem[48..64) = i32x4.relaxed_dot_i8x16_i7x16_add_s(mem[0..16), mem[16..32), mem[32..48)):
// (func (export "run")) and (memory (export "mem") 1)
const RELAXED_DOT_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, // magic, version
  1, 4, 1, 96, 0, 0, // type section: () -> ()
  3, 2, 1, 0, // function section
  5, 3, 1, 0, 1, // memory section: 1 page
  7, 13, 2, 3, 114, 117, 110, 0, 0, 3, 109, 101, 109, 2, 0, // exports "run", "mem"
  10, 31, 1, 29, 0, // code section: one body of 29 bytes, no locals
  65, 48, // i32.const 48
  65, 0, 253, 0, 4, 0, 65, 0, 253, 0, 4, 16, 65, 0, 253, 0, 4, 32, // 3 x (i32.const 0, v128.load offset)
  253, 147, 2, // i32x4.relaxed_dot_i8x16_i7x16_add_s
  253, 11, 4, 0, 11, // v128.store, end
]);
let relaxedDotAnswer: boolean | undefined;

/**
 * Whether this engine's i32x4.relaxed_dot_i8x16_i7x16_add_s gives the spec's sums, on operands
 * every lowering agrees on (the second in 0..127), run once on a fresh module, so in V8's
 * baseline tier: Node 20's baseline (Liftoff) returns twice the dot without the accumulator,
 * where its optimizing tier is right, so a kernel's first calls would be wrong there.
 */
export function relaxedDotComputes(): boolean {
  if (relaxedDotAnswer !== undefined) return relaxedDotAnswer;
  relaxedDotAnswer = false;
  try {
    const { exports } = new WebAssembly.Instance(new WebAssembly.Module(RELAXED_DOT_PROBE));
    const mem = (exports.mem as WebAssembly.Memory).buffer;
    const a = new Int8Array(mem, 0, 16), b = new Int8Array(mem, 16, 16), c = new Int32Array(mem, 32, 4);
    for (let i = 0; i < 16; i++) {
      a[i] = -127 + 17 * i;
      b[i] = (i * 9) % 128;
    }
    c.set([1000, -5, 30000, 7]);
    (exports.run as () => void)();
    const got = new Int32Array(mem, 48, 4);
    relaxedDotAnswer = [0, 1, 2, 3].every((l) => got[l] === c[l] + [0, 1, 2, 3].reduce((s, j) => s + a[4 * l + j] * b[4 * l + j], 0));
  } catch {
    // no relaxed SIMD: the answer stays no
  }
  return relaxedDotAnswer;
}

/** The feature probes chooseVariants() asks; replaceable in tests (a probe that says yes wrongly, or no). @internal */
export const probes = { simd: simdSupported, relaxedSimd: relaxedSimdSupported, threads: threadsSupported };

const THREADS_ERROR =
  'needs SharedArrayBuffer (in a browser: a crossOriginIsolated page, ' +
  'served with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)';

/**
 * The builds to try, in order, for the variant `env` asks for: one when it forces a variant;
 * for 'auto', the relaxed-SIMD build where the probe accepts relaxed SIMD and then its plain
 * SIMD twin (loaded if the relaxed one fails), else the SIMD build, else scalar.
 */
export function chooseVariants(): Variant[] {
  const want = env.variant;
  if (want === 'scalar') return ['scalar'];
  const simd = probes.simd();
  if (want !== 'auto') {
    if (!simd) throw new Error(`qkv: env.variant '${want}' needs WebAssembly SIMD, which this runtime lacks`);
    if (want.startsWith('simd-relaxed') && !probes.relaxedSimd()) {
      throw new Error(`qkv: env.variant '${want}' needs WebAssembly relaxed SIMD, which this runtime lacks (Node 20: run with --experimental-wasm-relaxed-simd)`);
    }
    if (isThreaded(want) && !probes.threads()) throw new Error(`qkv: env.variant '${want}' ${THREADS_ERROR}`);
    return [want];
  }
  if (!simd) return ['scalar'];
  const threads = probes.threads() && env.numThreads > 1;
  const plain: Variant = threads ? 'simd-threads' : 'simd';
  if (!probes.relaxedSimd()) return [plain];
  return [threads ? 'simd-relaxed-threads' : 'simd-relaxed', plain];
}

/** Where a file of dist/wasm/ is: env.wasmPaths (prefix or per-file map) or next to this module. */
function fileUrl(name: string, bundled: () => URL): string {
  const paths = env.wasmPaths;
  if (typeof paths === 'string' && paths !== '') return new URL(name, toBase(paths)).href;
  if (paths && typeof paths === 'object' && typeof paths[name] === 'string') return new URL(paths[name], toBase('./')).href;
  return bundled().href;
}

function toBase(prefix: string): string {
  const p = prefix.endsWith('/') ? prefix : prefix + '/';
  try {
    return new URL(p).href; // absolute already
  } catch {
    if (isNode) return new URL(p, `file://${process.cwd()}/`).href;
    return new URL(p, (globalThis as { location?: { href: string } }).location?.href ?? import.meta.url).href;
  }
}

// Written out literally so bundlers (Vite, webpack, ...) see each file and ship it.
const WEB_FILES: Record<Variant, () => { js: string; wasm: string; worker?: string }> = {
  scalar: () => ({
    js: fileUrl('qkv-scalar.mjs', () => new URL('./qkv-scalar.mjs', import.meta.url)),
    wasm: fileUrl('qkv-scalar.wasm', () => new URL('./qkv-scalar.wasm', import.meta.url)),
  }),
  simd: () => ({
    js: fileUrl('qkv-simd.mjs', () => new URL('./qkv-simd.mjs', import.meta.url)),
    wasm: fileUrl('qkv-simd.wasm', () => new URL('./qkv-simd.wasm', import.meta.url)),
  }),
  'simd-threads': () => ({
    js: fileUrl('qkv-simd-threads.mjs', () => new URL('./qkv-simd-threads.mjs', import.meta.url)),
    wasm: fileUrl('qkv-simd-threads.wasm', () => new URL('./qkv-simd-threads.wasm', import.meta.url)),
    worker: fileUrl('qkv-simd-threads.worker.js', () => new URL('./qkv-simd-threads.worker.js', import.meta.url)),
  }),
  'simd-relaxed': () => ({
    js: fileUrl('qkv-simd-relaxed.mjs', () => new URL('./qkv-simd-relaxed.mjs', import.meta.url)),
    wasm: fileUrl('qkv-simd-relaxed.wasm', () => new URL('./qkv-simd-relaxed.wasm', import.meta.url)),
  }),
  'simd-relaxed-threads': () => ({
    js: fileUrl('qkv-simd-relaxed-threads.mjs', () => new URL('./qkv-simd-relaxed-threads.mjs', import.meta.url)),
    wasm: fileUrl('qkv-simd-relaxed-threads.wasm', () => new URL('./qkv-simd-relaxed-threads.wasm', import.meta.url)),
    worker: fileUrl('qkv-simd-relaxed-threads.worker.js', () => new URL('./qkv-simd-relaxed-threads.worker.js', import.meta.url)),
  }),
};

// Node-only files, resolved at run time (kept out of bundlers' sight on purpose).
function nodeFile(name: string): string {
  return fileUrl(name, () => new URL('./' + name, import.meta.url));
}

interface Loaded {
  module: QkvModule;
  variant: Variant;
  poolSize: number; // pthread workers (0 without threads)
}

let loaded: Loaded | null = null;
let loading: Promise<Loaded> | null = null;
let generation = 0;

async function instantiate(variant: Variant): Promise<Loaded> {
  const threads = isThreaded(variant);
  // The core's parallel_for uses (threads - 1) helpers besides the calling thread.
  const poolSize = threads ? Math.max(1, env.numThreads - 1) : 0;
  const settings: Record<string, unknown> = {
    qkvPoolSize: poolSize,
    // The threaded kernel joins its helpers from the calling thread, which on a page is the
    // main thread: a short, bounded wait by design. Emscripten warns about any such wait;
    // that one line is dropped, everything else goes to the console as usual.
    printErr: (text: string) => {
      if (!/^Blocking on the main thread is very dangerous/.test(text)) console.warn(text);
    },
  };
  let factory: (m: Record<string, unknown>) => Promise<QkvModule>;
  if (isNode) {
    const [{ createRequire }, { readFile }, { fileURLToPath }] = await Promise.all([
      dynamicImport('node:module'),
      dynamicImport('node:fs/promises'),
      dynamicImport('node:url'),
    ]);
    const js = fileURLToPath(nodeFile(`qkv-${variant}.node.cjs`));
    const wasmPath = fileURLToPath(nodeFile(`qkv-${variant}.wasm`));
    const workerPath = threads ? fileURLToPath(nodeFile(`qkv-${variant}.node.worker.cjs`)) : '';
    factory = createRequire(import.meta.url)(js);
    settings.wasmBinary = await readFile(wasmPath);
    settings.locateFile = (path: string) => (path.endsWith('.worker.js') ? workerPath : path.endsWith('.wasm') ? wasmPath : path);
  } else {
    const files = WEB_FILES[variant]();
    if (files.worker?.startsWith('data:')) {
      // Bundlers inline small assets (the pthread worker script is one) as data: URLs; a
      // worker started from one gets an opaque origin and can neither share memory nor import
      // the loader. A blob: URL keeps this page's origin.
      const text = await (await fetch(files.worker)).text();
      files.worker = URL.createObjectURL(new Blob([text], { type: 'text/javascript' }));
    }
    factory = (await dynamicImport(files.js)).default;
    settings.mainScriptUrlOrBlob = files.js; // what pthread workers import
    settings.locateFile = (path: string) =>
      path.endsWith('.wasm') ? files.wasm : path.endsWith('.worker.js') && files.worker ? files.worker : path;
  }
  let module: QkvModule;
  try {
    module = await factory(settings);
  } catch (e) {
    // The glue starts the pthread pool before the .wasm compiles: a module that failed to
    // compile (a relaxed build on an engine without relaxed SIMD) leaves those workers behind,
    // which would keep Node alive and waste a page's threads. settings is the glue's Module.
    (settings as { qkvPThread?: QkvModule['qkvPThread'] }).qkvPThread?.terminateAllThreads();
    throw e;
  }
  // before any product runs: the 4-bit kernels' x rounding must not change under a loaded model
  if (variant.startsWith('simd-relaxed')) module.setRelaxedInt8Dot(relaxedDotComputes());
  const result = { module, variant, poolSize };
  unrefWorkers(module);
  return result;
}

/** Node: idle pthread workers must not keep the process alive. */
export function unrefWorkers(module: QkvModule): void {
  const pt = module.qkvPThread;
  if (!isNode || !pt) return;
  for (const w of [...pt.unusedWorkers, ...pt.runningWorkers]) (w as { unref?: () => void }).unref?.();
}

/** Loads the first of `variants` that loads; a failure before the last is a console warning. */
async function instantiateFirst(variants: Variant[]): Promise<Loaded> {
  for (let i = 0; ; i++) {
    try {
      return await instantiate(variants[i]);
    } catch (e) {
      if (i === variants.length - 1) throw e;
      console.warn(`qkv: the ${variants[i]} build failed to load (${(e as Error)?.message ?? e}); loading ${variants[i + 1]}`);
    }
  }
}

/**
 * Loads the module (once; concurrent callers share the load). The variant follows `env`:
 * SIMD + threads where threads can run (Node, crossOriginIsolated pages) and
 * env.numThreads > 1, else SIMD single-threaded, else scalar; each SIMD build in its
 * relaxed-SIMD form where the engine has relaxed SIMD (the plain one if that fails to load);
 * `env.variant` forces one.
 */
export async function loadModule(): Promise<QkvModule> {
  if (loaded) return loaded.module;
  if (!loading) {
    const gen = generation;
    loading = instantiateFirst(chooseVariants()).then(
      (l) => {
        if (gen !== generation) { // released while loading
          l.module.qkvPThread?.terminateAllThreads();
          throw new Error('qkv: the module was disposed while loading');
        }
        loaded = l;
        loading = null;
        runtime.loadedVariant = l.variant;
        runtime.poolSize = l.poolSize;
        return l;
      },
      (e) => {
        loading = null;
        throw e;
      },
    );
  }
  return (await loading).module;
}

/** The loaded module, or null. For web/lib/model/ and tests: `getModule()` after `await init()`. */
export function getModule(): QkvModule | null {
  return loaded?.module ?? null;
}

/** The loaded module, or an Error naming `fn` when it is not loaded yet (sync entry points). */
export function requireModule(fn: string): QkvModule {
  if (!loaded) {
    throw new Error(`${fn}: the wasm module is not loaded yet; call \`await init()\` (or any async qkv function) first`);
  }
  return loaded.module;
}

/** Threads a call may use: env.numThreads, capped by the loaded variant's worker pool. */
export function callThreads(): number {
  return env.threads;
}

/** Forgets the module (terminating its threads); the next call loads a fresh one. */
export function releaseModule(): void {
  generation++;
  loading = null;
  if (loaded) {
    loaded.module.qkvPThread?.terminateAllThreads();
    loaded = null;
  }
  runtime.loadedVariant = null;
  runtime.poolSize = 0;
}
