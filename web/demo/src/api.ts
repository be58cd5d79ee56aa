// The one place the demo meets the qkv library (dist/, built from web/lib/). The model page
// runs only qkv's model (loadModel, forward, generate, its tokenizer): when the library does not
// load, the page says why. The playground's single-head attention uses
// qkv.scaledDotProductAttention and, while the library is not built, the demo's TypeScript
// reference maths (math.ts); backendName() says which is in use.
import { attention, mat, type MaskSpec } from './math';

/** The parts of the qkv API (DESIGN.md) the demo uses. */
export interface QkvTensor { data: Float32Array | Uint8Array; shape: number[]; dispose?(): void }
export interface QkvLib {
  Tensor: new (data: Float32Array | Uint8Array, shape: number[]) => QkvTensor;
  scaledDotProductAttention(q: QkvTensor, k: QkvTensor, v: QkvTensor, options?: Record<string, unknown>):
    Promise<{ output: QkvTensor; weights?: QkvTensor }>;
  loadModel?(source: unknown, options?: Record<string, unknown>): Promise<unknown>;
  env?: Record<string, unknown>;
  [name: string]: unknown;
}

// import.meta.glob: an empty map (not a build error) while the library is not built yet.
// dist/index.js is preferred: its wasm files sit next to it (dist/wasm/), where it looks for them.
const libModules = { ...import.meta.glob('../../../dist/index.js') };
const modelModules = { ...import.meta.glob('../../../dist/model/index.js') };
/** dist/model/index.js, for a build whose index.js does not re-export loadModel yet. */
const modelModule = async (): Promise<Record<string, unknown> | null> => {
  const load = Object.values(modelModules)[0];
  return load ? (load() as Promise<Record<string, unknown>>).catch(() => null) : null;
};
let libPromise: Promise<QkvLib | null> | null = null;
let libError: string | null = null;

/** The qkv library, or null when it is not available (libStatus() says why). */
export function getLib(): Promise<QkvLib | null> {
  if (!libPromise) {
    const load = Object.values(libModules)[0];
    libPromise = !load
      ? Promise.resolve(((libError = 'web/lib/index.ts not found'), null))
      : load().then(
          (m) => m as QkvLib,
          (e: unknown) => ((libError = `qkv failed to load: ${(e as Error)?.message ?? e}`), null),
        );
  }
  return libPromise;
}
export const libStatus = (): string | null => libError;

/** A short description of the attention backend, e.g. "qkv wasm (simd-threads)". */
export async function backendName(): Promise<string> {
  const lib = await getLib();
  if (!lib) return 'TypeScript reference (qkv library not loaded)';
  const env = (lib.env ?? {}) as Record<string, unknown>;
  const variant = env.loadedVariant ?? env.variant;
  const threads = Number(env.threads ?? 1);
  return `qkv wasm ${variant ? String(variant) : ''}${threads > 1 ? ` × ${threads} threads` : ''}`.trim();
}

export interface SdpaOut { output: Float32Array; weights: Float32Array; backend: string }

/**
 * Single-head attention over [L, D] matrices with the playground's masks; uses
 * qkv.scaledDotProductAttention when available (padding becomes a bool attnMask over keys).
 */
export async function sdpa(q: Float32Array, k: Float32Array, v: Float32Array, L: number, D: number, Dv: number,
                           scale: number, spec: MaskSpec): Promise<SdpaOut> {
  const lib = await getLib();
  if (lib) {
    try {
      const T = lib.Tensor;
      const opts: Record<string, unknown> = { scale, returnWeights: true, backend: 'wasm' };
      if (spec.kind !== 'bidirectional') opts.isCausal = true;
      if (spec.kind === 'window') opts.window = spec.window;
      const tensors: QkvTensor[] = [new T(q, [1, 1, L, D]), new T(k, [1, 1, L, D]), new T(v, [1, 1, L, Dv])];
      if (spec.padded.some(Boolean)) {
        opts.attnMask = new T(Uint8Array.from(spec.padded, (p) => (p ? 0 : 1)), [1, 1, 1, L]);
        tensors.push(opts.attnMask as QkvTensor);
      }
      const r = await lib.scaledDotProductAttention(tensors[0], tensors[1], tensors[2], opts);
      const out = { output: Float32Array.from(r.output.data as Float32Array), weights: Float32Array.from(r.weights!.data as Float32Array), backend: await backendName() };
      r.output.dispose?.(); r.weights?.dispose?.();
      tensors.forEach((t) => t.dispose?.());
      return out;
    } catch (e) {
      libError = `scaledDotProductAttention failed: ${(e as Error).message}`;
    }
  }
  const r = attention(mat(L, D, q), mat(L, D, k), mat(L, Dv, v), scale, spec);
  return { output: r.output.data, weights: r.weights.data, backend: 'TypeScript reference' };
}

