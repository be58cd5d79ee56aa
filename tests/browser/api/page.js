// Runs the shared API checks in the page (served from the repository root) and leaves the
// result in window.__qkvResult for tests/browser/api.test.js. Query: ?variant=&fuzz=<calls>.
import * as qkv from '/dist/index.js';
import { loadCases, runCases } from '/tests/js/shared/cases.js';
import { checkInvalidCalls } from '/tests/js/shared/invalid.js';
import { fuzz } from '/tests/js/shared/fuzz.js';
import { relaxedSimdSupported } from '/dist/wasm/loader.js';

const params = new URLSearchParams(location.search);
const log = document.getElementById('log');

async function main() {
  if (params.get('variant')) qkv.env.variant = params.get('variant');
  const loaded = await qkv.init();
  const cases = await loadCases(async (p) => (await fetch(`/tests/data/sdpa/${p}`)).json());
  const asyncResults = await runCases(qkv, cases);
  const syncResults = await runCases(qkv, cases, { sync: true });
  const invalid = await checkInvalidCalls(qkv);
  qkv.env.variant = params.get('variant') || 'auto';
  const fuzzCalls = Number(params.get('fuzz') || 0);
  const fz = fuzzCalls ? await fuzz(qkv, { calls: fuzzCalls, seed: 3, warmup: 200 }) : null;
  return {
    crossOriginIsolated: self.crossOriginIsolated === true,
    relaxedSimd: relaxedSimdSupported(),
    loaded,
    cases: asyncResults.length,
    syncCases: syncResults.length,
    failures: [...asyncResults, ...syncResults].filter((r) => !r.ok),
    invalid,
    fuzz: fz && { calls: fz.calls, valid: fz.valid, invalid: fz.invalid, problems: fz.problems, before: fz.before, after: fz.after },
  };
}

main().then(
  (r) => { window.__qkvResult = r; log.textContent = JSON.stringify(r, null, 1); },
  (e) => { window.__qkvResult = { error: `${e?.name}: ${e?.message}\n${e?.stack}` }; log.textContent = String(e); },
);
