// attentionRollout and attentionFlow against the float64 references of
// tools/interpret/make_reference.py (numpy rollout; networkx max-flow, checked there against
// scipy's): random causal and bidirectional attentions, mean/max/min fusion, residual 0.3-0.7,
// and the real attentions of web/models/tiny-kjv-bpe on a verse. Both product paths of rollout
// (TypeScript float64, the wasm block-triangular F32 product) are checked. Bad input: errors
// that name the function, the argument and the shapes.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test, after } from 'node:test';
import * as qkv from 'qkv';

const { Tensor, attentionRollout, attentionRolloutSync, attentionFlow, attentionFlowSync } = qkv;
after(() => qkv.dispose());

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'data', 'interpret');
const ref = JSON.parse(readFileSync(path.join(DIR, 'reference.json'), 'utf8'));
const f32 = (file) => {
  const b = readFileSync(path.join(DIR, file));
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};
/** The case's attentions as model.forward returns them: one [1, H, L, L] Tensor per layer. */
function attentionsOf(c) {
  const all = f32(c.file);
  const per = c.heads * c.L * c.L;
  return Array.from({ length: c.layers }, (_, l) => new Tensor(all.slice(l * per, (l + 1) * per), [1, c.heads, c.L, c.L]));
}
function maxDiff(a, b) {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}
const flowCases = ref.cases.filter((c) => c.flow);

test('rollout matches the float64 reference, every layer (cumulative), both backends', async () => {
  await qkv.init({ variant: 'simd' });
  for (const c of flowCases) {
    const atts = attentionsOf(c);
    for (const backend of ['js', 'wasm']) {
      const r = attentionRolloutSync(atts, { ...c.options, cumulative: true, backend });
      assert.deepEqual(r.shape, [c.layers, c.L, c.L]);
      const err = maxDiff(r.data, c.rollout_cumulative);
      assert.ok(err < (backend === 'js' ? 1e-6 : 2e-6), `${c.name} (${backend}): max |diff| ${err}`);
      const last = attentionRolloutSync(atts, { ...c.options, backend });
      assert.deepEqual(last.shape, [c.L, c.L]);
      assert.deepEqual([...last.data], [...r.data.subarray((c.layers - 1) * c.L * c.L)]);
    }
  }
});

test('rollout of a long causal case (L = 80: the wasm product over two blocks) matches the reference', async () => {
  const c = ref.cases.find((x) => x.name === 'causal-long');
  const want = f32(c.rollout_file);
  const atts = attentionsOf(c);
  const wasm = await attentionRollout(atts, c.options);
  const js = attentionRolloutSync(atts, { ...c.options, backend: 'js' });
  assert.ok(maxDiff(wasm.data, want) < 2e-6, `wasm: ${maxDiff(wasm.data, want)}`);
  assert.ok(maxDiff(js.data, want) < 1e-6, `js: ${maxDiff(js.data, want)}`);
  // lower triangular, rows sum to 1
  for (let i = 0; i < c.L; i++) {
    let s = 0;
    for (let j = 0; j < c.L; j++) {
      if (j > i) assert.equal(wasm.data[i * c.L + j], 0);
      s += wasm.data[i * c.L + j];
    }
    assert.ok(Math.abs(s - 1) < 1e-5, `row ${i} sums to ${s}`);
  }
});

test('rollout: bidirectional maps at L = 100 agree between the wasm and TypeScript products', async () => {
  await qkv.init();
  const L = 100, H = 3;
  let s = 1;
  const rnd = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
  const atts = [0, 1, 2].map(() => {
    const d = new Float32Array(H * L * L);
    for (let r = 0; r < H * L; r++) {
      let sum = 0;
      for (let j = 0; j < L; j++) sum += (d[r * L + j] = Math.exp(3 * rnd()));
      for (let j = 0; j < L; j++) d[r * L + j] /= sum;
    }
    return new Tensor(d, [1, H, L, L]);
  });
  for (const fusion of ['mean', 'max']) {
    const a = attentionRolloutSync(atts, { fusion, backend: 'wasm' });
    const b = attentionRolloutSync(atts, { fusion, backend: 'js' });
    assert.ok(maxDiff(a.data, b.data) < 1e-6, `${fusion}: ${maxDiff(a.data, b.data)}`);
  }
});

