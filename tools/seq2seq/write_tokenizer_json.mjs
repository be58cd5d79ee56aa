// Writes <model folder>/tokenizer.json from its vocab.txt + tokenizer_config.json,
// through qkv's own converter (the BertTokenizerFast layout: BertNormalizer, BertPreTokenizer,
// WordPiece, [CLS] $A [SEP]). A browser then finds the tokenizer on its first request
// (tokenizer.json comes first in the search order) instead of after three 404s.
//   node tools/seq2seq/write_tokenizer_json.mjs [folder]   (after npm run build; default
//   web/models/tiny-numbers; web/models/tiny-bert-kjv is written the same way)
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const { bertTokenizerJson } = await import(pathToFileURL(path.join(ROOT, 'dist', 'model', 'tokenizers', 'vocab-txt.js')).href);
const dir = path.resolve(process.argv[2] ?? path.join(ROOT, 'web', 'models', 'tiny-numbers'));
const vocab = readFileSync(path.join(dir, 'vocab.txt'), 'utf8');
const config = JSON.parse(readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(bertTokenizerJson(vocab, config), null, 1) + '\n');
console.log('wrote', path.join(dir, 'tokenizer.json'));
