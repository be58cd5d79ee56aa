// npm run bench:report: writes the benchmark tables of docs/benchmarks.md and the README's
// headline table from the result files under bench/results/.
//   node tools/bench-report.mjs           rewrite every block between its marker comments
//   node tools/bench-report.mjs --check   change nothing; exit 1 if a committed block differs
//                                         from what would be written (test stage 05)
// A block is `<!-- bench:report NAME -->` ... `<!-- /bench:report -->` in a Markdown file; NAME
// is a table of tools/bench-report/tables.mjs: the result files it reads, its columns, and how
// each cell is formatted. Every table ends with a line naming its files, their dates (UTC), the
// machine and its load average as the files record them.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tables } from './bench-report/tables.mjs';
import { source } from './bench-report/results.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DOCS = ['README.md', 'docs/benchmarks.md', 'docs/residual.md', 'docs/gguf.md', 'docs/encoders.md'];
const check = process.argv.includes('--check');

// One table as Markdown: header, separator, rows, then the sources line (if the table has one).
function render(name) {
  const table = tables[name];
  if (!table) throw new Error(`bench-report: no table named "${name}" (tools/bench-report/tables.mjs)`);
  const { columns, rows, files } = table.build();
  const line = (cells) => `| ${cells.join(' | ')} |`;
  const out = [line(columns), line(columns.map(() => '---')), ...rows.map(line)];
  if (table.caption) out.push('', table.caption(files));
  else if (files.length) out.push('', `<sub>${source(files)}</sub>`);
  return out.join('\n');
}

const BLOCK = /(<!-- bench:report ([\w-]+) -->\n)([\s\S]*?)(<!-- \/bench:report -->)/g;
const stale = [];
const used = new Set();
for (const doc of DOCS) {
  const path = join(ROOT, doc);
  const text = readFileSync(path, 'utf8');
  const next = text.replace(BLOCK, (_, open, name, _body, close) => {
    used.add(name);
    return `${open}${render(name)}\n${close}`;
  });
  if (next === text) continue;
  if (check) stale.push(doc);
  else { writeFileSync(path, next); console.log(`bench-report: wrote ${doc}`); }
}
const unused = Object.keys(tables).filter((n) => !used.has(n));
if (unused.length) {
  console.error(`bench-report: tables with no marker in ${DOCS.join(' or ')}: ${unused.join(', ')}`);
  process.exit(1);
}
if (stale.length) {
  console.error(`bench-report: ${stale.join(', ')} differ from bench/results/: run \`npm run bench:report\``);
  process.exit(1);
}
console.log(`bench-report: ${used.size} tables ${check ? 'match bench/results/' : 'up to date'}`);
