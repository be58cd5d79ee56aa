"""A small, seeded WordPiece vocabulary trainer and encoder (BERT's uncased scheme).

No tokenizer library is packaged for Debian's Python (no python3-tokenizers), so this is
the algorithm Hugging Face's WordPieceTrainer runs, in plain Python: BPE merges over the
words of the corpus, where a piece that does not start a word is written "##piece".

    basic_tokenize(text)  lower-case, strip accents (NFD, drop Mn), split on whitespace and
                          around every punctuation character (BERT's BasicTokenizer)
    train(words, size)    words -> vocab list: special tokens, the alphabet (c and ##c),
                          then merged pieces in merge order (ties broken by the pair's text)
    WordPiece(vocab)      greedy longest-match-first encoder, [UNK] for a word > 100 chars
                          or one with a character not in the vocabulary
"""

import collections
import unicodedata

SPECIAL = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']


def _is_punct(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith('P')


def basic_tokenize(text):
    text = unicodedata.normalize('NFD', text.lower())
    text = ''.join(c for c in text if unicodedata.category(c) != 'Mn')
    out = []
    for w in text.split():
        cur = ''
        for c in w:
            if _is_punct(c):
                if cur:
                    out.append(cur)
                out.append(c)
                cur = ''
            else:
                cur += c
        if cur:
            out.append(cur)
    return out


def train(word_counts, vocab_size):
    """word_counts: {word: count} -> vocab list of vocab_size (or fewer) pieces."""
    words = sorted(word_counts)                  # a fixed order: the result is deterministic
    syms = [[w[0]] + ['##' + c for c in w[1:]] for w in words]
    freq = [word_counts[w] for w in words]
    alphabet = sorted({s for ss in syms for s in ss})
    vocab = SPECIAL + alphabet
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, ss in enumerate(syms):
        for a, b in zip(ss, ss[1:]):
            pairs[(a, b)] += freq[i]
            where[(a, b)].add(i)
    seen = set(vocab)
    while len(vocab) < vocab_size and pairs:
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        a, b = best
        new = a + b[2:]
        for i in sorted(where.pop(best, ())):
            ss = syms[i]
            for p in zip(ss, ss[1:]):            # take the word's old pairs out ...
                pairs[p] -= freq[i]
                if pairs[p] <= 0:
                    del pairs[p]
            j, merged = 0, []
            while j < len(ss):
                if j + 1 < len(ss) and ss[j] == a and ss[j + 1] == b:
                    merged.append(new)
                    j += 2
                else:
                    merged.append(ss[j])
                    j += 1
            syms[i] = merged
            for p in zip(merged, merged[1:]):    # ... and its new pairs in
                pairs[p] += freq[i]
                where[p].add(i)
        pairs.pop(best, None)
        if new not in seen:
            seen.add(new)
            vocab.append(new)
    return vocab


class WordPiece:
    def __init__(self, vocab):
        self.vocab = list(vocab)
        self.ids = {t: i for i, t in enumerate(self.vocab)}
        self.unk = self.ids['[UNK]']
        self._cache = {}

    def word(self, w):
        if w in self._cache:
            return self._cache[w]
        out, start = [], 0
        if len(w) > 100:
            out = [self.unk]
        while start < len(w) and not out == [self.unk]:
            end, cur = len(w), None
            while start < end:
                piece = w[start:end] if start == 0 else '##' + w[start:end]
                if piece in self.ids:
                    cur = self.ids[piece]
                    break
                end -= 1
            if cur is None:
                out = [self.unk]
                break
            out.append(cur)
            start = end
        self._cache[w] = out
        return out

    def encode(self, text):
        """text -> ids without [CLS]/[SEP]."""
        return [i for w in basic_tokenize(text) for i in self.word(w)]
