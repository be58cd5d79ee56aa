// tools/bench-report.mjs (npm run bench:report): every table it writes is whole and well formed,
// from the result files under bench/results/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tables } from '../../tools/bench-report/tables.mjs';
import { median, range, when, result } from '../../tools/bench-report/results.mjs';

test('bench-report: every table has a cell per column, no NaN or undefined, and names its files', () => {
  for (const [name, table] of Object.entries(tables)) {
    const { columns, rows, files } = table.build();
    assert.ok(rows.length > 0, `${name}: no rows`);
    assert.ok(files.length > 0, `${name}: no source files`);
    for (const row of rows) {
      assert.equal(row.length, columns.length, `${name}: ${JSON.stringify(row)}`);
      for (const cell of row) assert.doesNotMatch(String(cell), /NaN|undefined|Infinity/, `${name}: ${JSON.stringify(row)}`);
    }
    for (const f of files) assert.ok(!Number.isNaN(f.date.getTime()), `${name}: ${f.name} has no date`);
  }
});

test('bench-report: the README headline is at most 10 rows of short cells, its caption names machines and dates', () => {
  const { columns, rows, files } = tables.headline.build();
  assert.deepEqual(columns.length, 4);
  assert.ok(rows.length <= 10, `${rows.length} rows`);
  for (const row of rows) for (const cell of row) assert.ok(String(cell).length <= 70, cell);
  const caption = tables.headline.caption(files);
  assert.match(caption, /Intel Xeon.*2026-\d\d-\d\d.*AMD EPYC.*2026-\d\d-\d\d/);
});

test('bench-report: median, range and the run dates', () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.equal(range([1.04, 1.18, 0.98], (x) => x.toFixed(2)), '0.98-1.18');
  assert.equal(range([2, 2]), '2.0');
  assert.equal(when([result('js-node.json')]), '2026-12-01 12:53 UTC');
});
