// A walker over the instructions of a wasm module's function bodies: every opcode with its
// immediates (MVP, sign extension, bulk memory/reference types (0xfc), SIMD128 and relaxed
// SIMD (0xfd), threads/atomics (0xfe), exception handling, tail calls), so that an opcode is
// recognised only where an instruction starts, never inside an immediate (`i32.const 22525`
// is encoded 41 fd af 01). An opcode it does not know is an Error naming it and its offset:
// skipping it would lose the instruction boundaries.
//
// walkCode(bytes, visit) calls visit({ prefix, op, at, opEnd }) for each instruction:
// prefix is 0 for single-byte opcodes, else 0xfc/0xfd/0xfe; op the (sub-)opcode; at the
// offset of its first byte; opEnd the offset just past the (sub-)opcode's LEB (the immediates
// follow).

export const FD_RELAXED_MADD_F32X4 = 0x105; // f32x4.relaxed_madd (relaxed SIMD, final)
export const FD_LLVM14_FMA_F32X4 = 0xaf; // f32x4.qfma (pre-standard; LLVM 14's __builtin_wasm_fma_f32x4)
export const FD_RELAXED_DOT_I8X16_I7X16_ADD_S = 0x113; // i32x4.relaxed_dot_i8x16_i7x16_add_s (relaxed SIMD, final)
export const FD_LLVM14_FMA_F64X2 = 0xcf; // f64x2.qfma (pre-standard; LLVM 14's __builtin_wasm_fma_f64x2), the relaxed dot's stand-in

class Reader {
  constructor(bytes, pos, end) {
    this.b = bytes;
    this.pos = pos;
    this.end = end;
  }
  fail(msg, at = this.pos) {
    throw new Error(`wasm-code: ${msg} at byte offset ${at} (0x${at.toString(16)})`);
  }
  byte() {
    if (this.pos >= this.end) this.fail('unexpected end of data');
    return this.b[this.pos++];
  }
  u32() { // unsigned LEB128, at most 5 bytes
    let result = 0, shift = 0;
    for (let i = 0; i < 5; i++) {
      const x = this.byte();
      result += (x & 0x7f) * 2 ** shift;
      if ((x & 0x80) === 0) {
        if (result > 0xffffffff) this.fail('u32 LEB out of range');
        return result;
      }
      shift += 7;
    }
    this.fail('u32 LEB longer than 5 bytes');
  }
  sleb(maxBytes) { // signed LEB128 (s32: 5 bytes, s33: 5, s64: 10); the value is not needed
    for (let i = 0; i < maxBytes; i++) if ((this.byte() & 0x80) === 0) return;
    this.fail(`signed LEB longer than ${maxBytes} bytes`);
  }
  skip(n) {
    if (this.pos + n > this.end) this.fail('unexpected end of data');
    this.pos += n;
  }
}

// Value types and the empty block type, which a block type encodes in one byte.
const ONE_BYTE_BLOCKTYPES = new Set([0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f]);
function blockType(r) {
  if (ONE_BYTE_BLOCKTYPES.has(r.b[r.pos])) r.skip(1);
  else r.sleb(5); // s33 type index
}
function memarg(r) {
  const align = r.u32();
  if (align & 0x40) r.u32(); // multi-memory: a memory index follows
  r.sleb(10); // offset: u32 (u64 under memory64); LEB either way
}

// Single-byte opcodes -> immediate reader (null: none).
const NONE = null;
const MVP = new Map();
const set = (ops, imm) => { for (const op of ops) MVP.set(op, imm); };
const range = (a, b) => Array.from({ length: b - a + 1 }, (_, i) => a + i);
set([0x00, 0x01, 0x05, 0x0b, 0x0f, 0x19, 0x1a, 0x1b, 0xd1], NONE); // unreachable nop else end return catch_all drop select ref.is_null
set([0x02, 0x03, 0x04, 0x06], blockType); // block loop if try
set([0x07, 0x08, 0x09, 0x0c, 0x0d, 0x10, 0x12, 0x18], (r) => r.u32()); // catch throw rethrow br br_if call return_call delegate
set([0x0e], (r) => { const n = r.u32(); for (let i = 0; i <= n; i++) r.u32(); }); // br_table: n labels + default
set([0x11, 0x13], (r) => { r.u32(); r.u32(); }); // call_indirect return_call_indirect: type, table
set([0x1c], (r) => { const n = r.u32(); r.skip(n); }); // select t*: vec(valtype)
set(range(0x20, 0x26), (r) => r.u32()); // local.get/set/tee global.get/set table.get/set
set(range(0x28, 0x3e), memarg); // loads and stores
set([0x3f, 0x40], (r) => r.u32()); // memory.size memory.grow: memory index
set([0x41], (r) => r.sleb(5)); // i32.const
set([0x42], (r) => r.sleb(10)); // i64.const
set([0x43], (r) => r.skip(4)); // f32.const
set([0x44], (r) => r.skip(8)); // f64.const
set(range(0x45, 0xc4), NONE); // numeric (MVP 0x45-0xbf, sign extension 0xc0-0xc4)
set([0xd0], (r) => r.skip(1)); // ref.null: reftype
set([0xd2], (r) => r.u32()); // ref.func

