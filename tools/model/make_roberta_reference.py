#!/usr/bin/python3
"""Reference data for the RoBERTa / XLM-RoBERTa encoders (tests/data/encoder/roberta.json + .bin).

    /usr/bin/python3 tools/model/make_roberta_reference.py      # after make_unigram_tokenizer.py

Two random checkpoints in Hugging Face's layouts, weights made from a seed by
tools/model/random_weights.py (std 0.2; the test makes the same float32 values in JS), so only
the tokenizers and the float64 forward's outputs are committed:
  random-roberta      RobertaForMaskedLM (roberta.*, lm_head.{dense,layer_norm,bias}), hidden 64,
                      2 layers, 4 heads, intermediate 96, pad_token_id 1, 34 positions (32
                      tokens), type_vocab_size 1; tokenizer.json hand-built as transformers'
                      RobertaConverter writes it: GPT-2 byte-level BPE with 300 merges learned on
                      the KJV (tools/model/bpe.py), <s> <pad> </s> <unk> first, <mask> last
                      (lstrip), RobertaProcessing, ByteLevel pre-tokenizer and decoder
  random-xlm-roberta  XLMRobertaForMaskedLM, the same shape, tokenizer.json the converted
                      SentencePiece Unigram model (tests/data/tokenizers/kjv-unigram)
Cases per model: a padded batch of two texts (ids from the Python tokenizers: bpe.py / sentencepiece,
pad = 1 after the shorter), float64 forward rounded to float32: logits [B, L, V] (<model>.logits.bin)
and the mean of each text's last hidden states over its own tokens (<model>.mean.bin, [B, hidden]);
RoBERTa's positions: pad tokens at padding_idx, the others from padding_idx + 1.
"""

import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
import random_weights  # noqa: E402
from bert_torch import RobertaForMaskedLM, roberta_config  # noqa: E402
from train_tiny import kjv_text  # noqa: E402

OUT = os.path.join(ROOT, 'tests', 'data', 'encoder')
SEED = 77
TEXTS = ['And God said, Let there be light: and there was light.', 'Jesus wept.']
MASKED = 'In the beginning God created the<mask> and the earth.'


def shapes(c):
    E, I, V = c['hidden_size'], c['intermediate_size'], c['vocab_size']
    s = {'roberta.embeddings.word_embeddings.weight': [V, E],
         'roberta.embeddings.position_embeddings.weight': [c['max_position_embeddings'], E],
         'roberta.embeddings.token_type_embeddings.weight': [c['type_vocab_size'], E],
         'roberta.embeddings.LayerNorm.weight': [E], 'roberta.embeddings.LayerNorm.bias': [E]}
    for i in range(c['num_hidden_layers']):
        p = f'roberta.encoder.layer.{i}.'
        for n in ('query', 'key', 'value'):
            s[p + f'attention.self.{n}.weight'], s[p + f'attention.self.{n}.bias'] = [E, E], [E]
        s[p + 'attention.output.dense.weight'], s[p + 'attention.output.dense.bias'] = [E, E], [E]
        s[p + 'attention.output.LayerNorm.weight'], s[p + 'attention.output.LayerNorm.bias'] = [E], [E]
        s[p + 'intermediate.dense.weight'], s[p + 'intermediate.dense.bias'] = [I, E], [I]
        s[p + 'output.dense.weight'], s[p + 'output.dense.bias'] = [E, I], [E]
        s[p + 'output.LayerNorm.weight'], s[p + 'output.LayerNorm.bias'] = [E], [E]
    s.update({'lm_head.dense.weight': [E, E], 'lm_head.dense.bias': [E], 'lm_head.layer_norm.weight': [E],
              'lm_head.layer_norm.bias': [E], 'lm_head.bias': [V]})
    return s


