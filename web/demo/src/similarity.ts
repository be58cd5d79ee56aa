// Encoders page, panel 3: sentence similarity. A few sentences (one per line) are embedded with
// model.embed (mean pooling over each sentence's tokens, L2-normalized), their cosine matrix is
// printed, and for the chosen pair each sentence's tokens are shaded by how much the mean-pooled
// vector draws on them: the mean over positions of the attention rollout (qkv.attentionRollout:
// Abnar & Zuidema, per layer the mean over heads of the attention plus the identity for the
// residual, rows renormalized, multiplied through the layers). The model can be swapped
// (useSimilarityModel: a Hub or dropped encoder, encoder-source.ts); its sentence-transformers
// pooling (mean, cls, max) is used when its files name one. A checkpoint without an MLM head
// (MiniLM, bge) has no model.forward, so no attentions: its tokens are shaded by the pooling's
// own weights (mean: 1/n each; cls: all on the first token).
import { qkv } from './api';
import { $, message, showToken, weightColor, inkOn } from './ui';

let timer = 0;
let seq = 0;
let pair: [number, number] = [0, 1];
let model: qkv.EncoderModel;

/** The pooling embed uses here: the model's sentence-transformers default when it has one, else mean. */
export function poolingOf(m: qkv.EncoderModel): qkv.Pooling {
  const d = m.embeddingDefaults;
  return d.from === 'sentence-transformers' && d.pooling && !d.unsupported ? d.pooling : 'mean';
}

/** Each token's share of the pooled vector when there are no attentions (a model without MLM head). */
function poolingShares(pooling: qkv.Pooling, L: number): number[] | null {
  if (pooling === 'mean') return Array.from({ length: L }, () => 1 / L);
  if (pooling === 'cls') return Array.from({ length: L }, (_v, i) => (i === 0 ? 1 : 0));
  return null;  // max: per dimension, no one share per token
}

/** How much the mean over positions draws on each input token (sums to 1). */
function meanDraw(r: ArrayLike<number>, L: number): number[] {
  return Array.from({ length: L }, (_v, j) => { let s = 0; for (let i = 0; i < L; i++) s += r[i * L + j]; return s / L; });
}

async function drawPair(m: qkv.EncoderModel, lines: string[]): Promise<void> {
  const box = $('#sim-tokens');
  const pooling = poolingOf(m);
  const rollout = m.hasMaskedLmHead && pooling === 'mean';
  const rows = await Promise.all(pair.map(async (k) => {
    const ids = m.tokenizer.encode(lines[k]).slice(0, m.maxPositions);
    let w: number[] | null;
    if (rollout) {
      const out = await m.forward(ids, { outputAttentions: true });
      w = meanDraw(qkv.attentionRolloutSync(out.attentions!).data, ids.length);  // [L, L], the library's
      out.logits.dispose();
      out.attentions!.forEach((t) => t.dispose());
    } else {
      w = poolingShares(pooling, ids.length);
    }
    const p = document.createElement('p');
    p.className = 'mono sim-line';
    const max = w ? Math.max(...w) : 1;
    ids.forEach((id, i) => {
      const s = document.createElement('span');
      s.textContent = showToken(m.tokenizer.tokenText(id));
      if (w) {
        s.dataset.weight = w[i].toFixed(4);
        s.title = `${s.textContent}: ${(100 * w[i]).toFixed(1)} % of the pooled vector`;
        s.style.background = weightColor(w[i] / max);
        s.style.color = inkOn(w[i] / max);
      }
      p.append(s, ' ');
    });
    return p;
  }));
  box.replaceChildren(...rows);
  const how = rollout ? 'attention rollout'
    : pooling === 'max' ? 'max pooling takes each dimension from one token: no share per token is shown'
      : `${pooling} pooling's own weights${m.hasMaskedLmHead ? '' : ' (this checkpoint has no MLM head, so no model.forward and no attentions to roll out)'}`;
  $('#sim-pair').textContent = `pair ${pair[0] + 1} – ${pair[1] + 1}: each token shaded by its share of the ${pooling}-pooled vector (${how})`;
}

