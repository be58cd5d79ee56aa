// The parts of a tokenizer.json pipeline one by one (web/lib/model/tokenizers/, from dist/),
// with the examples of tokenizers' own Rust tests as the expected values: split behaviours,
// pre-tokenizers, normalizers, decoders; Oniguruma regexes translated to JavaScript.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';

import { ROOT } from './model-helpers.js';

const DIST = process.env.QKV_DIST ? path.resolve(process.env.QKV_DIST) : path.join(ROOT, 'dist');
const internal = (name) => import(pathToFileURL(path.join(DIST, 'model', 'tokenizers', `${name}.js`)).href);
const { onigToJs, splitSpans, charSpans, regexSpans } = await internal('split');
const { Where } = await internal('json');
const { parsePreTokenizer } = await internal('pre-tokenizers');
const { parseNormalizer } = await internal('normalizers');
const { parseDecoder } = await internal('decoders');

const at = new Where('tokenizer.json', 'part');
const pre = (config, text) => parsePreTokenizer(config, at)([{ text, first: true }]).map((p) => p.text);
const norm = (config, text) => parseNormalizer(config, at)(text);
const dec = (config, tokens) => parseDecoder(config, at).decode(tokens);

test('split behaviours (tokenizers normalizer.rs: "The-final--countdown" on "-")', () => {
  const s = 'The-final--countdown';
  const split = (b) => splitSpans(s, charSpans(s, (c) => c === '-'), b);
  assert.deepEqual(split('Removed'), ['The', 'final', 'countdown']);
  assert.deepEqual(split('Isolated'), ['The', '-', 'final', '-', '-', 'countdown']);
  assert.deepEqual(split('MergedWithPrevious'), ['The-', 'final-', '-', 'countdown']);
  assert.deepEqual(split('MergedWithNext'), ['The', '-final', '-', '-countdown']);
  assert.deepEqual(split('Contiguous'), ['The', '-', 'final', '--', 'countdown']);
  // empty matches delimit nothing; an empty string has no pieces
  assert.deepEqual(splitSpans('ab', regexSpans('ab', /x*/gu), 'Isolated'), ['ab']);
  assert.deepEqual(splitSpans('', [], 'Isolated'), []);
});

test('Split pre-tokenizer with invert (tokenizers split.rs: \\w+|[^\\w\\s]+ on "How are you doing?")', () => {
  const split = (behavior) => pre({ type: 'Split', pattern: { Regex: '\\w+|[^\\w\\s]+' }, behavior, invert: true }, 'How are you doing?');
  assert.deepEqual(split('Removed'), ['How', 'are', 'you', 'doing', '?']);
  assert.deepEqual(split('Isolated'), ['How', ' ', 'are', ' ', 'you', ' ', 'doing', '?']);
  assert.deepEqual(split('MergedWithPrevious'), ['How ', 'are ', 'you ', 'doing', '?']);
  assert.deepEqual(split('MergedWithNext'), ['How', ' are', ' you', ' doing', '?']);
  assert.deepEqual(split('Contiguous'), ['How', ' ', 'are', ' ', 'you', ' ', 'doing?']);
  // a String pattern: invert on "Hello" = split on " "
  assert.deepEqual(pre({ type: 'Split', pattern: { String: 'Hello' }, behavior: 'Removed', invert: true }, 'Hello Hello Hello'),
    pre({ type: 'Split', pattern: { String: ' ' }, behavior: 'Removed', invert: false }, 'Hello Hello Hello'));
  assert.deepEqual(pre({ type: 'Split', pattern: { String: ' ' }, behavior: 'Removed', invert: false }, 'Hello Hello Hello'), ['Hello', 'Hello', 'Hello']);
  assert.deepEqual(pre({ type: 'Split', pattern: { String: '.*' }, behavior: 'Isolated' }, 'a.*b'), ['a', '.*', 'b'], 'a String is literal');
});

