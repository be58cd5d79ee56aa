#!/usr/bin/python3
"""The encoder benchmark's model, written to build/bench-encoder/ (generated, not committed):

  bench-bert/        a BERT of the tiny encoder's shape (vocab 4096, hidden 128, 2 layers, 4 heads,
                     intermediate 512) but 512 positions, seeded random weights, HF layout + vocab.txt
  bench-bert.onnx    the same weights through torch.onnx (opset 14): input_ids int64 [1, L] ->
                     logits float32 [1, L, 4096], L dynamic

With --model DIR the weights are DIR's instead (its max_position_embeddings bounds L).
"""
import argparse
import json
import os
import shutil
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'tools', 'model'))
from bert_torch import BertForMaskedLM, bert_config, from_hf_state_dict  # noqa: E402
from make_bert_reference import write_model, small_vocab  # noqa: E402
from train_tiny import load_safetensors  # noqa: E402


class LogitsOnly(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids):
        return self.m(input_ids)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default=os.path.join(ROOT, 'build', 'bench-encoder'))
    ap.add_argument('--model', default=None)
    args = ap.parse_args()
    torch.manual_seed(5)
    d = os.path.join(args.out, 'bench-bert')
    if args.model:
        cfg = json.load(open(os.path.join(args.model, 'config.json')))
        model = from_hf_state_dict(cfg, load_safetensors(os.path.join(args.model, 'model.safetensors'))[0])
        os.makedirs(d, exist_ok=True)
        for f in ('config.json', 'model.safetensors', 'vocab.txt', 'tokenizer_config.json'):
            if os.path.exists(os.path.join(args.model, f)):
                shutil.copy(os.path.join(args.model, f), d)
    else:
        model = BertForMaskedLM(bert_config(4096, hidden=128, layers=2, heads=4, intermediate=512, max_pos=512))
        write_model(model, d)
    model.eval()
    onnx = os.path.join(args.out, 'bench-bert.onnx')
    torch.onnx.export(LogitsOnly(model), (torch.zeros(1, 16, dtype=torch.long),), onnx, opset_version=14,
                      input_names=['input_ids'], output_names=['logits'],
                      dynamic_axes={'input_ids': {1: 'sequence'}, 'logits': {1: 'sequence'}})
    print(f'wrote {d} and {onnx} ({os.path.getsize(onnx)} bytes)')


if __name__ == '__main__':
    main()
