/**
 * BERT's `vocab.txt` (one WordPiece token per line, id = line number) with its
 * tokenizer_config.json, as the tokenizer.json transformers' BertConverter would write for it:
 * BertNormalizer (do_lower_case, strip_accents, tokenize_chinese_chars), BertPreTokenizer,
 * WordPiece, `[CLS] $A [SEP]` / `[CLS] $A [SEP] $B [SEP]`, the WordPiece decoder, and the
 * special tokens as added tokens (so `[MASK]` written in the text is one token).
 */
import { type JsonObject, Where, asBool, asIndex, asObject } from './json.js';
import { tokenName } from './tokenizer-config.js';

/** vocab.txt -> token -> id. A token seen twice keeps its last line, as transformers' load_vocab. */
export function parseVocabTxt(text: string, file = 'vocab.txt'): Record<string, number> {
  if (typeof text !== 'string') throw new TypeError(`${file}: expected the file's text`);
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop(); // the newline that ends the last line
  if (lines.length === 0) throw new Error(`${file} is empty`);
  const vocab: Record<string, number> = Object.create(null);
  lines.forEach((line, id) => {
    vocab[line.endsWith('\r') ? line.slice(0, -1) : line] = id;
  });
  return vocab;
}

const DEFAULTS = { unk: '[UNK]', sep: '[SEP]', pad: '[PAD]', cls: '[CLS]', mask: '[MASK]' };

/** The tokenizer.json (as an object) for a vocab.txt and its tokenizer_config.json (optional). */
export function bertTokenizerJson(vocabText: string, config: unknown, files = { vocab: 'vocab.txt', config: 'tokenizer_config.json' }): JsonObject {
  const vocab = parseVocabTxt(vocabText, files.vocab);
  const cAt = new Where(files.config);
  const c: JsonObject = config === undefined || config === null ? {} : asObject(config, cAt);
  const name = (key: keyof typeof DEFAULTS) => {
    const k = `${key}_token`;
    return (k in c ? tokenName(c[k], cAt.key(k)) : null) ?? DEFAULTS[key];
  };
  const need = (key: keyof typeof DEFAULTS) => {
    const tok = name(key);
    if (!(tok in vocab)) throw new Error(`${files.vocab} has no ${key} token ${JSON.stringify(tok)}${`${key}_token` in c ? ` (${files.config} names it)` : ''}`);
    return [tok, vocab[tok]] as const;
  };
  const [unk] = need('unk');
  const cls = need('cls');
  const sep = need('sep');

  // added tokens: the config's added_tokens_decoder when it has one, else the special tokens
  let added: JsonObject[];
  if (c.added_tokens_decoder !== undefined) {
    const at = cAt.key('added_tokens_decoder');
    added = Object.entries(asObject(c.added_tokens_decoder, at)).map(([id, t]) => ({ ...asObject(t, at.key(id)), id: asIndex(Number(id), at.key(id)) }));
  } else {
    added = (['pad', 'unk', 'cls', 'sep', 'mask'] as const)
      .map((key) => name(key))
      .filter((tok) => tok in vocab)
      .map((tok) => ({ id: vocab[tok], content: tok, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  }
  const lower = asBool(c.do_lower_case, cAt.key('do_lower_case'), true);
  const strip = c.strip_accents === undefined || c.strip_accents === null ? null : asBool(c.strip_accents, cAt.key('strip_accents'));
  const chinese = asBool(c.tokenize_chinese_chars, cAt.key('tokenize_chinese_chars'), true);
  return {
    version: '1.0',
    added_tokens: added,
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: chinese, strip_accents: strip, lowercase: lower },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: cls[0], type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: sep[0], type_id: 0 } }],
      pair: [
        { SpecialToken: { id: cls[0], type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: sep[0], type_id: 0 } },
        { Sequence: { id: 'B', type_id: 1 } }, { SpecialToken: { id: sep[0], type_id: 1 } },
      ],
      special_tokens: {
        [cls[0]]: { id: cls[0], ids: [cls[1]], tokens: [cls[0]] },
        [sep[0]]: { id: sep[0], ids: [sep[1]], tokens: [sep[0]] },
      },
    },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: unk, continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab },
  };
}