test('Digits, Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer (tokenizers\' examples)', () => {
  assert.deepEqual(pre({ type: 'Digits', individual_digits: false }, 'Hey 123 friend!'), ['Hey ', '123', ' friend!']);
  assert.deepEqual(pre({ type: 'Digits', individual_digits: true }, 'Hey 123 friend!'), ['Hey ', '1', '2', '3', ' friend!']);
  assert.deepEqual(pre({ type: 'Whitespace' }, 'Hey man!'), ['Hey', 'man', '!']);
  assert.deepEqual(pre({ type: 'Whitespace' }, 'How are you doing?'), ['How', 'are', 'you', 'doing', '?']);
  assert.deepEqual(pre({ type: 'Whitespace' }, '\n'), []);
  assert.deepEqual(pre({ type: 'WhitespaceSplit' }, 'Hey, man, Good?'), ['Hey,', 'man,', 'Good?']);
  assert.deepEqual(pre({ type: 'Punctuation' }, 'Hey friend!     How are you?!?'), ['Hey friend', '!', '     How are you', '?', '!', '?']);
  assert.deepEqual(pre({ type: 'BertPreTokenizer' }, 'Hey friend!     How are you?!?'), ['Hey', 'friend', '!', 'How', 'are', 'you', '?', '!', '?']);
  // Sequence: each step on the pieces of the last
  assert.deepEqual(pre({ type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, { type: 'Digits', individual_digits: true }] }, 'ab12 c3'), ['ab', '1', '2', 'c', '3']);
  // ByteLevel: GPT-2's regex, then bytes as characters (space is Ġ)
  assert.deepEqual(pre({ type: 'ByteLevel', add_prefix_space: false }, "Hello, y'all we'll!"), ['Hello', ',', '\u0120y', "'", 'all', '\u0120we', "'ll", '!']);
  assert.deepEqual(pre({ type: 'ByteLevel', add_prefix_space: true }, 'Hi'), ['\u0120Hi']);
  assert.deepEqual(pre({ type: 'ByteLevel', add_prefix_space: false, use_regex: false }, 'a b'), ['a\u0120b']);
});

