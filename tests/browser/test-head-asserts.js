// The test-a-head panel's printed result against the API's: the top-5 tokens and probabilities
// before and after, the KL and the two losses (what demo-explorer-tests.test.js and
// demo-encoder-explorer.test.js both read off the page).
import assert from 'node:assert/strict';

/** shown: { rows: [[rank, token before, p before, token after, p after], ...], kl, lossBefore, lossAfter }. */
export function assertMatches(shown, want, what) {
  for (let i = 0; i < 5; i++) {
    const [, tb, pb, ta, pa] = shown.rows[i];
    assert.equal(tb, want.before[i][0], `${what}: before #${i + 1}`);
    assert.equal(ta, want.after[i][0], `${what}: after #${i + 1}`);
    assert.ok(Math.abs(Number(pb) - want.before[i][1]) <= 6e-4, `${what}: before p #${i + 1} ${pb} vs ${want.before[i][1]}`);
    assert.ok(Math.abs(Number(pa) - want.after[i][1]) <= 6e-4, `${what}: after p #${i + 1} ${pa} vs ${want.after[i][1]}`);
  }
  assert.ok(Math.abs(shown.kl - want.kl) <= 1e-4 + 1e-3 * want.kl, `${what}: KL ${shown.kl} vs ${want.kl}`);
  assert.ok(Math.abs(shown.lossBefore - want.lossBefore) <= 6e-4, `${what}: loss before ${shown.lossBefore} vs ${want.lossBefore}`);
  assert.ok(Math.abs(shown.lossAfter - want.lossAfter) <= 6e-4, `${what}: loss after ${shown.lossAfter} vs ${want.lossAfter}`);
}
