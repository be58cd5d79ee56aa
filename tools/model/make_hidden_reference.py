#!/usr/bin/python3
"""Reference data for the encoders' and BART's hidden states and the masked-LM logit lens.

    /usr/bin/python3 tools/model/make_hidden_reference.py

Random checkpoints in Hugging Face's layouts, their weights made from a seed by
tools/model/random_weights.py (std 0.2; the JS test makes the same float32 values,
tests/js/random-weights.js), so only the outputs are committed:
  bert        BertForMaskedLM, vocab 90, hidden 48, 3 layers, 4 heads, intermediate 80
  distilbert  DistilBertForMaskedLM, vocab 90, dim 48, 3 layers, 3 heads, hidden_dim 72
  roberta     tests/data/encoder/roberta.json's random-roberta (its config, seed and tokenizer)
  bart        BartForConditionalGeneration, vocab 60, d_model 32, 2 encoder layers of 4 heads,
              3 decoder layers of 2 heads, scale_embedding on (random_weights draws
              layernorm_embedding.weight around 0, not 1: its name is not a *layer_norm.weight)
Each is run in float64 (bert_torch.py, tools/seq2seq/bart.py) and its outputs rounded once to
float32, little-endian:
  tests/data/encoder/hidden-lens.json, hidden-<model>.states.bin   hidden_states [layers + 1, T, E]
      (HF's output_hidden_states: the embeddings' output after their LayerNorm, then each
      layer's), and the masked-LM logit lens by its definition: for every layer l and position t,
      softmax(head(hidden_states[l][t])): the top 5 (id, p), KL(final || layer) in nats, and
      the probability and rank (0 = most probable) of `target[t]`
  tests/data/seq2seq/bart-hidden.json, bart-hidden.{encoder,decoder}.bin, bart-hidden.logits.bin
      encoder_hidden_states [encoder_layers + 1, Ls, E], decoder_hidden_states
      [decoder_layers + 1, Lt, E], logits [Lt, V]
"""

import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, 'tools', 'seq2seq'))
import random_weights  # noqa: E402
from bart import Bart, bart_config  # noqa: E402
from bert_torch import (BertForMaskedLM, DistilBertForMaskedLM, RobertaForMaskedLM, bert_config,  # noqa: E402
                        distilbert_config, hf_state_dict)
from make_bert_reference import small_vocab  # noqa: E402

ENC = os.path.join(ROOT, 'tests', 'data', 'encoder')
S2S = os.path.join(ROOT, 'tests', 'data', 'seq2seq')
TOP = 5


def write_f32(path, t):
    np.ascontiguousarray(t.detach().numpy().astype('<f4')).tofile(path)


def with_weights(model, seed):
    """The model's parameters replaced by random_weights' (float32 values, run in float64) -> {name: shape}."""
    sd = hf_state_dict(model) if not isinstance(model, Bart) else model.hf_state_dict()
    shapes = {k: list(v.shape) for k, v in sd.items()}
    w = random_weights.checkpoint(seed, shapes)
    named = dict(model.named_parameters())
    named.update(dict(model.named_buffers()))
    with torch.no_grad():
        for k, v in w.items():
            key = 'vocab_projector_bias' if k == 'vocab_projector.bias' else k
            named[key].copy_(torch.from_numpy(v.astype(np.float64)))
    # a tied copy (BART's embed_tokens) is the shared table itself: nothing else to set
    return shapes


def lens(model, states, target):
    """The masked-LM logit lens of hidden_states [layers + 1] x [1, T, E] by its definition."""
    with torch.no_grad():
        logp = [torch.log_softmax(model.head(h[0]), -1) for h in states]   # each [T, V]
    final = logp[-1]
    out = []
    for lp in logp:
        cells = []
        for t in range(lp.shape[0]):
            p = lp[t].exp()
            order = sorted(range(p.shape[0]), key=lambda v: (-float(lp[t, v]), v))
            kl = float((final[t].exp() * (final[t] - lp[t])).sum())
            tg = target[t]
            cells.append({'top': [[v, float(p[v])] for v in order[:TOP]],
                          'gap': float(p[order[TOP - 1]] - p[order[TOP]]),   # how far from a tie the top 5 is
                          'kl': kl, 'target_p': float(p[tg]), 'target_rank': order.index(tg)})
        out.append(cells)
    return out