test('normalizers: NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, Sequence, BertNormalizer', () => {
  assert.equal(norm({ type: 'NFD' }, 'é'), 'e\u0301');
  assert.equal(norm({ type: 'NFC' }, 'e\u0301'), 'é');
  assert.equal(norm({ type: 'NFKC' }, 'ﬁ①'), 'fi1');
  assert.equal(norm({ type: 'NFKD' }, 'ﬁé'), 'fie\u0301');
  assert.equal(norm({ type: 'Lowercase' }, 'ÀB Σ'), 'àb σ');
  assert.equal(norm({ type: 'Strip', strip_left: true, strip_right: true }, ' \u00a0 x y \n'), 'x y');
  assert.equal(norm({ type: 'Strip', strip_left: false, strip_right: true }, '  x  '), '  x');
  assert.equal(norm({ type: 'Sequence', normalizers: [{ type: 'NFD' }, { type: 'StripAccents' }] }, 'Déjà vu'), 'Deja vu');
  assert.equal(norm({ type: 'Replace', pattern: { String: ' ' }, content: '\u2581' }, 'a b  c'), 'a\u2581b\u2581\u2581c');
  assert.equal(norm({ type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' }, 'a b   c'), 'a b c');
  assert.equal(norm({ type: 'Replace', pattern: { String: '$' }, content: '$&' }, 'a$b'), 'a$&b', 'content is literal');
  assert.equal(norm({ type: 'Prepend', prepend: '\u2581' }, 'hi'), '\u2581hi');
  assert.equal(norm({ type: 'Prepend', prepend: '\u2581' }, ''), '', 'nothing prepended to empty text');
  const bert = { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true };
  assert.equal(norm(bert, 'Héllo\tWORLD\u0000\u200b中文'), 'hello world 中  文 ');
  assert.equal(norm({ ...bert, lowercase: false }, 'Héllo'), 'Héllo', 'accents follow lowercase when strip_accents is null');
  assert.equal(norm({ ...bert, lowercase: false, strip_accents: true }, 'Héllo'), 'Hello');
  assert.equal(norm({ ...bert, handle_chinese_chars: false, clean_text: false }, 'a\u0000中'), 'a\u0000中');
});

test('decoders: ByteLevel, Replace + ByteFallback + Fuse + Strip (Llama 2), WordPiece, BPEDecoder, none', () => {
  assert.equal(dec({ type: 'ByteLevel' }, ['Hello', '\u0120w', 'orld', '\u010a']), 'Hello world\n');
  assert.equal(dec({ type: 'ByteLevel' }, ['\u00e2\u0124', '\u00ac']), '€', 'bytes split across tokens');
  assert.equal(dec({ type: 'ByteLevel' }, ['<|x|>', '\u4e2d']), '<|x|>中', 'characters outside the byte map: their own UTF-8');
  const llama = { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '\u2581' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] };
  assert.equal(dec(llama, ['\u2581Hello', '\u2581', '<0xE2>', '<0x82>', '<0xAC>', '!']), 'Hello €!');
  assert.equal(dec(llama, ['\u2581\u2581Hi']), ' Hi', 'Strip start 1 takes one space');
  assert.equal(dec({ type: 'Strip', content: 'x', start: 2, stop: 1 }, ['xxxaxx']), 'xax');
  assert.equal(dec({ type: 'WordPiece', prefix: '##', cleanup: false }, ['un', '##aff', '##able', 'cat', '.']), 'unaffable cat .');
  assert.equal(dec({ type: 'WordPiece', prefix: '##', cleanup: true }, ['un', '##aff', '##able', 'cat', '.']), 'unaffable cat.');
  assert.equal(dec({ type: 'BPEDecoder', suffix: '</w>' }, ['hel', 'lo</w>', 'wor', 'ld</w>']), 'hello world');
  assert.equal(parseDecoder(null, at).decode(['a', 'b']), 'a b', 'no decoder: tokens joined with spaces');
  // one token's bytes in the middle of a text
  const bytes = (config, token) => new TextDecoder().decode(parseDecoder(config, at).tokenBytes(token));
  assert.equal(bytes(llama, '\u2581Hi'), ' Hi');
  assert.deepEqual([...parseDecoder(llama, at).tokenBytes('<0xE2>')], [0xe2]);
  assert.equal(bytes({ type: 'WordPiece', prefix: '##' }, '##ing'), 'ing');
  assert.equal(bytes({ type: 'WordPiece', prefix: '##' }, 'walk'), ' walk');
});

test('tokenizer.json regexes: Oniguruma\'s \\s, \\d, \\w, (?i:...), \\p{Script}; what JavaScript cannot express is an Error', () => {
  const at = new Where('tokenizer.json', 'pattern.Regex');
  const all = (re, s) => Array.from(s.matchAll(onigToJs(re, at)), (m) => m[0]);
  // \s is Unicode White_Space, as Oniguruma's (JavaScript's \s differs on U+0085 and U+FEFF)
  assert.deepEqual(all('\\s+', 'a\u0085b\ufeffc\u00a0d'), ['\u0085', '\u00a0']);
  assert.deepEqual(all('[^\\s]+', 'a\u0085b'), ['a', 'b']);
  assert.deepEqual(all('\\S+', 'a\u0085b\ufeffc'), ['a', 'b\ufeffc']);
  // \d and \w are Unicode too
  assert.deepEqual(all('\\d+', 'x١٢٣y42'), ['١٢٣', '42']);
  assert.deepEqual(all('\\w+', 'naïve_日本 x'), ['naïve_日本', 'x']);
  // (?i:...) as Llama 3 and Qwen write their contractions
  assert.deepEqual(all("(?i:'s|'t|'re|'ve|'m|'ll|'d)", "it'S they'Re I'M we'll x's"), ["'S", "'Re", "'M", "'ll", "'s"]);
  assert.deepEqual(all('(?i:[a-c]x)y', 'AXy aXY bxy'), ['AXy', 'bxy']);
  assert.deepEqual(all('a(?i)b', 'aB Ab ab'), ['aB', 'ab']);
  assert.deepEqual(all('\\p{Han}+|\\p{N}{1,3}', '漢字12345'), ['漢字', '123', '45']);
  assert.deepEqual(all('\\#\\&\\~', '#&~'), ['#&~'], 'needless escapes');
  for (const [re, what] of [['a++', 'a possessive quantifier'], ['(?>ab)', 'an atomic group'], ['[a[b]]', 'a nested character class'],
    ['[a&&b]', 'a class intersection'], ['\\K', 'the escape \\K'], ['\\p{NoSuchThing}', 'the Unicode property \\p{NoSuchThing}']]) {
    assert.throws(() => onigToJs(re, at), (e) => {
      assert.ok(e.message.startsWith(`tokenizer.json: pattern.Regex: the regex ${JSON.stringify(re)} uses ${what}`), e.message);
      return true;
    });
  }
});


test('readTokenizerFiles asks for the files of the first set found only (each miss is a 404 in a browser)', async () => {
  const { readTokenizerFiles } = await internal('from-files');
  const folder = (files) => {
    const asked = [];
    const read = async (name) => {
      asked.push(name);
      return name in files ? new TextEncoder().encode(files[name]) : null;
    };
    return { asked, read };
  };
  let f = folder({ 'tokenizer.json': '{}', 'tokenizer_config.json': '{}', 'vocab.json': '{}', 'merges.txt': '' });
  assert.deepEqual(await readTokenizerFiles(f.read, 'llama'), { tokenizerJson: '{}', tokenizerConfig: '{}' });
  assert.deepEqual(f.asked, ['tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja']);
  // chat_template.jinja is read beside tokenizer.json, and not asked for when the config holds a template
  f = folder({ 'tokenizer.json': '{}', 'chat_template.jinja': '{{ x }}' });
  assert.deepEqual(await readTokenizerFiles(f.read, 'llama'), { tokenizerJson: '{}', tokenizerConfig: undefined, chatTemplate: '{{ x }}' });
  f = folder({ 'tokenizer.json': '{}', 'tokenizer_config.json': '{"chat_template": "t"}', 'chat_template.jinja': '{{ x }}' });
  assert.deepEqual(await readTokenizerFiles(f.read, 'llama'), { tokenizerJson: '{}', tokenizerConfig: '{"chat_template": "t"}' });
  assert.deepEqual(f.asked, ['tokenizer.json', 'tokenizer_config.json']);
  f = folder({ 'tokenizer.json': '{}', 'vocab.json': '{}', 'merges.txt': 'a b' });
  assert.deepEqual(await readTokenizerFiles(f.read, 'gpt2'), { vocabJson: '{}', merges: 'a b' });
  assert.deepEqual(f.asked.sort(), ['merges.txt', 'tokenizer_config.json', 'vocab.json'], 'GPT-2: its own files first, then its config');
  f = folder({ 'tokenizer.json': '{}', 'tokenizer_config.json': '{"add_prefix_space": true}', 'vocab.json': '{}', 'merges.txt': 'a b' });
  assert.deepEqual(await readTokenizerFiles(f.read, 'gpt2'), { vocabJson: '{}', merges: 'a b', tokenizerConfig: '{"add_prefix_space": true}' });
  assert.deepEqual(f.asked.slice(-1), ['tokenizer_config.json'], 'asked for after the BPE files were found');
  f = folder({ 'vocab.txt': '[UNK]\n' });
  assert.deepEqual(await readTokenizerFiles(f.read, 'bert'), { vocabTxt: '[UNK]\n', tokenizerConfig: undefined });
  assert.deepEqual(f.asked.sort(), ['merges.txt', 'tokenizer.json', 'tokenizer_config.json', 'vocab.json', 'vocab.txt']);
  f = folder({});
  assert.deepEqual(await readTokenizerFiles(f.read, 'bert'), {});
});