async function update(): Promise<void> {
  const m = model;
  const my = ++seq;
  const lines = $<HTMLTextAreaElement>('#sim-text').value.split('\n').map((s) => s.trim()).filter((s) => s.length > 0).slice(0, 8);
  const table = $<HTMLTableElement>('#sim-table');
  const msg = $('#sim-msg');
  try {
    if (lines.length < 2) throw new Error('Type at least two sentences, one per line.');
    const e = await m.embed(lines, { pooling: poolingOf(m), normalize: true });
    if (my !== seq) return;
    const E = e.shape[1];
    const d = e.data as Float32Array;
    const cos = (a: number, b: number) => { let s = 0; for (let k = 0; k < E; k++) s += d[a * E + k] * d[b * E + k]; return s; };
    if (pair[0] >= lines.length || pair[1] >= lines.length) pair = [0, 1];
    // shade by where a cosine lies between the smallest and the largest off the diagonal
    const off = lines.flatMap((_a, i) => lines.map((_b, j) => (i === j ? NaN : cos(i, j)))).filter((c) => !Number.isNaN(c));
    const lo = Math.min(...off), hi = Math.max(...off);
    const shade = (c: number) => Math.min(1, Math.max(0, hi > lo ? (c - lo) / (hi - lo) : 1));
    const head = document.createElement('tr');
    head.append(document.createElement('th'), ...lines.map((_l, j) => { const th = document.createElement('th'); th.textContent = String(j + 1); th.scope = 'col'; return th; }));
    const body = lines.map((l, i) => {
      const tr = document.createElement('tr');
      const th = document.createElement('th');
      th.scope = 'row';
      th.textContent = `${i + 1}`;
      th.title = l;
      tr.append(th, ...lines.map((_l, j) => {
        const td = document.createElement('td');
        const c = cos(i, j);
        td.textContent = c.toFixed(3);
        td.dataset.i = String(i);
        td.dataset.j = String(j);
        td.style.background = weightColor(i === j ? 1 : 0.15 + 0.85 * shade(c));
        td.style.color = inkOn(i === j ? 1 : 0.15 + 0.85 * shade(c));
        if ((i === pair[0] && j === pair[1]) || (i === pair[1] && j === pair[0])) td.classList.add('chosen');
        if (i !== j) td.addEventListener('click', () => { pair = [i, j]; void update(); });
        return td;
      }));
      return tr;
    });
    table.replaceChildren(head, ...body);
    table.dataset.lines = JSON.stringify(lines);
    table.dataset.model = $('#sim-model').textContent ?? '';
    e.dispose();
    message(msg, '');
    await drawPair(m, lines);
  } catch (err) {
    if (my === seq) message(msg, (err as Error).message, 'error');
  }
}

export function startSimilarity(m: qkv.EncoderModel, label: string): Promise<void> {
  $('#sim-text').addEventListener('input', () => { clearTimeout(timer); timer = window.setTimeout(() => void update(), 200); });
  return useSimilarityModel(m, label);
}

/** Puts `m` into the panel (the one it had is disposed unless it is `keep`) and redraws. */
export async function useSimilarityModel(m: qkv.EncoderModel, label: string, keep?: qkv.EncoderModel): Promise<void> {
  if (model && model !== m && model !== keep) model.dispose();
  model = m;
  $('#sim-model').textContent = `${label}: ${m.architecture}, ${m.layers} layers × ${m.heads} heads, hidden ${m.hidden}; ` +
    `${poolingOf(m)} pooling${m.embeddingDefaults.from === 'sentence-transformers' ? ' (from its sentence-transformers files)' : ''}, normalized.`;
  pair = [0, 1];
  await update();
}
