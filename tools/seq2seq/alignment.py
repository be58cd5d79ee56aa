#!/usr/bin/python3
"""How often the number speller's cross-attention looks at the digit a word names.

    /usr/bin/python3 tools/seq2seq/alignment.py [--count 500]

For each held-out number the model spells correctly, every word that names one digit ("nine"
in "nine hundred", "forty" for the tens digit 4, "seven" for the units) is checked: does the
cross-attention of the decoder query that produced it, averaged over the heads of a layer, peak
on that digit's encoder position? Prints the rate per decoder layer (teens, "hundred" and
"thousand" are not counted: they name no single digit).
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from make_reference import load  # noqa: E402
from number_words import ONES, TENS, decode_words, encode_number, spell  # noqa: E402
from train_numbers import held_out_numbers  # noqa: E402


def digit_words(n):
    """-> [(word index in spell(n), encoder position of its digit)] for words naming one digit."""
    s = str(n)
    k = len(s)
    out = []
    words = spell(n)
    i = 0

    def group(value, first_pos, ndig):
        # a group of up to 3 digits whose last digit is at encoder position first_pos + ndig - 1
        nonlocal i
        pos = {d: first_pos + d for d in range(ndig)}  # digit index within the group -> encoder position
        digits = str(value).rjust(ndig, '0')
        if ndig == 3 and digits[0] != '0':
            out.append((i, pos[0]))
            i += 2  # "<ones> hundred"
        rest = int(digits[-2:]) if ndig >= 2 else int(digits)
        if rest >= 20:
            out.append((i, pos[ndig - 2]))
            i += 1
            if rest % 10:
                out.append((i, pos[ndig - 1]))
                i += 1
        elif rest >= 10:
            i += 1  # a teen names two digits
        elif rest > 0 or value == 0:
            out.append((i, pos[ndig - 1]))
            i += 1

    if n >= 1000:
        group(n // 1000, 1, k - 3)
        i += 1  # "thousand"
        if n % 1000:
            group(n % 1000, k - 2, 3)
    else:
        group(n, 1, k)
    assert i == len(words), (n, words, i)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--count', type=int, default=500)
    args = ap.parse_args()
    model, cfg = load(os.path.join(HERE, '..', '..', 'web', 'models', 'tiny-numbers'))
    NL = cfg['decoder_layers']
    hits = [0] * NL
    total = 0
    for n in held_out_numbers()[:args.count]:
        src = encode_number(n)
        out = model.greedy(torch.tensor([src]), 10)
        if decode_words(out) != ' '.join(spell(n)):
            continue
        dec = [cfg['decoder_start_token_id']] + out[:-1]
        with torch.no_grad():
            cross = model(torch.tensor([src]), torch.tensor([dec]))['cross_attentions']
        for i, pos in digit_words(n):
            total += 1
            for l in range(NL):
                if int(cross[l][0, :, i].mean(0).argmax()) == pos:
                    hits[l] += 1
    for l in range(NL):
        print(f'decoder layer {l}: the head-averaged cross-attention peaks on the named digit for '
              f'{hits[l]}/{total} words ({100 * hits[l] / max(total, 1):.1f}%)')


if __name__ == '__main__':
    main()
