// The few-query-rows attention path (src/decode_attention.cpp: Lq <= 3 per head, a decode step)
// through wasm, every variant: against the C++ plain-loop reference on odd sizes (D 1..128, Lk up
// to 600, GQA, windows, weights out), and bit for bit against the flash kernel's prefill: the
// decoded rows equal the last rows of a causal prefill of the same keys (output and weights),
// on 1 and 2 threads. The relaxed-SIMD builds are held to the reference's tolerance only: their
// vector multiply-adds may fuse, while both paths' scalar tails do not, and the two paths put
// different elements in the tails.
import assert from 'node:assert/strict';
import { test, after } from 'node:test';
import * as qkv from 'qkv';
import { prepareAttention } from '../../dist/attention.js';
import { runWasmAttention } from '../../dist/wasm/attention.js';
import { getModule } from '../../dist/wasm/loader.js';
import { maxAbsDiff, OUTPUT_TOL, WEIGHTS_TOL } from './shared/cases.js';
import { VARIANTS, unsupported } from './shared/variants.js';

after(() => qkv.dispose());

function rng(seed) {
  let s = seed;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 4294967296);
}

const sameBits = (a, b) => a.length === b.length &&
  Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0;

for (const variant of VARIANTS) {
  test(`decode attention (Lq 1..3) == C++ reference, odd sizes, GQA, windows (${variant})`, { skip: unsupported(variant) }, async () => {
    qkv.dispose();
    qkv.env.variant = variant;
    qkv.env.numThreads = 2;
    await qkv.init();
    const m = getModule();
    const r = rng(7);
    const int = (lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
    const T = (shape) => new qkv.Tensor(Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => r() * 4 - 2), shape);
    let worstO = 0, worstW = 0, n = 0;
    for (const D of [1, 3, 64, 80, 128]) {
      for (const Lk of [1, 3, 64, 65, 200, 600]) {
        const [H, Hkv] = [[1, 1], [4, 4], [9, 3], [8, 1], [10, 1]][int(0, 4)];
        const Lq = Math.min(Lk, int(1, 3)), Dv = r() < 0.7 ? D : int(1, 70);
        const opts = { returnWeights: true, enableGqa: true, isCausal: Lq > 1 || r() < 0.5 };
        if (r() < 0.4) opts.window = int(1, 100);
        if (r() < 0.3) opts.attnMask = new qkv.Tensor(new Uint8Array(Lq * Lk).map(() => (r() < 0.8 ? 1 : 0)), [Lq, Lk]);
        const { problem } = prepareAttention('test', T([1, H, Lq, D]), T([1, Hkv, Lk, D]), T([1, Hkv, Lk, Dv]), opts);
        const fast = runWasmAttention('test', m, problem, problem);
        const ref = runWasmAttention('test', m, problem, problem, { reference: true });
        worstO = Math.max(worstO, maxAbsDiff(fast.output, ref.output));
        worstW = Math.max(worstW, maxAbsDiff(fast.weights, ref.weights));
        n++;
      }
    }
    assert.equal(n, 30);
    assert.ok(worstO <= OUTPUT_TOL, `output differs by ${worstO}`);
    assert.ok(worstW <= WEIGHTS_TOL, `weights differ by ${worstW}`);
  });

  test(`decoded rows == the prefill's last rows bit for bit, 1 and 2 threads (${variant})`, { skip: unsupported(variant) }, async () => {
    qkv.dispose();
    qkv.env.variant = variant;
    await qkv.init();
    const m = getModule();
    const relaxed = variant.startsWith('simd-relaxed');
    const r = rng(11);
    const rand = (n) => Float32Array.from({ length: n }, () => r() * 4 - 2);
    let compared = 0;
    for (const [H, Hkv, D, L] of [[4, 4, 64, 130], [9, 3, 64, 77], [2, 1, 3, 65], [3, 3, 80, 257], [10, 2, 16, 70]]) {
      const q = rand(H * L * D), k = rand(Hkv * L * D), v = rand(Hkv * L * D);
      const opts = { returnWeights: true, enableGqa: true, isCausal: true };
      const pre = prepareAttention('test', new qkv.Tensor(q, [1, H, L, D]), new qkv.Tensor(k, [1, Hkv, L, D]),
        new qkv.Tensor(v, [1, Hkv, L, D]), opts).problem;
      const full = runWasmAttention('test', m, pre, pre, { threads: 1 });
      for (const Lq of [1, 3]) {
        // the last Lq query rows of each head, and the rows of the prefill's results they should equal
        const qd = new Float32Array(H * Lq * D), wantO = new Float32Array(H * Lq * D), wantW = new Float32Array(H * Lq * L);
        for (let h = 0; h < H; h++) {
          qd.set(q.subarray((h * L + L - Lq) * D, (h * L + L) * D), h * Lq * D);
          wantO.set(full.output.subarray((h * L + L - Lq) * D, (h * L + L) * D), h * Lq * D);
          wantW.set(full.weights.subarray((h * L + L - Lq) * L, (h * L + L) * L), h * Lq * L);
        }
        const dec = prepareAttention('test', new qkv.Tensor(qd, [1, H, Lq, D]), new qkv.Tensor(k, [1, Hkv, L, D]),
          new qkv.Tensor(v, [1, Hkv, L, D]), opts).problem;
        for (const threads of [1, 2]) {
          const got = runWasmAttention('test', m, dec, dec, { threads });
          const what = `H ${H} Hkv ${Hkv} D ${D} L ${L} Lq ${Lq} threads ${threads}`;
          if (relaxed) {
            assert.ok(maxAbsDiff(got.output, wantO) <= OUTPUT_TOL, what);
            assert.ok(maxAbsDiff(got.weights, wantW) <= WEIGHTS_TOL, what);
          } else {
            assert.ok(sameBits(got.output, wantO), `output: ${what}, max |diff| ${maxAbsDiff(got.output, wantO)}`);
            assert.ok(sameBits(got.weights, wantW), `weights: ${what}, max |diff| ${maxAbsDiff(got.weights, wantW)}`);
          }
          compared++;
        }
      }
    }
    assert.equal(compared, 20);
  });
}
