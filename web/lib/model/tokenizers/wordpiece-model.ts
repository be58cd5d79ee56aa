/**
 * The WordPiece model (BERT; tokenizers' `models/wordpiece`): greedy longest-match-first over
 * the word, each piece after the first looked up with the `##` prefix; a word with a piece not
 * in the vocabulary, or longer than max_input_chars_per_word characters, is one [UNK].
 */
import { type JsonObject, type Where, asIndex, asString } from './json.js';
import { parseVocab } from './bpe-model.js';

export interface WordPieceModel {
  readonly type: 'WordPiece';
  readonly vocab: Map<string, number>;
  readonly prefix: string;
  tokenize(word: string): number[];
}

export interface WordPieceOptions {
  unkToken: string;
  prefix: string;
  maxInputCharsPerWord: number;
}

export function makeWordPiece(vocab: Map<string, number>, opt: WordPieceOptions, at: Where): WordPieceModel {
  const unkId = vocab.get(opt.unkToken);
  if (unkId === undefined) throw at.error(`the unknown token ${JSON.stringify(opt.unkToken)} is not in the vocabulary`);
  return {
    type: 'WordPiece',
    vocab,
    prefix: opt.prefix,
    tokenize(word: string): number[] {
      const chars = Array.from(word);
      if (chars.length === 0) return [];
      if (chars.length > opt.maxInputCharsPerWord) return [unkId];
      const ids: number[] = [];
      for (let start = 0; start < chars.length; ) {
        // the longest piece chars[start, end) in the vocabulary
        let end = chars.length;
        let id: number | undefined;
        for (; end > start; end--) {
          const piece = (start > 0 ? opt.prefix : '') + chars.slice(start, end).join('');
          id = vocab.get(piece);
          if (id !== undefined) break;
        }
        if (id === undefined) return [unkId];
        ids.push(id);
        start = end;
      }
      return ids;
    },
  };
}

/** tokenizer.json `model` of type WordPiece. */
export function parseWordPieceModel(o: JsonObject, at: Where): WordPieceModel {
  return makeWordPiece(
    parseVocab(o.vocab, at.key('vocab')),
    {
      unkToken: o.unk_token === undefined ? '[UNK]' : asString(o.unk_token, at.key('unk_token')),
      prefix: o.continuing_subword_prefix === undefined ? '##' : asString(o.continuing_subword_prefix, at.key('continuing_subword_prefix')),
      maxInputCharsPerWord: asIndex(o.max_input_chars_per_word, at.key('max_input_chars_per_word'), 100),
    },
    at,
  );
}
