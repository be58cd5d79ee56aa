// No source file over 500 lines: every C++, TypeScript, JavaScript, Python, shell and WGSL file of
// the repository (git's tracked and untracked files less the ignored ones; without git, the tree
// less node_modules/, build/, dist/), generated files (*.generated.*) and data (JSON, tensors,
// text) left out. A longer file is split where a reader would name the seam.
// Run by tools/lint.sh (stage 05): node tools/check-file-length.mjs
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MAX_LINES = 500;
const SOURCE = /\.(c|cc|cpp|h|hpp|ts|tsx|js|mjs|cjs|py|sh|wgsl)$/;
const GENERATED = /\.generated\./;

function trackedFiles() {
  try {
    return execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
      .split('\0').filter(Boolean);
  } catch {
    const out = [];
    const walk = (dir) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        if (['node_modules', 'build', 'dist', '.git'].includes(e.name)) continue;
        const path = join(dir, e.name);
        if (e.isDirectory()) walk(path);
        else if (e.isFile()) out.push(relative(ROOT, path));
      }
    };
    walk(ROOT);
    return out;
  }
}

const lineCount = (text) => text.length === 0 ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0);

const files = trackedFiles().filter((f) => SOURCE.test(f) && !GENERATED.test(f));
const long = [];
for (const f of files) {
  let text;
  try {
    text = readFileSync(join(ROOT, f), 'utf8');
  } catch {
    continue; // listed by git but deleted in the work tree
  }
  const n = lineCount(text);
  if (n > MAX_LINES) long.push(`${f}: ${n} lines`);
}
if (long.length > 0) {
  console.error(`check-file-length: ${long.length} source file(s) over ${MAX_LINES} lines (split each where a reader would name the seam):\n  ${long.join('\n  ')}`);
  process.exit(1);
}
console.log(`check-file-length: ${files.length} source files, none over ${MAX_LINES} lines`);