def encoder_case(name, model, cfg, shapes, seed, ids, target, extra):
    model.eval()
    states = []
    with torch.no_grad():
        logits, _ = model(torch.tensor([ids]), None, None, hidden=states) if not isinstance(model, DistilBertForMaskedLM) \
            else model(torch.tensor([ids]), hidden=states)
    hs = torch.stack([h[0] for h in states])                                  # [layers + 1, T, E]
    write_f32(os.path.join(ENC, f'hidden-{name}.states.bin'), hs)
    entry = {'config': cfg, 'shapes': shapes, 'seed': seed, 'ids': ids, 'target': target,
             'states': {'file': f'hidden-{name}.states.bin', 'shape': list(hs.shape)},
             'lens': lens(model, states, target), 'max_abs_logit': float(logits.abs().max())}
    entry.update(extra)
    return entry


def main():
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(5)
    ref = {'note': 'written by tools/model/make_hidden_reference.py; float64 forward rounded to float32', 'models': {}}

    cfg = bert_config(90, hidden=48, layers=3, heads=4, intermediate=80, max_pos=24)
    model = BertForMaskedLM(cfg).double()
    shapes = with_weights(model, 301)
    ids = [2] + torch.randint(5, 90, (9,), generator=g).tolist() + [3]
    target = torch.randint(0, 90, (len(ids),), generator=g).tolist()
    ref['models']['bert'] = encoder_case('bert', model, cfg, shapes, 301, ids, target, {'vocab': small_vocab(90)})

    cfg = distilbert_config(90, dim=48, layers=3, heads=3, hidden_dim=72, max_pos=24)
    model = DistilBertForMaskedLM(cfg).double()
    shapes = with_weights(model, 302)
    ids = [2] + torch.randint(5, 90, (7,), generator=g).tolist() + [3]
    target = torch.randint(0, 90, (len(ids),), generator=g).tolist()
    ref['models']['distilbert'] = encoder_case('distilbert', model, cfg, shapes, 302, ids, target, {'vocab': small_vocab(90)})

    rob = json.load(open(os.path.join(ENC, 'roberta.json')))['models']['random-roberta']
    cfg = rob['config']
    model = RobertaForMaskedLM(cfg).double()
    w = random_weights.checkpoint(rob['seed'], rob['shapes'])
    model.load_state_dict({k: torch.from_numpy(v.astype(np.float64)) for k, v in w.items()}, strict=True)
    ids = rob['ids'][0]
    V = cfg['vocab_size']
    target = torch.randint(0, V, (len(ids),), generator=g).tolist()
    ref['models']['roberta'] = encoder_case('roberta', model, cfg, rob['shapes'], rob['seed'], ids, target,
                                            {'tokenizer': rob['tokenizer']})
    with open(os.path.join(ENC, 'hidden-lens.json'), 'w') as f:
        json.dump(ref, f, indent=1)
        f.write('\n')

    cfg = bart_config(vocab_size=60, d_model=32, layers=2, heads=4, ffn=64, max_positions=24, pad=0, bos=1, eos=2,
                      decoder_start=2)
    cfg.update({'decoder_layers': 3, 'decoder_attention_heads': 2, 'decoder_ffn_dim': 48, 'scale_embedding': True})
    model = Bart(cfg).double().eval()
    shapes = with_weights(model, 303)
    src = torch.randint(3, 60, (7,), generator=g).tolist()
    tgt = [2] + torch.randint(3, 60, (5,), generator=g).tolist()
    enc_states, dec_states = [], []
    with torch.no_grad():
        enc_out, _ = model.encode(torch.tensor([src]), hidden=enc_states)
        logits, _, _ = model.decode(torch.tensor([tgt]), enc_out, hidden=dec_states)
    files = {}
    for what, t in (('encoder', torch.stack([h[0] for h in enc_states])),
                    ('decoder', torch.stack([h[0] for h in dec_states])), ('logits', logits[0])):
        files[what] = {'file': f'bart-hidden.{what}.bin', 'shape': list(t.shape)}
        write_f32(os.path.join(S2S, files[what]['file']), t)
    with open(os.path.join(S2S, 'bart-hidden.json'), 'w') as f:
        json.dump({'note': 'written by tools/model/make_hidden_reference.py; float64 forward rounded to float32',
                   'config': cfg, 'shapes': shapes, 'seed': 303, 'input_ids': src, 'decoder_input_ids': tgt,
                   'encoder_hidden_states': files['encoder'], 'decoder_hidden_states': files['decoder'],
                   'logits': files['logits']}, f, indent=1)
        f.write('\n')
    print('wrote', ENC, S2S)


if __name__ == '__main__':
    main()
