// tools/wasm/relax-fma.mjs (the post-link rewrite of LLVM 14's pre-standard f32x4 fma to
// f32x4.relaxed_madd) on a hand-built module, and its decoder (tools/wasm/wasm-code.mjs) on
// the shipped builds.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { rewriteDot, rewriteFma } from '../../tools/wasm/relax-fma.mjs';
import { countOps, walkCode } from '../../tools/wasm/wasm-code.mjs';

const f32x4 = (x) => [0xfd, 0x0c, ...new Uint8Array(new Float32Array([x, x, x, x]).buffer)]; // v128.const
const section = (id, content) => [id, content.length, ...content]; // sizes < 128 here: 1-byte LEBs

// (module
//   (func (export "k") (result i32) i32.const 22525)                   ;; encoded 41 fd af 01
//   (func (export "fma") (result f32)
//     v128.const f32x4 2 2 2 2  v128.const f32x4 3 3 3 3  v128.const f32x4 5 5 5 5
//     <fma: 0xfd 0xaf 0x01>  f32x4.extract_lane 0))
function handBuilt(body2 = [...f32x4(2), ...f32x4(3), ...f32x4(5), 0xfd, 0xaf, 0x01, 0xfd, 0x1f, 0x00]) {
  const body1 = [0x00, 0x41, 0xfd, 0xaf, 0x01, 0x0b];
  const fn2 = [0x00, ...body2, 0x0b];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, [2, 0x60, 0, 1, 0x7f, 0x60, 0, 1, 0x7d]), // types: () -> i32, () -> f32
    ...section(3, [2, 0, 1]), // functions
    ...section(7, [2, 1, 0x6b, 0, 0, 3, 0x66, 0x6d, 0x61, 0, 1]), // exports "k", "fma"
    ...section(10, [2, body1.length, ...body1, fn2.length, ...fn2]),
  ]);
}
const countBytes = (b, seq) => b.reduce((n, _, i) => n + (seq.every((x, j) => b[i + j] === x) ? 1 : 0), 0);

test('relax-fma rewrites the fma and leaves i32.const 22525 (the same bytes) alone', () => {
  const bytes = handBuilt();
  assert.equal(countBytes(bytes, [0xfd, 0xaf, 0x01]), 2); // a byte search would find two
  assert.equal(rewriteFma(bytes), 1);
  assert.equal(countBytes(bytes, [0xfd, 0xaf, 0x01]), 1);
  assert.equal(countBytes(bytes, [0x41, 0xfd, 0xaf, 0x01, 0x0b]), 1); // the constant survived
  assert.equal(countBytes(bytes, [0xfd, 0x85, 0x02]), 1);
  const ops = countOps(bytes);
  assert.equal(ops.get('253:261'), 1); // 0xfd 0x105 f32x4.relaxed_madd
  assert.equal(ops.get('0:65'), 1); // i32.const
  assert.equal(rewriteFma(bytes), 0, 'a second pass finds nothing left');
});

test('the rewritten module validates with relaxed SIMD and computes a * b + c (wabt, V8 with the flag)', (t) => {
  const bytes = handBuilt();
  rewriteFma(bytes);
  const out = spawnSync('wasm-validate', ['--enable-relaxed-simd', '-'], { input: bytes });
  if (out.error) t.diagnostic('wasm-validate not found; checked in V8 only');
  else assert.equal(out.status, 0, String(out.stderr));
  // Node 20 needs --experimental-wasm-relaxed-simd; a child process gets it.
  const src = `const m = new WebAssembly.Instance(new WebAssembly.Module(Buffer.from('${Buffer.from(bytes).toString('hex')}', 'hex'))).exports;
    process.stdout.write(JSON.stringify([m.k(), m.fma()]));`;
  const run = execFileSync(process.execPath, ['--experimental-wasm-relaxed-simd', '-e', src], { encoding: 'utf8' });
  assert.deepEqual(JSON.parse(run), [22525, 11]); // 2 * 3 + 5 (not LLVM 14's belief 2 + 3 * 5 = 17)
  const unrewritten = spawnSync('wasm-validate', ['--enable-relaxed-simd', '-'], { input: handBuilt() });
  if (!unrewritten.error) assert.notEqual(unrewritten.status, 0, 'the pre-standard opcode must not validate');
});

