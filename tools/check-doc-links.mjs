// The relative links of README.md and docs/*.md resolve: every [text](path) and ![alt](path)
// that is not a URL names a file or folder of the repository, and every #anchor names a
// heading of the Markdown file it points into (GitHub's anchors: lower case, punctuation
// dropped, spaces to hyphens, "-1", "-2" for repeats). Code spans and fenced blocks are skipped.
// Run by tools/lint.sh (stage 05): node tools/check-doc-links.mjs
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const files = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

// The text of a file outside fenced code blocks, one entry per line (fenced lines blanked).
function proseLines(text) {
  let fence = null;
  return text.split('\n').map((line) => {
    const m = /^\s*(`{3,}|~{3,})/.exec(line);
    if (m && (fence === null || m[1][0] === fence[0])) {
      fence = fence === null ? m[1] : null;
      return '';
    }
    return fence === null ? line : '';
  });
}

function slug(heading) {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // links and images: their text
    .replace(/<[^>]+>/g, '') // inline HTML tags
    .replace(/[`*_~]/g, '');
  return text.trim().toLowerCase().replace(/[^\p{L}\p{N}\s-]/gu, '').replace(/\s/g, '-');
}

const anchorsCache = new Map();
function anchors(file) {
  if (!anchorsCache.has(file)) {
    const seen = new Map(), set = new Set();
    for (const line of proseLines(readFileSync(file, 'utf8'))) {
      const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
      if (!m) continue;
      const base = slug(m[1]), n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      set.add(n === 0 ? base : `${base}-${n}`);
    }
    anchorsCache.set(file, set);
  }
  return anchorsCache.get(file);
}

const problems = [];
let checked = 0;
for (const file of files) {
  const path = join(ROOT, file);
  proseLines(readFileSync(path, 'utf8')).forEach((line, i) => {
    const prose = line.replace(/`[^`]*`/g, (s) => ' '.repeat(s.length)); // code spans are not links
    for (const m of prose.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, ...
      checked++;
      const where = `${file}:${i + 1}: ${m[0]}`;
      const [pathPart, anchor] = target.split('#');
      const dest = pathPart === '' ? path : resolve(dirname(path), decodeURIComponent(pathPart));
      if (!dest.startsWith(ROOT) || !existsSync(dest)) {
        problems.push(`${where}: ${relative(ROOT, dest) || pathPart} does not exist`);
        continue;
      }
      if (anchor !== undefined) {
        if (statSync(dest).isDirectory() || !dest.endsWith('.md')) {
          problems.push(`${where}: an anchor into ${relative(ROOT, dest)}, which is not a Markdown file`);
        } else if (!anchors(dest).has(anchor)) {
          problems.push(`${where}: ${relative(ROOT, dest)} has no heading with the anchor #${anchor}`);
        }
      }
    }
  });
}
if (problems.length > 0) {
  console.error(`doc links: ${problems.length} broken\n${problems.join('\n')}`);
  process.exit(1);
}
console.log(`doc links: ${checked} relative links in ${files.length} files resolve`);
