#!/usr/bin/env node
// Rewrites LLVM 14's pre-standard f32x4 fma (0xfd 0xaf 0x01, from __builtin_wasm_fma_f32x4)
// to the final f32x4.relaxed_madd (0xfd 0x85 0x02), in place, after the link. Both compute
// a * b + c from the operands in the order pushed; only the number changed. Instructions are
// decoded (wasm-code.mjs), so bytes inside immediates (`i32.const 22525` = 41 fd af 01) are
// never touched, and an opcode the decoder does not know stops the build.
// Also rewrites the stand-in the 4-bit kernel uses for the relaxed int8 dot (src/matmul/gemv_q4.cpp:
// LLVM 14 cannot emit it): the pre-standard f64x2 fma (0xfd 0xcf 0x01, __builtin_wasm_fma_f64x2,
// which nothing else calls) -> i32x4.relaxed_dot_i8x16_i7x16_add_s (0xfd 0x93 0x02), the same
// three operands in the same order.
//
//   node tools/wasm/relax-fma.mjs <file.wasm>...    prints how many it rewrote per file
import { readFileSync, writeFileSync, renameSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import {
  walkCode, FD_LLVM14_FMA_F32X4, FD_RELAXED_MADD_F32X4, FD_LLVM14_FMA_F64X2, FD_RELAXED_DOT_I8X16_I7X16_ADD_S,
} from './wasm-code.mjs';

/**
 * Rewrites every 0xfd-prefixed instruction with sub-opcode `from` in `bytes` (a Uint8Array,
 * changed in place) to sub-opcode `to`, re-encoding the LEB in the same number of bytes, so no
 * offset or size in the module moves; returns the count. `alsoKnown`: further unassigned
 * sub-opcodes the module may hold (without immediates), so that the walk can pass them. Also
 * serves the relaxed int8 dot's probe (bench/matmul/relaxed_dot_q4.mjs).
 */
export function rewriteFdOpcode(bytes, from, to, alsoKnown = []) {
  const sites = [];
  walkCode(bytes, ({ prefix, op, at, opEnd }) => {
    if (prefix === 0xfd && op === from) sites.push({ at, opEnd });
  }, new Map([from, ...alsoKnown].map((op) => [op, null])));
  const need = to < 0x80 ? 1 : to < 0x4000 ? 2 : 3;
  for (const { at, opEnd } of sites) {
    // a padded encoding of `from` keeps its length (0xaf -> 0x105 needs 2 bytes, as 0xaf has)
    const len = opEnd - at - 1;
    if (len < need) throw new Error(`relax-fma: sub-opcode 0x${from.toString(16)} at offset ${at} is ${len} byte(s); 0x${to.toString(16)} needs ${need}`);
    let v = to;
    for (let i = 0; i < len; i++) {
      bytes[at + 1 + i] = (v & 0x7f) | (i < len - 1 ? 0x80 : 0);
      v >>>= 7;
    }
  }
  return sites.length;
}

/** Rewrites the pre-standard fma in `bytes` (a Uint8Array, changed in place); returns the count. */
export function rewriteFma(bytes) {
  return rewriteFdOpcode(bytes, FD_LLVM14_FMA_F32X4, FD_RELAXED_MADD_F32X4, [FD_LLVM14_FMA_F64X2]);
}

/** Rewrites the relaxed int8 dot's stand-in in `bytes` (changed in place); returns the count. */
export function rewriteDot(bytes) {
  return rewriteFdOpcode(bytes, FD_LLVM14_FMA_F64X2, FD_RELAXED_DOT_I8X16_I7X16_ADD_S, [FD_LLVM14_FMA_F32X4]);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error('usage: node tools/wasm/relax-fma.mjs <file.wasm>...');
    process.exit(2);
  }
  for (const file of files) {
    const bytes = new Uint8Array(readFileSync(file));
    const dots = rewriteDot(bytes);
    const n = rewriteFma(bytes);
    if (n + dots > 0) {
      writeFileSync(file + '.tmp', bytes);
      renameSync(file + '.tmp', file);
    }
    console.log(`relax-fma: ${file}: ${n} f32x4 fma -> f32x4.relaxed_madd, ${dots} f64x2 fma -> i32x4.relaxed_dot_i8x16_i7x16_add_s`);
  }
}
