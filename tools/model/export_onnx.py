#!/usr/bin/python3
"""Export the tiny model to ONNX for the benchmarks (bench/model/tiny-kjv.onnx, not committed).

    /usr/bin/python3 tools/model/export_onnx.py [--model web/models/tiny-kjv] [--out bench/model/tiny-kjv.onnx]

Graph: input "input_ids" int64 [batch, sequence] (both dynamic, sequence <= n_positions),
output "logits" float32 [batch, sequence, vocab]. Opset 14. Weights are read from the
exported model.safetensors, so the ONNX model computes exactly what the web model holds.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_tiny as tt  # noqa: E402


class LogitsOnly(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--model', default=os.path.join(tt.ROOT, 'web', 'models', 'tiny-kjv'))
    ap.add_argument('--out', default=os.path.join(tt.ROOT, 'bench', 'model', 'tiny-kjv.onnx'))
    ap.add_argument('--opset', type=int, default=14)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = tt.load_model(args.model)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    dummy = torch.tensor([list(b'In the beginning God created')], dtype=torch.long)
    torch.onnx.export(LogitsOnly(model), (dummy,), args.out, opset_version=args.opset,
                      input_names=['input_ids'], output_names=['logits'],
                      dynamic_axes={'input_ids': {0: 'batch', 1: 'sequence'},
                                    'logits': {0: 'batch', 1: 'sequence'}},
                      do_constant_folding=True)
    print(f'wrote {args.out} ({os.path.getsize(args.out)} bytes), opset {args.opset}')


if __name__ == '__main__':
    main()
