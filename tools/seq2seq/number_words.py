"""The number-spelling task: "1907" -> "one thousand nine hundred seven" (0 .. 9999; spell() covers 0 .. 999999).

The vocabulary is a BERT WordPiece vocab.txt, so qkv's WordPiece tokenizer (and HF's
BertTokenizer) read it: the encoder input "1907" tokenizes as [CLS] 1 ##9 ##0 ##7 [SEP]
(a leading digit, then continuation digits), the decoder writes whole words and ends with
[SEP]; [CLS] starts the decoder (decoder_start_token_id).
"""
SPECIALS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
ONES = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten',
        'eleven', 'twelve', 'thirteen', 'fourteen', 'fifteen', 'sixteen', 'seventeen', 'eighteen', 'nineteen']
TENS = ['', '', 'twenty', 'thirty', 'forty', 'fifty', 'sixty', 'seventy', 'eighty', 'ninety']
DIGITS = [str(d) for d in range(10)]
VOCAB = SPECIALS + DIGITS + ['##' + d for d in DIGITS] + ONES + TENS[2:] + ['hundred', 'thousand']
IDS = {t: i for i, t in enumerate(VOCAB)}
PAD, UNK, CLS, SEP = 0, 1, 2, 3
MAX_NUMBER = 9999  # the trained range (short sequences: 6 encoder and <= 7 decoder tokens)


def below_thousand(n):
    words = []
    if n >= 100:
        words += [ONES[n // 100], 'hundred']
        n %= 100
    if n >= 20:
        words.append(TENS[n // 10])
        n %= 10
        if n:
            words.append(ONES[n])
    elif n or not words:
        words.append(ONES[n])
    return words


def spell(n):
    """0 <= n <= 999999 -> list of words (no "and", no hyphens)."""
    assert 0 <= n <= 999999
    if n < 1000:
        return below_thousand(n)
    words = below_thousand(n // 1000) + ['thousand']
    if n % 1000:
        words += below_thousand(n % 1000)
    return words


def encode_number(n):
    """[CLS] d ##d ##d ... [SEP], as BertTokenizer tokenizes str(n) with this vocab."""
    s = str(n)
    return [CLS, IDS[s[0]]] + [IDS['##' + c] for c in s[1:]] + [SEP]


def encode_words(words):
    """Decoder labels: the words then [SEP]."""
    return [IDS[w] for w in words] + [SEP]


def decode_words(ids):
    out = []
    for i in ids:
        if i == SEP:
            break
        out.append(VOCAB[i])
    return ' '.join(out)


def vocab_txt():
    return '\n'.join(VOCAB) + '\n'


if __name__ == '__main__':
    for n in (0, 7, 13, 20, 45, 100, 101, 1907, 2000, 10015, 999999, 120003):
        print(n, spell(n), encode_number(n))
    print(len(VOCAB), 'tokens')
