// The one place the demo meets the qkv library: the package's public API (`qkv`, resolved to
// dist/ by vite.config.ts and tsconfig.json), its types included. The model page runs only
// qkv's model (loadModel, forward, generate, its tokenizer) and the playground only qkv's
// scaledDotProductAttention: when the library fails, the pages say so (there is no second
// implementation to fall back to).
import * as qkv from 'qkv';
import type { DecoderModel, GPT2Config, Tensor } from 'qkv';
import type { MaskSpec } from './math';
import { residualTools, type ResidualTools } from './api-residual';

export { qkv };
export type { GPT2Config };

/** A short description of the attention backend, e.g. "qkv wasm simd-threads × 2 threads". */
export function backendName(): string {
  const variant = qkv.env.loadedVariant ?? qkv.env.variant;
  const threads = qkv.env.threads;
  return `qkv wasm ${variant}${threads > 1 ? ` × ${threads} threads` : ''}`;
}

export interface SdpaOut { output: Float32Array; weights: Float32Array; backend: string }

/**
 * Single-head attention over [L, D] matrices with the playground's masks, through
 * qkv.scaledDotProductAttention (padding becomes a bool attnMask over keys). Rejects with
 * qkv's Error when the library fails.
 */
export async function sdpa(q: Float32Array, k: Float32Array, v: Float32Array, L: number, D: number, Dv: number,
                           scale: number, spec: MaskSpec): Promise<SdpaOut> {
  const opts: qkv.AttentionOptions = { scale, returnWeights: true, backend: 'wasm' };
  if (spec.kind !== 'bidirectional') opts.isCausal = true;
  if (spec.kind === 'window') opts.window = spec.window;
  if (spec.padded.some(Boolean)) opts.attnMask = new qkv.Tensor(Uint8Array.from(spec.padded, (p) => (p ? 0 : 1)), [1, 1, 1, L]);
  const r = await qkv.scaledDotProductAttention(
    new qkv.Tensor(q, [1, 1, L, D]), new qkv.Tensor(k, [1, 1, L, D]), new qkv.Tensor(v, [1, 1, L, Dv]), opts,
  );
  return { output: r.output.data as Float32Array, weights: r.weights!.data as Float32Array, backend: backendName() };
}

// ---------------------------------------------------------------------------------------------
// The model: qkv's loadModel / forward / generate / tokenizer, nothing else. If the library does
// not load, the page shows why (there is no second implementation to fall back to).

/** A message about the dropped files themselves (which file is which), before qkv sees them. */
export class CheckpointError extends Error {}
export type Progress = (fraction: number | null, what: string) => void;

/** Progress and cancellation of a forward pass (qkv's forward options of the same names). */
export interface RunProgress {
  signal?: AbortSignal;
  onProgress?: (done: number, total: number) => void;
}

/** The demo's view of the model's tokenizer: qkv's, plus how one token looks on its own. */
export interface Tokenizer {
  encode(text: string): number[];
  decode(ids: number[]): string;
  /** one token's text (bytes that are not whole UTF-8 characters shown as \xNN) */
  tokenText(id: number): string;
  /** one token's UTF-8 bytes */
  tokenBytes(id: number): Uint8Array;
}

/**
 * The model's shape, for either family, from qkv's `model.dims` (no branch on the class):
 * query heads h = g * (heads / kvHeads) .. (g + 1) * (heads / kvHeads) - 1 share key/value head g.
 */
export interface DemoDims {
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  /** the context (positions the model accepts) */
  positions: number;
  vocab: number;
  /** each layer's sliding window (0 = full causal attention): query i sees keys i - window < j <= i */
  windows: readonly number[];
}

