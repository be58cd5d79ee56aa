// The Hub panel's weight choices, each with the memory it takes for the checkpoint named in the
// panel. GPT-2 small's are measured (bench/results/load-peak-*.json); for another id the size in
// its name ("Qwen3-0.6B", "SmolLM2-135M"), when it has one, gives an estimate; otherwise the
// bytes a weight each choice stores. The page's line under the panel (#hub-memory) then says
// what the loaded model really took.

export type HubWeights = 'int8' | 'int4' | 'auto';

/** Bytes per weight: Q8 and Q4 are blocks of 32 with a 16-bit scale (34 and 18 bytes a block). */
const BYTES = { int8: 34 / 32, int4: 18 / 32 };

const GPT2_SMALL: Record<HubWeights, string> = {
  int8: '8-bit (~0.2 GB in memory)',
  int4: '4-bit (~0.1 GB, less accurate)',
  auto: 'as stored (F32, 0.5 GB)',
};

/** The weight count a Hub name states ("Qwen3-0.6B" -> 6e8, "SmolLM2-135M" -> 1.35e8), or null. */
export function weightsInName(name: string): number | null {
  const m = name.match(/(?:^|[-_/.])(\d+(?:\.\d+)?)([MmBb])(?=$|[-_.])/);
  if (!m) return null;
  return Number(m[1]) * (m[2].toLowerCase() === 'b' ? 1e9 : 1e6);
}

const gb = (bytes: number) => {
  const g = bytes / 1e9;
  return g < 0.095 ? g.toFixed(2) : g < 9.5 ? g.toFixed(1) : g.toFixed(0);
};

/** The option labels for the Hub id `id` ("owner/name", as parseHubSource gives it; null for a folder URL: bytes a weight). */
export function weightLabels(id: string | null, gpt2Small: string): Record<HubWeights, string> {
  if (id !== null && id.toLowerCase() === gpt2Small.toLowerCase()) return GPT2_SMALL;
  const n = id === null ? null : weightsInName(id.split('/')[1]);
  if (n === null) {
    return {
      int8: `8-bit (~${BYTES.int8.toFixed(2)} bytes a weight)`,
      int4: `4-bit (~${BYTES.int4.toFixed(2)} bytes a weight, less accurate)`,
      auto: 'as stored (2 or 4 bytes a weight)',
    };
  }
  return {
    int8: `8-bit (~${gb(n * BYTES.int8)} GB in memory)`,
    int4: `4-bit (~${gb(n * BYTES.int4)} GB, less accurate)`,
    auto: `as stored (${gb(n * 2)} GB as 16-bit, ${gb(n * 4)} as F32)`,
  };
}
