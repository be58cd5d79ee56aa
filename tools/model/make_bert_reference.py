#!/usr/bin/python3
"""Reference data for the encoder tests (tests/data/encoder/), from a float64 PyTorch forward.

    /usr/bin/python3 tools/model/make_bert_reference.py            # random checkpoints + cases
    /usr/bin/python3 tools/model/make_bert_reference.py --trained  # also fill-mask on web/models/tiny-bert-kjv

Writes two small seeded, untrained checkpoints in Hugging Face's layouts:
  random-bert/        BertForMaskedLM: vocab 120, hidden 64, 2 layers, 4 heads (D 16),
                      intermediate 96, 40 positions, 2 token types; with the pooler tensors
                      a BertForPreTraining file also holds (the loader must ignore them)
  random-distilbert/  DistilBertForMaskedLM: vocab 100, dim 48, 2 layers, 3 heads (D 16),
                      hidden_dim 80, 32 positions
Weights ~N(0, 0.15^2), LayerNorm weights 1 + N(0, 0.1^2), every bias non-zero. Each has
config.json, model.safetensors (F32, the tied decoder left out as HF saves it) and a vocab.txt
(specials, letters, punctuation, common KJV words: enough for loadModel's WordPiece tokenizer).

encoder.json lists, per model, cases: ids [B, L], token_type_ids, attention_mask (a batch of
two sequences of unequal length, padded), and the float64 forward rounded once to float32:
logits [B, L, V] and attentions [layers, B, H, L, L] as raw little-endian float32 files.
With --trained, "fill_mask" holds masked sentences for the trained model: their ids, and the
top 5 (token id, token, probability) at the [MASK], from the float64 forward.
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from train_tiny import save_safetensors, load_safetensors  # noqa: E402
from bert_torch import (BertForMaskedLM, DistilBertForMaskedLM, bert_config, distilbert_config,  # noqa: E402
                        hf_state_dict, from_hf_state_dict)
import wordpiece  # noqa: E402


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith('LayerNorm.weight') or 'layer_norm.weight' in name:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=gen, dtype=torch.float64))


WORDS = ('the and of to that in he shall unto for i his a lord they be is him not them it with all thou thy was god '
         'which my me said but ye their have will thee from as are when this out were upon man by you israel king son '
         'up there hath then people came had house into her come one we children before your also day land men').split()


def small_vocab(n):
    """A vocab.txt of n pieces for a random model: specials, letters (c and ##c), punctuation, words."""
    letters = [chr(c) for c in range(ord('a'), ord('z') + 1)]
    v = wordpiece.SPECIAL + letters + ['##' + c for c in letters] + list('.,;:!?') + WORDS
    v += [f'[unused{i}]' for i in range(n - len(v))]      # BERT's spelling for pieces with no text
    return v[:n]


def write_model(model, out_dir, extra=None):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, 'vocab.txt'), 'w') as f:
        f.write(''.join(t + '\n' for t in small_vocab(model.cfg['vocab_size'])))
    with open(os.path.join(out_dir, 'config.json'), 'w') as f:
        json.dump(model.cfg, f, indent=2)
        f.write('\n')
    sd = {k: v.float() for k, v in hf_state_dict(model).items()}
    if extra:
        sd.update(extra)
    save_safetensors(os.path.join(out_dir, 'model.safetensors'), sd, {'format': 'pt'})


def reload64(model_dir):
    """The checkpoint as written (float32 values), run in float64."""
    cfg = json.load(open(os.path.join(model_dir, 'config.json')))
    tensors, _ = load_safetensors(os.path.join(model_dir, 'model.safetensors'))
    return from_hf_state_dict(cfg, tensors).double()


def sha256(path):
    return hashlib.sha256(open(path, 'rb').read()).hexdigest()


def write_case(out, name, model, ids, types, mask):
    ids_t, types_t, mask_t = (torch.tensor(a, dtype=torch.long) for a in (ids, types, mask))
    with torch.no_grad():
        logits, atts = model(ids_t, types_t, mask_t)
    att = torch.stack(atts)                                       # [layers, B, H, L, L]
    lf, af = f'{name}.logits.bin', f'{name}.attentions.bin'
    logits.float().numpy().astype('<f4').tofile(os.path.join(out, lf))
    att.float().numpy().astype('<f4').tofile(os.path.join(out, af))
    return {'ids': ids, 'token_type_ids': types, 'attention_mask': mask,
            'logits': {'file': lf, 'shape': list(logits.shape)},
            'attentions': {'file': af, 'shape': list(att.shape)},
            'max_abs_logit': float(logits.abs().max())}


