// env.variant 'auto' and the relaxed-SIMD builds: the probe decides, a relaxed build that
// fails to load falls back to its plain SIMD twin, forcing a relaxed build where the engine
// lacks relaxed SIMD is a clear error, and the relaxed threads build gives the same bits
// whatever the thread count.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, after, afterEach } from 'node:test';
import * as qkv from 'qkv';
import { chooseVariants, probes, relaxedSimdSupported } from '../../dist/wasm/loader.js';
import { unsupported } from './shared/variants.js';

const real = { ...probes };
afterEach(() => {
  Object.assign(probes, real);
  qkv.dispose();
  qkv.env.variant = 'auto';
  qkv.env.numThreads = 2;
  qkv.env.wasmPaths = undefined;
});
after(() => qkv.dispose());

test('auto: relaxed SIMD first where the probe accepts it, then its plain twin; else plain SIMD, else scalar', () => {
  qkv.env.variant = 'auto';
  probes.relaxedSimd = () => true;
  qkv.env.numThreads = 2;
  assert.deepEqual(chooseVariants(), ['simd-relaxed-threads', 'simd-threads']);
  qkv.env.numThreads = 1;
  assert.deepEqual(chooseVariants(), ['simd-relaxed', 'simd']);
  probes.relaxedSimd = () => false;
  assert.deepEqual(chooseVariants(), ['simd']);
  qkv.env.numThreads = 2;
  assert.deepEqual(chooseVariants(), ['simd-threads']);
  probes.threads = () => false; // a page that is not crossOriginIsolated
  assert.deepEqual(chooseVariants(), ['simd']);
  probes.simd = () => false;
  assert.deepEqual(chooseVariants(), ['scalar']);
});

test('forcing a relaxed build where the probe fails is a clear error naming the flag', async () => {
  probes.relaxedSimd = () => false;
  qkv.env.variant = 'simd-relaxed';
  assert.throws(() => chooseVariants(), /^Error: qkv: env.variant 'simd-relaxed' needs WebAssembly relaxed SIMD, which this runtime lacks \(Node 20: run with --experimental-wasm-relaxed-simd\)$/);
  await assert.rejects(qkv.init(), /needs WebAssembly relaxed SIMD/);
  assert.equal(qkv.env.loadedVariant, null);
});

test('a relaxed build that fails to load falls back to the plain SIMD build, with a warning', async () => {
  // The relaxed .wasm replaced by a module the engine rejects (the pre-standard fma opcode,
  // as an engine without relaxed SIMD rejects the real one); the probe says yes.
  const dir = mkdtempSync(join(tmpdir(), 'qkv-relaxed-'));
  const bad = join(dir, 'bad.wasm');
  writeFileSync(bad, new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 19, 1, 17, 0,
    65, 0, 253, 17, 65, 0, 253, 17, 65, 0, 253, 17, 253, 175, 1, 11]));
  probes.relaxedSimd = () => true;
  qkv.env.wasmPaths = { 'qkv-simd-relaxed-threads.wasm': bad, 'qkv-simd-relaxed.wasm': bad };
  const warnings = [];
  const warn = console.warn;
  console.warn = (m) => warnings.push(String(m));
  try {
    for (const [threads, want] of [[2, 'simd-threads'], [1, 'simd']]) {
      qkv.dispose();
      qkv.env.numThreads = threads;
      assert.deepEqual(await qkv.init(), { variant: want, threads });
      assert.equal(qkv.env.loadedVariant, want);
      const x = new qkv.Tensor(new Float32Array(16).fill(1), [1, 1, 2, 8]);
      const { output } = await qkv.scaledDotProductAttention(x, x, x);
      assert.deepEqual(Array.from(output.data), new Array(16).fill(1)); // it computes
    }
  } finally {
    console.warn = warn;
  }
  assert.equal(warnings.filter((w) => /^qkv: the simd-relaxed(-threads)? build failed to load \(.+\); loading simd(-threads)?$/.test(w)).length, 2, warnings.join('\n'));
});

test('Node without relaxed SIMD: a probe that wrongly says yes still ends on the plain SIMD build', () => {
  // A child process without --experimental-wasm-relaxed-simd (Node 20: no relaxed SIMD): the
  // real relaxed module fails to compile there. Skipped where the engine has it without the flag.
  const code = `import * as q from ${JSON.stringify(new URL('../../dist/index.js', import.meta.url).href)};
    import { probes, relaxedSimdSupported } from ${JSON.stringify(new URL('../../dist/wasm/loader.js', import.meta.url).href)};
    if (relaxedSimdSupported()) { console.log('has relaxed'); process.exit(0); }
    probes.relaxedSimd = () => true;
    q.env.numThreads = 1;
    const r = await q.init();
    console.log(r.variant, q.env.loadedVariant);`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  if (r.stdout.trim() === 'has relaxed') return;
  assert.equal(r.stdout.trim(), 'simd simd');
  assert.match(r.stderr, /qkv: the simd-relaxed build failed to load \(.*\); loading simd/);
});

test('the relaxed threads build gives identical bits with 1, 2 and 3 threads', { skip: unsupported('simd-relaxed-threads') }, async () => {
  qkv.env.variant = 'simd-relaxed-threads';
  qkv.env.numThreads = 3;
  await qkv.init();
  let s = 5;
  const rand = () => ((s = (s * 1664525 + 1013904223) >>> 0) / 4294967296) * 2 - 1;
  const T = (shape) => new qkv.Tensor(Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, rand), shape);
  const q = T([2, 4, 200, 64]), k = T([2, 4, 300, 64]), v = T([2, 4, 300, 64]);
  const outs = [];
  for (const n of [1, 2, 3]) {
    qkv.env.numThreads = n;
    assert.equal(qkv.env.threads, n);
    outs.push((await qkv.scaledDotProductAttention(q, k, v)).output.data);
  }
  assert.deepEqual(outs[1], outs[0]);
  assert.deepEqual(outs[2], outs[0]);
});

test('relaxedSimdSupported() agrees with the engine', () => {
  // The hand-assembled probe in the loader is a valid relaxed-SIMD module: exactly where this
  // process was given the flag (or the engine ships relaxed SIMD) it validates.
  const flag = process.execArgv.includes('--experimental-wasm-relaxed-simd');
  const major = Number(process.versions.node.split('.')[0]);
  if (flag || major >= 22) assert.equal(relaxedSimdSupported(), true);
  else assert.equal(relaxedSimdSupported(), false);
});
