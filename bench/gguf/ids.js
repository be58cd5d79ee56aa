// Token ids of the race's prompts: `n` ids spread over the vocabulary (past its 3 control
// tokens), a different set per `seed`, the same on both runtimes' pages.
export const idsOf = (n, vocab, seed) => Array.from({ length: n }, (_, i) => 3 + ((i * 7919 + 13 + seed * 104729) % (vocab - 3)));
