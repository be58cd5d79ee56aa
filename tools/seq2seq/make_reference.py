#!/usr/bin/python3
"""Reference outputs of the BART layout for qkv's tests, from tools/seq2seq/bart.py in float64.

    /usr/bin/python3 tools/seq2seq/make_reference.py

Writes under tests/data/seq2seq/:
  random-bart/            a small random checkpoint (config.json, model.safetensors, a placeholder
                          vocab.txt) whose shapes
                          differ on purpose: 1 encoder layer of 2 heads, 3 decoder layers of 4
                          heads, encoder FFN 48, decoder FFN 80, scale_embedding on, random
                          LayerNorms and final_logits_bias
  random-bart.json        its cases
  tiny-numbers.json       cases of the trained web/models/tiny-numbers, and its greedy outputs
  <model>/<case>.<what>.bin   float32 little-endian: logits [Lt, V], encoder_attentions
                          [enc_layers, H, Ls, Ls], decoder_attentions [dec_layers, H, Lt, Lt],
                          cross_attentions [dec_layers, H, Lt, Ls]
"""
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, 'tools', 'model'))

from bart import Bart, bart_config  # noqa: E402
from number_words import decode_words, encode_number, spell  # noqa: E402
from train_tiny import load_safetensors, save_safetensors  # noqa: E402

OUT = os.path.join(ROOT, 'tests', 'data', 'seq2seq')
WHAT = ('logits', 'encoder_attentions', 'decoder_attentions', 'cross_attentions')


def write_bin(path, t):
    np.ascontiguousarray(t.detach().numpy().astype('<f4')).tofile(path)


def run_case(model, name, src, tgt, folder):
    """Forward in float64; writes the four outputs of the case, returns its manifest entry."""
    with torch.no_grad():
        out = model(torch.tensor([src]), torch.tensor([tgt]))
    entry = {'name': name, 'input_ids': src, 'decoder_input_ids': tgt}
    for what in WHAT:
        t = out[what][0] if what == 'logits' else torch.stack([a[0] for a in out[what]])
        file = f'{folder}/{name}.{what}.bin'
        write_bin(os.path.join(OUT, file), t)
        entry[what] = {'file': file, 'shape': list(t.shape)}
    return entry


def random_model():
    torch.manual_seed(7)
    cfg = bart_config(vocab_size=50, d_model=32, layers=1, heads=2, ffn=48, max_positions=24,
                      pad=0, bos=1, eos=2, decoder_start=2)
    cfg.update({'decoder_layers': 3, 'decoder_attention_heads': 4, 'decoder_ffn_dim': 80, 'scale_embedding': True})
    model = Bart(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'layer_norm' in name or 'layernorm' in name:
                p.copy_((1.0 if name.endswith('weight') else 0.0) + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p) / (p.shape[-1] ** 0.5 if p.dim() == 2 else 1.0))
        model.final_logits_bias.copy_(0.5 * torch.randn_like(model.final_logits_bias))
    folder = os.path.join(OUT, 'random-bart')
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
        f.write('\n')
    save_safetensors(os.path.join(folder, 'model.safetensors'),
                     {k: v.float().contiguous() for k, v in model.hf_state_dict().items()}, metadata={'format': 'pt'})
    with open(os.path.join(folder, 'vocab.txt'), 'w') as f:  # loadModel wants a tokenizer: placeholder words
        f.write('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(45)]) + '\n')
    return cfg


def load(folder):
    with open(os.path.join(folder, 'config.json')) as f:
        cfg = json.load(f)
    model = Bart(cfg)
    tensors, _ = load_safetensors(os.path.join(folder, 'model.safetensors'))
    model.load_hf_state_dict(tensors)
    return model.double().eval(), cfg


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument('--trained', default=os.path.join(ROOT, 'web', 'models', 'tiny-numbers'))
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    random_model()
    model, cfg = load(os.path.join(OUT, 'random-bart'))
    g = torch.Generator().manual_seed(11)
    rand_ids = lambda n: torch.randint(0, cfg['vocab_size'], (n,), generator=g).tolist()  # noqa: E731
    cases = [run_case(model, 'short', rand_ids(3), [2] + rand_ids(4), 'random-bart'),
             run_case(model, 'long', rand_ids(17), [2] + rand_ids(23), 'random-bart'),
             run_case(model, 'one', rand_ids(1), [2], 'random-bart')]
    greedy = [{'input_ids': ids, 'output_ids': model.greedy(torch.tensor([ids]), 12)}
              for ids in (rand_ids(5), rand_ids(9))]
    with open(os.path.join(OUT, 'random-bart.json'), 'w') as f:
        json.dump({'model_dir': 'tests/data/seq2seq/random-bart', 'cases': cases, 'greedy': greedy,
                   'generator': 'tools/seq2seq/make_reference.py (float64)'}, f, indent=1)
        f.write('\n')

    model, cfg = load(args.trained)
    os.makedirs(os.path.join(OUT, 'tiny-numbers'), exist_ok=True)
    cases, greedy = [], []
    for n in (1907, 42, 7000, 3018):
        src = encode_number(n)
        out = model.greedy(torch.tensor([src]), 10)
        greedy.append({'number': n, 'input_ids': src, 'output_ids': out, 'text': decode_words(out),
                       'correct': decode_words(out) == ' '.join(spell(n))})
    for n in (1907, 3018):
        g0 = next(x for x in greedy if x['number'] == n)
        cases.append(run_case(model, str(n), g0['input_ids'], [cfg['decoder_start_token_id']] + g0['output_ids'],
                              'tiny-numbers'))
    with open(os.path.join(OUT, 'tiny-numbers.json'), 'w') as f:
        json.dump({'model_dir': 'web/models/tiny-numbers', 'cases': cases, 'greedy': greedy,
                   'generator': 'tools/seq2seq/make_reference.py (float64)'}, f, indent=1)
        f.write('\n')
    for x in greedy:
        print(x['number'], '->', x['text'], 'ok' if x['correct'] else 'WRONG')


if __name__ == '__main__':
    main()