/** What the page needs from a model. */
export interface DemoModel {
  name: string;
  /** Where the model's bytes are (qkv's model.memoryUsage()): its weights and the page's wasm memory. */
  memory(): { weights: number; dtype: string; wasmHeap: number };
  /** qkv's model.architecture: gpt2, llama, mistral, qwen2 */
  architecture: string;
  /** config.json as qkv read it (for the JSON export) */
  config: Record<string, unknown>;
  dims: DemoDims;
  /** one line on the model: family, layers, heads, context, vocab, windows */
  info: string;
  /**
   * qkv's tokenizer; for a checkpoint without one, a stand-in that reads token ids typed as
   * text ("1 2 3") and writes ids back (hasTokenizer false).
   */
  tokenizer: Tokenizer;
  hasTokenizer: boolean;
  /** queries and keys come after the rotary position embedding (the Llama family) */
  rotary: boolean;
  /** which code runs the forward pass, e.g. "qkv wasm simd" */
  engine: string;
  headDim: number;
  /** the attention's scale (1/sqrt(headDim) unless the config says otherwise) */
  scale: number;
  /**
   * One forward pass over ids: the next-token logits (last position, length vocab_size) and,
   * when asked, the attention weights attn[layer][head][q][k]. With `signal` / `onProgress`,
   * qkv runs it a chunk of tokens at a time: onProgress(tokens done, total) after each chunk,
   * and an abort rejects with the signal's reason (an AbortError) within one chunk.
   */
  run(ids: number[], attentions: boolean, progress?: RunProgress): Promise<{ logits: Float32Array; attn?: Float32Array[][][] }>;
  /**
   * per-head queries and keys for ids (the neuron view): q[layer][head] = Float32Array(L * headDim);
   * k[layer][head] alike, the key head that query head reads (with GQA one array shared by its group, not copied).
   * `progress` as for {@link run}.
   */
  queriesKeys(ids: number[], progress?: RunProgress): Promise<{ q: Float32Array[][]; k: Float32Array[][] }>;
  /**
   * Generates after ids, one token per step. Each step carries the attention row of the query
   * that predicted it: rows[layer][head] over positions 0..position-1 (query = position - 1).
   */
  generate(ids: number[], opts: GenOptions): AsyncGenerator<GenStep, void, undefined>;
  /** The checkpoint's chat template (an Instruct checkpoint: chat.ts), or null when it has none. */
  chat: ChatTemplate | null;
  /**
   * One forward pass over ids with qkv's interventions (headMask, knockout: docs/interventions.md):
   * the logits of every position [L * vocab] (for the prompt's loss) and the attention weights.
   */
  intervene(ids: number[], iv: Interventions, progress?: RunProgress): Promise<{ logits: Float32Array; attn: Float32Array[][][] }>;
  /** qkv's headProbes on this model (docs/interpret.md). */
  probe(options: qkv.HeadProbeOptions): Promise<qkv.HeadProbeResult>;
  /** The residual-stream measures: lens, attribution, patching, steering (api-residual.ts). */
  residual: ResidualTools;
  dispose(): void;
}

/** One turn of a conversation. */
export interface ChatTurn { role: 'system' | 'user' | 'assistant'; content: string }

/** An Instruct checkpoint's chat template, through qkv's tokenizer. */
export interface ChatTemplate {
  /** The conversation as the template writes it, ending with the assistant's turn opened (addGenerationPrompt). */
  render(turns: ChatTurn[]): string;
  /** That text's token ids: the template writes the special tokens itself (addSpecialTokens false, as transformers does). */
  encode(text: string): number[];
  /** The ids that end the assistant's turn (the tokenizer's EOS, e.g. <|im_end|>). */
  stop: number[];
}

/** What a test of heads changes: qkv's forward options headMask ([layer][head], 0 = removed) and knockout. */
export interface Interventions { headMask?: number[][]; knockout?: { layer: number; heads: number[]; block: [number, number][] }[] }

export interface GenOptions { maxNewTokens: number; temperature: number; topK: number; seed: number }
export interface GenStep { token: number; index: number; position: number; rows: Float32Array[][] }

/**
 * A dropped checkpoint, as qkv's loadModel takes it ({ config, weights, vocab?, merges?,
 * tokenizer?, tokenizerConfig? }) plus a name.
 */
export interface CheckpointFiles {
  config: string; weights?: ArrayBuffer; vocab?: string; merges?: string; tokenizer?: string; tokenizerConfig?: string; name: string;
  /** a GGUF file (llama.cpp's format: config, tokenizer and weights in one), streamed by qkv from the File */
  gguf?: File;
  /** a sharded checkpoint: model.safetensors.index.json's text and its shards (read by qkv as streams) */
  sharded?: { index: string; shards: Record<string, File> };
  /** chat_template.jinja's text, when dropped */
  chatTemplate?: string;
}

/**
 * qkv's loadModel, with the library's own Error when it fails. This page shows decoder-only
 * models (GPT-2 and the Llama family: qkv's DecoderModel); the encoders have their own page.
 */
