/**
 * Which tokenizer a model folder's files describe, and reading them:
 *   tokenizer.json [+ tokenizer_config.json]  -> HfTokenizer (byte-level BPE, SentencePiece BPE, WordPiece)
 *   vocab.json + merges.txt [+ tokenizer_config.json] -> GPT-2's BpeTokenizer (add_prefix_space)
 *   vocab.txt [+ tokenizer_config.json]       -> WordPiece (BERT)
 * GPT-2 folders (model_type gpt2) look for vocab.json + merges.txt first, so GPT-2 keeps the
 * tokenizer of openai/gpt-2's encoder.py even when a tokenizer.json sits beside them.
 */
import { BpeTokenizer, type BpeOptions } from './gpt2-bpe.js';
import { loadChatTemplateEngine } from './chat-template.js';
import { HfTokenizer } from './hf-tokenizer.js';
import { Where, asBool, asIndex, asObject, parseJson } from './json.js';
import type { Tokenizer } from './types.js';
import { bertTokenizerJson } from './vocab-txt.js';

/** The tokenizer files of a model, as text (or parsed JSON for the .json ones); each optional. */
export interface TokenizerFiles {
  /** tokenizer.json */
  tokenizerJson?: string | object;
  /** tokenizer_config.json */
  tokenizerConfig?: string | object;
  /** vocab.json (GPT-2 BPE: token -> id) */
  vocabJson?: string | object;
  /** merges.txt */
  merges?: string;
  /** vocab.txt (BERT WordPiece) */
  vocabTxt?: string;
  /** chat_template.jinja (a chat template kept apart from tokenizer_config.json; it wins over the config's) */
  chatTemplate?: string;
}

export const TOKENIZER_FILE_NAMES: Record<keyof TokenizerFiles, string> = {
  tokenizerJson: 'tokenizer.json',
  tokenizerConfig: 'tokenizer_config.json',
  vocabJson: 'vocab.json',
  merges: 'merges.txt',
  vocabTxt: 'vocab.txt',
  chatTemplate: 'chat_template.jinja',
};

/** A set of files that makes one tokenizer: tokenizer.json, vocab.json + merges.txt ('bpe'), vocab.txt. */
export type TokenizerFileSet = 'tokenizer.json' | 'bpe' | 'vocab.txt';

/** The order in which a model looks for its tokenizer: GPT-2's own files first for GPT-2. */
export function tokenizerSearchOrder(modelType: unknown): TokenizerFileSet[] {
  return modelType === 'gpt2' ? ['bpe', 'tokenizer.json', 'vocab.txt'] : ['tokenizer.json', 'bpe', 'vocab.txt'];
}

/**
 * Reads the first tokenizer found, in {@link tokenizerSearchOrder}; `read(name)` returns a
 * file's bytes or null when the folder lacks it. Files of the sets after the one found are not
 * asked for (each miss is a 404 in a browser console).
 */
export async function readTokenizerFiles(
  read: (name: string) => Promise<Uint8Array | null>,
  modelType?: unknown,
): Promise<TokenizerFiles> {
  const text = async (name: string) => {
    const b = await read(name);
    return b === null ? undefined : new TextDecoder('utf-8').decode(b);
  };
  for (const set of tokenizerSearchOrder(modelType)) {
    if (set === 'bpe') {
      const [vocabJson, merges] = await Promise.all([text('vocab.json'), text('merges.txt')]);
      if (vocabJson !== undefined || merges !== undefined) {
        // asked for only once the BPE files are there (a folder of another set never sees it asked twice)
        const tokenizerConfig = await text('tokenizer_config.json');
        return tokenizerConfig === undefined ? { vocabJson, merges } : { vocabJson, merges, tokenizerConfig };
      }
    } else {
      const main = await text(set);
      if (main !== undefined) {
        const tokenizerConfig = await text('tokenizer_config.json');
        if (set !== 'tokenizer.json') return { vocabTxt: main, tokenizerConfig };
        // chat_template.jinja: where transformers now saves a template; not asked for when the config
        // holds one, nor for encoders and encoder-decoders, which chat with nobody (each miss is a
        // 404 in a browser console)
        const chatTemplate = configHasTemplate(tokenizerConfig) || !mayChat(modelType) ? undefined : await text('chat_template.jinja');
        return chatTemplate === undefined ? { tokenizerJson: main, tokenizerConfig } : { tokenizerJson: main, tokenizerConfig, chatTemplate };
      }
    }
  }
  return {};
}

/** Model types that are never instruct models (encoders, the encoder-decoder). */
const NO_CHAT = new Set(['bert', 'distilbert', 'roberta', 'xlm-roberta', 'bart']);

/** Whether a model of this model_type may ship a chat template (unknown: yes). */
function mayChat(modelType: unknown): boolean {
  return !(typeof modelType === 'string' && NO_CHAT.has(modelType));
}

/** Whether tokenizer_config.json's text has a chat_template (a damaged file is reported later, by the tokenizer). */
function configHasTemplate(configText: string | undefined): boolean {
  if (configText === undefined) return false;
  try {
    const c = JSON.parse(configText) as { chat_template?: unknown };
    return c !== null && typeof c === 'object' && c.chat_template !== undefined && c.chat_template !== null;
  } catch {
    return false;
  }
}

