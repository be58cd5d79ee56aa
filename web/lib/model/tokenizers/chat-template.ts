/**
 * Chat templates: a model's Jinja template (tokenizer_config.json's `chat_template`, a string or
 * a list of `{ name, template }`, or a `chat_template.jinja` file, which wins) rendered with
 * `@huggingface/jinja` (the Hub's Jinja, as transformers.js renders it) and the variables
 * transformers' `apply_chat_template` passes: `messages`, `tools`, `documents`,
 * `add_generation_prompt`, the special tokens (`bos_token`, `eos_token`, ...), any extra keyword
 * (`enable_thinking`), and the helpers `raise_exception(message)` and `strftime_now(format)`.
 */
import type { Template } from '@huggingface/jinja';
import { describe } from '../../errors.js';
import { type JsonObject, Where } from './json.js';
import { SPECIAL_KEYS, tokenName } from './tokenizer-config.js';

/** One message of a conversation: a role ('system', 'user', 'assistant', 'tool') and its content. */
export interface ChatMessage {
  /** Who speaks: 'system', 'user', 'assistant', 'tool' (the template decides which it takes). */
  role: string;
  /** Text, or (for templates that take them) a list of parts such as `{ type: 'text', text }`. */
  content?: unknown;
  [key: string]: unknown;
}

/** Options of {@link Tokenizer.applyChatTemplate}; any other key is a variable the template reads. */
export interface ChatTemplateOptions {
  /** End with the opening of the assistant's turn (`<|im_start|>assistant\n`), for generation. Default false. */
  addGenerationPrompt?: boolean;
  /** Tool (function) descriptions as JSON schemas, for templates that take them. */
  tools?: object[];
  /** Documents for retrieval-augmented templates. */
  documents?: object[];
  /** Which named template, when the config has several (default: 'tool_use' with tools if present, else 'default'). */
  chatTemplate?: string;
  /** Any other variable the template reads (`enable_thinking: false` for Qwen3), passed as is. */
  [extra: string]: unknown;
}

const FN = 'tokenizer.applyChatTemplate';

/**
 * @huggingface/jinja, imported on first need (a tokenizer with a template): a page that imports
 * qkv's files without a bundler and uses no template never needs it resolved; applyChatTemplate
 * stays synchronous once it is here (tokenizerFromFiles and loadModel wait for it).
 */
let engine: typeof import('@huggingface/jinja') | null = null;
let engineFailure: Error | null = null;
let engineLoading: Promise<void> | null = null;

/**
 * Loads the template engine (`@huggingface/jinja`) if it is not loaded yet. `loadModel` and
 * `tokenizerFromFiles` await it for files that carry a chat template, so their tokenizers apply
 * it at once; await it only before `applyChatTemplate` on a tokenizer made with
 * `new HfTokenizer(...)`, or to load the engine ahead of time. Never rejects: a failure to load
 * is applyChatTemplate's Error (which names the import map a page without a bundler needs).
 */
export function loadChatTemplateEngine(): Promise<void> {
  engineLoading ??= import('@huggingface/jinja').then(
    (m) => { engine = m; },
    (e: Error) => { engineFailure = e; },
  );
  return engineLoading;
}

/** The template's text(s) and where they come from. */
interface Source {
  templates: Map<string, string>;
  where: string;
}

/** The chat templates a tokenizer's files hold, or null when they hold none. */
export function chatTemplateSource(config: JsonObject | null, jinja: string | undefined, names: { config: string; jinja: string }): Source | null {
  if (jinja !== undefined) {
    if (typeof jinja !== 'string') throw new TypeError(`${names.jinja}: expected the file's text, got ${describe(jinja)}`);
    return { templates: new Map([['default', jinja]]), where: names.jinja };
  }
  const t = config?.chat_template;
  if (t === undefined || t === null) return null;
  const at = new Where(names.config).key('chat_template');
  if (typeof t === 'string') return { templates: new Map([['default', t]]), where: at.toString() };
  if (!Array.isArray(t)) throw at.error(`must be a template (string) or a list of { name, template }, got ${describe(t)}`);
  const templates = new Map<string, string>();
  t.forEach((e, i) => {
    const o = e as { name?: unknown; template?: unknown } | null;
    if (!o || typeof o !== 'object' || typeof o.name !== 'string' || typeof o.template !== 'string') {
      throw at.index(i).error(`must be { "name": string, "template": string }, got ${describe(e)}`);
    }
    templates.set(o.name, o.template);
  });
  return { templates, where: at.toString() };
}

/** The special tokens as transformers' `special_tokens_map` names them, for the template. */
export function specialTokenStrings(config: JsonObject | null, where: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  if (!config) return out;
  const at = new Where(where);
  for (const key of SPECIAL_KEYS) {
    const k = `${key}_token`;
    const name = k in config ? tokenName(config[k], at.key(k)) : null;
    if (name !== null) out[k] = name;
  }
  const extra = config.additional_special_tokens;
  if (Array.isArray(extra)) out.additional_special_tokens = extra.map((v, i) => tokenName(v, at.key('additional_special_tokens').index(i)) ?? '');
  return out;
}