// ---------------------------------------------------------------------------------------------
// The model: qkv's loadModel / forward / generate / tokenizer, nothing else. If the library does
// not load, the page shows why (there is no second implementation to fall back to).

/** A message about the dropped files themselves (which file is which), before qkv sees them. */
export class CheckpointError extends Error {}
export type Progress = (fraction: number | null, what: string) => void;

/** config.json of a GPT-2-family model, as qkv's model.config gives it. */
export interface GPT2Config {
  n_layer: number; n_head: number; n_embd: number; n_positions: number; vocab_size: number;
  [key: string]: unknown;
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

/** What the page needs from a model. */
export interface DemoModel {
  name: string;
  config: GPT2Config;
  tokenizer: Tokenizer;
  /** which code runs the forward pass, e.g. "qkv wasm simd" */
  engine: string;
  headDim: number;
  /**
   * One forward pass over ids: the next-token logits (last position, length vocab_size) and,
   * when asked, the attention weights attn[layer][head][q][k].
   */
  run(ids: number[], attentions: boolean): Promise<{ logits: Float32Array; attn?: Float32Array[][][] }>;
  /** per-head queries and keys for ids (the neuron view): q[layer][head] = Float32Array(L * headDim), k alike */
  queriesKeys(ids: number[]): Promise<{ q: Float32Array[][]; k: Float32Array[][] }>;
  /**
   * Generates after ids, one token per step. Each step carries the attention row of the query
   * that predicted it: rows[layer][head] over positions 0..position-1 (query = position - 1).
   */
  generate(ids: number[], opts: GenOptions): AsyncGenerator<GenStep, void, undefined>;
  dispose(): void;
}

export interface GenOptions { maxNewTokens: number; temperature: number; topK: number; seed: number }
export interface GenStep { token: number; index: number; position: number; rows: Float32Array[][] }

/** A dropped checkpoint, as qkv's loadModel takes it ({ config, weights, vocab?, merges? }) plus a name. */
export interface CheckpointFiles { config: string; weights?: ArrayBuffer; vocab?: string; merges?: string; name: string }

/** qkv's model object (web/lib/model/model.ts). */
interface QkvTokenizer {
  encode(text: string): number[];
  decode(ids: ArrayLike<number>): string;
  decodeBytes(ids: ArrayLike<number>): Uint8Array;
}
interface QkvModel {
  config: GPT2Config;
  tokenizer: QkvTokenizer;
  forward(ids: number[], opts?: { outputAttentions?: boolean; outputQueriesKeys?: boolean }): Promise<{
    logits: QkvTensor; attentions?: QkvTensor[]; queriesKeys?: { queries: QkvTensor; keys: QkvTensor }[];
  }>;
  generate(ids: number[], opts: Record<string, unknown>):
    AsyncGenerator<{ token: number; index: number; position: number; attentions?: QkvTensor[] }, void, undefined>;
  dispose(): void;
}
type LoadModel = (source: unknown) => Promise<QkvModel>;

/** qkv's loadModel; throws with the reason when the library is not available. */
async function qkvLoadModel(): Promise<LoadModel> {
  const lib = await getLib();
  if (!lib) throw new Error(`the qkv library is not available (${libStatus() ?? 'unknown reason'}); build it with \`npm run build\``);
  const load = (lib.loadModel ?? (await modelModule())?.loadModel) as LoadModel | undefined;
  if (!load) throw new Error('this build of the qkv library has no loadModel; rebuild it with `npm run build`');
  return load;
}

/** Loads a model folder (config.json, model.safetensors [+ vocab.json, merges.txt]) by URL with qkv. */
export async function loadModelFromUrl(base: string, onProgress: Progress): Promise<DemoModel> {
  const loadModel = await qkvLoadModel();
  const url = new URL(base, location.href);
  onProgress(null, `loading ${base} with qkv`);
  const m = await loadModel(url.href);
  return demoModel(m, base.replace(/\/$/, '').split('/').pop() || base, await backendName());
}

/** Loads dropped checkpoint files with qkv: its loader checks them, and its Error says what is wrong. */
export async function loadModelFromFiles(files: CheckpointFiles, onProgress: Progress): Promise<DemoModel> {
  const loadModel = await qkvLoadModel();
  onProgress(null, 'loading into qkv');
  const source: Record<string, unknown> = { config: files.config, weights: files.weights };
  if (files.vocab !== undefined) source.vocab = files.vocab;
  if (files.merges !== undefined) source.merges = files.merges;
  const m = await loadModel(source);
  return demoModel(m, files.name, await backendName());
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

/**
 * Sorts dropped files into a checkpoint: config.json, one .safetensors, vocab.json, merges.txt.
 * Only says which file is which (CheckpointError); what is inside is qkv's loadModel's to check.
 */
export async function readDroppedFiles(files: File[], onProgress: Progress): Promise<CheckpointFiles> {
  if (!files.length) throw new CheckpointError('Nothing was dropped. Drop config.json, model.safetensors, vocab.json and merges.txt together.');
  const by = (pred: (f: File) => boolean) => files.filter(pred);
  const configs = by((f) => f.name === 'config.json' || (f.name.endsWith('.json') && /config/i.test(f.name)));
  const weights = by((f) => f.name.endsWith('.safetensors'));
  const vocab = by((f) => f.name === 'vocab.json');
  const merges = by((f) => f.name === 'merges.txt');
  const unknown = files.filter((f) => !configs.includes(f) && !weights.includes(f) && !vocab.includes(f) && !merges.includes(f));
  const unknownNote = unknown.length ? ` (ignored: ${unknown.map((f) => f.name).join(', ')})` : '';
  if (unknown.some((f) => /\.bin$/.test(f.name)) && !weights.length) throw new CheckpointError('This looks like a PyTorch .bin checkpoint; the demo reads .safetensors.');
  if (!configs.length) throw new CheckpointError(`config.json is missing${unknownNote}. Drop config.json, model.safetensors, vocab.json and merges.txt together.`);
  if (weights.length > 1) throw new CheckpointError('Several .safetensors files were dropped; sharded checkpoints are not supported — drop one.');
  const buf = weights.length ? await readFile(weights[0], onProgress) : undefined;
  return {
    config: await configs[0].text(), weights: buf, vocab: await vocab[0]?.text(), merges: await merges[0]?.text(),
    name: !weights.length || weights[0].name === 'model.safetensors' ? 'dropped checkpoint' : weights[0].name,
  };
}

/** Splits [1, H, L, L] tensors into attn[layer][head][q] rows (views, no copy). */
export function splitAttentions(ts: QkvTensor[]): Float32Array[][][] {
  return ts.map((t) => {
    const [, H, L, Lk] = t.shape;
    const d = t.data as Float32Array;
    return Array.from({ length: H }, (_h, h) => Array.from({ length: L }, (_q, q) => d.subarray((h * L + q) * Lk, (h * L + q + 1) * Lk)));
  });
}

/** Splits a [1, H, L, D] tensor into one Float32Array(L * D) per head (copies). */
function splitHeads(t: QkvTensor): Float32Array[] {
  const [, H, L, D] = t.shape;
  const d = t.data as Float32Array;
  return Array.from({ length: H }, (_h, h) => d.slice(h * L * D, (h + 1) * L * D));
}

/** How one token looks on its own: its bytes as UTF-8, or \xNN for bytes that are not whole characters. */
function tokenTextOf(tok: QkvTokenizer): (id: number) => string {
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

function demoModel(m: QkvModel, name: string, backend: string): DemoModel {
  const config = m.config;
  const V = config.vocab_size;
  const copy = (t: QkvTensor) => Float32Array.from(t.data as Float32Array);
  const tokenizer: Tokenizer = {
    encode: (text) => m.tokenizer.encode(text),
    decode: (ids) => m.tokenizer.decode(ids),
    tokenText: tokenTextOf(m.tokenizer),
    tokenBytes: (id) => m.tokenizer.decodeBytes([id]),
  };
  return {
    name, config, tokenizer, engine: backend, headDim: config.n_embd / config.n_head,
    async run(ids, attentions) {
      const out = await m.forward(ids, { outputAttentions: attentions });
      const L = ids.length;
      const logits = (out.logits.data as Float32Array).slice((L - 1) * V, L * V);
      const attn = attentions ? splitAttentions((out.attentions ?? []).map((t) => ({ data: copy(t), shape: t.shape }))) : undefined;
      out.logits.dispose?.(); out.attentions?.forEach((t) => t.dispose?.());
      return { logits, attn };
    },
    async queriesKeys(ids) {
      const out = await m.forward(ids, { outputQueriesKeys: true });
      const qk = out.queriesKeys ?? [];
      const result = { q: qk.map((l) => splitHeads(l.queries)), k: qk.map((l) => splitHeads(l.keys)) };
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
    dispose: () => m.dispose(),
  };
}