const parsed = (v: string | object | undefined, file: string) => (typeof v === 'string' ? parseJson(v, file) : v);

/** vocab.json: an object of token -> id, each id a token id (an Error names the file and the entry). */
function bpeVocab(vocab: unknown, file: string): Record<string, number> {
  const at = new Where(file);
  const o = asObject(vocab, at);
  for (const [tok, id] of Object.entries(o)) asIndex(id, at.key(JSON.stringify(tok)));
  return o as Record<string, number>;
}

/**
 * GPT2TokenizerFast's reading of tokenizer_config.json: `add_prefix_space` (false when the
 * file or the key is absent, as GPT2Tokenizer's default).
 */
function bpeOptions(config: unknown, file: string): BpeOptions {
  if (config === undefined || config === null) return {};
  const at = new Where(file);
  const c = asObject(config, at);
  return { addPrefixSpace: asBool(c.add_prefix_space, at.key('add_prefix_space'), false) };
}

/** Options of {@link tokenizerFromFiles}. */
export interface TokenizerFromFilesOptions {
  /** The folder the files come from, prefixed to the file names in errors (`/m` gives `/m/tokenizer.json`). Default: the bare file names. */
  where?: string;
  /**
   * config.json's `model_type`: `'gpt2'` looks for vocab.json + merges.txt before tokenizer.json.
   * Default: tokenizer.json first, then vocab.json + merges.txt, then vocab.txt.
   */
  modelType?: unknown;
}

/**
 * The tokenizer the files describe, or null when there are none: tokenizer.json (+
 * tokenizer_config.json) gives an {@link HfTokenizer}, vocab.json + merges.txt GPT-2's
 * {@link BpeTokenizer} (with tokenizer_config.json's add_prefix_space), vocab.txt BERT's
 * WordPiece (an HfTokenizer); the first found wins, GPT-2's own files first for
 * `modelType: 'gpt2'`. `where` (a folder) prefixes the file names in errors. Damaged files are
 * Errors naming the file and the field (the promise rejects with them).
 *
 * When the files carry a chat template, the promise resolves once the template engine
 * (`@huggingface/jinja`, imported on first need) is loaded, so `applyChatTemplate` works at once.
 */
export async function tokenizerFromFiles(files: TokenizerFiles, options: TokenizerFromFilesOptions = {}): Promise<Tokenizer | null> {
  const tokenizer = tokenizerOf(files, options);
  if (tokenizer instanceof HfTokenizer && tokenizer.hasChatTemplate) await loadChatTemplateEngine();  // applyChatTemplate is then synchronous
  return tokenizer;
}

/** {@link tokenizerFromFiles} before the template engine is awaited. */
function tokenizerOf(files: TokenizerFiles, options: TokenizerFromFilesOptions): Tokenizer | null {
  if (options === null || typeof options !== 'object') throw new TypeError(`tokenizerFromFiles: options must be an object, got ${String(options)}`);
  if (files === null || typeof files !== 'object') throw new TypeError(`tokenizerFromFiles: files must be an object of file contents, got ${String(files)}`);
  for (const key of Object.keys(files)) {
    if (!(key in TOKENIZER_FILE_NAMES)) {
      throw new TypeError(`tokenizerFromFiles: unknown file '${key}' (expected ${Object.keys(TOKENIZER_FILE_NAMES).join(', ')})`);
    }
  }
  const name = (key: keyof TokenizerFiles) => (options.where ? `${options.where}/${TOKENIZER_FILE_NAMES[key]}` : TOKENIZER_FILE_NAMES[key]);
  const config = () => parsed(files.tokenizerConfig, name('tokenizerConfig'));
  const hasBpe = files.vocabJson !== undefined || files.merges !== undefined;
  for (const set of tokenizerSearchOrder(options.modelType)) {
    if (set === 'tokenizer.json' && files.tokenizerJson !== undefined) {
      return new HfTokenizer({
        tokenizer: parsed(files.tokenizerJson, name('tokenizerJson')),
        config: config(),
        chatTemplate: files.chatTemplate,
        names: { tokenizer: name('tokenizerJson'), config: name('tokenizerConfig'), chatTemplate: name('chatTemplate') },
      });
    }
    if (set === 'bpe' && hasBpe) {
      if (files.vocabJson === undefined || files.merges === undefined) {
        throw new Error(`${options.where ?? 'tokenizer'}: a BPE tokenizer needs both vocab.json and merges.txt; only ${files.vocabJson !== undefined ? 'vocab.json' : 'merges.txt'} was given`);
      }
      const vocab = bpeVocab(parsed(files.vocabJson, name('vocabJson')), name('vocabJson'));
      if (typeof files.merges !== 'string') throw new TypeError(`${name('merges')}: expected the file's text`);
      return new BpeTokenizer(vocab, files.merges, bpeOptions(config(), name('tokenizerConfig')));
    }
    if (set === 'vocab.txt' && files.vocabTxt !== undefined) {
      const c = config();
      return new HfTokenizer({
        tokenizer: bertTokenizerJson(files.vocabTxt, c, { vocab: name('vocabTxt'), config: name('tokenizerConfig') }),
        config: c,
        names: { tokenizer: `${name('vocabTxt')} (as tokenizer.json)`, config: name('tokenizerConfig') },
        cleanUpDefault: true, // transformers' BertTokenizer
      });
    }
  }
  return null;
}
