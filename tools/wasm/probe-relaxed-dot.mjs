#!/usr/bin/env node
// Does this engine run the relaxed-SIMD int8 dot product i32x4.relaxed_dot_i8x16_i7x16_add_s
// (0xfd 0x113, final numbering) and give the value the spec gives? A hand-built module (LLVM
// 14 cannot emit the instruction: docs/kernels.md "The relaxed-SIMD build") computes
// dot(a, b, c) on fixed vectors, a signed int8, b in [0, 127] (the 7-bit operand: either
// reading of its sign agrees), c int32, and the result is compared with the sum written here:
// lane l = c[l] + sum_j a[4l + j] * b[4l + j].
//
//   node tools/wasm/probe-relaxed-dot.mjs             Node (this process; pass
//                                                     --experimental-wasm-relaxed-simd to node 20)
//   node tools/wasm/probe-relaxed-dot.mjs --chromium  and headless Chromium (tests/browser/harness.js)
//
// Prints one JSON line per engine: { engine, compiled, got, want, equal } (or the compile error).

function probe(cs) {
  const leb = (v) => {
    const o = [];
    do {
      let b = v & 0x7f;
      v >>>= 7;
      if (v) b |= 0x80;
      o.push(b);
    } while (v);
    return o;
  };
  const ascii = (s) => Array.from(s, (ch) => ch.charCodeAt(0));
  const sec = (id, body) => [id, ...leb(body.length), ...body];
  const load = (off) => [0x41, 0, 0xfd, 0x00, 4, ...leb(off)]; // i32.const 0; v128.load offset=off
  // (func) mem[48] = relaxed_dot(mem[0], mem[16], mem[32])
  const body = [0, 0x41, 48, ...load(0), ...load(16), ...load(32), 0xfd, ...leb(0x113), 0xfd, 0x0b, 4, 0, 0x0b];
  const bytes = new Uint8Array([
    0, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
    ...sec(1, [1, 0x60, 0, 0]), ...sec(3, [1, 0]), ...sec(5, [1, 0, 1]),
    ...sec(7, [2, 3, ...ascii('run'), 0, 0, 3, ...ascii('mem'), 2, 0]),
    ...sec(10, [1, ...leb(body.length), ...body]),
  ]);
  const results = [];
  let instance;
  try {
    instance = new WebAssembly.Instance(new WebAssembly.Module(bytes));
  } catch (e) {
    return [{ compiled: false, error: String(e) }];
  }
  for (const c of cs) {
    const m = new Int8Array(instance.exports.mem.buffer);
    for (let i = 0; i < 16; i++) {
      m[i] = -127 + 17 * i;
      m[16 + i] = (i * 9) % 128;
    }
    new Int32Array(instance.exports.mem.buffer, 32, 4).set(c);
    instance.exports.run();
    const got = Array.from(new Int32Array(instance.exports.mem.buffer, 48, 4));
    const want = [0, 1, 2, 3].map((l) => c[l] + [0, 1, 2, 3].reduce((s, j) => s + m[4 * l + j] * m[16 + 4 * l + j], 0));
    results.push({ compiled: true, c, got, want, equal: got.every((v, i) => v === want[i]) });
  }
  return results;
}

const CS = [[0, 0, 0, 0], [1000, -5, 0, 7]];
for (const r of probe(CS)) console.log(JSON.stringify({ engine: `node ${process.version} ${process.execArgv.join(' ')}`.trim(), ...r }));
if (process.argv.includes('--chromium')) {
  const { launch } = await import('../../tests/browser/harness.js');
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const version = browser.version();
    for (const r of await page.evaluate(`(${probe.toString()})(${JSON.stringify(CS)})`)) {
      console.log(JSON.stringify({ engine: `chromium ${version}`, ...r }));
    }
  } finally {
    await browser.close();
  }
}
