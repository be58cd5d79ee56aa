// The explorer's raw / rollout / flow toggle as a person uses it (what demo-explorer-tests.test.js
// checks on the model page and demo-encoder-explorer.test.js on the encoders page, each with its
// own selectors): flow chosen and Cancel clicked at once goes back to raw maps and says so; the
// enlarged map under rollout and flow is qkv's attentionRolloutSync / attentionFlowSync of the
// model's own maps, cell by cell; the choice is in the URL and a reload comes back to it.
import assert from 'node:assert/strict';
import * as qkv from 'qkv';

/**
 * page: the page open on the model view, its enlarged map showing the last layer.
 * attentions: the model's maps of the shown text (qkv forward, outputAttentions: true).
 * shape: { layers, heads }. causal: a causal model's cells above the diagonal read "masked".
 * ids: { select, note, msg }: the map toggle (<select>), the note under it, the message box
 * where the cancelled flow is said.
 */
export async function assertMapModes(page, { attentions, shape, causal, ids }) {
  const L = attentions[0].shape.at(-1);
  // flow chosen, then Cancel at once (one task): the page says so and goes back to raw maps
  await page.evaluate((sel) => {
    const s = document.querySelector(sel);
    s.value = 'flow'; s.dispatchEvent(new Event('change'));
    document.querySelector('#fwd-cancel').click();
  }, ids.select);
  await page.waitForFunction((sel) => document.querySelector(sel).value === 'raw', ids.select);
  assert.equal(await page.textContent(ids.msg), 'Cancelled: the flow was not computed; the maps are raw attention.');
  assert.equal(await page.locator('#thumbs button.thumb').count(), shape.layers * shape.heads, 'raw: every head');

  // the enlarged map's cells, as their tooltips print them ("q → k: 0.1234", or "masked")
  const cells = () => page.$$eval('#heatmap g.cell title', (ts) => ts.map((t) => t.textContent.split(': ').at(-1)));
  const assertCells = async (mode, want) => {
    const got = await cells();
    assert.equal(got.length, L * L, `${mode}: one cell per query and key`);
    let diff = 0;
    got.forEach((text, c) => {
      const i = Math.floor(c / L), j = c % L;
      // masked exactly where a causal model's query cannot see the key, and qkv's value there is 0
      assert.equal(text === 'masked', causal && j > i, `${mode}: cell ${i} → ${j} reads "${text}"`);
      if (text === 'masked') assert.equal(want.data[c], 0, `${mode}: qkv's ${i} → ${j} under a masked cell`);
      else diff = Math.max(diff, Math.abs(Number(text) - want.data[c]));
    });
    assert.ok(diff <= 6e-5, `${mode}: largest difference from qkv ${diff}`);
  };
  const want = { rollout: qkv.attentionRolloutSync(attentions), flow: qkv.attentionFlowSync(attentions) };
  const noted = (mode) => page.waitForFunction(([sel, start]) => document.querySelector(sel).textContent.startsWith(start),
    [ids.note, mode === 'flow' ? 'Flow (' : 'Rollout ('], { timeout: 30_000 });
  for (const mode of ['rollout', 'flow']) {
    await page.selectOption(ids.select, mode);
    await noted(mode);
    assert.equal(await page.locator('#thumbs button.thumb').count(), shape.layers, `${mode}: one map per layer`);
    await assertCells(mode, want[mode]);
  }

  // in the URL: a reload shows the flow again, the same cells
  assert.match(page.url(), /map=flow/);
  await page.reload();
  await page.waitForSelector('body[data-ready=true]', { timeout: 60_000 });
  await noted('flow');
  assert.equal(await page.inputValue(ids.select), 'flow');
  await assertCells('flow after the reload', want.flow);
}