function checkMessages(messages: unknown): ChatMessage[] {
  if (!Array.isArray(messages)) throw new TypeError(`${FN}: messages must be an array of { role, content }, got ${describe(messages)}`);
  if (messages.length === 0) throw new RangeError(`${FN}: messages is empty (a conversation needs at least one message)`);
  messages.forEach((m, i) => {
    if (m === null || typeof m !== 'object' || Array.isArray(m)) throw new TypeError(`${FN}: messages[${i}] must be an object { role, content }, got ${describe(m)}`);
    if (typeof (m as ChatMessage).role !== 'string') throw new TypeError(`${FN}: messages[${i}].role must be a string, got ${describe((m as ChatMessage).role)}`);
  });
  return messages as ChatMessage[];
}

/** A model's chat templates, parsed on first use. */
export class ChatTemplates {
  readonly #source: Source;
  readonly #specials: Record<string, string | string[]>;
  readonly #parsed = new Map<string, Template>();

  constructor(source: Source, specials: Record<string, string | string[]>) {
    this.#source = source;
    this.#specials = specials;
    void loadChatTemplateEngine();
  }

  /** The template's names ('default' for a single one). */
  get names(): string[] {
    return [...this.#source.templates.keys()];
  }

  #pick(name: string | undefined, tools: boolean): [string, string] {
    const t = this.#source.templates;
    if (name !== undefined) {
      const text = t.get(name);
      if (text === undefined) throw new RangeError(`${FN}: options.chatTemplate ${JSON.stringify(name)} is not among the model's templates (${[...t.keys()].join(', ')})`);
      return [name, text];
    }
    if (tools && t.has('tool_use')) return ['tool_use', t.get('tool_use')!];
    if (t.has('default')) return ['default', t.get('default')!];
    throw new Error(`${FN}: ${this.#source.where} has several templates (${[...t.keys()].join(', ')}) and none named "default": pass options.chatTemplate`);
  }

  render(messages: unknown, options: ChatTemplateOptions = {}): string {
    const msgs = checkMessages(messages);
    if (options === null || typeof options !== 'object') throw new TypeError(`${FN}: options must be an object, got ${describe(options)}`);
    const { addGenerationPrompt, tools, documents, chatTemplate, ...extra } = options;
    if (addGenerationPrompt !== undefined && typeof addGenerationPrompt !== 'boolean') {
      throw new TypeError(`${FN}: options.addGenerationPrompt must be a boolean, got ${describe(addGenerationPrompt)}`);
    }
    for (const [k, v] of [['tools', tools], ['documents', documents]] as const) {
      if (v !== undefined && v !== null && !Array.isArray(v)) throw new TypeError(`${FN}: options.${k} must be an array of objects, got ${describe(v)}`);
    }
    if (chatTemplate !== undefined && typeof chatTemplate !== 'string') throw new TypeError(`${FN}: options.chatTemplate must be a template name, got ${describe(chatTemplate)}`);
    const [name, text] = this.#pick(chatTemplate, Array.isArray(tools) && tools.length > 0);
    const where = this.#source.templates.size > 1 ? `${this.#source.where} ("${name}")` : this.#source.where;
    let template = this.#parsed.get(name);
    if (!template) {
      if (!engine) {
        throw new Error(engineFailure
          ? `${FN}: the template engine @huggingface/jinja could not be loaded (${engineFailure.message}); a page without a bundler maps it with an import map`
          : `${FN}: the template engine @huggingface/jinja is still loading: await loadChatTemplateEngine() first (tokenizerFromFiles and loadModel do)`);
      }
      try {
        template = new engine.Template(text);
      } catch (e) {
        throw new Error(`${FN}: the chat template in ${where} does not parse: ${(e as Error).message}`);
      }
      this.#parsed.set(name, template);
    }
    try {
      return template.render({
        ...this.#specials,
        ...extra,
        messages: msgs,
        tools: tools ?? null,
        documents: documents ?? null,
        add_generation_prompt: addGenerationPrompt ?? false,
      });  // raise_exception and strftime_now are @huggingface/jinja's globals, as transformers defines them
    } catch (e) {
      // a raise_exception('...') of the template (Gemma's "roles must alternate") lands here too, its message kept
      throw new Error(`${FN}: rendering the chat template in ${where} failed: ${(e as Error).message}`);
    }
  }
}

/** The Error for a tokenizer without a template. */
export function noChatTemplate(why: string): Error {
  return new Error(`${FN}: this tokenizer has no chat template (${why}); qkv does not guess one`);
}
