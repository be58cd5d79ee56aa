// What the MiniLM embedding benchmark does in Node (minilm.mjs) and in Chromium (minilm_page.js)
// alike: the sentences, the peer's pooling, and the timed loop.
//
// Cells: L tokens per sentence ([CLS] + L - 2 words + [SEP], every word one WordPiece of the
// vocabulary, so each text is exactly L tokens and a batch has no padding) x B sentences per call.
// Runtimes, each a function texts -> Float32Array [B * 384] of unit-length mean-pooled embeddings:
//  - qkv: model.embed(texts) (tokenization, the forward, mean pooling, normalization);
//  - ort-f32 / ort-q8: onnxruntime-web's session.run on the ids (tokenized beforehand, untimed)
//    -> last_hidden_state, then mean pooling over the mask and L2 normalization in JS, as
//    transformers.js's feature-extraction pipeline does ({ pooling: 'mean', normalize: true }).

export const LENGTHS = [16, 64, 256];
export const BATCHES = [1, 32];

/** Whole words of a WordPiece vocabulary (lowercase letters, 3+ long), in a fixed shuffled order. */
export function wordsOf(vocab) {
  const words = vocab.filter((t) => /^[a-z]{3,}$/.test(t));
  let s = 12345;
  for (let i = words.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    const j = s % (i + 1);
    [words[i], words[j]] = [words[j], words[i]];
  }
  return words;
}

/** B texts of L - 2 words each (L tokens with [CLS] and [SEP]), different per (L, b). */
export function textsOf(words, L, B) {
  return Array.from({ length: B }, (_, b) => Array.from({ length: L - 2 }, (_, i) => words[(b * 7919 + L * 104729 + i * 31) % words.length]).join(' '));
}

/** Mean over the mask's tokens, then L2 normalization: hidden [B, L, E] -> [B, E]. */
export function meanPoolNormalize(h, B, L, E, mask) {
  const out = new Float32Array(B * E);
  for (let b = 0; b < B; b++) {
    const v = out.subarray(b * E, (b + 1) * E);
    let n = 0;
    for (let i = 0; i < L; i++) {
      if (!mask[b * L + i]) continue;
      n++;
      const row = h.subarray((b * L + i) * E, (b * L + i + 1) * E);
      for (let e = 0; e < E; e++) v[e] += row[e];
    }
    let ss = 0;
    for (let e = 0; e < E; e++) ss += (v[e] /= n) * v[e];
    const d = Math.max(Math.sqrt(ss), 1e-12);
    for (let e = 0; e < E; e++) v[e] /= d;
  }
  return out;
}

export function cosine(a, b) {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
  return ab / Math.sqrt(aa * bb);
}

/** The lowest cosine over the B rows of two [B, E] embeddings. */
export function minCosine(a, b, B, E) {
  let m = 1;
  for (let r = 0; r < B; r++) m = Math.min(m, cosine(a.subarray(r * E, (r + 1) * E), b.subarray(r * E, (r + 1) * E)));
  return m;
}

/** ORT's runner: ids of the texts (qkv's tokenizer, done here, not timed) -> unit embeddings. */
export function ortRunner(ort, session, tokenize, E) {
  const prepared = new Map();
  return async (texts) => {
    let p = prepared.get(texts);
    if (!p) {
      const ids = texts.map(tokenize);
      const B = ids.length, L = Math.max(...ids.map((x) => x.length));
      const flat = new BigInt64Array(B * L), mask = new BigInt64Array(B * L), m8 = new Uint8Array(B * L);
      ids.forEach((x, b) => x.forEach((t, i) => { flat[b * L + i] = BigInt(t); mask[b * L + i] = 1n; m8[b * L + i] = 1; }));
      p = { B, L, flat, mask, m8 };
      prepared.set(texts, p);
    }
    const { B, L, flat, mask, m8 } = p;
    const feeds = {
      input_ids: new ort.Tensor('int64', flat, [B, L]),
      attention_mask: new ort.Tensor('int64', mask, [B, L]),
      token_type_ids: new ort.Tensor('int64', new BigInt64Array(B * L), [B, L]),
    };
    const out = await session.run(feeds);
    return meanPoolNormalize(out.last_hidden_state.data, B, L, E, m8);
  };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/**
 * Times every runtime on every cell: a warm-up pass, then `rounds` rounds, each timing every
 * (cell, runtime) once (the runtimes' order rotating per round), a timing being max(1, 512 / (B L))
 * calls. clock() -> { wall, cpu } in ms, or a promise of it (cpu may be NaN where it cannot be read).
 * -> { cells: { 'L/B': { runtime: { ms, cpu_ms, min_ms, max_ms, runs } , cos: { runtime: min cosine to qkv } } } }
 */
export async function measure(runtimes, words, { rounds, clock, lengths = LENGTHS, batches = BATCHES, log = () => {} }) {
  const names = Object.keys(runtimes);
  const cells = [];
  for (const L of lengths) for (const B of batches) cells.push({ L, B, texts: textsOf(words, L, B), calls: Math.max(1, Math.round(512 / (B * L))) });
  const result = {};
  for (const c of cells) {
    const key = `${c.L}/${c.B}`;
    result[key] = { L: c.L, B: c.B, calls: c.calls, cos: {} };
    const outs = {};
    for (const n of names) outs[n] = await runtimes[n](c.texts);   // warm-up, and the outputs compared
    for (const n of names) if (n !== 'qkv') result[key].cos[n] = minCosine(outs.qkv, outs[n], c.B, outs.qkv.length / c.B);
    for (const n of names) result[key][n] = { runs: [], cpu_runs: [] };
  }
  for (let r = 0; r < rounds; r++) {
    for (const c of cells) {
      const key = `${c.L}/${c.B}`;
      for (let k = 0; k < names.length; k++) {
        const n = names[(k + r) % names.length];
        const a = await clock();
        for (let i = 0; i < c.calls; i++) await runtimes[n](c.texts);
        const b = await clock();
        result[key][n].runs.push((b.wall - a.wall) / (c.calls * c.B));
        result[key][n].cpu_runs.push((b.cpu - a.cpu) / (c.calls * c.B));
      }
    }
    log(`round ${r + 1}/${rounds}`);
  }
  for (const c of cells) {
    const cell = result[`${c.L}/${c.B}`];
    for (const n of names) {
      const x = cell[n];
      Object.assign(x, { ms: median(x.runs), cpu_ms: median(x.cpu_runs), min_ms: Math.min(...x.runs), max_ms: Math.max(...x.runs) });
    }
  }
  return result;
}
