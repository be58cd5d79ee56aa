// The demo's word view (web/demo/src/words.ts; run by stage 50 with the other model tests):
// tokens grouped into GPT-2 pre-tokenizer pieces for byte-level and BPE tokenizers alike, and
// merged attention rows that still sum to 1.
// words.ts has no runtime imports, so it is transpiled here with TypeScript and imported.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';

import { DATA, ROOT, api } from './model-helpers.js';

const qkv = await api();
const tmp = mkdtempSync(path.join(tmpdir(), 'qkv-words-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

const src = readFileSync(path.join(ROOT, 'web/demo/src/words.ts'), 'utf8');
const js = ts.transpileModule(src, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
writeFileSync(path.join(tmp, 'words.mjs'), js);
const W = await import(pathToFileURL(path.join(tmp, 'words.mjs')).href);

const utf8 = new TextEncoder();
const byteTokens = (text) => Array.from(utf8.encode(text), (b) => Uint8Array.of(b));
const bpeModels = ['tiny-kjv-bpe'].map((m) => path.join(ROOT, 'web/models', m));

/** Seeded causal softmax rows: rows[i] has i + 1 entries summing to 1. */
function randomRows(L, seed) {
  let s = seed >>> 0;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  return Array.from({ length: L }, (_v, i) => {
    const e = Float32Array.from({ length: i + 1 }, () => Math.exp(4 * rnd() - 2));
    const z = e.reduce((a, b) => a + b, 0);
    return e.map((x) => x / z);
  });
}

test('the word pattern is the library\'s GPT-2 pre-tokenizer', () => {
  assert.equal(W.WORD_PATTERN.source, qkv.GPT2_PATTERN.source);
  assert.equal(W.WORD_PATTERN.flags, qkv.GPT2_PATTERN.flags);
});

test('byte tokens group into GPT-2 pieces, multi-byte characters included', () => {
  const cases = [
    ['In the beginning God created', ['In', ' the', ' beginning', ' God', ' created']],
    ['1 In the beginning.\n2 And', ['1', ' In', ' the', ' beginning', '.', '\n', '2', ' And']],
    ["the LORD's  house, 3:16", ['the', ' LORD', "'s", ' ', ' house', ',', ' 3', ':', '16']],
    ['café, naïve 日本語 🙂!', ['café', ',', ' naïve', ' 日本語', ' 🙂!']],
  ];
  for (const [text, words] of cases) {
    const g = W.groupWords(byteTokens(text));
    assert.deepEqual(g.text, words, JSON.stringify(text));
    assert.equal(g.wordOf.length, utf8.encode(text).length);
    assert.equal(g.start.length, words.length + 1);
    // word w = tokens start[w] .. start[w+1]-1, in order
    g.wordOf.forEach((w, t) => assert.ok(g.start[w] <= t && t < g.start[w + 1]));
  }
  // an invalid byte does not throw and stays in some word
  const bad = W.groupWords([Uint8Array.of(0x61), Uint8Array.of(0xff), Uint8Array.of(0x62)]);
  assert.equal(bad.wordOf.length, 3);
  assert.equal(W.groupWords([]).text.length, 0);
});

test('BPE tokens: the words are exactly the pre-tokenizer pieces (random-gpt2 and the trained model, with its add_prefix_space)', async () => {
  const text = 'In the beginning God created the heaven and the earth.\n2 And the earth was without form, and void; café 🙂';
  for (const dir of [path.join(DATA, 'random-gpt2'), ...bpeModels]) {
    const tok = new qkv.BpeTokenizer(JSON.parse(readFileSync(path.join(dir, 'vocab.json'), 'utf8')), readFileSync(path.join(dir, 'merges.txt'), 'utf8'));
    const ids = tok.encode(text);
    const g = W.groupWords(ids.map((id) => tok.decodeBytes([id])));
    assert.deepEqual(g.text, tok.pieces(text), dir);
    // and the byte-level grouping of the same text gives the same words
    assert.deepEqual(W.groupWords(byteTokens(text)).text, g.text);
  }
  // the trained model as loadModel reads it: tokenizer_config.json's add_prefix_space puts a space
  // before the prompt, so its first word is a word like the others (" In", not "I" "n")
  for (const dir of bpeModels) {
    const model = await qkv.loadModel(dir);
    try {
      const tok = model.tokenizer;
      const g = W.groupWords(tok.encode(text).map((id) => tok.decodeBytes([id])));
      assert.deepEqual(g.text, tok.pieces(text));
      assert.deepEqual(g.text.slice(0, 3), [' In', ' the', ' beginning']);
      assert.deepEqual(g.start.slice(0, 4), [0, 1, 2, 3], 'one token per word');
      assert.deepEqual(W.groupWords(byteTokens(' ' + text)).text, g.text);
    } finally {
      model.dispose();
    }
  }
});

test('merged rows: sum over key words, mean over query words; every row sums to 1 and stays causal', () => {
  // a hand example: tokens a b | c ; words [a b] [c]
  const words = { wordOf: [0, 0, 1], start: [0, 2, 3], text: ['ab', 'c'] };
  const rows = [Float32Array.of(1), Float32Array.of(0.4, 0.6), Float32Array.of(0.2, 0.3, 0.5)];
  const m = W.mergeRows(rows, words);
  assert.deepEqual(Array.from(m[0]), [1, 0]);
  assert.ok(Math.abs(m[1][0] - 0.5) < 1e-7 && Math.abs(m[1][1] - 0.5) < 1e-7);

  const text = 'And God said, Let there be light: and there was light.\n4 And God saw the light, that it was good';
  for (const [name, tokens] of [['bytes', byteTokens(text)], ['pairs', Array.from({ length: Math.ceil(utf8.encode(text).length / 2) }, (_v, i) => utf8.encode(text).subarray(2 * i, 2 * i + 2))]]) {
    const g = W.groupWords(tokens);
    const L = tokens.length;
    const attn = [0, 1].map((l) => [0, 1, 2].map((h) => randomRows(L, 100 * l + h + 1)));
    const d = { tokens: tokens.map((t) => new TextDecoder().decode(t)), ids: Array.from({ length: L }, (_v, i) => i), promptLength: 10,
      nLayer: 2, nHead: 3, attn, headDim: 4, scale: 0.5 };
    const wd = W.wordData(d, g);
    const nW = g.text.length;
    assert.ok(nW < L, `${name}: fewer words (${nW}) than tokens (${L})`);
    assert.deepEqual(wd.tokens, g.text);
    assert.equal(wd.ids.length, nW);
    assert.equal(wd.promptLength, g.wordOf[9] + 1);
    for (const layer of wd.attn) for (const head of layer) {
      assert.equal(head.length, nW);
      head.forEach((r, a) => {
        const sum = r.reduce((x, y) => x + y, 0);
        assert.ok(Math.abs(sum - 1) < 1e-5, `${name}: word row ${a} sums to ${sum}`);
        for (let b = a + 1; b < nW; b++) assert.equal(r[b], 0, `${name}: word ${a} attends to a later word ${b}`);
      });
    }
    // a direct evaluation of the rule for one cell
    const [a, b] = [nW - 1, 1];
    let want = 0;
    for (let i = g.start[a]; i < g.start[a + 1]; i++) for (let j = g.start[b]; j < g.start[b + 1]; j++) want += attn[1][2][i][j] ?? 0;
    want /= g.start[a + 1] - g.start[a];
    assert.ok(Math.abs(wd.attn[1][2][a][b] - want) < 1e-6);
  }
  assert.throws(() => W.wordData({ tokens: ['a'], attn: [] }, W.groupWords(byteTokens('ab'))), /wordData: 2 tokens were grouped, the data has 1/);
});
