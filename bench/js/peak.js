// The machine's limit for the attention kernels, measured in the same run as they are: small
// hand-written wasm modules whose loops are nothing but f32x4 multiplies and adds (SIMD128 has
// no fused multiply-add, so a multiply-add is an f32x4.mul and an f32x4.add, as in qkv's
// micro-kernel). 8 FLOPs per multiply-add (4 lanes x 2), the same count as the attention's
// 4·L²·D. The limit is the fastest of these loops:
//   chains12, chains13   acc[i] = acc[i] * m + c on 12 (13) independent chains, all in registers
//   stream2x3            acc[r][v] += A[k][r] * B[k][v] over a 4 KB buffer in L1: the shape of
//                        a matrix-product micro-kernel (broadcast loads of A, vector loads of B)
// Which one wins depends on the CPU and the engine: on this machine's V8 the register chains
// run slower than a micro-kernel that streams its operands from L1 (the mul -> add dependence
// of one chain is 7-8 cycles), so a loop of that shape is measured too; otherwise qkv's own
// micro-kernel would run above the "limit".
// Where the engine has relaxed SIMD, the same two shapes with f32x4.relaxed_madd (fused where
// the CPU has FMA) are the limit of the relaxed-SIMD builds, whose micro-kernel uses it.
//   peakGflops({ reps }) -> { gflops, loop, loops: { name: gflops }, madd: { gflops, loop } | null }
// (Measured here, on a 2-core Intel Xeon under KVM: stream2x3 was the fastest in Node 20 and
// chains13 or stream2x3 in Chromium 156, 3-12% above chains12.)
const uleb = (n) => {
  const out = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
};
const section = (id, bytes) => [id, ...uleb(bytes.length), ...bytes];
const vec = (items) => [...uleb(items.length), ...items.flat()];
const f32x4 = (x) => [...new Uint8Array(new Float32Array([x, x, x, x]).buffer)];
const I32 = 0x7f, F32 = 0x7d, V128 = 0x7b;
const get = (i) => [0x20, i], set = (i) => [0x21, i];
const simd = (op) => [0xfd, ...uleb(op)];
const MUL = 230, ADD = 228, CONST = 12, EXTRACT = 31, LOAD = 0, LOAD32_SPLAT = 9, RELAXED_MADD = 0x105;
const i32 = (x) => [0x41, ...uleb(x)];

/**
 * A module exporting peak(steps: i32) -> f32: `locals` are its (count, type) local groups after
 * the parameter, `init` runs once, `body` once per loop step; the result sums accumulators
 * 1..accs (so none is dead code).
 */
function module({ locals, init, body, accs, memory = false }) {
  const code = [...init, 0x03, 0x40, ...body]; // loop
  code.push(...get(0), ...i32(1), 0x6b, 0x22, 0, 0x0d, 0, 0x0b); // steps -= 1; continue while != 0
  code.push(...get(1));
  for (let a = 2; a <= accs; a++) code.push(...get(a), ...simd(ADD));
  code.push(...simd(EXTRACT), 0, 0x0b);
  const func = [...vec(locals.map(([n, t]) => [...uleb(n), t])), ...code];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, vec([[0x60, 1, I32, 1, F32]])), // type 0: (i32) -> f32
    ...section(3, vec([[0]])), // function 0 has type 0
    ...(memory ? section(5, vec([[0, 1]])) : []), // one 64 KB page
    ...section(7, vec([[...uleb(4), ...new TextEncoder().encode('peak'), 0x00, 0]])), // export "peak" = func 0
    ...section(10, vec([[...uleb(func.length), ...func]])),
  ]);
}

// acc[i] = acc[i] * m + c, n chains; locals 1..n the accumulators, n+1 = m, n+2 = c. m = 0.5,
// c = 1: every chain converges to 2, never overflows or goes subnormal. 4 steps per iteration.
function chains(n, madd = false) {
  const m = n + 1, c = n + 2;
  const init = [];
  for (let i = 1; i <= n; i++) init.push(...simd(CONST), ...f32x4(i / 16), ...set(i));
  init.push(...simd(CONST), ...f32x4(0.5), ...set(m), ...simd(CONST), ...f32x4(1), ...set(c));
  const body = [];
  for (let u = 0; u < 4; u++) {
    for (let i = 1; i <= n; i++) {
      body.push(...get(i), ...get(m), ...(madd ? [...get(c), ...simd(RELAXED_MADD)] : [...simd(MUL), ...get(c), ...simd(ADD)]), ...set(i));
    }
  }
  return { bytes: module({ locals: [[n + 2, V128]], init, body, accs: n }), flopsPerStep: 4 * n * 8 };
}

