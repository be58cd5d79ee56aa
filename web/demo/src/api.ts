// The one place the demo meets the qkv library. Pages call these functions; they use the
// real API (web/lib/index.ts, bundled by Vite from source) when it is present and loads, and
// otherwise fall back to the demo's TypeScript reference maths (math.ts) so the pages still
// work while the library is being built. backendName() says which is in use.
import { attention, mat, rng, type MaskSpec } from './math';
import { CheckpointError, TinyGPT2, bpeTokenizer, byteTokenizer, parseConfig, parseSafetensors, sample, type GPT2Config, type Tokenizer } from './gpt2';

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
// The model

export { CheckpointError };
export type Progress = (fraction: number | null, what: string) => void;

/** What the page needs from a model, whichever engine runs it. */
export interface DemoModel {
  name: string;
  config: GPT2Config;
  tokenizer: Tokenizer;
  /** which code runs the forward pass, e.g. "qkv wasm (simd)" */
  engine: string;
  headDim: number;
  /**
   * One forward pass over ids: the next-token logits (last position, length vocab_size) and,
   * when asked, the attention weights attn[layer][head][q][k].
   */
  run(ids: number[], attentions: boolean): Promise<{ logits: Float32Array; attn?: Float32Array[][][] }>;
  /** per-head q and k for ids (for the neuron view), or null if this model cannot give them */
  queriesKeys(ids: number[]): Promise<{ q: Float32Array[][]; k: Float32Array[][] } | null>;
  /**
   * Generates after ids, one token per step. Each step carries the attention row of the query
   * that predicted it: rows[layer][head] over positions 0..position-1 (query = position - 1).
   */
  generate(ids: number[], opts: GenOptions): AsyncGenerator<GenStep, void, undefined>;
  dispose(): void;
}

export interface GenOptions { maxNewTokens: number; temperature: number; topK: number; seed: number }
export interface GenStep { token: number; index: number; position: number; rows: Float32Array[][] }

export interface CheckpointFiles { config: string; weights: ArrayBuffer; vocab?: string; merges?: string; name: string }

/** Reads a Response body with progress (bytes / Content-Length). */
async function readWithProgress(res: Response, what: string, onProgress: Progress): Promise<ArrayBuffer> {
  const total = Number(res.headers.get('Content-Length')) || 0;
  if (!res.body) return res.arrayBuffer();
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let got = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    got += value.length;
    onProgress(total ? got / total : null, `${what}: ${(got / 1048576).toFixed(1)} MiB${total ? ` of ${(total / 1048576).toFixed(1)} MiB` : ''}`);
  }
  const out = new Uint8Array(got);
  let o = 0;
  for (const c of chunks) { out.set(c, o); o += c.length; }
  return out.buffer;
}

/** Fetches a model folder (config.json, model.safetensors, and vocab.json + merges.txt when the vocab is not bytes). */
export async function fetchCheckpoint(base: string, onProgress: Progress): Promise<CheckpointFiles> {
  const url = (f: string) => new URL(f, new URL(base, location.href)).href;
  onProgress(null, 'config.json');
  const cres = await fetch(url('config.json'));
  if (!cres.ok) throw new CheckpointError(`No model at ${base} (config.json: HTTP ${cres.status}). Build it, or drop a checkpoint onto the page.`);
  const config = await cres.text();
  const cfg = parseConfig(config);
  const wres = await fetch(url('model.safetensors'));
  if (!wres.ok) throw new CheckpointError(`${base}model.safetensors: HTTP ${wres.status}.`);
  const weights = await readWithProgress(wres, 'model.safetensors', onProgress);
  let vocab: string | undefined, merges: string | undefined;
  const bytes = (cfg.qkv as { tokenizer?: string } | undefined)?.tokenizer === 'bytes' || cfg.vocab_size <= 256;
  if (!bytes) {
    vocab = await (await fetch(url('vocab.json'))).text();
    merges = await (await fetch(url('merges.txt'))).text();
  }
  return { config, weights, vocab, merges, name: base.replace(/\/$/, '').split('/').pop() || base };
}

/** Reads a File with progress. */
async function readFile(file: File, onProgress: Progress): Promise<ArrayBuffer> {
  return readWithProgress(new Response(file.stream(), { headers: { 'Content-Length': String(file.size) } }), file.name, onProgress);
}

