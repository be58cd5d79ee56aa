/**
 * tokenizer_config.json (transformers' side of a tokenizer): which tokens are BOS, EOS, [CLS],
 * ..., and whether `encode` adds BOS/EOS (`add_bos_token`, `add_eos_token`).
 */
import { type JsonObject, type Where, asBool, asObject, asString } from './json.js';
import type { TemplatePiece } from './post-processors.js';
import type { SpecialTokenIds } from './types.js';

export const SPECIAL_KEYS = ['bos', 'eos', 'unk', 'pad', 'cls', 'sep', 'mask'] as const;
export type SpecialKey = (typeof SPECIAL_KEYS)[number];

/** The names these tokens usually have, for files that do not say (no tokenizer_config.json). */
const USUAL_NAMES: Record<SpecialKey, string[]> = {
  bos: ['<s>', '<|begin_of_text|>', '<bos>'],
  eos: ['</s>', '<|end_of_text|>', '<|endoftext|>', '<eos>'],
  unk: ['<unk>', '[UNK]'],
  pad: ['<pad>', '[PAD]'],
  cls: ['[CLS]'],
  sep: ['[SEP]'],
  mask: ['[MASK]', '<mask>'],
};

/** A special token as a config writes it: a string, `{ "content": ... }` (an AddedToken), or null. */
export function tokenName(v: unknown, at: Where): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') return v;
  return asString(asObject(v, at).content, at.key('content'));
}

/**
 * The ids of the special tokens: the config's `<key>_token` when it has the key (null when it
 * names a token the vocabulary lacks), else the usual name when `isSpecial` knows it.
 */
export function specialTokenIds(
  config: JsonObject | null,
  at: Where,
  idOf: (token: string) => number | undefined,
  isSpecial: (token: string) => boolean,
): SpecialTokenIds {
  const out = {} as Record<SpecialKey, number | null>;
  for (const key of SPECIAL_KEYS) {
    const k = `${key}_token`;
    if (config && k in config) {
      const name = tokenName(config[k], at.key(k));
      out[key] = name === null ? null : idOf(name) ?? null;
    } else {
      const name = USUAL_NAMES[key].find(isSpecial);
      out[key] = name === undefined ? null : idOf(name) ?? null;
    }
  }
  return Object.freeze(out);
}

/**
 * When tokenizer_config.json sets add_bos_token or add_eos_token, the templates transformers
 * builds from them for a fast tokenizer (update_post_processor, LlamaTokenizerFast's and since
 * transformers PR 31316 every fast tokenizer's): single `[BOS:0] $A:0 [EOS:0]`, pair
 * `single [BOS:1] $B:1 [EOS:1]`. An add_*_token without its token (bos_token null) adds nothing,
 * as transformers does (PR 44090). Null when neither is set: the tokenizer.json post-processor decides.
 */
export function bosEosTemplates(
  config: JsonObject | null,
  at: Where,
  idOf: (token: string) => number | undefined,
): { single: TemplatePiece[]; pair: TemplatePiece[] } | null {
  if (!config || (config.add_bos_token === undefined && config.add_eos_token === undefined)) return null;
  /** The BOS or EOS piece when the config asks for it and names it; a name the vocabulary lacks is an Error. */
  const special = (key: 'bos' | 'eos', typeId: number): TemplatePiece[] => {
    if (!asBool(config[`add_${key}_token`], at.key(`add_${key}_token`), false)) return [];
    const name = tokenName(config[`${key}_token`], at.key(`${key}_token`));
    if (name === null) return [];
    const id = idOf(name);
    if (id === undefined) throw at.key(`${key}_token`).error(`${JSON.stringify(name)} is not in the vocabulary`);
    return [{ special: name, ids: [id], typeId }];
  };
  const single: TemplatePiece[] = [...special('bos', 0), { seq: 'A', typeId: 0 }, ...special('eos', 0)];
  const pair: TemplatePiece[] = [...single, ...special('bos', 1), { seq: 'B', typeId: 1 }, ...special('eos', 1)];
  return { single, pair };
}
