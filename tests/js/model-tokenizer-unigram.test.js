// The Unigram model and the Precompiled normalizer (XLM-RoBERTa, T5), from tokenizer.json:
//  - kjv-unigram: a SentencePiece Unigram model with its nmt_nfkc precompiled charsmap, converted
//    as transformers converts XLM-R's (tools/model/make_unigram_tokenizer.py), against
//    SentencePiece's own ids (spm-ids.json) and @lenml/tokenizers, on the shared tricky texts;
//  - a hand-built vocabulary whose scores decide the Viterbi split, unknown runs and byte
//    fallback, against @lenml/tokenizers and by hand.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { before, describe, test } from 'node:test';

import { ROOT, api } from './model-helpers.js';
import { CORPUS, referenceTokenizer, show } from './model-tokenizer-shared.js';

const qkv = await api();
const DIR = path.join(ROOT, 'tests', 'data', 'tokenizers', 'kjv-unigram');
const JSON_TEXT = readFileSync(path.join(DIR, 'tokenizer.json'), 'utf8');
const CONFIG = JSON.parse(readFileSync(path.join(DIR, 'tokenizer_config.json'), 'utf8'));
const SPM = JSON.parse(readFileSync(path.join(DIR, 'spm-ids.json'), 'utf8')).cases;

/** The file as @lenml/tokenizers reads it: it honours Metaspace's older add_prefix_space, not prepend_scheme. */
function forReference(json) {
  const j = structuredClone(json);
  for (const m of [j.pre_tokenizer, j.decoder]) if (m?.type === 'Metaspace') m.add_prefix_space = m.prepend_scheme !== 'never';
  return JSON.stringify(j);
}

// SentencePiece's normalizer takes the longest rule at each position ("a" + U+0301 -> "á");
// tokenizers (and so qkv) cuts the text into grapheme clusters and looks a cluster of 6 bytes or
// more up one character at a time: "a\u0301\u0302\u0303" (7 bytes) keeps its U+0301.
const HF_NOT_SPM = (t) => t.includes('a\u0301\u0302\u0303');
// @lenml/tokenizers stands NFKC plus a few replacements in for the charsmap: it turns U+200B-U+200F
// (the zero-width joiner of emoji sequences) into spaces, which nmt_nfkc keeps.
const LENML_NOT_SPM = (t) => /[\u200b-\u200f]/.test(t);

describe('kjv-unigram: SentencePiece Unigram + nmt_nfkc charsmap, converted as XLM-R', () => {
  let tok;
  let ref;
  before(async () => {
    tok = await qkv.tokenizerFromFiles({ tokenizerJson: JSON_TEXT, tokenizerConfig: CONFIG });
    ref = await referenceTokenizer(forReference(JSON.parse(JSON_TEXT)), CONFIG);
  });

  test('kind, size and special tokens', () => {
    assert.equal(tok.kind, 'unigram');
    assert.equal(tok.vocabSize, 1002);
    assert.deepEqual({ ...tok.specialTokens }, { bos: 0, eos: 2, unk: 3, pad: 1, cls: 0, sep: 2, mask: 1001 });
  });

  test('ids = SentencePiece\'s on every text but the one where tokenizers\' grapheme rule differs', () => {
    assert.equal(SPM.length, CORPUS.length);
    let differ = 0;
    for (const c of SPM) {
      const got = tok.encode(c.text, { addSpecialTokens: false });
      if (HF_NOT_SPM(c.text)) {
        differ++;
        assert.notDeepEqual(got, c.ids, `${show(c.text)} was expected to differ from SentencePiece`);
        const toks = got.map((i) => tok.token(i));
        const at = toks.indexOf('\u2581a', toks.length - 5);
        assert.deepEqual(toks.slice(at), ['\u2581a', '<unk>', '\u0302', '\u0303'], 'a + U+0301 kept apart (U+0301 has no piece)');
        continue;
      }
      assert.deepEqual(got, c.ids, `${show(c.text)}: qkv ${JSON.stringify(got.map((i) => tok.token(i)))} vs spm ${JSON.stringify(c.pieces)}`);
    }
    assert.equal(differ, 1);
  });

  test('ids = @lenml/tokenizers\' on every text but those where its NFKC stand-in drops U+200D', () => {
    let differ = 0;
    for (const text of CORPUS) {
      const got = tok.encode(text);
      const want = ref.encode(text);
      if (LENML_NOT_SPM(text)) {
        differ++;
        continue;
      }
      assert.deepEqual(got, want, show(text));
    }
    assert.equal(differ, 2);
  });

  test('the charsmap does what NFKC cannot: fullwidth tilde and ﬁ ligature as SentencePiece normalizes them', () => {
    const pieces = (t) => tok.encode(t, { addSpecialTokens: false }).map((i) => tok.token(i));
    assert.deepEqual(pieces('ﬁ'), ['\u2581fi']);           // NFKC too
    assert.deepEqual(pieces('ＡＢＣ'), ['\u2581A', 'B', 'C']);
    assert.deepEqual(pieces('a\tb\nc'), pieces('a b c'));   // nmt_nfkc: whitespace and controls to spaces
  });

  test('pairs, decode, and the mask token', () => {
    const { ids } = tok.encodePair('In the beginning', 'God created');
    assert.deepEqual(ids, ref.encode('In the beginning', { text_pair: 'God created' }));
    assert.equal(tok.decode(tok.encode('And God said, Let there be light'), { skipSpecialTokens: true }), 'And God said, Let there be light');
    const m = tok.encode('Let there be <mask>.');
    assert.ok(m.includes(1001), JSON.stringify(m));
  });
});

