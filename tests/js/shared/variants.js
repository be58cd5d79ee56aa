// The wasm variants the Node tests loop over, and whether this engine can run each: the two
// relaxed-SIMD builds need relaxed SIMD (Node 22+, or Node 20 with
// --experimental-wasm-relaxed-simd, which stage 30 passes); elsewhere their tests are skipped,
// saying why.
import { relaxedSimdSupported } from '../../../dist/wasm/loader.js';

export const VARIANTS = ['scalar', 'simd', 'simd-threads', 'simd-relaxed', 'simd-relaxed-threads'];

/** false when `variant` runs here, else the reason to skip (for node:test's `skip`). */
export function unsupported(variant) {
  if (variant.startsWith('simd-relaxed') && !relaxedSimdSupported()) {
    return 'this engine lacks relaxed SIMD (Node 20: run with --experimental-wasm-relaxed-simd)';
  }
  return false;
}

export const threaded = (variant) => variant.endsWith('-threads');