test('flow matches the max-flow reference (normalized rows and raw values)', async () => {
  for (const c of flowCases) {
    const atts = attentionsOf(c);
    const fl = await attentionFlow(atts, c.options);
    assert.deepEqual(fl.shape, [c.L, c.L]);
    const err = maxDiff(fl.data, c.flow);
    assert.ok(err < 1e-6, `${c.name}: max |diff| ${err}`);
    const raw = attentionFlowSync(atts, { ...c.options, normalize: false });
    assert.ok(maxDiff(raw.data, c.flow_raw) < 1e-6, `${c.name} raw: ${maxDiff(raw.data, c.flow_raw)}`);
  }
});

test('flow: outputs and layer choose rows and depth', () => {
  const c = flowCases.find((x) => x.name === 'causal-mean');
  const atts = attentionsOf(c);
  const full = attentionFlowSync(atts, c.options);
  const some = attentionFlowSync(atts, { ...c.options, outputs: [c.L - 1, 2] });
  assert.deepEqual(some.shape, [2, c.L]);
  assert.deepEqual([...some.data.subarray(0, c.L)], [...full.data.subarray((c.L - 1) * c.L)]);
  assert.deepEqual([...some.data.subarray(c.L)], [...full.data.subarray(2 * c.L, 3 * c.L)]);
  // through the first layer only the flow is that layer's residual-augmented map itself
  // (one edge per path), normalized: the rollout of one layer
  const one = attentionFlowSync(atts, { ...c.options, layer: 0, normalize: false });
  const r0 = c.rollout_cumulative.slice(0, c.L * c.L);
  assert.ok(maxDiff(one.data, r0) < 1e-6);
});

test('one layer: rollout is the fused map; hand-computed 2-token case', () => {
  // heads [[1, 0], [1, 0]] and [[1, 0], [0, 1]]: mean [[1, 0], [0.5, 0.5]];
  // A' = 0.5 mean + 0.5 I = [[1, 0], [0.25, 0.75]]
  const a = new Tensor(new Float32Array([1, 0, 1, 0, 1, 0, 0, 1]), [1, 2, 2, 2]);
  assert.deepEqual([...attentionRolloutSync([a], { backend: 'js' }).data], [1, 0, 0.25, 0.75]);
  // two layers: [[1, 0], [0.25, 0.75]]^2 = [[1, 0], [0.25 + 0.1875, 0.5625]]
  assert.deepEqual([...attentionRolloutSync([a, a], { backend: 'js' }).data], [1, 0, 0.4375, 0.5625]);
  // max fusion: [[1, 0], [1, 1]] -> 0.5 max + 0.5 I = [[1, 0], [0.5, 1]] -> rows / sum: [[1, 0], [1/3, 2/3]]
  const mx = attentionRolloutSync([a], { fusion: 'max', backend: 'js' }).data;
  assert.ok(Math.abs(mx[2] - 1 / 3) < 1e-7 && Math.abs(mx[3] - 2 / 3) < 1e-7);
  // flow through 2 layers of [[1, 0], [0.25, 0.75]] from output 1: to token 0 the best of the
  // paths 1-0-0 (min(0.25, 1)) and 1-1-0 (min(0.75, 0.25)), which share no edge: 0.5; to token 1: min(0.75, 0.75) = 0.75 along 1-1-1
  // (a flow is bounded by its narrowest edge; rollout multiplies: 0.5625)
  const fl = attentionFlowSync([a, a], { normalize: false }).data;
  assert.ok(Math.abs(fl[2] - 0.5) < 1e-12 && Math.abs(fl[3] - 0.75) < 1e-12, String([...fl]));
  // residual 0: a row whose heads were all removed stays 0 (no NaN); residual > 0 keeps the token itself
  const z = new Tensor(new Float32Array([1, 0, 0, 0]), [1, 1, 2, 2]);
  assert.deepEqual([...attentionRolloutSync([z], { residual: 0, backend: 'js' }).data], [1, 0, 0, 0]);
  assert.deepEqual([...attentionRolloutSync([z], { backend: 'js' }).data], [1, 0, 0, 1]);
});

