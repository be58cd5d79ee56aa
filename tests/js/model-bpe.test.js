// The demo's default model, web/models/tiny-kjv-bpe: its GPT-2 BPE tokenizer (vocab.json +
// merges.txt learned by tools/model/bpe.py, tokenizer_config.json with add_prefix_space) loaded
// through loadModel encodes as Hugging Face's GPT2TokenizerFast does with that option: the
// training script's encoding of ' ' + text (the text itself when it starts with a space), so a
// prompt's first word is the token it is mid-line. The files alone (no tokenizer_config.json)
// keep the training script's encoding of the text itself.
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
const dir = path.join(DATA, m.model_dir);
let model;
before(async () => { model = await qkv.loadModel(dir); });
after(() => model?.dispose());

/** The tokenizer the model was trained with: vocab.json + merges.txt, no tokenizer_config.json. */
const trainingTokenizer = async () => qkv.tokenizerFromFiles({
  vocabJson: readFileSync(path.join(dir, 'vocab.json'), 'utf8'), merges: readFileSync(path.join(dir, 'merges.txt'), 'utf8'),
});
/** What add_prefix_space encodes: ' ' + text, unless the text is empty or starts with a space. */
const prefixed = (text) => (text === '' || text.startsWith(' ') ? text : ' ' + text);
const sha = (ids) => createHash('sha256').update(ids.join(',')).digest('hex');

const heldout = () => {
  const text = gunzipSync(readFileSync(path.join(DATA, m.heldout.file))).toString('utf8');
  assert.equal(createHash('sha256').update(text).digest('hex'), m.heldout.sha256, 'held-out text');
  return text;
};

test('loadModel reads the BPE files and tokenizer_config.json: a 3000-token GPT-2 tokenizer with add_prefix_space', async () => {
  assert.equal(model.tokenizer.kind, 'bpe');
  assert.equal(model.tokenizer.vocabSize, model.config.vocab_size);
  assert.equal(model.config.vocab_size, m.config.vocab_size);
  assert.equal(model.tokenizer.addPrefixSpace, true);
  assert.equal((await trainingTokenizer()).addPrefixSpace, false);
  // common words are single tokens
  for (const w of [' the', ' LORD', ' God', ' unto', ' Jesus', ' said', ' and']) {
    assert.equal(model.tokenizer.encode(w).length, 1, `${JSON.stringify(w)} is one token`);
  }
});

test('a prompt\'s first word is the token it is mid-line: "And God said" -> " And" " God" " said"', async () => {
  const tokens = (text) => model.tokenizer.encode(text).map((id) => model.tokenizer.token(id));
  assert.deepEqual(tokens('And God said'), ['\u0120And', '\u0120God', '\u0120said']);
  assert.deepEqual(tokens('In the beginning'), ['\u0120In', '\u0120the', '\u0120beginning']);
  // the same ids as the words mid-line, and as the prompt with its space typed
  const mid = model.tokenizer.encode('1:1 In the beginning');
  assert.deepEqual(model.tokenizer.encode('In the beginning'), mid.slice(-3));
  assert.deepEqual(model.tokenizer.encode(' In the beginning'), model.tokenizer.encode('In the beginning'));
  // without the option (the training script's encoding) the first word splits: why the option is there
  const raw = await trainingTokenizer();
  assert.deepEqual(raw.encode('In the beginning').slice(0, 2).map((id) => raw.token(id)), ['I', 'n']);
  assert.deepEqual(raw.encode('And God said').slice(0, 2).map((id) => raw.token(id)), ['A', 'nd']);
  // decode keeps the space the option added (Hugging Face's ByteLevel decoder does)
  assert.equal(model.tokenizer.decode(model.tokenizer.encode('And God said')), ' And God said');
  assert.deepEqual(model.tokenizer.encode(''), []);
  assert.deepEqual(model.tokenizer.pieces('And God said'), [' And', ' God', ' said']);
});

