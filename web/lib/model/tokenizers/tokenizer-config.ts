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
 * When tokenizer_config.json sets add_bos_token or add_eos_token, the templates transformers'
 * LlamaTokenizerFast.update_post_processor builds from them:
 * single `[BOS:0] $A:0 [EOS:0]`, pair `single [BOS:1] $B:1 [EOS:1]`. Null when neither is set
 * (the tokenizer.json post-processor decides).
 */
export function bosEosTemplates(
  config: JsonObject | null,
  at: Where,
  idOf: (token: string) => number | undefined,
): { single: TemplatePiece[]; pair: TemplatePiece[] } | null {
  if (!config || (config.add_bos_token === undefined && config.add_eos_token === undefined)) return null;
  const addBos = asBool(config.add_bos_token, at.key('add_bos_token'), false);
  const addEos = asBool(config.add_eos_token, at.key('add_eos_token'), false);
  const special = (key: 'bos' | 'eos', typeId: number): TemplatePiece => {
    const name = tokenName(config[`${key}_token`], at.key(`${key}_token`));
    if (name === null) throw at.error(`add_${key}_token is true but ${key}_token is not set`);
    const id = idOf(name);
    if (id === undefined) throw at.key(`${key}_token`).error(`${JSON.stringify(name)} is not in the vocabulary`);
    return { special: name, ids: [id], typeId };
  };
  const single: TemplatePiece[] = [];
  if (addBos) single.push(special('bos', 0));
  single.push({ seq: 'A', typeId: 0 });
  if (addEos) single.push(special('eos', 0));
  const pair = [...single];
  if (addBos) pair.push(special('bos', 1));
  pair.push({ seq: 'B', typeId: 1 });
  if (addEos) pair.push(special('eos', 1));
  return { single, pair };
}