const loadModel = async (source: qkv.ModelSource, options?: qkv.LoadOptions): Promise<DecoderModel> => {
  const m = await qkv.loadModel(source, options);
  if (m instanceof qkv.DecoderModel) return m as DecoderModel;
  m.dispose();
  throw new Error(`this page shows decoder-only models (GPT-2, Llama, Mistral, Qwen2, Qwen3, Gemma 3); the checkpoint is ${m} (the Encoders page shows encoders)`);
};

/** Loads a model folder (config.json, model.safetensors [+ tokenizer files]) by URL with qkv. */
export async function loadModelFromUrl(base: string, onProgress: Progress): Promise<DemoModel> {
  const url = new URL(base, location.href);
  onProgress(null, `loading ${base} with qkv`);
  const m = await loadModel(url.href);
  return demoModel(m, base.replace(/\/$/, '').split('/').pop() || base, backendName());
}

/** Loads dropped checkpoint files with qkv: its loader checks them, and its Error says what is wrong. */
export async function loadModelFromFiles(files: CheckpointFiles, onProgress: Progress): Promise<DemoModel> {
  onProgress(null, 'loading into qkv');
  const mib = (n: number) => (n / 1048576).toFixed(1);
  if (files.gguf) {
    const m = await loadModel(files.gguf, {
      onProgress: (p) => onProgress(p.total ? p.loaded / p.total : null, `${p.file}: ${mib(p.loaded)} MiB${p.total ? ` of ${mib(p.total)} MiB` : ''} into qkv`),
    });
    return demoModel(m, files.name, backendName());
  }
  // qkv checks config.json first, then the weights (a missing file is its Error too)
  const source = (files.sharded ? { config: files.config, index: files.sharded.index, weights: files.sharded.shards }
    : { config: files.config, weights: files.weights }) as qkv.ModelFiles;
  if (files.chatTemplate !== undefined) source.chatTemplate = files.chatTemplate;
  if (files.vocab !== undefined) source.vocab = files.vocab;
  if (files.merges !== undefined) source.merges = files.merges;
  if (files.tokenizer !== undefined) source.tokenizer = files.tokenizer;
  if (files.tokenizerConfig !== undefined) source.tokenizerConfig = files.tokenizerConfig;
  // a sharded checkpoint is streamed from the files: progress over all its shards
  const m = await loadModel(source, files.sharded ? {
    onProgress: (p) => onProgress(p.total ? p.loaded / p.total : null, `${p.file}: ${mib(p.loaded)} MiB${p.total ? ` of ${mib(p.total)} MiB` : ''} into qkv`),
  } : {});
  return demoModel(m, files.name, backendName());
}

/** Loads a Hub id or a folder URL (hub.ts) with qkv: the weights as chosen, with progress and a cancel. */
export async function loadModelFromHub(source: string, name: string, options: qkv.LoadOptions): Promise<DemoModel> {
  return demoModel(await loadModel(source, options), name, backendName());
}

/** Reads a File with progress (bytes / size). */
async function readFile(file: File, onProgress: Progress): Promise<ArrayBuffer> {
  if (!file.stream) return file.arrayBuffer();
  const reader = file.stream().getReader();
  const out = new Uint8Array(file.size);
  let got = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    out.set(value, got);
    got += value.length;
    onProgress(file.size ? got / file.size : null, `${file.name}: ${(got / 1048576).toFixed(1)} MiB of ${(file.size / 1048576).toFixed(1)} MiB`);
  }
  return out.buffer;
}

const DROP_HINT = 'Drop a .gguf file, or config.json and model.safetensors together (or a sharded checkpoint\'s model.safetensors.index.json with all its shards), ' +
  'with the tokenizer files if there are any (GPT-2: vocab.json and merges.txt; Llama, Mistral, Qwen, Gemma: tokenizer.json and tokenizer_config.json); ' +
  'or choose the checkpoint\'s folder.';
const INDEX = 'model.safetensors.index.json';

/**
 * The shards a sharded checkpoint's index names, matched with the dropped .safetensors files:
 * a CheckpointError names each one missing (qkv's loader checks what is inside them).
 */
