// What the race's two pages share: the prompts' token ids and the marks around timed regions.

/** `n` token ids spread over the vocabulary (past its 3 control tokens), a different set per `seed`. */
export const idsOf = (n, vocab, seed) => Array.from({ length: n }, (_, i) => 3 + ((i * 7919 + 13 + seed * 104729) % (vocab - 3)));

/** A mark: the time here and the index of the runner's reading of the renderer's CPU time (GET /mark). */
export const mark = async () => ({ wall: performance.now(), id: Number(await (await fetch('/mark')).text()) });

/** A timed region between two marks: its wall ms and the marks' indices (the runner gives its CPU ms). */
export const span = (a, b) => ({ wall: b.wall - a.wall, from: a.id, to: b.id });
