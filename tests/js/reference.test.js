// The fast kernel against the C++ reference (attention_reference, plain loops) on random
// problems large enough to cross tile boundaries and use several threads, every variant.
import assert from 'node:assert/strict';
import { test, after } from 'node:test';
import * as qkv from 'qkv';
// internals: the same validated problem run on the fast kernel and on the plain-loop reference
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

for (const variant of VARIANTS) {
  test(`fast kernel == C++ reference on random problems (${variant})`, { skip: unsupported(variant) }, async () => {
    qkv.dispose();
    qkv.env.variant = variant;
    qkv.env.numThreads = 2;
    await qkv.init();
    const m = getModule();
    const r = rng(99);
    const int = (lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
    const T = (shape) => new qkv.Tensor(Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => r() * 4 - 2), shape);
    let worstO = 0, worstW = 0;
    for (let i = 0; i < 40; i++) {
      const B = int(1, 2), Hkv = int(1, 2), H = Hkv * int(1, 2), Lq = int(1, 150), Lk = int(1, 200);
      const D = pickD(r), Dv = r() < 0.8 ? D : int(1, 70);
      const opts = { returnWeights: true, enableGqa: true, isCausal: r() < 0.5 };
      if (r() < 0.3) opts.window = int(1, 64);
      if (r() < 0.3) {
        const mask = new Uint8Array(Lq * Lk).map(() => (r() < 0.8 ? 1 : 0));
        opts.attnMask = new qkv.Tensor(mask, [Lq, Lk]);
      } else if (r() < 0.3) {
        opts.attnMask = T([B, 1, 1, Lk]);
      }
      const { problem } = prepareAttention('test', T([B, H, Lq, D]), T([B, Hkv, Lk, D]), T([B, Hkv, Lk, Dv]), opts);
      const fast = runWasmAttention('test', m, problem, problem);
      const ref = runWasmAttention('test', m, problem, problem, { reference: true });
      worstO = Math.max(worstO, maxAbsDiff(fast.output, ref.output));
      worstW = Math.max(worstW, maxAbsDiff(fast.weights, ref.weights));
    }
    assert.ok(worstO <= OUTPUT_TOL, `output differs by ${worstO}`);
    assert.ok(worstW <= WEIGHTS_TOL, `weights differ by ${worstW}`);
  });
}

function pickD(r) {
  const ds = [1, 3, 4, 7, 8, 16, 31, 32, 64, 80, 128];
  return ds[Math.floor(r() * ds.length)];
}
