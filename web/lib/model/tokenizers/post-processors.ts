/**
 * tokenizer.json post-processors (tokenizers' `processors/`): they put special tokens around
 * the encoded sequence(s) — `<s> A`, `[CLS] A [SEP] B [SEP]` — and give each token its type id.
 */
import { type JsonObject, type Where, asArray, asIndex, asObject, asString, typeOf } from './json.js';
import type { EncodedPair } from './types.js';

/** (A's ids, B's ids or null, add special tokens?) -> ids and type ids. */
export type PostProcessor = (a: number[], b: number[] | null, addSpecial: boolean) => EncodedPair;

const SUPPORTED = ['TemplateProcessing', 'BertProcessing', 'RobertaProcessing', 'ByteLevel', 'Sequence'];

/** No post-processor: A then B, types 0 and 1. */
export const concatenate: PostProcessor = (a, b) => ({
  ids: [...a, ...(b ?? [])],
  tokenTypeIds: [...a.map(() => 0), ...(b ?? []).map(() => 1)],
});

/** One item of a template: a sequence (A or B) or a special token's ids, with a type id. */
export type TemplatePiece = { seq: 'A' | 'B'; typeId: number } | { special: string; ids: number[]; typeId: number };

/** Applies a template (TemplateProcessing's `single` or `pair`). */
export function applyTemplate(template: TemplatePiece[], a: number[], b: number[] | null, addSpecial: boolean): EncodedPair {
  const ids: number[] = [];
  const types: number[] = [];
  for (const p of template) {
    if ('seq' in p) {
      const seq = p.seq === 'A' ? a : b ?? [];
      for (const id of seq) { ids.push(id); types.push(p.typeId); }
    } else if (addSpecial) {
      for (const id of p.ids) { ids.push(id); types.push(p.typeId); }
    }
  }
  return { ids, tokenTypeIds: types };
}

export function templateProcessor(single: TemplatePiece[], pair: TemplatePiece[]): PostProcessor {
  return (a, b, addSpecial) => applyTemplate(b === null ? single : pair, a, b, addSpecial);
}

function parseTemplate(v: unknown, at: Where, specials: Map<string, number[]>): TemplatePiece[] {
  return asArray(v, at).map((item, i) => {
    const w = at.index(i);
    const o = asObject(item, w);
    if (o.Sequence !== undefined) {
      const s = asObject(o.Sequence, w.key('Sequence'));
      const id = asString(s.id, w.key('Sequence').key('id'));
      if (id !== 'A' && id !== 'B') throw w.key('Sequence').key('id').error(`expected "A" or "B", got ${JSON.stringify(id)}`);
      return { seq: id, typeId: asIndex(s.type_id, w.key('Sequence').key('type_id'), 0) };
    }
    if (o.SpecialToken !== undefined) {
      const s = asObject(o.SpecialToken, w.key('SpecialToken'));
      const name = asString(s.id, w.key('SpecialToken').key('id'));
      const ids = specials.get(name);
      if (!ids) throw w.key('SpecialToken').error(`${JSON.stringify(name)} is not in the template's special_tokens`);
      return { special: name, ids, typeId: asIndex(s.type_id, w.key('SpecialToken').key('type_id'), 0) };
    }
    throw w.error(`expected { "Sequence": ... } or { "SpecialToken": ... }, got keys ${Object.keys(o).join(', ') || 'none'}`);
  });
}

/** `[token, id]` as BertProcessing and RobertaProcessing write their cls and sep. */
function tokenAndId(v: unknown, at: Where): number {
  const a = asArray(v, at);
  if (a.length !== 2) throw at.error(`expected [token, id], got ${a.length} items`);
  asString(a[0], at.index(0));
  return asIndex(a[1], at.index(1));
}

/** The post-processor a tokenizer.json `post_processor` describes (none: {@link concatenate}). */
export function parsePostProcessor(v: unknown, at: Where): PostProcessor {
  if (v === null || v === undefined) return concatenate;
  const o: JsonObject = asObject(v, at);
  const type = typeOf(o, at);
  switch (type) {
    case 'TemplateProcessing': {
      const specials = new Map<string, number[]>();
      const st = asObject(o.special_tokens ?? {}, at.key('special_tokens'));
      for (const [name, sv] of Object.entries(st)) {
        const w = at.key('special_tokens').key(JSON.stringify(name));
        const s = asObject(sv, w);
        specials.set(name, asArray(s.ids, w.key('ids')).map((id, i) => asIndex(id, w.key('ids').index(i))));
      }
      return templateProcessor(parseTemplate(o.single, at.key('single'), specials), parseTemplate(o.pair, at.key('pair'), specials));
    }
    case 'BertProcessing': {
      const cls = tokenAndId(o.cls, at.key('cls'));
      const sep = tokenAndId(o.sep, at.key('sep'));
      return templateProcessor(
        [{ special: 'cls', ids: [cls], typeId: 0 }, { seq: 'A', typeId: 0 }, { special: 'sep', ids: [sep], typeId: 0 }],
        [{ special: 'cls', ids: [cls], typeId: 0 }, { seq: 'A', typeId: 0 }, { special: 'sep', ids: [sep], typeId: 0 },
          { seq: 'B', typeId: 1 }, { special: 'sep', ids: [sep], typeId: 1 }],
      );
    }
    case 'RobertaProcessing': {
      // <s> A </s> </s> B </s>, every type id 0 ("Roberta is weird", tokenizers' roberta.rs)
      const cls = tokenAndId(o.cls, at.key('cls'));
      const sep = tokenAndId(o.sep, at.key('sep'));
      return templateProcessor(
        [{ special: 'cls', ids: [cls], typeId: 0 }, { seq: 'A', typeId: 0 }, { special: 'sep', ids: [sep], typeId: 0 }],
        [{ special: 'cls', ids: [cls], typeId: 0 }, { seq: 'A', typeId: 0 }, { special: 'sep', ids: [sep, sep], typeId: 0 },
          { seq: 'B', typeId: 0 }, { special: 'sep', ids: [sep], typeId: 0 }],
      );
    }
    case 'ByteLevel':
      return concatenate; // it only trims offsets, which qkv does not report
    case 'Sequence': {
      const steps = asArray(o.processors, at.key('processors')).map((p, i) => parsePostProcessor(p, at.key('processors').index(i)));
      // tokenizers runs each processor on the encodings the previous one returned; the ones
      // that add tokens (templates) are the last in the files that use Sequence (Llama 3: ByteLevel, Template)
      const adding = steps.filter((s) => s !== concatenate);
      if (adding.length > 1) throw at.error('a Sequence with more than one post-processor that adds special tokens is not supported');
      return adding[0] ?? concatenate;
    }
    default:
      throw at.unsupported('post-processor', type, SUPPORTED);
  }
}