async function droppedShards(indexFile: File, weights: File[]): Promise<{ index: string; shards: Record<string, File> }> {
  const index = await indexFile.text();
  let map: unknown;
  try {
    map = (JSON.parse(index) as { weight_map?: unknown }).weight_map;
  } catch (e) {
    throw new CheckpointError(`${INDEX} is not valid JSON (${(e as Error).message}).`);
  }
  if (!map || typeof map !== 'object' || Array.isArray(map)) throw new CheckpointError(`${INDEX} has no weight_map (the tensor -> shard table of a sharded checkpoint).`);
  const names = [...new Set(Object.values(map as Record<string, unknown>).map(String))].sort();
  const byName = new Map(weights.map((f) => [f.name, f]));
  const missing = names.filter((n) => !byName.has(n));
  if (missing.length) {
    throw new CheckpointError(`${missing.length === 1 ? `The shard ${missing[0]} is` : `${missing.length} shards are`} missing: ${INDEX} names ${names.length} ` +
      `(${names.join(', ')}) and ${names.length - missing.length} of them ${names.length - missing.length === 1 ? 'was' : 'were'} dropped${missing.length > 1 ? ` (missing: ${missing.join(', ')})` : ''}. Drop the whole folder.`);
  }
  return { index, shards: Object.fromEntries(names.map((n) => [n, byName.get(n)!])) };
}

/**
 * Sorts dropped files into a checkpoint: config.json, one .safetensors or a sharded checkpoint's
 * index and shards, and the tokenizer files (vocab.json + merges.txt, or tokenizer.json
 * [+ tokenizer_config.json] [+ chat_template.jinja]; none at all for a checkpoint without a
 * tokenizer), or one .gguf file. Only says which file is which (CheckpointError); what is inside is qkv's
 * loadModel's to check. One .safetensors is read here with progress; shards are streamed by qkv.
 */
export async function readDroppedFiles(files: File[], onProgress: Progress): Promise<CheckpointFiles> {
  if (!files.length) throw new CheckpointError(`Nothing was dropped. ${DROP_HINT}`);
  // a GGUF file holds everything (config, tokenizer, weights): qkv streams it from the File
  const ggufs = files.filter((f) => /\.gguf$/i.test(f.name));
  if (ggufs.length > 1) throw new CheckpointError(`Several .gguf files were dropped (${ggufs.map((f) => f.name).join(', ')}): drop one.`);
  if (ggufs.length) return { config: '', gguf: ggufs[0], name: ggufs[0].name };
  const known = ['vocab.json', 'merges.txt', 'tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja', INDEX];
  const named = (name: string) => files.find((f) => f.name === name);
  // config.json, else another *config*.json that is not one of the tokenizer's or generation's
  const configs = named('config.json') ? [named('config.json')!]
    : files.filter((f) => f.name.endsWith('.json') && /config/i.test(f.name) && !known.includes(f.name) && !/generation|tokenizer/i.test(f.name));
  const weights = files.filter((f) => f.name.endsWith('.safetensors'));
  const used = (f: File) => configs.includes(f) || weights.includes(f) || known.includes(f.name);
  const unknown = files.filter((f) => !used(f));
  const unknownNote = unknown.length ? ` (ignored: ${unknown.map((f) => f.name).join(', ')})` : '';
  if (unknown.some((f) => /\.bin$/.test(f.name)) && !weights.length) throw new CheckpointError('This looks like a PyTorch .bin checkpoint; the demo reads .safetensors.');
  if (!configs.length) throw new CheckpointError(`config.json is missing${unknownNote}. ${DROP_HINT}`);
  const indexFile = named(INDEX);
  if (!indexFile && weights.length > 1) {
    throw new CheckpointError(`Several .safetensors files were dropped (${weights.map((f) => f.name).join(', ')}) without ${INDEX}: drop a sharded checkpoint's index with its shards, or one model.safetensors.`);
  }
  const sharded = indexFile ? await droppedShards(indexFile, weights) : undefined;
  const buf = !sharded && weights.length ? await readFile(weights[0], onProgress) : undefined;
  const shardCount = sharded ? Object.keys(sharded.shards).length : 0;
  return {
    config: await configs[0].text(), weights: buf, sharded, vocab: await named('vocab.json')?.text(), merges: await named('merges.txt')?.text(),
    tokenizer: await named('tokenizer.json')?.text(), tokenizerConfig: await named('tokenizer_config.json')?.text(),
    chatTemplate: await named('chat_template.jinja')?.text(),
    name: sharded ? `sharded checkpoint (${shardCount} shard${shardCount > 1 ? 's' : ''})`
      : !weights.length || weights[0].name === 'model.safetensors' ? 'dropped checkpoint' : weights[0].name,
  };
}