describe('a hand-built Unigram vocabulary', () => {
  const vocab = [
    ['<unk>', 0], ['<s>', 0], ['</s>', 0],
    ['\u2581', -2], ['a', -3], ['b', -3], ['c', -3], ['ab', -4], ['bc', -4.5], ['abc', -9],
    ['\u2581ab', -3.5], ['\u2581abc', -20], ['d', -6], ['\u2581d', -5],
    ...Array.from({ length: 256 }, (_, b) => [`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, -30]),
  ];
  const metaspace = { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true };
  const json = (byteFallback) => ({
    version: '1.0', added_tokens: [{ id: 1, content: '<s>', special: true, normalized: false, lstrip: false, rstrip: false, single_word: false }],
    normalizer: null, pre_tokenizer: metaspace, post_processor: null,
    decoder: byteFallback ? { type: 'Sequence', decoders: [metaspace, { type: 'ByteFallback' }, { type: 'Fuse' }] } : metaspace,
    model: { type: 'Unigram', unk_id: 0, vocab, byte_fallback: byteFallback },
  });
  let tok;
  before(async () => { tok = await qkv.tokenizerFromFiles({ tokenizerJson: json(false) }); });
  const pieces = (t, k = tok) => k.encode(t).map((i) => k.token(i));

  test('the split with the highest summed score', () => {
    // ▁abc: ▁ab + c = -6.5 beats ▁ + abc = -11, ▁abc = -20, ▁ + ab + c = -9
    assert.deepEqual(pieces('abc'), ['\u2581ab', 'c']);
    // ▁bc: ▁ + bc = -6.5 beats ▁ + b + c = -8
    assert.deepEqual(pieces('bc'), ['\u2581', 'bc']);
    assert.deepEqual(pieces('d dd'), ['\u2581d', '\u2581d', 'd']);
  });

  test('a run of unknown characters is one <unk>; byte_fallback spells it in bytes', async () => {
    assert.deepEqual(pieces('axyzb'), ['\u2581', 'a', '<unk>', 'b']);
    const bf = await qkv.tokenizerFromFiles({ tokenizerJson: json(true) });
    assert.deepEqual(pieces('axé', bf), ['\u2581', 'a', '<0x78>', '<0xC3>', '<0xA9>']);
    assert.equal(bf.decode(bf.encode('axé')), 'axé');
  });

  test('ids = @lenml/tokenizers\' on the shared texts', async () => {
    const ref = await referenceTokenizer(forReference(json(false)), {});
    for (const text of CORPUS) assert.deepEqual(tok.encode(text), ref.encode(text), show(text));
  });

  test('damaged files are Errors naming the field', async () => {
    const bad = (model) => qkv.tokenizerFromFiles({ tokenizerJson: { ...json(false), model: { type: 'Unigram', ...model } } });
    await assert.rejects(bad({ vocab: [] }), /tokenizer\.json: model\.vocab.*empty/);
    await assert.rejects(bad({ vocab: [['a', 'x']] }), /model\.vocab\[0\].*\[piece, score\]/);
    await assert.rejects(bad({ vocab: [['a', 0]], unk_id: 5 }), /model\.unk_id.*5 is not an index/);
    const charsmap = (s) => qkv.tokenizerFromFiles({ tokenizerJson: { ...json(false), normalizer: { type: 'Precompiled', precompiled_charsmap: s } } });
    await assert.rejects(charsmap('!!'), /precompiled_charsmap.*not base64/);
    await assert.rejects(charsmap(Buffer.from([0xff, 0, 0, 0, 1, 2]).toString('base64')), /precompiled_charsmap.*trie size 255 bytes does not fit/);
  });
});
