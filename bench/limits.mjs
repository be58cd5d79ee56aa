// This machine's wasm limits, measured beside a benchmark's figures: the f32x4 mul+add peak and
// one thread's read bandwidth (bench/matmul/bench_matmul.cpp's `limits` mode prints them as a
// `LIMITS {...}` line). The benchmarks write the object into their JSON as `machine`.
import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Builds bench/matmul when needed (build: true) and runs its limits probe with `threads` threads.
 * who: the benchmark's name, for the message. required: throw when the probe fails; otherwise
 * say so on stderr and return null.
 */
export function machineLimits({ who, threads = 1, build = true, required = true }) {
  try {
    if (build) execFileSync('bash', [path.join(ROOT, 'bench/matmul/run.sh'), '--build-only'], { stdio: 'inherit' });
    const bin = threads > 1 ? 'bench-threads.cjs' : 'bench-simd.cjs';
    const r = spawnSync(process.execPath, [path.join(ROOT, 'build/bench-matmul', bin), String(threads), '-', 'limits'], { encoding: 'utf8' });
    const line = (r.stdout ?? '').split('\n').find((l) => l.startsWith('LIMITS '));
    if (!line) throw new Error(`the limits probe printed no LIMITS line:\n${r.stdout}${r.stderr}`);
    return JSON.parse(line.slice(7));
  } catch (e) {
    if (required) throw new Error(`${who}: the machine's limits could not be measured: ${e.message}`);
    process.stderr.write(`${who}: no machine limits (${e.message})\n`);
    return null;
  }
}
