// A randomized run of valid and invalid calls through the public API. Checks: valid calls
// succeed with finite outputs and weight rows summing to 1 (or all 0); invalid calls raise an
// Error (never a wasm trap); and the wasm heap ends where it started (same linear memory size,
// same bytes in use). Shared by the Node test and the browser page.

function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

export async function fuzz(qkv, { calls = 10000, seed = 1234, warmup = 300 } = {}) {
  const { Tensor } = qkv;
  const r = rng(seed);
  const int = (lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
  const pick = (a) => a[Math.floor(r() * a.length)];
  const fill = (n) => { const a = new Float32Array(n); for (let i = 0; i < n; i++) a[i] = r() * 4 - 2; return a; };
  const f = (shape) => new Tensor(fill(shape.reduce((a, b) => a * b, 1)), shape);
  const stats = { valid: 0, invalid: 0, kv: 0, mha: 0, sync: 0, problems: [] };
  const problem = (what, detail) => { if (stats.problems.length < 20) stats.problems.push({ what, detail }); };

  function checkResult(what, res, wantWeights) {
    for (const x of res.output.data) if (!Number.isFinite(x)) { problem(what, 'non-finite output'); return; }
    if (wantWeights) {
      const w = res.weights;
      if (!w) { problem(what, 'weights missing'); return; }
      const lk = w.shape[w.shape.length - 1];
      for (let row = 0; row < w.data.length / lk; row++) {
        let sum = 0;
        for (let j = 0; j < lk; j++) sum += w.data[row * lk + j];
        if (!(Math.abs(sum - 1) < 1e-4 || sum === 0)) { problem(what, `weights row sums to ${sum}`); return; }
      }
    }
  }

  function validSdpa() {
    const B = int(1, 2), Hkv = int(1, 3), H = Hkv * int(1, 3), Lq = int(1, 12), Lk = int(1, 12), D = int(1, 16), Dv = int(1, 16);
    const opts = {};
    if (H !== Hkv) opts.enableGqa = true;
    if (r() < 0.4) opts.isCausal = true;
    if (r() < 0.2) opts.window = int(0, 6);
    if (r() < 0.2) opts.scale = r() * 2;
    if (r() < 0.5) opts.returnWeights = true;
    if (r() < 0.4) {
      const full = [B, H, Lq, Lk];
      const rank = int(0, 4);
      const shape = full.slice(4 - rank).map((d) => (r() < 0.5 ? 1 : d));
      const n = shape.reduce((a, b) => a * b, 1);
      if (r() < 0.5) {
        const m = new Uint8Array(n); for (let i = 0; i < n; i++) m[i] = r() < 0.7 ? 1 : 0;
        opts.attnMask = new Tensor(m, shape);
      } else {
        const m = fill(n); for (let i = 0; i < n; i++) if (r() < 0.15) m[i] = -Infinity;
        opts.attnMask = new Tensor(m, shape);
      }
    }
    return { args: [f([B, H, Lq, D]), f([B, Hkv, Lk, D]), f([B, Hkv, Lk, Dv]), opts], weights: !!opts.returnWeights };
  }

  // One way to break a valid call (each must be rejected before wasm).
  const breakers = [
    (a) => { a[0] = f([...a[0].shape.slice(0, 3), a[0].shape[3] + 1]); },
    (a) => { a[2] = f([...a[2].shape.slice(0, 2), a[2].shape[2] + 1, a[2].shape[3]]); },
    (a) => { a[1] = { data: new Float32Array(a[1].size + 1), shape: a[1].shape }; },
    (a) => { a[3] = { ...a[3], scale: pick([-1, NaN, Infinity, '2']) }; },
    (a) => { a[3] = { ...a[3], window: pick([-1, 0.5, 'x']) }; },
    (a) => { a[3] = { ...a[3], isCausal: 'yes' }; },
    (a) => { a[3] = { ...a[3], bogus: 1 }; },
    (a) => { a[3] = { ...a[3], backend: 'cpu' }; },
    (a) => { a[3] = { ...a[3], attnMask: new Tensor(new Uint8Array(13 * 13), [13, 13]) }; },
    (a) => { a[0] = new Tensor(new Uint8Array(a[0].size), a[0].shape); },
    (a) => {
      const [B, , Lq, D] = a[0].shape, [, , Lk, Dv] = a[2].shape;
      a[0] = f([B, 3, Lq, D]); a[1] = f([B, 2, Lk, D]); a[2] = f([B, 2, Lk, Dv]); a[3] = { enableGqa: true };
    },
    (a) => { a[0] = f([1, 1, 100000, 1]); a[1] = f([1, 1, 100000, 1]); a[2] = f([1, 1, 100000, 1]); a[3] = { returnWeights: true }; },
    (a) => { a[1] = null; },
    (a) => { a[3] = 42; },
  ];

  async function oneCall() {
    const kind = r();
    if (kind < 0.08) { // KV cache life cycle
      stats.kv++;
      const Hkv = int(1, 2), D = int(1, 8), cap = int(2, 10);
      const c = await qkv.KVCache.create({ numKvHeads: Hkv, maxLength: cap, headDim: D });
      try {
        const n = int(1, cap);
        c.append(f([1, Hkv, n, D]), f([1, Hkv, n, D]));
        const res = await c.attend(f([1, Hkv * int(1, 2), int(1, n), D]), { isCausal: r() < 0.5, returnWeights: true, enableGqa: true });
        checkResult('kv', res, true);
        try { c.append(f([1, Hkv, cap, D]), f([1, Hkv, cap, D])); problem('kv', 'over-capacity append accepted'); } catch (e) { if (!(e instanceof RangeError)) throw e; }
      } finally {
        if (r() < 0.9) c.dispose(); // the rest: the top-level accounting below disposes via GC-less path
        else c.dispose();
      }
      return;
    }
    if (kind < 0.14) { // MHA life cycle
      stats.mha++;
      const H = int(1, 3), E = H * int(1, 4), L = int(1, 6);
      const m = new qkv.MultiHeadAttention({ embedDim: E, numHeads: H, weights: { inProjWeight: fill(3 * E * E), inProjBias: fill(3 * E), outProjWeight: fill(E * E), outProjBias: fill(E) } });
      try {
        const res = await m.forward(f([1, L, E]), f([1, L, E]), f([1, L, E]), { averageAttnWeights: r() < 0.5 });
        checkResult('mha', res, true);
      } finally {
        m.dispose();
      }
      return;
    }
    const { args, weights } = validSdpa();
    const sync = r() < 0.3;
    const call = (a) => (sync ? qkv.scaledDotProductAttentionSync(...a) : qkv.scaledDotProductAttention(...a));
    if (sync) stats.sync++;
    if (r() < 0.45) {
      stats.invalid++;
      const which = Math.floor(r() * breakers.length);
      breakers[which](args);
      try {
        await call(args);
        problem('invalid', `breaker ${which} accepted`);
      } catch (e) {
        if (!(e instanceof Error) || e.name === 'RuntimeError' || /Aborted|unreachable/.test(e.message)) problem('invalid', `trap: ${e}`);
      }
    } else {
      stats.valid++;
      checkResult('sdpa', await call(args), weights);
    }
  }

  for (let i = 0; i < warmup; i++) await oneCall();
  const before = qkv.memoryUsage();
  for (let i = 0; i < calls; i++) {
    try {
      await oneCall();
    } catch (e) {
      problem('call', `${e?.name}: ${e?.message}`);
    }
  }
  const after = qkv.memoryUsage();
  return { ...stats, calls, before, after };
}