def roberta_tokenizer():
    """(tokenizer.json object, encode(text) -> ids without specials)."""
    text = '\n'.join(ln for ln in kjv_text().splitlines()[:4000])
    merges = bpe.learn_bpe(text, 300)
    byte_vocab = bpe.vocab_from_merges(merges)                 # GPT-2 order: bytes, then merges
    vocab = {'<s>': 0, '<pad>': 1, '</s>': 2, '<unk>': 3}
    for t, i in sorted(byte_vocab.items(), key=lambda kv: kv[1]):
        vocab[t] = i + 4
    vocab['<mask>'] = len(vocab)
    enc = bpe.GPT2Encoder(byte_vocab, merges)
    special = lambda i, c, lstrip=False: {'id': i, 'content': c, 'single_word': False, 'lstrip': lstrip, 'rstrip': False,
                                          'normalized': False, 'special': True}
    tok = {'version': '1.0', 'truncation': None, 'padding': None,
           'added_tokens': [special(0, '<s>'), special(1, '<pad>'), special(2, '</s>'), special(3, '<unk>'),
                            special(vocab['<mask>'], '<mask>', True)],
           'normalizer': None,
           'pre_tokenizer': {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': True, 'use_regex': True},
           'post_processor': {'type': 'RobertaProcessing', 'sep': ['</s>', 2], 'cls': ['<s>', 0], 'trim_offsets': True,
                              'add_prefix_space': False},
           'decoder': {'type': 'ByteLevel', 'add_prefix_space': True, 'trim_offsets': True, 'use_regex': True},
           'model': {'type': 'BPE', 'dropout': None, 'unk_token': None, 'continuing_subword_prefix': '',
                     'end_of_word_suffix': '', 'fuse_unk': False, 'byte_fallback': False,
                     'vocab': vocab, 'merges': [f'{a} {b}' for a, b in merges]}}
    return tok, lambda s: [i + 4 for i in enc.encode(s)]


def xlmr_tokenizer():
    d = os.path.join(ROOT, 'tests', 'data', 'tokenizers', 'kjv-unigram')
    tok = json.load(open(os.path.join(d, 'tokenizer.json')))
    return tok


def unigram_encode(tok, text):
    """The converted file's ids, by a plain Viterbi over its vocab (no normalization needed for ASCII)."""
    vocab = tok['model']['vocab']
    index = {p: i for i, (p, _) in reversed(list(enumerate(vocab)))}
    ids = []
    for word in text.split():
        w = '\u2581' + word
        best = [(0.0, -1, -1)] + [None] * len(w)
        for s in range(len(w)):
            if best[s] is None:
                continue
            for e in range(s + 1, len(w) + 1):
                i = index.get(w[s:e])
                if i is None or i < 4:
                    continue
                sc = best[s][0] + vocab[i][1]
                if best[e] is None or sc > best[e][0]:
                    best[e] = (sc, s, i)
        out, e = [], len(w)
        while e > 0:
            out.append(best[e][2])
            e = best[e][1]
        ids += out[::-1]
    return ids


def run(name, model_type, tok, encode):
    V = max(max(tok['model']['vocab'].values()) if isinstance(tok['model']['vocab'], dict) else len(tok['model']['vocab']) - 1,
            max(t['id'] for t in tok['added_tokens'])) + 1
    cfg = roberta_config(V, hidden=64, layers=2, heads=4, intermediate=96, max_tokens=32, model_type=model_type)
    sh = shapes(cfg)
    w = random_weights.checkpoint(SEED, sh)
    model = RobertaForMaskedLM(cfg).double()
    model.load_state_dict({k: torch.from_numpy(v.astype(np.float64)) for k, v in w.items()}, strict=True)
    model.eval()
    ids = [[0] + encode(t) + [2] for t in TEXTS]
    L = max(map(len, ids))
    x = torch.tensor([i + [1] * (L - len(i)) for i in ids])
    mask = torch.tensor([[1] * len(i) + [0] * (L - len(i)) for i in ids])
    with torch.no_grad():
        logits, _ = model(x, None, mask)
        hidden, _ = model(x, None, mask, head=False)
    mean = torch.stack([hidden[b, :len(i)].mean(0) for b, i in enumerate(ids)])
    logits.float().numpy().astype('<f4').tofile(os.path.join(OUT, f'{name}.logits.bin'))
    mean.float().numpy().astype('<f4').tofile(os.path.join(OUT, f'{name}.mean.bin'))
    left, right = MASKED.split('<mask>')
    mids = [0] + encode(left) + [V - 1] + encode(right) + [2]
    with torch.no_grad():
        ml, _ = model(torch.tensor([mids]))
    at = mids.index(V - 1)
    top = torch.topk(torch.softmax(ml[0, at], -1), 5)
    return {'config': cfg, 'shapes': sh, 'seed': SEED, 'tokenizer': f'{name}.tokenizer.json',
            'ids': ids, 'attention_mask': mask.tolist(),
            'logits': {'file': f'{name}.logits.bin', 'shape': list(logits.shape)},
            'mean': {'file': f'{name}.mean.bin', 'shape': list(mean.shape)},
            'fill_mask': {'text': MASKED, 'ids': mids, 'top': [[int(i), float(p)] for i, p in zip(top.indices, top.values)]}}


def main():
    torch.set_num_threads(1)
    ref = {'note': 'written by tools/model/make_roberta_reference.py; float64 forward rounded to float32', 'texts': TEXTS,
           'models': {}}
    rtok, renc = roberta_tokenizer()
    with open(os.path.join(OUT, 'random-roberta.tokenizer.json'), 'w') as f:
        json.dump(rtok, f, ensure_ascii=False)
    ref['models']['random-roberta'] = run('random-roberta', 'roberta', rtok, renc)
    xtok = xlmr_tokenizer()
    ref['models']['random-xlm-roberta'] = run('random-xlm-roberta', 'xlm-roberta', xtok, lambda s: unigram_encode(xtok, s))
    ref['models']['random-xlm-roberta']['tokenizer'] = '../tokenizers/kjv-unigram/tokenizer.json'
    with open(os.path.join(OUT, 'roberta.json'), 'w') as f:
        json.dump(ref, f, indent=1)
        f.write('\n')
    print('wrote', OUT)


if __name__ == '__main__':
    main()
