// The demo's default model, web/models/tiny-kjv-bpe: its GPT-2 BPE tokenizer (vocab.json +
// merges.txt learned by tools/model/bpe.py) loaded through loadModel encodes exactly as the
// training script did, and round-trips the held-out text line by line.
// Fixture: tests/data/model/tiny-kjv-bpe.json (tools/model/make_reference.py --only bpe).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { gunzipSync } from 'node:zlib';

import { DATA, api, manifest } from './model-helpers.js';

const qkv = await api();
const m = manifest('tiny-kjv-bpe.json');
let model;
before(async () => { model = await qkv.loadModel(path.join(DATA, m.model_dir)); });
after(() => model?.dispose());

const heldout = () => {
  const text = gunzipSync(readFileSync(path.join(DATA, m.heldout.file))).toString('utf8');
  assert.equal(createHash('sha256').update(text).digest('hex'), m.heldout.sha256, 'held-out text');
  return text;
};

test('loadModel reads the BPE files: a 3000-token GPT-2 tokenizer', () => {
  assert.equal(model.tokenizer.kind, 'bpe');
  assert.equal(model.tokenizer.vocabSize, model.config.vocab_size);
  assert.equal(model.config.vocab_size, m.config.vocab_size);
  // common words are single tokens
  for (const w of [' the', ' LORD', ' God', ' unto', ' Jesus', ' said', ' and']) {
    assert.equal(model.tokenizer.encode(w).length, 1, `${JSON.stringify(w)} is one token`);
  }
});

test('ids equal the training script\'s encoding: the fixture lines, and all of the held-out text (sha256)', () => {
  assert.ok(m.tokenizer_cases.length >= 20);
  for (const c of m.tokenizer_cases) {
    assert.deepEqual(model.tokenizer.encode(c.text), c.ids, JSON.stringify(c.text));
    assert.deepEqual(model.tokenizer.pieces(c.text), c.pieces);
    assert.equal(model.tokenizer.decode(c.ids), c.text);
  }
  const ids = model.tokenizer.encode(heldout());
  assert.equal(ids.length, m.heldout.n_ids);
  assert.equal(createHash('sha256').update(ids.join(',')).digest('hex'), m.heldout.ids_sha256);
});

test('every line of the held-out text round-trips: decode(encode(line)) === line', () => {
  const lines = heldout().split('\n');
  assert.equal(lines.length, m.heldout.lines);
  let tokens = 0, bytes = 0;
  for (const line of lines) {
    const ids = model.tokenizer.encode(line);
    assert.equal(model.tokenizer.decode(ids), line);
    tokens += ids.length;
    bytes += Buffer.byteLength(line);
  }
  // words, not letters: several bytes per token on average
  assert.ok(bytes / tokens > 3, `${(bytes / tokens).toFixed(2)} bytes per token`);
  console.log(`# held-out text: ${lines.length} lines, ${bytes} bytes, ${tokens} tokens (${(bytes / tokens).toFixed(2)} bytes/token)`);
});
