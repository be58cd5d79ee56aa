// What the explorer shows: the model's tokens, or, with the word toggle on, the same attention
// merged into words (words.ts). The word data and its head statistics are computed once per
// token data object and reused until the data or the toggle changes.
import type { AttnData } from './contract';
import { allHeadStats, type HeadStats } from './patterns';
import { groupWords, wordData, type Words } from './words';

export interface ShownData { data: AttnData; stats: HeadStats[][]; words: Words | null }

export class Shown {
  /** whether the views show words (the toggle) or tokens */
  words = false;
  private from: AttnData | null = null;
  private cached: ShownData | null = null;

  /** tokens: the page's data and stats as they are; words: merged (cached per data object). */
  get(d: AttnData, tokenStats: HeadStats[][], tokenBytes: (id: number) => Uint8Array): ShownData {
    if (!this.words) return { data: d, stats: tokenStats, words: null };
    if (this.from !== d || !this.cached) {
      const words = groupWords(d.ids.map(tokenBytes));
      const data = wordData(d, words);
      this.cached = { data, stats: allHeadStats(data), words };
      this.from = d;
    }
    return this.cached;
  }

  /** For a query in the shown data: the token whose q·k arithmetic the neuron view draws
   *  (a word's last token, the one that predicts what follows), or -1 for the last. */
  queryToken(shown: ShownData, query: number): number {
    if (!shown.words || query < 0) return query;
    return shown.words.start[Math.min(query, shown.words.text.length - 1) + 1] - 1;
  }
}
