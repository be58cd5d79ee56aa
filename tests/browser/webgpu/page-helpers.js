// Helpers the WebGPU browser tests import inside the page (from dist/, the built package).
import { makeCase, maxAbsDiff } from './cases.js';

// The package under test: /dist (the built package), or QKV_DIST set by session.js.
const DIST = globalThis.QKV_DIST ?? '/dist';
export const qkv = await import(`${DIST}/index.js`);
export const gpu = await import(`${DIST}/webgpu/index.js`);

/** Where the last call ran ('wasm' | 'webgpu'). */
export const lastBackend = () => qkv.env.lastBackend;

/** Sets the size above which 'auto' uses WebGPU. */
export function setThreshold(t) {
  qkv.env.webgpuThreshold = t;
}

/** Lets 'auto' use a software adapter (SwiftShader here), which it avoids by default. */
export function allowSoftware(on) {
  qkv.env.webgpuUseSoftwareAdapter = on;
}

/** The public-API arguments of a case from cases.js. */
export function apiArgs(c) {
  const T = (data, shape) => new qkv.Tensor(data, shape);
  const mask = c.boolMask ?? c.floatMask;
  const opts = {
    isCausal: c.causal, window: c.window, enableGqa: c.H !== c.Hkv, returnWeights: c.returnWeights,
    attnMask: mask ? T(mask.data, mask.dims) : undefined,
  };
  if (c.scaleGiven) opts.scale = c.scale;
  return [T(c.query, [c.B, c.H, c.Lq, c.D]), T(c.key, [c.B, c.Hkv, c.Lk, c.D]), T(c.value, [c.B, c.Hkv, c.Lk, c.Dv]), opts];
}

/** A plain case (no masks unless asked) of the given sizes, seeded. */
export function sizedCase(seed, s) {
  const c = makeCase(seed, 0);
  const r = { ...c, boolMask: undefined, floatMask: undefined, ...s };
  let x = seed * 7 + 1;
  const fill = (n) => { const a = new Float32Array(n); for (let i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; a[i] = x / 1073741824 - 1; } return a; };
  r.query = fill(r.B * r.H * r.Lq * r.D);
  r.key = fill(r.B * r.Hkv * r.Lk * r.D);
  r.value = fill(r.B * r.Hkv * r.Lk * r.Dv);
  r.scaleGiven = false;
  r.scale = Math.fround(1 / Math.sqrt(r.D));
  r.window = s.window ?? 0;
  r.causal = s.causal ?? false;
  r.returnWeights = s.returnWeights ?? false;
  return r;
}

/** Max abs differences of two results (outputs, weights). */
export function diff(a, b) {
  return { out: maxAbsDiff(a.output.data, b.output.data), w: a.weights ? maxAbsDiff(a.weights.data, b.weights.data) : 0 };
}

/** Runs a case on a backend through the public API. */
export function run(c, backendName) {
  const [q, k, v, o] = apiArgs(c);
  return qkv.scaledDotProductAttention(q, k, v, { ...o, backend: backendName });
}
