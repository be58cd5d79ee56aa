#!/usr/bin/python3
"""Export the tiny model to ONNX *with past key/values*, the peer for KV-cache generation.

    /usr/bin/python3 bench/model/export_onnx_kv.py [--model web/models/tiny-kjv] [--out build/bench-model/tiny-kjv-kv.onnx]

Graph (opset 14): inputs "input_ids" int64 [1, n] and "past" float32 [n_layer, 2, 1, n_head, T, head_dim]
(keys and values of the T positions before; T may be 0), outputs "logits" float32 [1, n, vocab] and
"present" [n_layer, 2, 1, n_head, T + n, head_dim]. With --last-logits, "logits" is [1, 1, vocab]:
the last position's only (what a generation's prefill needs; qkv's forward(ids, { logits: 'last' })). Prefill = one call with T = 0; each generated token
= one call with n = 1 feeding "present" back as "past" -- the same work qkv's KV cache does.
The weights are those of the exported model.safetensors (tools/model/train_tiny.py's loader).
"""
import argparse
import math
import os
import sys

import torch

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tools', 'model'))
import train_tiny as tt  # noqa: E402


class KVModel(torch.nn.Module):
    def __init__(self, model, last_logits=False):
        super().__init__()
        self.m = model
        self.last_logits = last_logits
        c = model.cfg
        self.E, self.H = c['n_embd'], c['n_head']
        self.D = self.E // self.H

    def forward(self, input_ids, past):
        m, E, H, D = self.m, self.E, self.H, self.D
        n = input_ids.shape[1]
        T = past.shape[4]
        pos = torch.arange(n) + T
        x = m.wte(input_ids) + m.wpe(pos)[None]
        # query i (absolute position T + i) sees keys j <= T + i
        keep = torch.arange(T + n)[None, :] <= (torch.arange(n) + T)[:, None]
        presents = []
        for layer, block in enumerate(m.h):
            a = block.attn
            q, k, v = a.c_attn(block.ln_1(x)).split(E, dim=2)
            q = q.view(1, n, H, D).transpose(1, 2)
            k = torch.cat([past[layer, 0], k.view(1, n, H, D).transpose(1, 2)], dim=2)
            v = torch.cat([past[layer, 1], v.view(1, n, H, D).transpose(1, 2)], dim=2)
            presents.append(torch.stack([k, v]))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D)
            scores = scores.masked_fill(~keep, float('-inf'))
            y = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(1, n, E)
            x = x + a.c_proj(y)
            x = x + block.mlp(block.ln_2(x))
        if self.last_logits:
            x = x[:, -1:]
        logits = torch.matmul(m.ln_f(x), m.wte.weight.t())
        return logits, torch.stack(presents)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--model', default=os.path.join(ROOT, 'web', 'models', 'tiny-kjv'))
    ap.add_argument('--out', default=os.path.join(ROOT, 'build', 'bench-model', 'tiny-kjv-kv.onnx'))
    ap.add_argument('--last-logits', action='store_true', help='logits of the last position only')
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = tt.load_model(args.model)
    kv = KVModel(model, args.last_logits).eval()
    c = model.cfg
    D = c['n_embd'] // c['n_head']
    ids = torch.tensor([list(b'In the beginning')], dtype=torch.long)
    # check against the plain forward: prefill from T = 0, then one step
    with torch.no_grad():
        empty = torch.zeros(c['n_layer'], 2, 1, c['n_head'], 0, D)
        logits, present = kv(ids[:, :-1], empty)
        step, _ = kv(ids[:, -1:], present)
        full = model(ids)
    want = full[:, -2:-1] if args.last_logits else full[:, :-1]
    assert torch.allclose(logits, want, atol=1e-5) and torch.allclose(step[0, -1], full[0, -1], atol=1e-5)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    dummy_past = torch.zeros(c['n_layer'], 2, 1, c['n_head'], 3, D)
    torch.onnx.export(kv, (ids[:, :2], dummy_past), args.out, opset_version=14,
                      input_names=['input_ids', 'past'], output_names=['logits', 'present'],
                      dynamic_axes={'input_ids': {1: 'n'}, 'past': {4: 'T'},
                                    'logits': {1: 'n'}, 'present': {4: 'T_plus_n'}},
                      do_constant_folding=True)
    print(f'wrote {args.out} ({os.path.getsize(args.out)} bytes)')


if __name__ == '__main__':
    main()