def random_cases(out, name, model, vocab, gen, with_types):
    L, L2 = 12, 7
    a = torch.randint(5, vocab, (L,), generator=gen).tolist()
    b = torch.randint(5, vocab, (L2,), generator=gen).tolist()
    types = [0] * 6 + [1] * 6 if with_types else [0] * L
    single = write_case(out, f'{name}-single', model, [a], [types], [[1] * L])
    ids2 = [a, b + [0] * (L - L2)]
    types2 = [types, ([0] * 4 + [1] * 3 if with_types else [0] * L2) + [0] * (L - L2)]
    mask2 = [[1] * L, [1] * L2 + [0] * (L - L2)]
    batch = write_case(out, f'{name}-padded', model, ids2, types2, mask2)
    return {'single': single, 'padded': batch}


FILL_MASK_TEXTS = [
    'In the beginning God created the [MASK] and the earth.',
    'And God said, Let there be [MASK]: and there was light.',
    'The LORD is my [MASK]; I shall not want.',
    'For God so loved the [MASK], that he gave his only begotten Son.',
]


def fill_mask_cases(model_dir):
    vocab = open(os.path.join(model_dir, 'vocab.txt')).read().split('\n')[:-1]
    wp = wordpiece.WordPiece(vocab)
    model = reload64(model_dir)
    cases = []
    for text in FILL_MASK_TEXTS:
        left, right = text.split('[MASK]')
        ids = [wp.ids['[CLS]']] + wp.encode(left) + [wp.ids['[MASK]']] + wp.encode(right) + [wp.ids['[SEP]']]
        at = ids.index(wp.ids['[MASK]'])
        with torch.no_grad():
            logits, _ = model(torch.tensor([ids]))
        p = torch.softmax(logits[0, at], -1)
        top = torch.topk(p, 6)
        cases.append({'text': text, 'ids': ids, 'mask_index': at,
                      'top': [{'token_id': int(i), 'token': vocab[int(i)], 'score': float(s)}
                              for i, s in zip(top.indices[:5], top.values[:5])],
                      'top1_margin': float(top.values[0] - top.values[1])})
    return {'model_dir': os.path.relpath(model_dir, os.path.join(ROOT, 'tests', 'data', 'encoder')),
            'model_sha256': sha256(os.path.join(model_dir, 'model.safetensors')), 'cases': cases}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default=os.path.join(ROOT, 'tests', 'data', 'encoder'))
    ap.add_argument('--trained', action='store_true')
    ap.add_argument('--model', default=os.path.join(ROOT, 'web', 'models', 'tiny-bert-kjv'))
    args = ap.parse_args()
    torch.set_num_threads(1)
    out = args.out
    os.makedirs(out, exist_ok=True)
    gen = torch.Generator().manual_seed(11)
    manifest = {'note': 'written by tools/model/make_bert_reference.py; float64 forward rounded to float32',
                'models': {}}

    bert = BertForMaskedLM(bert_config(120, hidden=64, layers=2, heads=4, intermediate=96, max_pos=40)).double()
    randomize(bert, gen)
    pooler = {'bert.pooler.dense.weight': (0.1 * torch.randn(64, 64, generator=gen)).float(),
              'bert.pooler.dense.bias': (0.1 * torch.randn(64, generator=gen)).float()}
    write_model(bert, os.path.join(out, 'random-bert'), pooler)
    m = reload64(os.path.join(out, 'random-bert'))
    manifest['models']['random-bert'] = {'dir': 'random-bert', 'cases': random_cases(out, 'random-bert', m, 120, gen, True)}

    dist = DistilBertForMaskedLM(distilbert_config(100, dim=48, layers=2, heads=3, hidden_dim=80, max_pos=32)).double()
    randomize(dist, gen)
    write_model(dist, os.path.join(out, 'random-distilbert'))
    m = reload64(os.path.join(out, 'random-distilbert'))
    manifest['models']['random-distilbert'] = {'dir': 'random-distilbert',
                                               'cases': random_cases(out, 'random-distilbert', m, 100, gen, False)}

    if args.trained:
        manifest['fill_mask'] = fill_mask_cases(args.model)
        for c in manifest['fill_mask']['cases']:
            print(c['text'], '->', [(t['token'], round(t['score'], 4)) for t in c['top']])
    elif os.path.exists(os.path.join(out, 'encoder.json')):
        old = json.load(open(os.path.join(out, 'encoder.json')))
        if 'fill_mask' in old:
            manifest['fill_mask'] = old['fill_mask']
    with open(os.path.join(out, 'encoder.json'), 'w') as f:
        json.dump(manifest, f, indent=1)
        f.write('\n')
    print('wrote', out)


if __name__ == '__main__':
    main()
