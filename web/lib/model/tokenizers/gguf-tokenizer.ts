/**
 * The tokenizer a GGUF file carries in its metadata (tokenizer.ggml.*), rebuilt as the
 * tokenizer.json and tokenizer_config.json Hugging Face would write for it, and read by the same
 * {@link HfTokenizer}:
 *
 * - `tokenizer.ggml.model` "gpt2": byte-level BPE from `tokens` and `merges`; the pre-tokenizer
 *   `tokenizer.ggml.pre` names: "llama-bpe" (Llama 3), "qwen2" (Qwen2 / Qwen3), "smollm"
 *   (SmolLM / SmolLM2), "gpt-2" and "default" (GPT-2's regex).
 * - "llama": SentencePiece BPE from `tokens` and `scores` (a merge of two pieces ranks by the
 *   score of the piece it makes, as SentencePiece merges), byte fallback through the <0xNN>
 *   pieces, "▁" for spaces (`tokenizer.ggml.add_space_prefix`: one before the text, as Llama 2).
 *
 * Token types (`token_type`): 3 (control) are special added tokens, 4 (user-defined) added
 * tokens that are not special. `bos_token_id`, `eos_token_id`, `padding_token_id`,
 * `unknown_token_id`, `add_bos_token`, `add_eos_token` and `tokenizer.chat_template` become
 * tokenizer_config.json's keys.
 */
import { HfTokenizer } from './hf-tokenizer.js';

/** GGUF metadata as ggufHeader returns it: key -> number, boolean, string or array. */
export type GgufMetadata = Record<string, unknown>;

/** Token types (llama.cpp's llama_token_type). */
const CONTROL = 3, USER_DEFINED = 4;

/** The pre-tokenizer regexes, as the models' tokenizer.json files write them. */
const LLAMA3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const byteLevel = (useRegex: boolean) => ({ type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: useRegex });

/** tokenizer.json's normalizer and pre_tokenizer for a byte-level BPE's `tokenizer.ggml.pre`. */
function bytePreTokenizer(pre: string, fn: string): { normalizer: object | null; pre_tokenizer: object } {
  const split = (regex: string) => ({
    type: 'Sequence',
    pretokenizers: [{ type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false }, byteLevel(false)],
  });
  switch (pre) {
    case 'llama-bpe':
    case 'llama3':
      return { normalizer: null, pre_tokenizer: split(LLAMA3_REGEX) };
    case 'qwen2':
      return { normalizer: { type: 'NFC' }, pre_tokenizer: split(QWEN2_REGEX) };
    case 'smollm':
      return { normalizer: null, pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: true }, byteLevel(true)] } };
    case 'gpt-2':
    case 'gpt2':
    case 'default':
      return { normalizer: null, pre_tokenizer: byteLevel(true) };
    default:
      throw new Error(`${fn}: tokenizer.ggml.pre ${JSON.stringify(pre)} is not supported (llama-bpe, qwen2, smollm, gpt-2, default)`);
  }
}

function stringArray(meta: GgufMetadata, key: string, fn: string): string[] {
  const v = meta[key];
  if (!Array.isArray(v) || v.some((s) => typeof s !== 'string')) throw new Error(`${fn}: metadata ${key} must be an array of strings`);
  return v as string[];
}

function numberArray(meta: GgufMetadata, key: string, n: number, fn: string): number[] | null {
  const v = meta[key];
  if (v === undefined) return null;
  if (!Array.isArray(v) || v.length !== n || v.some((s) => typeof s !== 'number')) {
    throw new Error(`${fn}: metadata ${key} must be an array of ${n} numbers (one per token)`);
  }
  return v as number[];
}

/**
 * SentencePiece's merges from the pieces' scores: every split of a piece into two pieces of the
 * vocabulary, ranked by the score of the piece they make (highest first), then by the left
 * piece's id, then the right's.
 */
function mergesFromScores(tokens: string[], scores: number[], types: number[] | null): [string, string][] {
  const id = new Map<string, number>();
  tokens.forEach((t, i) => id.set(t, i));
  const found: { a: string; b: string; score: number; ia: number; ib: number }[] = [];
  for (let i = 0; i < tokens.length; i++) {
    if (types && types[i] === CONTROL) continue;  // (user-defined pieces merge too, as in SentencePiece's vocabulary)
    const chars = Array.from(tokens[i]);
    for (let k = 1; k < chars.length; k++) {
      const a = chars.slice(0, k).join(''), b = chars.slice(k).join('');
      const ia = id.get(a), ib = id.get(b);
      if (ia !== undefined && ib !== undefined) found.push({ a, b, score: scores[i], ia, ib });
    }
  }
  found.sort((x, y) => y.score - x.score || x.ia - y.ia || x.ib - y.ib);
  return found.map((m) => [m.a, m.b]);
}

