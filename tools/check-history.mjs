// No history in the tree: docs, comments, test names and scripts describe what the code does and
// why, not the order it was written in. This check fails on a tracked text file that names the
// project's own issues or work sessions by number ("issue N asks 1.1x", "session N's build"),
// a numbered stage of the work, or a work branch by its session label ("branch sNN-name").
// The examples each pattern must and must not match are in tests/js/check-history.test.js.
// The test pipeline's stages ("stage 05") are names, not history, and are not matched; another
// project's issue is cited with its name and `#` ("onnxruntime issue #425") and is allowed.
// A legitimate match goes in ALLOWED below (path and the matched text).
// Run by tools/lint.sh (stage 05): node tools/check-history.mjs
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const PATTERNS = [
  // "issue N", "issues N and M", "Issue N's": the project's own numbered issues (another
  // project's is written "<name> issue #N" and not matched)
  /\bissues? (?!#)\d+/i,
  // "session N", "sessions N-M": the work sessions
  /\bsessions? #?\d+/i,
  // "stage N of the work", "work stage N"
  /\bstage \d+ of (?:the|this) (?:work|project)\b|\bwork stage \d+/i,
  // a work branch named by its session: "branch sNN-name", "sNN-name's"
  /\b(?:branch )?s\d{2}-[a-z][a-z0-9]{2,}\b/,
];

// Matches that are not history: [path, matched text, why].
const ALLOWED = [
  // the check's own test: the examples it must catch
  ['tests/js/check-history.test.js', '', 'examples'],
];

// Files that are not the project's own text.
const SKIP = [/^package-lock\.json$/, /\.(png|jpe?g|gif|ico|wasm|safetensors|onnx|bin|gz|woff2?)$/i];

/** The history references in one line of text: the matched strings, none if the line is clean. */
export function historyReferences(line) {
  return PATTERNS.map((re) => re.exec(line)?.[0]).filter((m) => m !== undefined);
}

function main() {
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' }).split('\0').filter(Boolean);
  const problems = [];
  for (const file of files) {
    if (SKIP.some((re) => re.test(file))) continue;
    let text;
    try { text = readFileSync(join(ROOT, file), 'utf8'); } catch { continue; } // a submodule, a removed file
    if (text.includes('\0')) continue; // binary
    text.split('\n').forEach((line, i) => {
      for (const m of historyReferences(line)) {
        if (ALLOWED.some(([path, match]) => path === file && m.toLowerCase().startsWith(match.toLowerCase()))) continue;
        problems.push(`${file}:${i + 1}: "${m}": ${line.trim().slice(0, 160)}`);
      }
    });
  }
  if (problems.length) {
    console.error(`check-history: ${problems.length} reference(s) to the project's history (describe what the code does instead):`);
    for (const p of problems) console.error(`  ${p}`);
    process.exit(1);
  }
  console.log(`check-history: ${files.length} tracked files name no issue, session or work stage by number`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
