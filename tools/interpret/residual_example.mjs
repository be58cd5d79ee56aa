// The worked example of docs/residual.md, on the tiny GPT (web/models/tiny-kjv-bpe): a clean and a
// corrupted prompt of the same length, the patching sweeps over heads and over resid_pre, the
// direct logit attribution of the answer, and the logit lens on a verse. Prints the markdown and,
// with --write, puts it into docs/residual.md between its example markers, so the page's numbers
// are this script's output, not typed by hand.
//
//   npm run build && node tools/interpret/residual_example.mjs [--write]
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const qkv = await import(pathToFileURL(path.join(ROOT, 'dist', 'index.js')).href);
qkv.env.variant = 'simd';
const model = await qkv.loadModel(path.join(ROOT, 'web', 'models', 'tiny-kjv-bpe'));
const tok = model.tokenizer;
const show = (id) => JSON.stringify(tok.decode([id]));
const out = [];
const p = (s = '') => out.push(s);
const f = (x, n = 3) => x.toFixed(n);

// ---- clean and corrupted: the same length, one word changed ----------------------------------
const clean = tok.encode('And the LORD spake unto Moses, saying, Speak unto the children of');
const corrupted = tok.encode('And the LORD spake unto Aaron, saying, Speak unto the children of');
if (clean.length !== corrupted.length) throw new Error('residual_example: the prompts tokenize to different lengths');
const top = async (ids) => {
  const l = (await model.forward(ids, { logits: 'last' })).logits.data;
  let best = 0;
  for (let v = 1; v < l.length; v++) if (l[v] > l[best]) best = v;
  return best;
};
const correct = await top(clean);
let wrong = await top(corrupted);
if (wrong === correct) {
  // the corruption keeps the top token: the wrong answer is the one it raises most against it
  const a = (await model.forward(clean, { logits: 'last' })).logits.data;
  const b = (await model.forward(corrupted, { logits: 'last' })).logits.data;
  wrong = -1;
  for (let v = 0; v < a.length; v++) if (v !== correct && (wrong < 0 || b[v] - a[v] > b[wrong] - a[wrong])) wrong = v;
}
const diff = clean.findIndex((id, i) => id !== corrupted[i]);
p(`Clean: \`${tok.decode(clean)}\`; corrupted: \`${tok.decode(corrupted)}\` (${clean.length} tokens, position ${diff} differs: ${show(clean[diff])} / ${show(corrupted[diff])}). ` +
  `Answer: correct ${show(correct)} (id ${correct}), wrong ${show(wrong)} (id ${wrong}).`);
p();
const heads = await qkv.activationPatching(model, { clean, corrupted, answer: [correct, wrong], over: 'heads' });
p(`m(clean) = ${f(heads.cleanMetric)}, m(corrupted) = ${f(heads.corruptedMetric)}. \`activationPatching(..., { over: 'heads' })\` (1 = the head's clean output restores the clean metric):`);
p();
const [NL, H] = heads.shape;
p(`| layer | ${Array.from({ length: H }, (_, h) => `head ${h}`).join(' | ')} |`);
p(`|---|${'---|'.repeat(H)}`);
for (let l = 0; l < NL; l++) p(`| ${l} | ${Array.from({ length: H }, (_, h) => f(heads.values[l * H + h], 2)).join(' | ')} |`);
p();
const ranked = Array.from(heads.values.keys()).sort((a, b) => Math.abs(heads.values[b]) - Math.abs(heads.values[a])).slice(0, 3);
p(`The heads that matter most: ${ranked.map((i) => `L${Math.floor(i / H)}H${i % H} (${f(heads.values[i], 2)})`).join(', ')}.`);
p();
const resid = await qkv.activationPatching(model, { clean, corrupted, answer: [correct, wrong], over: 'residPre' });
const T = clean.length;
p(`\`over: 'residPre'\` at the changed position ${diff} and at the last position ${T - 1}, by layer (the information moves from the one to the other):`);
p();
p('| layer | position ' + diff + ' | position ' + (T - 1) + ' |');
p('|---|---|---|');
for (let l = 0; l < NL; l++) p(`| ${l} | ${f(resid.values[l * T + diff], 2)} | ${f(resid.values[l * T + T - 1], 2)} |`);
p();

// ---- direct logit attribution of the answer ----------------------------------------------------
const attr = await qkv.logitAttribution(model, clean, { tokens: [correct, wrong] });
const sum = attr.parts.reduce((s, q) => s + q.value, 0);
const big = [...attr.parts].sort((a, b) => Math.abs(b.value) - Math.abs(a.value)).slice(0, 5);
p(`\`logitAttribution(model, clean, { tokens: [correct, wrong] })\`: total ${f(attr.total, 4)} (the parts sum to ${f(sum, 4)}); the largest parts: ` +
  big.map((q) => `\`${q.name}\` ${f(q.value, 3)}`).join(', ') + '.');
p();

// ---- the lens on a verse -----------------------------------------------------------------------
const verse = tok.encode('In the beginning God created the heaven and the earth.');
const lens = await qkv.logitLens(model, verse, { topK: 1, target: [...verse.slice(1), verse[0]] });
p(`\`logitLens\` on \`${tok.decode(verse)}\`: each cell the lens's top token and, in brackets, the probability it gives the verse's next token (the last column has none):`);
p();
p(`| layer | ${verse.map((id) => `\`${tok.decode([id]).trim() || '·'}\``).join(' | ')} |`);
p(`|---|${'---|'.repeat(verse.length)}`);
lens.layers.forEach((row, l) => {
  const name = l === lens.numLayers ? 'out' : `${l}`;
  p(`| ${name} | ${row.map((c, t) => `${JSON.stringify(c.top[0].token).slice(1, -1).trim().replaceAll('|', '\\|') || '·'}${t < verse.length - 1 ? ` (${f(c.targetP, 2)})` : ''}`).join(' | ')} |`);
});
p();
const kl = lens.layers.map((row) => row.reduce((s, c) => s + c.kl, 0) / row.length);
p(`Mean KL(final || layer) over the positions, nats: ${kl.map((k, l) => `${l === lens.numLayers ? 'out' : l}: ${f(k, 2)}`).join(', ')}.`);

const md = out.join('\n');
console.log(md);
if (process.argv.includes('--write')) {
  const doc = path.join(ROOT, 'docs', 'residual.md');
  const text = readFileSync(doc, 'utf8');
  const begin = '<!-- residual-example:begin (tools/interpret/residual_example.mjs --write) -->';
  const end = '<!-- residual-example:end -->';
  const i = text.indexOf(begin);
  const j = text.indexOf(end);
  if (i < 0 || j < i) throw new Error('residual_example: docs/residual.md lacks the example markers');
  writeFileSync(doc, text.slice(0, i + begin.length) + '\n' + md + '\n' + text.slice(j));
  console.error('wrote docs/residual.md');
}
model.dispose();