/**
 * The tokenizer in a GGUF file's metadata, or null when it has none (`tokenizer.ggml.model`
 * absent). `where` names the file in messages.
 */
export function ggufTokenizer(meta: GgufMetadata, where: string): HfTokenizer | null {
  const fn = `loadModel: ${where}`;
  const model = meta['tokenizer.ggml.model'];
  if (model === undefined) return null;
  if (model !== 'gpt2' && model !== 'llama') {
    throw new Error(`${fn}: tokenizer.ggml.model ${JSON.stringify(model)} is not supported ('gpt2' byte-level BPE, 'llama' SentencePiece)`);
  }
  const tokens = stringArray(meta, 'tokenizer.ggml.tokens', fn);
  const types = numberArray(meta, 'tokenizer.ggml.token_type', tokens.length, fn);
  const vocab: Record<string, number> = {};
  tokens.forEach((t, i) => { if (!Object.hasOwn(vocab, t)) vocab[t] = i; });
  const added = [];
  for (let i = 0; i < tokens.length; i++) {
    const type = types?.[i];
    if (type === CONTROL || type === USER_DEFINED) {
      added.push({ id: i, content: tokens[i], single_word: false, lstrip: false, rstrip: false, normalized: false, special: type === CONTROL });
    }
  }
  const special = (key: string) => {
    const v = meta[`tokenizer.ggml.${key}`];
    return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < tokens.length ? tokens[v] : null;
  };
  const flag = (key: string) => (typeof meta[`tokenizer.ggml.${key}`] === 'boolean' ? meta[`tokenizer.ggml.${key}`] : undefined);
  let json: object;
  if (model === 'gpt2') {
    const merges = stringArray(meta, 'tokenizer.ggml.merges', fn);
    const pre = typeof meta['tokenizer.ggml.pre'] === 'string' ? (meta['tokenizer.ggml.pre'] as string) : 'default';
    json = {
      version: '1.0', added_tokens: added, ...bytePreTokenizer(pre, fn), post_processor: null,
      decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
      model: { type: 'BPE', vocab, merges, dropout: null, unk_token: null, fuse_unk: false, byte_fallback: false, ignore_merges: pre === 'llama-bpe' || pre === 'llama3' },
    };
  } else {
    const scores = numberArray(meta, 'tokenizer.ggml.scores', tokens.length, fn);
    if (!scores) throw new Error(`${fn}: a SentencePiece tokenizer needs metadata tokenizer.ggml.scores`);
    const prefix = meta['tokenizer.ggml.add_space_prefix'] === true;
    const replace = { type: 'Replace', pattern: { String: ' ' }, content: '▁' };
    json = {
      version: '1.0', added_tokens: added,
      normalizer: prefix ? { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' }, replace] } : replace,
      pre_tokenizer: prefix ? null : { type: 'Split', pattern: { String: ' ' }, behavior: 'MergedWithPrevious', invert: false },
      post_processor: null,
      decoder: {
        type: 'Sequence',
        decoders: [
          { type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' },
          ...(prefix ? [{ type: 'Strip', content: ' ', start: 1, stop: 0 }] : []),
        ],
      },
      model: {
        type: 'BPE', vocab, merges: mergesFromScores(tokens, scores, types), dropout: null,
        unk_token: special('unknown_token_id'), fuse_unk: true, byte_fallback: true, ignore_merges: false,
      },
    };
  }
  const config: Record<string, unknown> = {
    bos_token: special('bos_token_id'), eos_token: special('eos_token_id'), pad_token: special('padding_token_id'),
    unk_token: special('unknown_token_id'),
    add_bos_token: flag('add_bos_token') ?? (model === 'llama'), add_eos_token: flag('add_eos_token') ?? false,
  };
  const template = meta['tokenizer.chat_template'];
  if (typeof template === 'string') config.chat_template = template;
  return new HfTokenizer({ tokenizer: json, config, names: { tokenizer: `${where} (tokenizer.ggml.*)`, config: `${where} (tokenizer.ggml.*)` } });
}