// 0xfc prefix: saturating truncation, bulk memory, reference-type table ops.
const FC = new Map();
for (const op of range(0, 7)) FC.set(op, NONE); // i32.trunc_sat_f32_s ...
FC.set(8, (r) => { r.u32(); r.u32(); }); // memory.init data, mem
FC.set(9, (r) => r.u32()); // data.drop
FC.set(10, (r) => { r.u32(); r.u32(); }); // memory.copy dst, src
FC.set(11, (r) => r.u32()); // memory.fill
FC.set(12, (r) => { r.u32(); r.u32(); }); // table.init elem, table
FC.set(13, (r) => r.u32()); // elem.drop
FC.set(14, (r) => { r.u32(); r.u32(); }); // table.copy
for (const op of [15, 16, 17]) FC.set(op, (r) => r.u32()); // table.grow/size/fill

// 0xfd prefix: SIMD128 (final numbering) and relaxed SIMD.
const FD = new Map();
for (const op of range(0x00, 0x0b)) FD.set(op, memarg); // v128.load ... v128.store
FD.set(0x0c, (r) => r.skip(16)); // v128.const
FD.set(0x0d, (r) => r.skip(16)); // i8x16.shuffle: 16 lane indices
for (const op of range(0x0e, 0x14)) FD.set(op, NONE); // swizzle, splats
for (const op of range(0x15, 0x22)) FD.set(op, (r) => r.skip(1)); // extract/replace_lane: lane index
for (const op of range(0x23, 0x53)) FD.set(op, NONE); // comparisons, bitwise, any_true
for (const op of range(0x54, 0x5b)) FD.set(op, (r) => { memarg(r); r.skip(1); }); // load/store lane
for (const op of [0x5c, 0x5d]) FD.set(op, memarg); // v128.load32_zero, load64_zero
// 0x5e-0xff have no immediates; these numbers are unassigned in the final SIMD spec (several
// were pre-standard opcodes, 0xaf among them), so they are left unknown.
const FD_UNASSIGNED = new Set([0x9a, 0xa2, 0xa5, 0xa6, 0xaf, 0xb0, 0xb2, 0xb3, 0xb4, 0xbb, 0xc2, 0xc5, 0xc6, 0xcf, 0xd0, 0xd2, 0xd3, 0xd4, 0xe2, 0xee]);
for (const op of range(0x5e, 0xff)) if (!FD_UNASSIGNED.has(op)) FD.set(op, NONE);
for (const op of range(0x100, 0x113)) FD.set(op, NONE); // relaxed SIMD

// 0xfe prefix: threads (atomics).
const FE = new Map();
for (const op of [0x00, 0x01, 0x02]) FE.set(op, memarg); // memory.atomic.notify, wait32, wait64
FE.set(0x03, (r) => r.skip(1)); // atomic.fence: 0x00
for (const op of range(0x10, 0x4e)) FE.set(op, memarg); // atomic loads, stores, rmw, cmpxchg

const PREFIXED = new Map([[0xfc, FC], [0xfd, FD], [0xfe, FE]]);

/**
 * Walks every instruction of every function body. `extraFd` maps further 0xfd sub-opcodes to
 * immediate readers (null: none) for a caller that expects one the table leaves unknown.
 * Returns the number of function bodies.
 */
export function walkCode(bytes, visit, extraFd = new Map()) {
  const top = new Reader(bytes, 0, bytes.length);
  const magic = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
  for (const m of magic) if (top.byte() !== m) top.fail('not a wasm module (version 1)', 0);
  let bodies = 0;
  while (top.pos < top.end) {
    const id = top.byte();
    const size = top.u32();
    const start = top.pos;
    top.skip(size);
    if (id !== 10) continue; // only the code section holds instructions
    const sec = new Reader(bytes, start, start + size);
    const count = sec.u32();
    for (let f = 0; f < count; f++) {
      const bodySize = sec.u32();
      const r = new Reader(bytes, sec.pos, sec.pos + bodySize);
      sec.skip(bodySize);
      const groups = r.u32();
      for (let g = 0; g < groups; g++) { r.u32(); r.skip(1); } // locals: count, valtype
      while (r.pos < r.end) {
        const at = r.pos;
        const first = r.byte();
        const table = PREFIXED.get(first);
        let op = first, prefix = 0, imm;
        if (table) {
          prefix = first;
          op = r.u32();
          imm = table.get(op);
          if (imm === undefined && prefix === 0xfd) imm = extraFd.get(op);
          if (imm === undefined) r.fail(`unknown opcode 0x${first.toString(16)} ${op} (0x${op.toString(16)}) in function body ${f}`, at);
        } else {
          imm = MVP.get(op);
          if (imm === undefined) r.fail(`unknown opcode 0x${op.toString(16)} in function body ${f}`, at);
        }
        const opEnd = r.pos;
        if (imm) imm(r);
        visit({ prefix, op, at, opEnd });
      }
      if (bytes[r.end - 1] !== 0x0b) r.fail(`function body ${f} does not end with 'end'`, r.end - 1);
      bodies++;
    }
    if (sec.pos !== sec.end) sec.fail('code section size mismatch');
  }
  return bodies;
}

/** Counts instructions by "prefix:op" key (prefix 0 for single-byte opcodes). */
export function countOps(bytes, extraFd) {
  const counts = new Map();
  walkCode(bytes, ({ prefix, op }) => {
    const key = `${prefix}:${op}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }, extraFd);
  return counts;
}
