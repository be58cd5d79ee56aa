// Raw attention, rollout or flow (Abnar & Zuidema 2020), the explorer's "map" toggle. Rollout and
// flow fuse a layer's heads (mean), add the residual (0.5 A + 0.5 I) and follow the maps through
// the layers, so each layer has one map: what the explorer then shows is an AttnData of one
// "head" per layer, map l = the rollout (or flow) up to layer l's outputs, computed by qkv's
// attentionRolloutSync (cumulative) and attentionFlow (layer = l), never by this page.
// Flow is exact max-flow, L x L of them per layer: only for L <= FLOW_MAX_LENGTH, with progress
// and cancel (the caller's ForwardProgress); rollout takes milliseconds and runs at once.
import { qkv } from './api';
import type { AttnData } from './contract';
import { allHeadStats, type HeadStats } from './patterns';

export type MapMode = 'raw' | 'rollout' | 'flow';
export const MAP_MODES: MapMode[] = ['raw', 'rollout', 'flow'];
export const FLOW_MAX = qkv.FLOW_MAX_LENGTH;

export const MAP_NOTE: Record<MapMode, string> = {
  raw: '',
  rollout: 'Rollout (Abnar & Zuidema 2020): each layer\'s heads averaged, the residual added (0.5 A + 0.5 I, rows renormalised), ' +
    'and the maps multiplied through the layers; layer l\'s map is the share of each input token in each position after layers 0..l.',
  flow: 'Flow (Abnar & Zuidema 2020): the same layered graph as rollout (heads averaged, 0.5 A + 0.5 I), ' +
    'with the maximum flow from each position after layer l to each input token instead of the product; rows normalised to 1.',
};

export interface Mapped { data: AttnData; stats: HeadStats[][] }

/** attn[layer][head][q] rows as qkv's [1, H, L, L] tensors (rows shorter than L padded with 0). */
function tensors(d: AttnData): InstanceType<typeof qkv.Tensor>[] {
  const L = d.tokens.length;
  return d.attn.map((layer) => {
    const x = new Float32Array(layer.length * L * L);
    layer.forEach((rows, h) => rows.slice(0, L).forEach((r, q) => x.set(r.subarray(0, Math.min(L, r.length)), (h * L + q) * L)));
    return new qkv.Tensor(x, [1, layer.length, L, L]);
  });
}

/** One map per layer ([L * L] each) as an AttnData of one head per layer. */
function asData(d: AttnData, maps: Float32Array[]): Mapped {
  const L = d.tokens.length;
  const attn = maps.map((m) => [Array.from({ length: L }, (_v, q) => m.subarray(q * L, (q + 1) * L))]);
  // a row of rollout / flow can weigh later tokens (not in a causal model, but windows no longer apply)
  const data: AttnData = { ...d, attn, nHead: 1, kvHeads: 1, windows: undefined, q: undefined, k: undefined };
  return { data, stats: allHeadStats(data) };
}

export function rollout(d: AttnData): Mapped {
  const r = qkv.attentionRolloutSync(tensors(d), { cumulative: true });
  const L = d.tokens.length, x = r.data as Float32Array;
  return asData(d, d.attn.map((_l, l) => Float32Array.from(x.subarray(l * L * L, (l + 1) * L * L))));
}

/** Flow to every layer's outputs; onProgress(rows done, rows) over all layers; rejects with signal.reason. */
export async function flow(d: AttnData, signal: AbortSignal, onProgress: (done: number, total: number) => void): Promise<Mapped> {
  const L = d.tokens.length, N = d.attn.length, ts = tensors(d), maps: Float32Array[] = [];
  if (L > FLOW_MAX) throw new RangeError(`flow: ${L} tokens; exact flow is computed for at most ${FLOW_MAX}`);
  for (let l = 0; l < N; l++) {
    const f = await qkv.attentionFlow(ts, { layer: l, signal, onProgress: (done) => onProgress(l * L + done, N * L) });
    maps.push(Float32Array.from(f.data as Float32Array));
  }
  return asData(d, maps);
}

/** The mapped data of each raw AttnData, computed once (the views ask on every render). */
export class MapCache {
  private cache = new WeakMap<AttnData, Partial<Record<MapMode, Mapped>>>();
  get(d: AttnData, mode: MapMode): Mapped | undefined {
    if (mode === 'raw') return undefined;
    let e = this.cache.get(d);
    if (!e) this.cache.set(d, (e = {}));
    if (mode === 'rollout' && !e.rollout) e.rollout = rollout(d);
    return e[mode];
  }
  set(d: AttnData, mode: MapMode, m: Mapped): void {
    const e = this.cache.get(d) ?? {};
    e[mode] = m;
    this.cache.set(d, e);
  }
}