/**
 * Sorts dropped files into a checkpoint: config.json, one .safetensors, vocab.json, merges.txt.
 * Throws CheckpointError with a message a person can act on.
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
  if (weights.some((f) => /pytorch_model\.bin|\.bin$/.test(f.name))) throw new CheckpointError('This looks like a PyTorch .bin checkpoint; the demo reads .safetensors.');
  if (!configs.length) throw new CheckpointError(`config.json is missing${unknownNote}. Drop config.json, model.safetensors, vocab.json and merges.txt together.`);
  const config = await configs[0].text();
  const cfg = parseConfig(config, configs[0].name);
  if (!weights.length) throw new CheckpointError(`No .safetensors file among the dropped files${unknownNote}. Drop model.safetensors with config.json.`);
  if (weights.length > 1) throw new CheckpointError('Several .safetensors files were dropped; sharded checkpoints are not supported — drop one.');
  if (cfg.vocab_size > 256 && (!vocab.length || !merges.length)) {
    throw new CheckpointError(`config.json has vocab_size ${cfg.vocab_size}, so the GPT-2 tokenizer files are needed: ${[!vocab.length && 'vocab.json', !merges.length && 'merges.txt'].filter(Boolean).join(' and ')} missing.`);
  }
  const buf = await readFile(weights[0], onProgress);
  return { config, weights: buf, vocab: await vocab[0]?.text(), merges: await merges[0]?.text(), name: weights[0].name.replace(/\.safetensors$/, '') === 'model' ? 'dropped checkpoint' : weights[0].name };
}

const TS_REFERENCE_MAX_PARAMS = 60e6; // keep a TypeScript copy of the weights only for small models

/** Builds a DemoModel from checkpoint files: checks them, then prefers qkv's loadModel. */
export async function openModel(files: CheckpointFiles, onProgress: Progress): Promise<DemoModel> {
  onProgress(null, 'checking the checkpoint');
  const config = parseConfig(files.config);
  const st = parseSafetensors(files.weights);
  const ref = new TinyGPT2(config, st); // throws CheckpointError on missing or mis-shaped tensors
  const tokenizer = files.vocab && files.merges ? bpeTokenizer(files.vocab, files.merges) : byteTokenizer;
  let params = 0;
  for (const t of st.tensors.values()) params += t.data.length;

  const lib = await getLib();
  let why = lib ? 'this qkv build has no loadModel' : 'qkv library not loaded';
  const loadModel = lib?.loadModel ?? ((await modelModule())?.loadModel as QkvLib['loadModel'] | undefined);
  if (loadModel) {
    try {
      onProgress(null, 'loading into qkv');
      const m = (await loadModel({ config: JSON.parse(files.config), weights: files.weights, vocab: files.vocab, merges: files.merges })) as QkvModel;
      return qkvModel(m, files.name, config, tokenizer, params <= TS_REFERENCE_MAX_PARAMS ? ref : null, await backendName());
    } catch (e) {
      // the files passed the demo's own checks, so this is qkv's side: run the reference and say so
      why = `qkv loadModel failed: ${(e as Error).message}`;
    }
  }
  return {
    name: files.name, config, tokenizer, engine: `TypeScript reference (${why})`, headDim: ref.headDim,
    run: async (ids, attentions) => {
      const out = ref.forward(ids);
      const V = config.vocab_size, L = ids.length;
      return { logits: out.logits.slice((L - 1) * V, L * V), attn: attentions ? out.attn : undefined };
    },
    queriesKeys: async (ids) => ref.forward(ids),
    async *generate(ids, o) {
      const rand = rng(o.seed);
      const cur = ids.slice();
      const V = config.vocab_size;
      for (let index = 0; index < o.maxNewTokens; index++) {
        const out = ref.forward(cur);
        const L = cur.length;
        const token = sample(out.logits.subarray((L - 1) * V, L * V), o.temperature, o.topK, rand);
        yield { token, index, position: L, rows: out.attn.map((layer) => layer.map((head) => head[L - 1].slice(0, L))) };
        cur.push(token);
        await new Promise((ok) => setTimeout(ok, 0));
      }
    },
    dispose: () => {},
  };
}

/** qkv's model object, as DESIGN.md describes it. */
interface QkvModel {
  generate?(ids: number[], opts: Record<string, unknown>): AsyncGenerator<{ token: number; index: number; position: number; attentions?: QkvTensor[] }, void, undefined>;
  forward(ids: number[] | Int32Array, opts?: Record<string, unknown>): Promise<{ logits: QkvTensor; attentions?: QkvTensor[]; [k: string]: unknown }>;
  dispose?(): void;
  [k: string]: unknown;
}

/** Splits [1, H, L, L] tensors into attn[layer][head][q] rows (views, no copy). */
export function splitAttentions(ts: QkvTensor[]): Float32Array[][][] {
  return ts.map((t) => {
    const [, H, L, Lk] = t.shape;
    const d = t.data as Float32Array;
    return Array.from({ length: H }, (_h, h) => Array.from({ length: L }, (_q, q) => d.subarray((h * L + q) * Lk, (h * L + q + 1) * Lk)));
  });
}

function qkvModel(m: QkvModel, name: string, config: GPT2Config, tokenizer: Tokenizer, ref: TinyGPT2 | null, backend: string): DemoModel {
  const V = config.vocab_size;
  const copy = (t: QkvTensor) => Float32Array.from(t.data as Float32Array);
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
    async queriesKeys(ids) { return ref ? ref.forward(ids) : null; },
    async *generate(ids, o) {
      if (!m.generate) throw new Error('this qkv model has no generate()');
      const it = m.generate(ids, { ...o, outputAttentions: true });
      for await (const step of it) {
        const rows = (step.attentions ?? []).map((t) => {
          const [H, P] = t.shape.length === 2 ? t.shape : [t.shape[t.shape.length - 2], t.shape[t.shape.length - 1]];
          const d = t.data as Float32Array;
          const out = Array.from({ length: H }, (_h, h) => d.slice(h * P, (h + 1) * P));
          t.dispose?.();
          return out;
        });
        yield { token: step.token, index: step.index, position: step.position, rows };
      }
    },
    dispose: () => m.dispose?.(),
  };
}