test('ids equal the fixture\'s (Python GPT2Encoder with add_prefix_space) and the training encoding of \' \' + text; all of the held-out text (sha256)', async () => {
  assert.ok(m.tokenizer_cases.length >= 20);
  const raw = await trainingTokenizer();
  for (const c of m.tokenizer_cases) {
    const what = JSON.stringify(c.text);
    assert.deepEqual(model.tokenizer.encode(c.text), c.ids, what);
    assert.deepEqual(model.tokenizer.pieces(c.text), c.pieces, what);
    assert.deepEqual(raw.encode(c.text), c.train_ids, `training encoding of ${what}`);
    assert.deepEqual(c.ids, raw.encode(prefixed(c.text)), `${what}: the training encoding of the prefixed text`);
    assert.equal(model.tokenizer.decode(c.ids), prefixed(c.text));
  }
  // some fixture lines start with a word the option changes, and some with a space it leaves alone
  assert.ok(m.tokenizer_cases.some((c) => c.ids[0] !== c.train_ids[0]));
  assert.ok(m.tokenizer_cases.some((c) => c.text.startsWith(' ') && c.ids.join() === c.train_ids.join()));
  const text = heldout();
  const ids = model.tokenizer.encode(text);
  assert.equal(ids.length, m.heldout.model_n_ids);
  assert.equal(sha(ids), m.heldout.model_ids_sha256);
  const trainIds = raw.encode(text);
  assert.equal(trainIds.length, m.heldout.n_ids);
  assert.equal(sha(trainIds), m.heldout.ids_sha256, 'the training script\'s encoding');
  assert.deepEqual(ids, raw.encode(' ' + text));
});

test('every line of the held-out text round-trips: decode(encode(line)) === \' \' + line (line itself when it starts with a space)', async () => {
  const lines = heldout().split('\n');
  assert.equal(lines.length, m.heldout.lines);
  const raw = await trainingTokenizer();
  let tokens = 0, rawTokens = 0, bytes = 0, changed = 0;
  for (const line of lines) {
    const ids = model.tokenizer.encode(line);
    assert.equal(model.tokenizer.decode(ids), prefixed(line));
    const r = raw.encode(line);
    assert.equal(raw.decode(r), line);
    if (r.join() !== ids.join()) changed++;
    tokens += ids.length;
    rawTokens += r.length;
    bytes += Buffer.byteLength(line);
  }
  // words, not letters: several bytes per token on average
  assert.ok(bytes / tokens > 3, `${(bytes / tokens).toFixed(2)} bytes per token`);
  console.log(`# held-out text: ${lines.length} lines, ${bytes} bytes, ${tokens} tokens with add_prefix_space (${rawTokens} without; ${changed} lines encode differently)`);
});

test('a GPT-2 folder without tokenizer_config.json, or with add_prefix_space false, keeps the encoding of the text itself', async () => {
  const vocabJson = readFileSync(path.join(dir, 'vocab.json'), 'utf8'), merges = readFileSync(path.join(dir, 'merges.txt'), 'utf8');
  const off = await qkv.tokenizerFromFiles({ vocabJson, merges, tokenizerConfig: { add_prefix_space: false, model_max_length: 128 } });
  const on = await qkv.tokenizerFromFiles({ vocabJson, merges, tokenizerConfig: '{"add_prefix_space": true}' });
  assert.deepEqual(off.encode('In the beginning'), (await trainingTokenizer()).encode('In the beginning'));
  assert.deepEqual(on.encode('In the beginning'), model.tokenizer.encode('In the beginning'));
  // loadModel from files (a dropped folder, the demo's Hub download) reads it the same way
  const config = readFileSync(path.join(dir, 'config.json'), 'utf8'), weights = readFileSync(path.join(dir, 'model.safetensors'));
  for (const [tokenizerConfig, first] of [[readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'), ['\u0120In']], [undefined, ['I', 'n']]]) {
    const fromFiles = await qkv.loadModel({ config, weights, vocab: vocabJson, merges, ...(tokenizerConfig ? { tokenizerConfig } : {}) });
    try {
      assert.deepEqual(fromFiles.tokenizer.encode('In the').slice(0, first.length).map((id) => fromFiles.tokenizer.token(id)), first);
    } finally {
      fromFiles.dispose();
    }
  }
  // the random GPT-2 fixture has no tokenizer_config.json
  const rnd = await qkv.loadModel(path.join(DATA, 'random-gpt2'));
  try {
    assert.equal(rnd.tokenizer.addPrefixSpace, false);
    for (const c of manifest('random-gpt2.json').tokenizer_cases) assert.deepEqual(rnd.tokenizer.encode(c.text), c.ids, JSON.stringify(c.text));
  } finally {
    rnd.dispose();
  }
  // a damaged option is an Error naming the file and the key
  await assert.rejects(qkv.tokenizerFromFiles({ vocabJson, merges, tokenizerConfig: { add_prefix_space: 'yes' } }),
    /tokenizer_config\.json: add_prefix_space: expected true or false, got string "yes"/);
  await assert.rejects(qkv.tokenizerFromFiles({ vocabJson, merges, tokenizerConfig: '[1]' }), /tokenizer_config\.json: expected an object, got an array/);
  assert.throws(() => new qkv.BpeTokenizer(JSON.parse(vocabJson), merges, { addPrefixSpace: 1 }), /BpeTokenizer: options\.addPrefixSpace must be true or false, got 1/);
});
