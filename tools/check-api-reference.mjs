// The API reference (npm run docs -> build/api/) against the package's own declarations, read
// with the TypeScript compiler from the entry point (web/lib/index.ts), independently of TypeDoc:
//   - every export has its page (classes/, interfaces/, types/, functions/, variables/);
//   - every property of every exported interface (inherited ones too: FlowAsyncOptions lists
//     FlowOptions') and every public member of every exported class is on its page, so the
//     reference lists every option of every options interface.
// Run by tools/docs.sh: node tools/check-api-reference.mjs [DIR]   (default build/api)
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = resolve(ROOT, process.argv[2] ?? 'build/api');
const ENTRY = join(ROOT, 'web/lib/index.ts');

const config = ts.getParsedCommandLineOfConfigFile(join(ROOT, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
const program = ts.createProgram([ENTRY], { ...config.options, noEmit: true, incremental: false });
const checker = program.getTypeChecker();
const entry = checker.getSymbolAtLocation(program.getSourceFile(ENTRY));

const problems = [];
/** The page's member anchors (TypeDoc: the member's name, lower-cased). */
function anchors(page) {
  return new Set([...readFileSync(page, 'utf8').matchAll(/ id="([^"]+)"/g)].map((m) => m[1]));
}
/** Whether a member is left out of the reference on purpose (@internal, stripped from the .d.ts). */
const internal = (symbol) => symbol.getDeclarations()?.some((d) => ts.getJSDocTags(d).some((t) => t.tagName.text === 'internal')) ?? false;

let pages = 0, members = 0;
for (const exported of checker.getExportsOfModule(entry)) {
  const name = exported.getName();
  const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
  const f = symbol.flags;
  const folder = f & ts.SymbolFlags.Class ? 'classes' : f & ts.SymbolFlags.Interface ? 'interfaces'
    : f & ts.SymbolFlags.TypeAlias ? 'types' : f & ts.SymbolFlags.Function ? 'functions' : f & ts.SymbolFlags.Variable ? 'variables' : null;
  if (folder === null) {
    problems.push(`${name}: an export of a kind this check does not know (flags ${f})`);
    continue;
  }
  const page = join(OUT, folder, `${name}.html`);
  if (!existsSync(page)) {
    problems.push(`${name}: no page ${folder}/${name}.html`);
    continue;
  }
  pages++;
  if (folder !== 'interfaces' && folder !== 'classes') continue;
  const type = folder === 'classes' ? checker.getDeclaredTypeOfSymbol(symbol) : checker.getDeclaredTypeOfSymbol(symbol);
  const ids = anchors(page);
  for (const p of checker.getPropertiesOfType(type)) {
    const member = p.getName();
    if (member.startsWith('#') || member.startsWith('__@') || internal(p)) continue;
    const decl = p.getDeclarations()?.[0];
    // members a class inherits from the standard library (Error's stack, message) are TypeDoc's to show or not
    if (decl && program.isSourceFileDefaultLibrary(decl.getSourceFile())) continue;
    if (decl && ts.getCombinedModifierFlags(decl) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) continue;
    members++;
    if (!ids.has(member.toLowerCase())) problems.push(`${name}.${member}: not on ${folder}/${name}.html`);
  }
}

if (problems.length > 0) {
  console.error(`check-api-reference: ${problems.length} problem(s) in ${OUT}:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(`check-api-reference: ${pages} exports have their pages; ${members} members of the interfaces and classes are listed`);
