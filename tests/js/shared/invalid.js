// A table of invalid calls and the errors they must raise (Node and browser runners share it).
// Each row: [description, (qkv) => call, expected error class name, RegExp the message must match].
// Messages name the function, the argument and the shapes.

export function invalidCalls(qkv) {
  const { Tensor } = qkv;
  const f = (...shape) => new Tensor(new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(0.5), shape);
  const b = (...shape) => new Tensor(new Uint8Array(shape.reduce((a, b) => a * b, 1)).fill(1), shape);
  const q = f(1, 2, 4, 8), k = f(1, 2, 6, 8), v = f(1, 2, 6, 8);
  const sdpa = (...a) => qkv.scaledDotProductAttention(...a);
  const sync = (...a) => qkv.scaledDotProductAttentionSync(...a);
  const mhaWeights = (E) => ({ inProjWeight: new Float32Array(3 * E * E), outProjWeight: new Float32Array(E * E) });
  const mha = () => new qkv.MultiHeadAttention({ embedDim: 8, numHeads: 2, weights: mhaWeights(8) });
  const SHAPES = /got query \[1, 2, 4, 8\], key \[1, 2, 6, 8\], value \[1, 2, 6, 8\]/;
  return [
    // Tensor construction
    ['Tensor: wrong data length', () => new Tensor(new Float32Array(5), [2, 3]), 'RangeError', /^Tensor: data has 5 elements but shape \[2, 3\] needs 6$/],
    ['Tensor: bad dtype', () => new Tensor(new Float64Array(6), [2, 3]), 'TypeError', /^Tensor: data must be a Float32Array \(float32\) or a Uint8Array \(bool mask\), got Float64Array\(6\)$/],
    ['Tensor: negative dim', () => new Tensor(new Float32Array(6), [2, -3]), 'TypeError', /^Tensor: shape must be an array of non-negative integers/],
    ['Tensor: fractional dim', () => new Tensor(new Float32Array(6), [2, 1.5]), 'TypeError', /^Tensor: shape must be/],
    // scaledDotProductAttention arguments
    ['sdpa: query not a tensor', () => sdpa([1, 2], k, v), 'TypeError', /^scaledDotProductAttention: query must be a Tensor.*got an array of length 2/],
    ['sdpa: bool query', () => sdpa(b(1, 2, 4, 8), k, v), 'TypeError', /^scaledDotProductAttention: query must be float32 \(Float32Array\), got a bool tensor of shape \[1, 2, 4, 8\]$/],
    ['sdpa: duck tensor with wrong length', () => sdpa({ data: new Float32Array(3), shape: [1, 2, 4, 8] }, k, v), 'RangeError', /^scaledDotProductAttention: query has 3 elements but its shape \[1, 2, 4, 8\] needs 64$/],
    ['sdpa: rank mismatch', () => sdpa(q, f(2, 6, 8), v), 'Error', /^scaledDotProductAttention: query, key and value must have the same rank.*got query \[1, 2, 4, 8\], key \[2, 6, 8\]/],
    ['sdpa: rank 5', () => sdpa(f(1, 1, 2, 4, 8), f(1, 1, 2, 6, 8), f(1, 1, 2, 6, 8)), 'Error', /^scaledDotProductAttention: query, key and value must have the same rank, 2 to 4/],
    ['sdpa: head dim mismatch', () => sdpa(q, f(1, 2, 6, 4), v), 'Error', /^scaledDotProductAttention: key's last dim \(4\) must equal query's last dim D \(8\) \(got query \[1, 2, 4, 8\], key \[1, 2, 6, 4\]/],
    ['sdpa: key/value length mismatch', () => sdpa(q, k, f(1, 2, 5, 8)), 'Error', /^scaledDotProductAttention: value must have the length of key \(6\), got 5 \(got query/],
    ['sdpa: batch mismatch', () => sdpa(q, f(2, 2, 6, 8), f(2, 2, 6, 8)), 'Error', /^scaledDotProductAttention: key and value must have the batch size of query/],
    ['sdpa: heads differ without enableGqa', () => sdpa(f(1, 4, 4, 8), k, v), 'Error', /^scaledDotProductAttention: key\/value have 2 heads but query has 4; pass enableGqa: true/],
    ['sdpa: H % Hkv != 0', () => sdpa(f(1, 3, 4, 8), k, v, { enableGqa: true }), 'Error', /^scaledDotProductAttention: enableGqa: query heads \(3\) must be a multiple of key\/value heads \(2\) \(got query \[1, 3, 4, 8\]/],
    ['sdpa: empty dim', () => sdpa(f(1, 2, 0, 8), k, v), 'Error', /^scaledDotProductAttention: query has an empty dimension/],
    ['sdpa: negative scale', () => sdpa(q, k, v, { scale: -1 }), 'RangeError', new RegExp('^scaledDotProductAttention: options.scale must be a finite number >= 0, got -1 \\(' + SHAPES.source)],
    ['sdpa: out too short', () => sdpa(q, k, v, { out: new Float32Array(63) }), 'Error', new RegExp('^scaledDotProductAttention: options.out must be a Float32Array of 64 floats \\(output \\[1, 2, 4, 8\\]\\), got a Float32Array of 63 \\(' + SHAPES.source)],
    ['sdpa: out not a Float32Array', () => sdpa(q, k, v, { out: new Float64Array(64) }), 'Error', /^scaledDotProductAttention: options.out must be a Float32Array of 64 floats \(output \[1, 2, 4, 8\]\), got Float64Array\(64\)/],
    ['sdpa: NaN scale', () => sdpa(q, k, v, { scale: NaN }), 'RangeError', /^scaledDotProductAttention: options.scale must be a finite number >= 0, got NaN/],
    ['sdpa: Infinity scale', () => sdpa(q, k, v, { scale: Infinity }), 'RangeError', /options.scale must be a finite number >= 0, got Infinity/],
    ['sdpa: string scale', () => sdpa(q, k, v, { scale: '1' }), 'RangeError', /options.scale must be a finite number >= 0, got "1"/],
    ['sdpa: unknown option', () => sdpa(q, k, v, { causal: true }), 'Error', /^scaledDotProductAttention: unknown option 'causal' \(known options: attnMask, isCausal, window, scale, enableGqa, returnWeights, backend, out\)$/],
    ['sdpa: options not an object', () => sdpa(q, k, v, 5), 'TypeError', /^scaledDotProductAttention: options must be an object, got 5$/],
    ['sdpa: isCausal not boolean', () => sdpa(q, k, v, { isCausal: 1 }), 'TypeError', /^scaledDotProductAttention: options.isCausal must be a boolean, got 1$/],
    ['sdpa: negative window', () => sdpa(q, k, v, { window: -2 }), 'RangeError', /^scaledDotProductAttention: options.window must be an integer in \[0, \d+\] \(0 = no window\), got -2$/],
    ['sdpa: fractional window', () => sdpa(q, k, v, { window: 1.5 }), 'RangeError', /options.window must be an integer/],
    ['sdpa: unknown backend', () => sdpa(q, k, v, { backend: 'cuda' }), 'Error', /^scaledDotProductAttention: options.backend must be one of 'auto', 'wasm', 'webgpu', got "cuda"$/],
    ['sdpa: mask not broadcastable', () => sdpa(q, k, v, { attnMask: b(3, 6) }), 'Error', /^scaledDotProductAttention: options.attnMask of shape \[3, 6\] does not broadcast to \[B, H, Lq, Lk\] = \[1, 2, 4, 6\]/],
    ['sdpa: mask rank 5', () => sdpa(q, k, v, { attnMask: b(1, 1, 2, 4, 6) }), 'Error', /options.attnMask of shape \[1, 1, 2, 4, 6\] does not broadcast/],
    ['sdpa: float64 mask', () => sdpa(q, k, v, { attnMask: { data: new Float64Array(24), shape: [4, 6] } }), 'TypeError', /^scaledDotProductAttention: options.attnMask must be a Tensor with Float32Array \(float32\) or Uint8Array \(bool\) data/],
    ['sdpa: disposed tensor', () => { const t = f(1, 2, 4, 8); t.dispose(); return sdpa(t, k, v); }, 'Error', /^scaledDotProductAttention: query is a disposed Tensor$/],
    ['sdpa: weights too large for the heap', () => sdpa(f(1, 1, 100000, 1), f(1, 1, 100000, 1), f(1, 1, 100000, 1), { returnWeights: true }), 'RangeError', /^scaledDotProductAttention: the call needs 37\.3 GiB of wasm memory \(weights \[1, 1, 100000, 100000\] alone is 37\.3 GiB\) but the wasm heap holds at most 4\.0 GiB/],
    ['sync: same checks', () => sync(q, k, f(1, 2, 6, 8), { window: 'x' }), 'RangeError', /^scaledDotProductAttentionSync: options.window must be an integer/],
    ['sync: webgpu backend', () => sync(q, k, v, { backend: 'webgpu' }), 'Error', /^scaledDotProductAttentionSync: options.backend 'webgpu' is asynchronous/],
    // KVCache
    ['KVCache: missing sizes', () => qkv.KVCache.create({ numKvHeads: 2, headDim: 8 }), 'TypeError', /^KVCache.create: options.maxLength is required$/],
    ['KVCache: zero heads', () => qkv.KVCache.create({ numKvHeads: 0, maxLength: 4, headDim: 8 }), 'RangeError', /^KVCache.create: options.numKvHeads must be an integer in \[1, \d+\], got 0$/],
    ['KVCache: unknown option', () => qkv.KVCache.create({ numKvHeads: 1, maxLength: 4, headDim: 8, heads: 2 }), 'Error', /^KVCache.create: unknown option 'heads'/],
    ['KVCache: too large', () => qkv.KVCache.create({ numKvHeads: 8, maxLength: 1e7, headDim: 64 }), 'RangeError', /^KVCache.create: a cache of \[B, Hkv, maxLength\] = \[1, 8, 10000000\] with D=64, Dv=64 needs 38\.1 GiB/],
    ['KVCache.append: wrong shape', async () => { const c = await qkv.KVCache.create({ numKvHeads: 2, maxLength: 4, headDim: 8 }); try { c.append(f(1, 2, 2, 4), f(1, 2, 2, 8)); } finally { c.dispose(); } }, 'Error', /^KVCache.append: key and value must be \[B, Hkv, n, D\] = \[1, 2, n, 8\] .*\(got key \[1, 2, 2, 4\], value \[1, 2, 2, 8\]\)$/],
    ['KVCache.append: over capacity', async () => { const c = await qkv.KVCache.create({ numKvHeads: 2, maxLength: 4, headDim: 8 }); try { c.append(f(1, 2, 3, 8), f(1, 2, 3, 8)); c.append(f(1, 2, 2, 8), f(1, 2, 2, 8)); } finally { c.dispose(); } }, 'RangeError', /^KVCache.append: appending 2 positions to a cache holding 3 would exceed its maxLength 4/],
    ['KVCache.attend: empty cache', async () => { const c = await qkv.KVCache.create({ numKvHeads: 2, maxLength: 4, headDim: 8 }); try { await c.attend(q); } finally { c.dispose(); } }, 'Error', /^KVCache.attend: the cache is empty; append keys and values first/],
    ['KVCache.attend: heads not a multiple', async () => { const c = await qkv.KVCache.create({ numKvHeads: 2, maxLength: 8, headDim: 8 }); try { c.append(f(1, 2, 4, 8), f(1, 2, 4, 8)); await c.attend(f(1, 3, 1, 8)); } finally { c.dispose(); } }, 'Error', /^KVCache.attend: query heads \(3\) must be a multiple of the cache's kv heads \(2\)/],
    ['KVCache.attend: more query heads without enableGqa', async () => { const c = await qkv.KVCache.create({ numKvHeads: 2, maxLength: 8, headDim: 8 }); try { c.append(f(1, 2, 4, 8), f(1, 2, 4, 8)); await c.attend(f(1, 4, 1, 8), { enableGqa: false }); } finally { c.dispose(); } }, 'Error', /^KVCache.attend: key\/value have 2 heads but query has 4; pass enableGqa: true for grouped-query attention \(got query \[1, 4, 1, 8\], cache \[B, Hkv, length, D\] = \[1, 2, 4, 8\]\)$/],
    ['KVCache.attend: after dispose', async () => { const c = await qkv.KVCache.create({ numKvHeads: 2, maxLength: 8, headDim: 8 }); c.dispose(); await c.attend(q); }, 'Error', /^KVCache.attend: the cache was disposed$/],
    // MultiHeadAttention
    ['MHA: embedDim not divisible', () => new qkv.MultiHeadAttention({ embedDim: 10, numHeads: 3, weights: mhaWeights(10) }), 'Error', /^MultiHeadAttention: embedDim \(10\) must be divisible by numHeads \(3\)$/],
    ['MHA: wrong weight length', () => new qkv.MultiHeadAttention({ embedDim: 8, numHeads: 2, weights: { inProjWeight: new Float32Array(10), outProjWeight: new Float32Array(64) } }), 'RangeError', /^MultiHeadAttention: weights.inProjWeight has 10 elements but shape \[24, 8\] needs 192$/],
    ['MHA: wrong weight shape', () => new qkv.MultiHeadAttention({ embedDim: 8, numHeads: 2, weights: { inProjWeight: f(8, 24), outProjWeight: f(8, 8) } }), 'Error', /^MultiHeadAttention: weights.inProjWeight must have shape \[24, 8\], got \[8, 24\]$/],
    ['MHA: missing weights', () => new qkv.MultiHeadAttention({ embedDim: 8, numHeads: 2 }), 'TypeError', /^MultiHeadAttention: weights \{ inProjWeight/],
    ['MHA.forward: wrong embed dim', () => mha().forward(f(1, 3, 4), f(1, 3, 8), f(1, 3, 8)), 'Error', /^MultiHeadAttention.forward: the last dim of query, key and value must be embedDim = 8 \(got query \[1, 3, 4\], key \[1, 3, 8\], value \[1, 3, 8\]\)$/],
    ['MHA.forward: float key padding mask', () => mha().forward(f(1, 3, 8), f(1, 3, 8), f(1, 3, 8), { keyPaddingMask: f(1, 3) }), 'Error', /^MultiHeadAttention.forward: options.keyPaddingMask must be a bool \(Uint8Array\) tensor of shape \[1, 3\]/],
    ['MHA.forward: bad attn mask shape', () => mha().forward(f(2, 3, 8), f(2, 5, 8), f(2, 5, 8), { attnMask: b(5, 3) }), 'Error', /^MultiHeadAttention.forward: options.attnMask must have shape \[Lq, Lk\] = \[3, 5\] or \[B \* numHeads, Lq, Lk\] = \[4, 3, 5\], got \[5, 3\]/],
    ['MHA.forward: unknown option', () => mha().forward(f(1, 3, 8), f(1, 3, 8), f(1, 3, 8), { need_weights: false }), 'Error', /^MultiHeadAttention.forward: unknown option 'need_weights'/],
    // env
    ['env.numThreads: zero', () => { qkv.env.numThreads = 0; }, 'Error', /^env.numThreads: must be an integer in \[1, 64\], got 0$/],
    ['env.variant: unknown', () => { qkv.env.variant = 'gpu'; }, 'Error', /^env.variant: must be one of 'auto', 'scalar', 'simd', 'simd-threads', 'simd-relaxed', 'simd-relaxed-threads', got "gpu"$/],
  ];
}

/** Runs the table; returns the rows whose outcome differs from the expectation. */
export async function checkInvalidCalls(qkv) {
  const problems = [];
  const rows = invalidCalls(qkv);
  for (const [what, call, type, pattern] of rows) {
    let error = null;
    try {
      await call();
    } catch (e) {
      error = e;
    }
    if (!error) problems.push({ what, problem: 'did not throw' });
    else if (!(error instanceof Error) || error.name !== type) problems.push({ what, problem: `threw ${error?.name}: ${error?.message}, expected ${type}` });
    else if (!pattern.test(error.message)) problems.push({ what, problem: `message ${JSON.stringify(error.message)} does not match ${pattern}` });
  }
  return { count: rows.length, problems };
}
