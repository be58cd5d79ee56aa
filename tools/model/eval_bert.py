#!/usr/bin/python3
"""Held-out masked-token accuracy of an exported tiny BERT, and its top 5 on famous verses.

    /usr/bin/python3 tools/model/eval_bert.py [--model web/models/tiny-bert-kjv]

Reads the exported files only (config.json, model.safetensors, vocab.txt), so it checks what
ships. Held-out text: the last 5 % of the KJV's verses (train_bert.py's split), every pair of
consecutive held-out verses ("[CLS] A [SEP] B [SEP]", cut to 64 tokens as in training); 15 % of
their non-special tokens replaced by [MASK] (torch.Generator seed 99); accuracy = top-1 of the
MLM head at those positions. Also over the first 512 evenly spread pairs: the set train_bert.py
logs as "val acc". Then the [MASK] prompts (each verse's mask at one word), top 5 with
probabilities from the float64 forward.
"""

import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from train_tiny import load_safetensors  # noqa: E402
from train_bert import kjv_verses, make_pairs, mask_batch  # noqa: E402
from bert_torch import from_hf_state_dict  # noqa: E402
import wordpiece  # noqa: E402

PROMPTS = [
    'In the beginning God created the [MASK] and the earth.',
    'And God said, Let there be [MASK]: and there was light.',
    'The LORD is my [MASK]; I shall not want.',
    'For God so loved the [MASK], that he gave his only begotten Son',
    'Jesus [MASK].',
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--model', default=os.path.join(ROOT, 'web', 'models', 'tiny-bert-kjv'))
    ap.add_argument('--json', help='also write the figures to this file')
    ap.add_argument('--seeds', default='99',
                    help='masking draws for the held-out accuracy, comma-separated (the first is the reported one; '
                         'more give the spread between draws)')
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = json.load(open(os.path.join(args.model, 'config.json')))
    tensors, _ = load_safetensors(os.path.join(args.model, 'model.safetensors'))
    model = from_hf_state_dict(cfg, tensors).double()
    vocab = open(os.path.join(args.model, 'vocab.txt')).read().split('\n')[:-1]
    wp = wordpiece.WordPiece(vocab)
    cls, sep, mask_id = wp.ids['[CLS]'], wp.ids['[SEP]'], wp.ids['[MASK]']
    block = int(cfg.get('qkv', {}).get('block', 64))

    verses = kjv_verses()
    held = verses[-(len(verses) // 20):]
    ids, types, lens = (torch.from_numpy(a) for a in make_pairs([wp.encode(v) for v in held], block, cls, sep))
    am = (torch.arange(block)[None] < lens[:, None]).long()

    def heldout_accuracy(seed):
        x, y = mask_batch(ids, lens, torch.Generator().manual_seed(seed), len(vocab), mask_id, len(wordpiece.SPECIAL),
                          train=False)
        hits = torch.zeros(len(x), dtype=torch.long)
        counts = torch.zeros(len(x), dtype=torch.long)
        with torch.no_grad():
            for i in range(0, len(x), 64):
                logits, _ = model(x[i:i + 64], types[i:i + 64], am[i:i + 64])
                sel = y[i:i + 64] != -100
                ok = (logits.argmax(-1) == y[i:i + 64]) & sel
                hits[i:i + 64], counts[i:i + 64] = ok.sum(1), sel.sum(1)
        return hits.sum().item() / counts.sum().item(), counts.sum().item(), len(x)

    seeds = [int(v) for v in args.seeds.split(',')]
    draws = [heldout_accuracy(sd) for sd in seeds]
    acc, masked, pairs = draws[0]
    x = ids
    vsel = torch.linspace(0, len(x) - 1, min(512, len(x))).long()
    print(f'held-out pairs {pairs}, masked tokens {masked}: accuracy {acc:.4f}')
    if len(draws) > 1:
        accs = [a for a, _, _ in draws]
        print(f'{len(draws)} masking draws (seeds {args.seeds}): accuracy {min(accs):.4f} .. {max(accs):.4f}, '
              f'mean {sum(accs) / len(accs):.4f}')
    # the training log's set masks the 512 pairs on their own (another draw of the same rule)
    vx, vy = mask_batch(ids[vsel], lens[vsel], torch.Generator().manual_seed(99), len(vocab), mask_id,
                        len(wordpiece.SPECIAL), train=False)
    with torch.no_grad():
        logits, _ = model(vx, types[vsel], am[vsel])
    sel = vy != -100
    acc512 = (logits.argmax(-1)[sel] == vy[sel]).float().mean().item()
    print(f'the 512 pairs train_bert.py evaluates: accuracy {acc512:.4f} ({sel.sum().item()} masked)')

    out = {'heldout_pairs': pairs, 'masked_tokens': masked, 'accuracy': round(acc, 4),
           'accuracy_512': round(acc512, 4),
           'draws': [{'seed': sd, 'accuracy': round(a, 4), 'masked_tokens': n} for sd, (a, n, _) in zip(seeds, draws)],
           'prompts': []}
    for text in PROMPTS:
        left, right = text.split('[MASK]')
        seq = [cls] + wp.encode(left) + [mask_id] + wp.encode(right) + [sep]
        at = seq.index(mask_id)
        with torch.no_grad():
            logits, _ = model(torch.tensor([seq]))
        p = torch.softmax(logits[0, at], -1)
        top = torch.topk(p, 5)
        pairs = [(vocab[int(i)], round(float(s), 4)) for i, s in zip(top.indices, top.values)]
        out['prompts'].append({'text': text, 'top5': pairs})
        print(f'{text!r}: ' + ', '.join(f'{t} {s:.1%}' for t, s in pairs))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(out, f, indent=1)
            f.write('\n')


if __name__ == '__main__':
    main()
