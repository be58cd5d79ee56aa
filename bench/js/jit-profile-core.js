// bench/js/jit-profile.mjs's workload, the same in Node and in the page: `calls` public SDPA
// calls on the attention benchmark's inputs (core.js: non-causal, B=1, H=8, D=64, one thread),
// the first ones tiering the kernel up to TurboFan. Returns the wall ms of each call.
import { D, H, inputs } from './core.js';

export function runCalls(qkv, { L, calls }) {
  const tensor = (a) => new qkv.Tensor(a, [1, H, L, D]);
  const { q: qa, k: ka, v: va } = inputs(L);
  const q = tensor(qa), k = tensor(ka), v = tensor(va);
  const ms = [];
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    qkv.scaledDotProductAttentionSync(q, k, v);
    ms.push(+(performance.now() - t0).toFixed(2));
  }
  return ms;
}