test('relax-fma rewrites the int8 dot stand-in (f64x2 fma) to i32x4.relaxed_dot_i8x16_i7x16_add_s, which computes c + the 4-byte dots', () => {
  // fma: v128.const i8 1..16, v128.const i8 (0..127), v128.const i32 (100, 200, 300, 400), <0xfd 0xcf 0x01>,
  // i32x4.extract_lane 1 reinterpreted: the function returns f32, so lane 1 is read as i32 through the
  // f32 bits (0xfd 0x1f 0x01: f32x4.extract_lane 1)
  const a = Array.from({ length: 16 }, (_, i) => i + 1), b = Array.from({ length: 16 }, (_, i) => (i * 9) % 128);
  const c = new Uint8Array(new Int32Array([100, 200, 300, 400]).buffer);
  const bytes = handBuilt([0xfd, 0x0c, ...a, 0xfd, 0x0c, ...b, 0xfd, 0x0c, ...c, 0xfd, 0xcf, 0x01, 0xfd, 0x1f, 0x01]);
  assert.equal(rewriteDot(bytes), 1);
  assert.equal(countOps(bytes).get('253:275'), 1); // 0xfd 0x113
  assert.equal(rewriteDot(bytes), 0, 'a second pass finds nothing left');
  assert.equal(rewriteFma(bytes), 0, 'the fma pass walks past the dot');
  const src = `const m = new WebAssembly.Instance(new WebAssembly.Module(Buffer.from('${Buffer.from(bytes).toString('hex')}', 'hex'))).exports;
    process.stdout.write(String(new Int32Array(new Float32Array([m.fma()]).buffer)[0]));`;
  // V8's optimizing tier: Node 20's baseline computes this instruction wrong (web/lib/wasm/loader.ts)
  const run = execFileSync(process.execPath, ['--experimental-wasm-relaxed-simd', '--no-liftoff', '-e', src], { encoding: 'utf8' });
  const want = 200 + [4, 5, 6, 7].reduce((s, i) => s + a[i] * b[i], 0);
  assert.equal(Number(run), want);
});

test('the decoder fails loudly on an opcode it does not know', () => {
  assert.throws(() => rewriteFma(handBuilt([0xfd, 0x9a, 0x01, 0x43, 0, 0, 0, 0])), /unknown opcode 0xfd 154 \(0x9a\) in function body 1 at byte offset \d+/);
  assert.throws(() => rewriteFma(handBuilt([0x27, 0x43, 0, 0, 0, 0])), /unknown opcode 0x27 in function body 1/);
  assert.throws(() => rewriteFma(handBuilt([0xfd, 0xb0, 0x01])), /unknown opcode 0xfd 176/); // pre-standard fms
  assert.throws(() => rewriteFma(new Uint8Array([0, 0x61, 0x73, 0x6d, 2, 0, 0, 0])), /not a wasm module/);
  const truncated = handBuilt().slice(0, -3);
  assert.throws(() => rewriteFma(truncated), /unexpected end of data/);
});

// The decoder against wabt on real modules: same instruction count as wasm-objdump -d.
for (const v of ['simd', 'simd-threads', 'simd-relaxed', 'simd-relaxed-threads']) {
  const file = new URL(`../../dist/wasm/qkv-${v}.wasm`, import.meta.url);
  test(`the decoder walks dist/wasm/qkv-${v}.wasm like wasm-objdump`, { skip: !existsSync(file) && 'not built' }, (t) => {
    const bytes = new Uint8Array(readFileSync(file));
    let n = 0;
    walkCode(bytes, () => n++);
    const dump = spawnSync('wasm-objdump', ['-d', file.pathname], { encoding: 'utf8', maxBuffer: 1 << 30 });
    if (dump.error) return t.skip('wasm-objdump not found');
    // one line per instruction, " offset: bytes | text" (not the locals' lines, nor the
    // continuation lines of long immediates, whose text is empty)
    const lines = dump.stdout.split('\n').filter((l) => /^ [0-9a-f]+: [0-9a-f ]*\| +\S/.test(l) && !/\| local\[/.test(l)).length;
    assert.equal(n, lines);
    const fma = countOps(bytes).get('253:261') ?? 0;
    const dot = countOps(bytes).get('253:275') ?? 0; // i32x4.relaxed_dot_i8x16_i7x16_add_s (gemv_q4.cpp)
    if (v.includes('relaxed')) {
      assert.ok(fma >= 9, `${v}: ${fma} f32x4.relaxed_madd`);
      assert.ok(dot >= 16, `${v}: ${dot} i32x4.relaxed_dot_i8x16_i7x16_add_s`);
    } else {
      assert.equal(fma, 0);
      assert.equal(dot, 0);
    }
  });
}
