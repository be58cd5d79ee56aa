// The data contract between the model and every view (BertViz's habit): attention weights as
// attn[layer][head][query][key]. Rows are Float32Arrays; a causal model's row q has meaningful
// entries 0..q and zeros after. Views only read an AttnData; the model page alone writes it.

export interface AttnData {
  /** display text of each token */
  tokens: string[];
  ids: number[];
  /** how many of the tokens came from the prompt */
  promptLength: number;
  nLayer: number;
  nHead: number;
  /** attn[layer][head][q][k] */
  attn: Float32Array[][][];
  /** per-head queries and keys, q[layer][head] = Float32Array(L * headDim), when known */
  q?: Float32Array[][];
  k?: Float32Array[][];
  headDim: number;
  /** 1/sqrt(headDim) unless the model says otherwise */
  scale: number;
  /** an encoder's attention: every query sees every key (both triangles), not only j <= q */
  bidirectional?: boolean;
  /**
   * key/value heads (grouped-query attention): query heads h with floor(h / (nHead / kvHeads)) = g
   * share key head g. Absent or nHead: one key head per query head.
   */
  kvHeads?: number;
  /** each layer's sliding window over token positions (0 = none): query i sees keys i - w < j <= i */
  windows?: readonly number[];
  /** q and k are after the rotary position embedding (the Llama family) */
  rotary?: boolean;
}

/** The query heads that share key/value head g: [first, last]. */
export function kvGroup(d: AttnData, g: number): [number, number] {
  const per = d.nHead / (d.kvHeads ?? d.nHead);
  return [g * per, (g + 1) * per - 1];
}

/** The key/value head that query head h reads. */
export const kvHeadOf = (d: AttnData, h: number): number => Math.floor(h / (d.nHead / (d.kvHeads ?? d.nHead)));

/** Readable GQA groups, e.g. "heads 0-2 share KV head 0; heads 3-5 share KV head 1" ('' without GQA). */
export function kvGroupsText(d: AttnData): string {
  const G = d.kvHeads ?? d.nHead;
  if (G === d.nHead) return '';
  return Array.from({ length: G }, (_v, g) => {
    const [a, b] = kvGroup(d, g);
    return a === b ? `head ${a} has KV head ${g}` : `heads ${a}-${b} share KV head ${g}`;
  }).join('; ');
}

/** The layer's sliding window (0 = none). */
export const windowOf = (d: AttnData, layer: number): number => d.windows?.[layer] ?? 0;

/**
 * What a layer's label adds: ' · window W' for a sliding-window layer, ' · global' for a
 * full-attention layer of a model that also has windowed ones (Gemma 3's local/global
 * interleaving, Qwen's max_window_layers), '' otherwise.
 */
export function layerKindText(d: AttnData, layer: number): string {
  const w = windowOf(d, layer);
  if (w) return ` · window ${w}`;
  return d.windows?.some((x) => x > 0) ? ' · global' : '';
}

/** Whether key j is hidden from query i in that layer: after it (causal) or outside its window. */
export function hidden(d: AttnData, layer: number, i: number, j: number): boolean {
  if (d.bidirectional) return false;
  const w = windowOf(d, layer);
  return j > i || (w > 0 && j <= i - w);
}

export const seqLen = (d: AttnData): number => d.tokens.length;

/** Largest |row sum - 1| over every row of every head (0 for an empty set). */
export function maxRowSumError(d: AttnData): number {
  let worst = 0;
  for (const layer of d.attn) for (const head of layer) for (const r of head) {
    let s = 0;
    for (let j = 0; j < r.length; j++) s += r[j];
    worst = Math.max(worst, Math.abs(s - 1));
  }
  return worst;
}

/** The JSON export: plain arrays, one matrix per head, padded with zeros to L x L. */
export function toJSON(d: AttnData, meta: Record<string, unknown>): string {
  const L = d.tokens.length;
  return JSON.stringify({
    ...meta,
    format: 'attn[layer][head][query][key]; rows are softmax probabilities (each sums to 1)',
    tokens: d.tokens, ids: d.ids, promptLength: d.promptLength, nLayer: d.nLayer, nHead: d.nHead,
    attn: d.attn.map((layer) => layer.map((head) => head.map((r) => Array.from({ length: L }, (_v, j) => +(r[j] ?? 0).toPrecision(6))))),
  });
}
