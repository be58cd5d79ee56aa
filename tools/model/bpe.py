#!/usr/bin/python3
"""GPT-2's byte-level BPE: learn merges on a text, encode, decode, write vocab.json/merges.txt.

The scheme is GPT-2's (openai/gpt-2 src/encoder.py):
  1. the pre-tokenizer regex GPT2_PAT splits the text into pieces (" the", "LORD", ",", "\\n");
  2. each piece's UTF-8 bytes are written as characters through bytes_to_unicode()
     (printable bytes stand for themselves, the rest map to U+0100 onwards; " " is "Ġ");
  3. merges (pairs of symbols, by rank) are applied inside each piece, lowest rank first.

vocab.json maps each token's string to its id: the 256 byte tokens first, in
bytes_to_unicode() order (so "!" = 0 and "Ġ" = 220, as in GPT-2), then one token per merge
in merge order. merges.txt is "#version: 0.2" then one "a b" line per merge.

Learning (learn_bpe) is plain BPE over the pieces: repeatedly merge the most frequent
adjacent pair (ties: the lexicographically smallest pair); merges never cross pieces.

    /usr/bin/python3 tools/model/bpe.py --vocab-size 2048 --out /tmp/bpe   # learn on the KJV
"""
import argparse
import collections
import heapq
import json
import os
import sys

try:
    import regex as re_u
except ImportError:  # pragma: no cover
    sys.exit('bpe: needs the `regex` module (\\p{L}): apt-get install -y python3-regex')

GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable unicode char map (openai/gpt-2 encoder.py).
    Returns (bs, cs): bs[i] is the byte whose token has id i in GPT-2's vocab, cs[i] its char."""
    bs = list(range(ord('!'), ord('~') + 1)) + list(range(ord('¡'), ord('¬') + 1)) + \
        list(range(ord('®'), ord('ÿ') + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return bs, [chr(c) for c in cs]


def learn_bpe(text, n_tokens):
    """Merges learned on text until they make n_tokens new tokens: the most frequent
    adjacent pair first (counted over the distinct pieces, weighted by how often each piece
    occurs), ties broken by the lexicographically smallest pair. Returns a list of (a, b)
    symbol pairs. Two merges can make the same string ("ab"+"c", "a"+"bc"): both are kept
    in merges.txt, the token once in vocab.json, so len(merges) >= n_tokens.

    Incremental: `where` maps a pair to the pieces that hold it, so a merge only rewrites
    those pieces; a heap of (-count, pair) with stale entries skipped finds the best pair."""
    bs, cs = bytes_to_unicode()
    b2u = dict(zip(bs, cs))
    piece_counts = collections.Counter(re_u.findall(GPT2_PAT, text))
    words = [[b2u[b] for b in p.encode('utf-8')] for p in piece_counts]   # symbols of each piece
    freq = list(piece_counts.values())                                    # occurrences of each piece
    pairs = collections.Counter()                                         # pair -> weighted count
    where = collections.defaultdict(set)                                  # pair -> indices into words
    for i, w in enumerate(words):
        for p in zip(w, w[1:]):
            pairs[p] += freq[i]
            where[p].add(i)
    heap = [(-c, p) for p, c in pairs.items()]
    heapq.heapify(heap)

    merges = []
    made = set()                                       # strings of the tokens made so far
    while len(made) < n_tokens and heap:
        c, best = heapq.heappop(heap)
        if pairs.get(best, 0) != -c or c == 0:
            continue                                   # stale entry: the count has changed
        merges.append(best)
        a, b = best
        made.add(a + b)
        changed = set()
        for i in where.pop(best):
            w = words[i]
            # take the piece's pairs out, merge, put the new pairs in
            for p in zip(w, w[1:]):
                pairs[p] -= freq[i]
                changed.add(p)
            out, j = [], 0
            while j < len(w):
                if j < len(w) - 1 and w[j] == a and w[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for p in zip(out, out[1:]):
                pairs[p] += freq[i]
                where[p].add(i)
                changed.add(p)
        for p in changed:
            if pairs[p] > 0:
                heapq.heappush(heap, (-pairs[p], p))
            else:
                pairs.pop(p, None)
                where.pop(p, None)
    return merges


def vocab_from_merges(merges):
    """vocab.json's dict: 256 byte tokens in GPT-2 order, then the token each merge makes,
    in merge order (a string that an earlier merge made keeps its id)."""
    _, cs = bytes_to_unicode()
    vocab = {c: i for i, c in enumerate(cs)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    return vocab


def save_tokenizer(out_dir, merges):
    """Write vocab.json and merges.txt in GPT-2's format into out_dir; returns the vocab."""
    vocab = vocab_from_merges(merges)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, 'vocab.json'), 'w', encoding='utf-8') as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out_dir, 'merges.txt'), 'w', encoding='utf-8') as f:
        f.write('#version: 0.2\n')
        for a, b in merges:
            f.write(f'{a} {b}\n')
    return vocab


