#!/usr/bin/python3
"""Bits per byte of a trained KJV model over the whole held-out text (the last 5 % of the bytes).

    /usr/bin/python3 tools/model/eval_heldout.py web/models/tiny-kjv web/models/tiny-kjv-bpe

Total nats over every predicted token / the bytes of those tokens / ln 2, in windows of
n_positions tokens (train_tiny.heldout_bits_per_byte), so byte-level and BPE models compare.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_tiny as tt  # noqa: E402
from make_reference import model_tokenizer  # noqa: E402
import bpe  # noqa: E402


def main():
    dirs = sys.argv[1:] or [os.path.join(tt.ROOT, 'web', 'models', n) for n in ('tiny-kjv', 'tiny-kjv-bpe')]
    torch.set_num_threads(1)
    _, val_text = tt.split_text(tt.kjv_text())
    for d in dirs:
        model = tt.load_model(d)
        encode, _, desc = model_tokenizer(d)
        V = model.cfg['vocab_size']
        if os.path.exists(os.path.join(d, 'vocab.json')):
            enc = bpe.load_tokenizer(d)
            tok_bytes = torch.tensor([len(enc.token_bytes(i)) for i in range(V)])
        else:
            tok_bytes = torch.ones(V, dtype=torch.long)
        bpb, npt, nbytes, ntok = tt.heldout_bits_per_byte(model, encode(val_text), tok_bytes)
        print(f'{os.path.basename(os.path.normpath(d))}: {bpb:.4f} bits/byte over the whole held-out text '
              f'({ntok} tokens, {nbytes} bytes, {npt:.4f} nats/token; {desc}; context {model.cfg["n_positions"]})', flush=True)


if __name__ == '__main__':
    main()