/** Splits [1, H, L, L] tensors into attn[layer][head][q] rows (views, no copy). */
export function splitAttentions(ts: { data: Tensor['data']; shape: readonly number[] }[]): Float32Array[][][] {
  return ts.map((t) => {
    const [, H, L, Lk] = t.shape;
    const d = t.data as Float32Array;
    return Array.from({ length: H }, (_h, h) => Array.from({ length: L }, (_q, q) => d.subarray((h * L + q) * Lk, (h * L + q + 1) * Lk)));
  });
}

/** Splits a [1, H, L, D] tensor into one Float32Array(L * D) per head (copies). */
function splitHeads(t: Tensor): Float32Array[] {
  const [, H, L, D] = t.shape;
  const d = t.data as Float32Array;
  return Array.from({ length: H }, (_h, h) => d.slice(h * L * D, (h + 1) * L * D));
}

/** How one token looks on its own: its bytes as UTF-8, or \xNN for bytes that are not whole characters. */
function tokenTextOf(tok: qkv.Tokenizer): (id: number) => string {
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  return (id) => {
    const bytes = tok.decodeBytes([id]);
    try {
      return utf8.decode(bytes);
    } catch {
      return Array.from(bytes, (b) => (b < 128 ? String.fromCharCode(b) : `\\x${b.toString(16)}`)).join('');
    }
  };
}

/**
 * The page's stand-in tokenizer for a checkpoint without one: the prompt is token ids separated
 * by spaces or commas ("1 2 3"), each checked against the vocab; ids are written back as numbers.
 */
export function idsTokenizer(vocab: number): Tokenizer {
  const utf8 = new TextEncoder();
  return {
    encode(text) {
      const parts = text.split(/[\s,]+/).filter(Boolean);
      return parts.map((p) => {
        const id = Number(p);
        if (!/^\d+$/.test(p) || id >= vocab) {
          throw new Error(`this checkpoint has no tokenizer: type token ids in [0, ${vocab}) separated by spaces (e.g. "1 2 3"); "${p.slice(0, 20)}" is not one`);
        }
        return id;
      });
    },
    decode: (ids) => ids.join(' '),
    tokenText: (id) => String(id),
    tokenBytes: (id) => utf8.encode(` ${id}`), // one word per id for the word toggle
  };
}

/** One line on the model: its family, shape, context, vocab, GQA groups and windows. */
function describeModel(name: string, arch: string, config: Record<string, unknown>, d: DemoDims): string {
  if (arch === 'gpt2') {
    return `${name}: ${d.layers} layers × ${d.heads} heads, d_model ${String(config.n_embd)}, context ${d.positions}, vocab ${d.vocab}.`;
  }
  const gqa = d.kvHeads === d.heads ? '' : ` sharing ${d.kvHeads} key/value heads (grouped-query attention)`;
  const windowed = d.windows.flatMap((w, l) => (w ? [l] : []));
  const global = d.windows.flatMap((w, l) => (w ? [] : [l]));
  const many = (n: number) => (n > 1 ? 's' : '');
  const win = windowed.length === 0 ? '' : windowed.length === d.layers
    ? `; sliding window ${d.windows[0]} on every layer`
    : windowed.length > global.length // Gemma 3: mostly local layers, a global one every few
      ? `; local layers (sliding window ${d.windows[windowed[0]]}) but global layer${many(global.length)} ${global.join(', ')}`
      : `; sliding window ${d.windows[windowed[0]]} on layer${many(windowed.length)} ${windowed.join(', ')}`;
  const text = (config.text_config ?? config) as Record<string, unknown>; // gemma3: the text model's config
  return `${name} (${arch}): ${d.layers} layers × ${d.heads} heads${gqa}, head_dim ${d.headDim}, ` +
    `hidden ${String(text.hidden_size)}, context ${d.positions}, vocab ${d.vocab}${win}; q and k after the rotary embedding.`;
}

/** The softmax scale of q k^T: 1/sqrt(head_dim), GPT-2 without scale_attn_weights 1, Gemma 3 query_pre_attn_scalar^-0.5. */
function attentionScale(m: DecoderModel, headDim: number): number {
  const config = m.config as Record<string, unknown>;
  if (m.architecture === 'gpt2') return config.scale_attn_weights === false ? 1 : 1 / Math.sqrt(headDim);
  if (m.architecture === 'gemma3_text' || m.architecture === 'gemma3') {
    const text = (config.text_config ?? config) as Record<string, unknown>;
    return 1 / Math.sqrt(Number(text.query_pre_attn_scalar ?? 256)); // Gemma3TextConfig's default
  }
  return 1 / Math.sqrt(headDim);
}