// acc[r][v] += A[k][r] * B[k][v] for k walking a 4 KB buffer (B: 4 KB from 0, NV vectors a
// step; A: from 4096): R*NV chains, NV vector loads and R broadcast loads a
// step, as in a matrix-product micro-kernel. The buffer holds zeros: the arithmetic runs at the
// same rate on any normal value. Locals: 1..R*NV accumulators, then NV for B, 1 for A, the offset.
function stream(R, NV, madd = false) {
  const accs = R * NV, b = accs + 1, a = b + NV, p = a + 1;
  const body = [];
  for (let v = 0; v < NV; v++) body.push(...get(p), ...simd(LOAD), 4, ...uleb(v * 16), ...set(b + v));
  for (let r = 0; r < R; r++) {
    // A's elements at 4096 + p / 8 + 4 r: a few bytes further each step, always in L1
    body.push(...get(p), ...i32(3), 0x76, ...simd(LOAD32_SPLAT), 2, ...uleb(4096 + 4 * r), ...set(a));
    for (let v = 0; v < NV; v++) {
      const acc = 1 + r * NV + v;
      if (madd) body.push(...get(a), ...get(b + v), ...get(acc), ...simd(RELAXED_MADD), ...set(acc));
      else body.push(...get(acc), ...get(a), ...get(b + v), ...simd(MUL), ...simd(ADD), ...set(acc));
    }
  }
  body.push(...get(p), ...i32(16 * NV), 0x6a, ...i32(4095), 0x71, ...set(p)); // p = (p + 16 NV) & 4095
  return {
    bytes: module({ locals: [[accs + NV + 1, V128], [1, I32]], init: [], body, accs, memory: true }),
    flopsPerStep: accs * 8,
  };
}

const LOOPS = { chains12: chains(12), chains13: chains(13), stream2x3: stream(2, 3) };
const MADD_LOOPS = { 'chains12-madd': chains(12, true), 'stream2x3-madd': stream(2, 3, true) };

/** The compiled loops: { name: { run(steps), flopsPerStep } } (madd: the relaxed-SIMD ones; {} without relaxed SIMD). */
export async function peakKernels({ madd = false } = {}) {
  const loops = madd ? MADD_LOOPS : LOOPS;
  if (madd && !WebAssembly.validate(Object.values(loops)[0].bytes)) return {};
  const out = {};
  for (const [name, { bytes, flopsPerStep }] of Object.entries(loops)) {
    const { instance } = await WebAssembly.instantiate(bytes);
    out[name] = { run: instance.exports.peak, flopsPerStep };
  }
  return out;
}

/**
 * GFLOP/s of one thread on each loop: a warm-up (V8 tiers the function up), then the median
 * of `reps` calls of about `targetMs` each (the statistic of every row of the benchmark). The
 * limit is the fastest loop.
 */
export async function peakGflops({ reps = 7, targetMs = 20 } = {}) {
  const now = () => performance.now();
  const rates = async (kernels) => {
    const loops = {};
    for (const [name, { run, flopsPerStep }] of Object.entries(kernels)) {
      let steps = 1 << 12;
      for (let t0 = now(); now() - t0 < 200; ) run(steps); // warm-up: baseline -> optimised code
      for (;;) { // size one call to ~targetMs
        const t0 = now();
        run(steps);
        const ms = now() - t0;
        if (ms >= targetMs / 4) { steps = Math.max(1, Math.round((steps * targetMs) / ms)); break; }
        steps *= 4;
      }
      const times = [];
      for (let i = 0; i < reps; i++) {
        const t0 = now();
        const r = run(steps);
        times.push(now() - t0);
        if (!Number.isFinite(r)) throw new Error(`peak ${name}: unexpected result ${r}`);
      }
      times.sort((a, b) => a - b);
      loops[name] = +((steps * flopsPerStep) / times[reps >> 1] / 1e6).toFixed(2);
    }
    return loops;
  };
  const fastest = (loops) => Object.entries(loops).sort((x, y) => y[1] - x[1])[0];
  const loops = await rates(await peakKernels());
  const [loop, gflops] = fastest(loops);
  const maddLoops = await rates(await peakKernels({ madd: true }));
  const madd = Object.keys(maddLoops).length ? { gflops: fastest(maddLoops)[1], loop: fastest(maddLoops)[0], loops: maddLoops } : null;
  return { gflops, loop, loops, madd };
}
