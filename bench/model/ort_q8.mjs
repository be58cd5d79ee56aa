// GPT-2's onnxruntime-web q8 peer, made from its F32 export by bench/onnx_q8.py with the options
// that give what transformers.js ships as q8 for it: weights per tensor, +-127, Gemm (GPT-2's
// Conv1D) as MatMul + Add, the embedding Gathers int8; `--names weight` keeps the tensor names
// (and so the files) of the q8 graphs written before. Shared by gpt2_small.mjs and int8_accuracy.mjs.
import { execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const OPTIONS = ['--per-tensor', '--no-reduce-range', '--gemm', '--gather', '--names', 'weight'];

/** Writes `q8` from the F32 graph `f32` unless it exists and is newer. */
export function ensureGpt2Q8(f32, q8) {
  if (existsSync(q8) && statSync(q8).mtimeMs >= statSync(f32).mtimeMs) return;
  execFileSync('/usr/bin/python3', [path.join(ROOT, 'bench/onnx_q8.py'), f32, q8, ...OPTIONS], { stdio: 'inherit' });
}