def load_tokenizer(model_dir, config=True):
    """GPT2Encoder from model_dir/vocab.json and model_dir/merges.txt, with the add_prefix_space
    of model_dir/tokenizer_config.json when there is one (config=False: without it, the
    encoding train_tiny.py trained on)."""
    with open(os.path.join(model_dir, 'vocab.json'), encoding='utf-8') as f:
        vocab = json.load(f)
    with open(os.path.join(model_dir, 'merges.txt'), encoding='utf-8') as f:
        lines = f.read().split('\n')
    merges = [tuple(ln.split(' ')) for ln in lines[1:] if ln]
    add_prefix_space = False
    cfg_path = os.path.join(model_dir, 'tokenizer_config.json')
    if config and os.path.exists(cfg_path):
        with open(cfg_path, encoding='utf-8') as f:
            add_prefix_space = bool(json.load(f).get('add_prefix_space', False))
    return GPT2Encoder(vocab, merges, add_prefix_space)


class GPT2Encoder:
    """GPT-2's encoder (openai/gpt-2 src/encoder.py), verbatim in its algorithm.

    add_prefix_space is Hugging Face's GPT2TokenizerFast option (the ByteLevel pre-tokenizer of
    huggingface/tokenizers): a text that is not empty and does not start with ' ' is encoded
    as ' ' + text; decode keeps that space."""

    def __init__(self, vocab, merges, add_prefix_space=False):
        self.add_prefix_space = add_prefix_space
        self.encoder = vocab
        self.decoder = {v: k for k, v in vocab.items()}
        bs, cs = bytes_to_unicode()
        self.byte_encoder = dict(zip(bs, cs))
        self.byte_decoder = {v: k for k, v in self.byte_encoder.items()}
        self.bpe_ranks = {tuple(m): i for i, m in enumerate(merges)}
        self.pat = re_u.compile(GPT2_PAT)
        self.cache = {}

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = set(zip(word, word[1:]))
        if not pairs:
            return token
        while True:
            bigram = min(pairs, key=lambda p: self.bpe_ranks.get(p, float('inf')))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word, i = [], 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                except ValueError:
                    new_word.extend(word[i:])
                    break
                new_word.extend(word[i:j])
                i = j
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            if len(word) == 1:
                break
            pairs = set(zip(word, word[1:]))
        out = ' '.join(word)
        self.cache[token] = out
        return out

    def prefixed(self, text):
        """The text the regex splits (see add_prefix_space)."""
        return ' ' + text if self.add_prefix_space and text and not text.startswith(' ') else text

    def pieces(self, text):
        return self.pat.findall(self.prefixed(text))

    def encode(self, text):
        ids = []
        for tok in self.pat.findall(self.prefixed(text)):
            tok = ''.join(self.byte_encoder[b] for b in tok.encode('utf-8'))
            ids.extend(self.encoder[t] for t in self.bpe(tok).split(' '))
        return ids

    def token_bytes(self, i):
        """The UTF-8 bytes that token id i stands for."""
        return bytes(self.byte_decoder[c] for c in self.decoder[i])

    def decode(self, ids):
        s = ''.join(self.decoder[i] for i in ids)
        return bytearray(self.byte_decoder[c] for c in s).decode('utf-8', errors='replace')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--vocab-size', type=int, default=2048)
    ap.add_argument('--out', required=True, help='folder for vocab.json and merges.txt')
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import train_tiny as tt
    text = tt.kjv_text()
    train_text, _ = tt.split_text(text)
    merges = learn_bpe(train_text, args.vocab_size - 256)
    save_tokenizer(args.out, merges)
    enc = GPT2Encoder(vocab_from_merges(merges), merges)
    n = len(enc.encode(train_text))
    print(f'{len(merges)} merges -> {args.out}; training text {len(train_text.encode())} bytes = {n} tokens '
          f'({len(train_text.encode()) / n:.2f} bytes/token)')


if __name__ == '__main__':
    main()
