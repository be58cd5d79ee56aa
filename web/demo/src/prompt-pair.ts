// Where two tokenized prompts part: the patching panel says it under its two prompts, since a
// sweep needs the clean and corrupted prompts to have the same number of tokens, and a reader
// who changed "Moses" to "Aaron" should see that the corrupted one has a token more and where.

/** What {@link comparePrompts} found: `sweepable` when the lengths agree and some token differs. */
export interface PromptPair { sweepable: boolean; text: string }

/** The tokens of `ids` as quoted texts: 'Aar' 'on' (nothing: '(nothing)'; past 6 tokens: '… and 20 more'). */
const quoted = (ids: number[], text: (id: number) => string): string =>
  (ids.length ? ids.slice(0, 6).map((id) => `'${text(id)}'`).join(' ') + (ids.length > 6 ? ` … and ${ids.length - 6} more` : '') : '(nothing)');

/**
 * Compares the clean and corrupted ids: their counts, the first token where they part, and the
 * differing spans (between the common start and the common end), e.g. "clean has 9 tokens,
 * corrupted 10: they part at token 4 ('Moses' vs ' Aar' 'on')".
 */
export function comparePrompts(clean: number[], corrupt: number[], text: (id: number) => string): PromptPair {
  const n = Math.min(clean.length, corrupt.length);
  let start = 0;
  while (start < n && clean[start] === corrupt[start]) start++;
  let end = 0; // tokens the two share at their ends, after `start`
  while (end < n - start && clean[clean.length - 1 - end] === corrupt[corrupt.length - 1 - end]) end++;
  const a = clean.slice(start, clean.length - end), b = corrupt.slice(start, corrupt.length - end);
  const where = `token ${start} (${quoted(a, text)} vs ${quoted(b, text)})`;
  if (clean.length !== corrupt.length) {
    return {
      sweepable: false,
      text: `clean has ${clean.length} tokens, corrupted ${corrupt.length}: they part at ${where}. A sweep needs the same number of tokens: change a word for one of the same token count.`,
    };
  }
  if (start === clean.length) return { sweepable: false, text: `The two prompts are the same ${clean.length} tokens: there is nothing to patch.` };
  const differ = clean.filter((id, t) => id !== corrupt[t]).length;
  const more = differ > 1 ? ` and ${differ - 1} more position${differ > 2 ? 's' : ''}` : '';
  return { sweepable: true, text: `Both have ${clean.length} tokens; they differ at ${where}${more}.` };
}
