// The model page's headline and the line under it, for the model that is loaded: the tiny GPTs
// trained on the King James Bible keep the page's own words (index.html); any other checkpoint
// (GPT-2 small from the Hub, a Llama checkpoint, a dropped folder) is named with its family and
// shape (and, for Gemma 3, its local : global layers), and the line says where it came from.
import { mixTag } from './layer-kinds';

/** Where a model came from: a folder of this site, a Hub (or any folder URL), dropped files. */
export type ModelOrigin =
  | { kind: 'site'; url: string }
  | { kind: 'hub'; url: string; name: string; weights: 'int8' | 'int4' | 'auto' }
  | { kind: 'dropped'; files: string[] };

export interface HeadlineModel {
  name: string;
  /** qkv's model.architecture: gpt2, llama, mistral, qwen2 */
  architecture: string;
  config: Record<string, unknown>;
  dims: { layers: number; heads: number; windows?: readonly number[] };
}

const FAMILY: Record<string, string> = { gpt2: 'GPT-2', llama: 'Llama', mistral: 'Mistral', qwen2: 'Qwen2', qwen3: 'Qwen3', gemma3_text: 'Gemma 3', gemma3: 'Gemma 3' };
const TAIL = 'Type a prompt, generate, and watch every layer and head update with each new token.';

/** True for the models tools/model/train_tiny.py trained on the KJV (their config.json says so). */
function trainedOnKjv(config: Record<string, unknown>): boolean {
  const q = config.qkv as { text?: unknown } | undefined;
  return typeof q?.text === 'string' && /King James/.test(q.text);
}

/**
 * The headline and lead for a model. `page` is index.html's own pair (what the tiny GPTs
 * show); other models get "GPT-2 (gpt2, 12 layers × 12 heads), and what its heads attend to".
 */
export function headline(m: HeadlineModel, origin: ModelOrigin, page: { title: string; lead: string }): { title: string; lead: string } {
  if (origin.kind === 'site' && trainedOnKjv(m.config)) return page;
  const family = FAMILY[m.architecture] ?? m.architecture;
  const mix = mixTag(m.dims.windows ?? []); // Gemma 3: "5 local : 1 global layers"
  const title = `${family} (${m.name}, ${m.dims.layers} layers × ${m.dims.heads} heads${mix ? `; ${mix}` : ''}), and what its heads attend to`;
  let from: string;
  if (origin.kind === 'hub') {
    const hf = /^https:\/\/huggingface\.co\//.test(origin.url);
    from = `Downloaded from ${hf ? 'the Hugging Face Hub' : 'a Hub folder'} (${origin.url}) and loaded ${origin.weights === 'int8' ? 'with 8-bit weights' : origin.weights === 'int4' ? 'with 4-bit weights' : 'with its weights as stored'}`;
  } else if (origin.kind === 'dropped') {
    from = `Dropped into this page (${origin.files.join(', ')}): read from your disk, nothing was uploaded`;
  } else {
    from = `Loaded from ${origin.url} on this site`;
  }
  return { title, lead: `${from}; it runs in this page on qkv's attention kernels. ${TAIL}` };
}