test('bad input: errors name the function, the argument and the shapes', () => {
  const t = (shape) => new Tensor(new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(0.25), shape);
  assert.throws(() => attentionRolloutSync(t([1, 2, 4, 4])), /attentionRollout: attentions must be an array of Tensors/);
  assert.throws(() => attentionRolloutSync([]), /attentionRollout: attentions is empty/);
  assert.throws(() => attentionRolloutSync([t([1, 2, 4, 3])]), /attentionRollout: attentions\[0\] must be \[1, H, L, L\] or \[H, L, L\].*got \[1, 2, 4, 3\]/);
  assert.throws(() => attentionRolloutSync([t([1, 2, 4, 4]), t([1, 2, 5, 5])]), /attentionRollout: every layer's maps must have the same L: attentions\[0\] is \[1, 2, 4, 4\], attentions\[1\] is \[1, 2, 5, 5\]/);
  assert.throws(() => attentionRolloutSync([t([1, 2, 4, 4])], { fusion: 'sum' }), /attentionRollout: options.fusion must be 'mean', 'max' or 'min', got "sum"/);
  assert.throws(() => attentionRolloutSync([t([1, 2, 4, 4])], { residual: 2 }), /attentionRollout: options.residual must be a number in \[0, 1\]/);
  assert.throws(() => attentionRolloutSync([t([1, 2, 4, 4])], { fuse: 'mean' }), /attentionRollout: unknown option 'fuse'/);
  const bad = t([1, 1, 2, 2]);
  bad.data[1] = NaN;
  assert.throws(() => attentionRolloutSync([bad]), /attentionRollout: attentions\[0\] \(shape \[1, 2, 2\]\) has a negative or non-finite weight in row 0/);
  bad.data[1] = -0.5;
  assert.throws(() => attentionFlowSync([bad]), /attentionFlowSync: attentions\[0\].*negative or non-finite/);
  // the wasm kernels find a bad weight in the row the TypeScript path names (L = 40: chunks of rows)
  const uniform = () => new Tensor(new Float32Array(3 * 40 * 40).fill(1 / 40), [1, 3, 40, 40]);
  for (const v of [NaN, -1, Infinity]) {
    const layers = [uniform(), uniform()];
    layers[1].data[2 * 1600 + 33 * 40 + 5] = v;
    for (const backend of ['wasm', 'js']) {
      assert.throws(() => attentionRolloutSync(layers, { backend }), /attentionRollout: attentions\[1\] \(shape \[3, 40, 40\]\) has a negative or non-finite weight in row 33 \(fused: (NaN|-|Infinity)/, `${v} (${backend})`);
    }
  }
  assert.throws(() => attentionFlowSync([t([1, 1, 65, 65])]), /attentionFlowSync: attentions\[0\] has shape \[1, 1, 65, 65\]: L = 65 is more than 64/);
  assert.throws(() => attentionFlowSync([t([1, 1, 4, 4])], { layer: 1 }), /attentionFlowSync: options.layer must be an integer in \[0, 0\] \(attentions has 1 layers\), got 1/);
  assert.throws(() => attentionFlowSync([t([1, 1, 4, 4])], { outputs: [4] }), /attentionFlowSync: options.outputs must be an array of positions in \[0, 3\] \(L = 4\)/);
  assert.throws(() => attentionFlowSync([t([1, 1, 4, 4])], { signal: null }), /attentionFlowSync: unknown option 'signal'/);
});

test('attentionFlow (async): progress per row, cancel between rows, bad options rejected', async () => {
  const c = flowCases.find((x) => x.name === 'causal-mean');
  const atts = attentionsOf(c);
  const seen = [];
  const f = await attentionFlow(atts, { ...c.options, onProgress: (d, n) => seen.push([d, n]) });
  assert.deepEqual(seen, Array.from({ length: c.L }, (_, k) => [k + 1, c.L]));
  assert.deepEqual([...f.data], [...attentionFlowSync(atts, c.options).data]);
  const ac = new AbortController();
  let rows = 0;
  await assert.rejects(attentionFlow(atts, { onProgress: (d) => { rows = d; if (d === 3) ac.abort(); }, signal: ac.signal }), (e) => e.name === 'AbortError');
  assert.equal(rows, 3);
  await assert.rejects(attentionFlow(atts, { signal: 'stop' }), /attentionFlow: options.signal must be an AbortSignal/);
  await assert.rejects(attentionFlow([]), /attentionFlow: attentions is empty/);
});