function demoModel(m: DecoderModel, name: string, backend: string): DemoModel {
  const config = m.config as Record<string, unknown>;
  const { layers, heads, kvHeads, headDim, positions, vocab, windows } = m.dims;
  const dims: DemoDims = { layers, heads, kvHeads, headDim, positions, vocab, windows };
  const V = vocab;
  const group = heads / kvHeads; // query heads per key/value head
  const copy = (t: Tensor) => Float32Array.from(t.data as Float32Array);
  const tok = m.tokenizer;
  const tokenizer: Tokenizer = tok ? {
    encode: (text) => tok.encode(text),
    decode: (ids) => tok.decode(ids),
    tokenText: tokenTextOf(tok),
    tokenBytes: (id) => tok.decodeBytes([id]),
  } : idsTokenizer(V);
  const gpt2 = m.architecture === 'gpt2';
  return {
    name, architecture: m.architecture, config, dims, info: describeModel(name, m.architecture, config, dims), tokenizer, hasTokenizer: !!tok,
    rotary: !gpt2, engine: backend, headDim,
    memory: () => m.memoryUsage(),
    scale: attentionScale(m, headDim),
    async run(ids, attentions, progress = {}) {
      const out = await m.forward(ids, { outputAttentions: attentions, logits: 'last', ...progress });
      const logits = (out.logits.data as Float32Array).slice(0, V);
      const attn = attentions ? splitAttentions((out.attentions ?? []).map((t) => ({ data: copy(t), shape: t.shape }))) : undefined;
      out.logits.dispose?.(); out.attentions?.forEach((t) => t.dispose?.());
      return { logits, attn };
    },
    async queriesKeys(ids, progress = {}) {
      const out = await m.forward(ids, { outputQueriesKeys: true, logits: 'last', ...progress });
      const qk = out.queriesKeys ?? [];
      // keys are [1, kvHeads, L, D]: query head h reads key head floor(h / group) (the same array)
      const result = {
        q: qk.map((l) => splitHeads(l.queries)),
        k: qk.map((l) => { const kv = splitHeads(l.keys); return Array.from({ length: heads }, (_h, h) => kv[Math.floor(h / group)]); }),
      };
      out.logits.dispose?.();
      qk.forEach((l) => { l.queries.dispose?.(); l.keys.dispose?.(); });
      return result;
    },
    async *generate(ids, o) {
      for await (const step of m.generate(ids, { ...o, outputAttentions: true })) {
        const rows = (step.attentions ?? []).map((t) => {
          const [H, P] = t.shape; // [n_head, position]
          const d = t.data as Float32Array;
          const out = Array.from({ length: H }, (_h, h) => d.slice(h * P, (h + 1) * P));
          t.dispose?.();
          return out;
        });
        yield { token: step.token, index: step.index, position: step.position, rows };
      }
    },
    chat: tok ? chatTemplateOf(tok) : null,
    async intervene(ids, iv, progress = {}) {
      const out = await m.forward(ids, { outputAttentions: true, logits: 'all', ...iv, ...progress });
      const logits = Float32Array.from(out.logits.data as Float32Array);
      const attn = splitAttentions((out.attentions ?? []).map((t) => ({ data: copy(t), shape: t.shape })));
      out.logits.dispose?.(); out.attentions?.forEach((t) => t.dispose?.());
      return { logits, attn };
    },
    probe: (options) => qkv.headProbes(m, options),
    residual: residualTools(m),
    dispose: () => m.dispose(),
  };
}

/** The tokenizer's chat template, or null when its files hold none (qkv's applyChatTemplate then throws). */
function chatTemplateOf(tok: qkv.Tokenizer): ChatTemplate | null {
  try {
    tok.applyChatTemplate([{ role: 'user', content: '' }], { addGenerationPrompt: true });
  } catch {
    return null;
  }
  const eos = tok.specialTokens.eos;
  return {
    render: (turns) => tok.applyChatTemplate(turns.map((t) => ({ ...t })), { addGenerationPrompt: true }),
    encode: (text) => tok.encode(text, { addSpecialTokens: false }),
    stop: eos === null ? [] : [eos],
  };
}
