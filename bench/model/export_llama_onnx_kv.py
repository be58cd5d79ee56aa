#!/usr/bin/python3
"""Export a Llama-family checkpoint to ONNX *with past key/values*: the onnxruntime-web peer of
bench/model/llama_smol.mjs, on the same weights.

    /usr/bin/python3 bench/model/export_llama_onnx_kv.py --model build/bench-llama/smollm2-135m-shape \
        --out build/bench-llama/smollm2-135m-shape-kv.onnx

Graph (opset 14): inputs "input_ids" int64 [1, n] and "past" float32 [n_layer, 2, Hkv, T, head_dim]
(keys and values of the T positions before, once per kv head; T may be 0), outputs "logits"
float32 [1, vocab] (the last position's) and "present" [n_layer, 2, Hkv, T + n, head_dim].
The weights go to ONNX external data, one file beside the graph (<out>.data, every initializer
over 1 KB): the protobuf stays small (Qwen3-0.6B's 2.4 GB of F32 weights are past protobuf's
2 GB), and onnxruntime-web takes them as the session option externalData, copying them into its
heap once instead of parsing them out of a model buffer it holds as well.
The layers are tools/model/make_llama_reference.py's (RMSNorm, rotate_half RoPE, SwiGLU, GQA),
in float32; checked here against that reference's float64 forward before exporting. A Qwen3
checkpoint (model_type "qwen3": q_norm / k_norm, head_dim given apart from hidden / heads) gets
the RMSNorm over each head of q and k before the rotation, and is checked against
tools/model/make_qwen3_gemma3_reference.py's forward instead.
"""
import argparse
import json
import math
import gc
import os
import shutil
import struct
import sys
import tempfile

import numpy as np
import onnx
import torch

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tools', 'model'))
import make_llama_reference as ref  # noqa: E402
import make_qwen3_gemma3_reference as qwen3_ref  # noqa: E402


def read_safetensors(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == '__metadata__':
            continue
        assert t['dtype'] == 'F32', f'{name}: only F32 files ({t["dtype"]})'
        b, e = t['data_offsets']
        out[name] = torch.from_numpy(np.frombuffer(data, dtype=np.float32, count=(e - b) // 4, offset=b).copy()).view(t['shape'])
    return out


class KVLlama(torch.nn.Module):
    def __init__(self, cfg, tensors):
        super().__init__()
        self.cfg = cfg
        self.w = torch.nn.ParameterDict({k.replace('.', '__'): torch.nn.Parameter(v, requires_grad=False) for k, v in tensors.items()})
        self.names = set(tensors)
        # a tied table is kept once, as [E, V]: the LM head's MatMul reads it as is and the
        # embedding gathers its columns. With [V, E] the export's constant folding stored a
        # transposed copy for the head beside the table (0.6 GB more for Qwen3's 151936 x 1024,
        # past what onnxruntime-web's 4 GB heap could load)
        tied = 'lm_head.weight' not in tensors
        self.tied_t = torch.nn.Parameter(tensors['model.embed_tokens.weight'].t().contiguous(), requires_grad=False) if tied else None
        if tied:
            del self.w['model__embed_tokens__weight']
        self.register_buffer('inv_freq', ref.rope_inv_freq(cfg).float())

    def p(self, name):
        return self.w[name.replace('.', '__')]

    def forward(self, input_ids, past):
        c = self.cfg
        H, Hkv, D, eps = c['num_attention_heads'], c['num_key_value_heads'], ref.head_dim(c), c['rms_norm_eps']
        n = input_ids.shape[1]
        T = past.shape[3]
        pos = (torch.arange(n) + T).float()
        ang = pos[:, None] * self.inv_freq[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], -1)
        sin = torch.cat([ang.sin(), ang.sin()], -1)
        keep = torch.arange(T + n)[None, :] <= (torch.arange(n) + T)[:, None]

        def rms(x, w):
            return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

        if self.tied_t is not None:  # the rows of a tied table stored [E, V]: columns of it
            x = self.tied_t.index_select(1, input_ids[0]).t()  # [n, E]
        else:
            x = self.p('model.embed_tokens.weight')[input_ids[0]]  # [n, E]
        presents = []
        for l in range(c['num_hidden_layers']):
            pre = f'model.layers.{l}.'
            h = rms(x, self.p(pre + 'input_layernorm.weight'))
            q = (h @ self.p(pre + 'self_attn.q_proj.weight').t()).view(n, H, D).transpose(0, 1)
            k = (h @ self.p(pre + 'self_attn.k_proj.weight').t()).view(n, Hkv, D).transpose(0, 1)
            v = (h @ self.p(pre + 'self_attn.v_proj.weight').t()).view(n, Hkv, D).transpose(0, 1)
            if pre + 'self_attn.q_norm.weight' in self.names:  # Qwen3: per-head RMSNorm before RoPE
                q = rms(q, self.p(pre + 'self_attn.q_norm.weight'))
                k = rms(k, self.p(pre + 'self_attn.k_norm.weight'))
            q = q * cos + ref.rotate_half(q) * sin
            k = k * cos + ref.rotate_half(k) * sin
            k = torch.cat([past[l, 0], k], dim=1)  # [Hkv, T + n, D]
            v = torch.cat([past[l, 1], v], dim=1)
            presents.append(torch.stack([k, v]))
            # query head h reads kv head h // (H / Hkv) (expand + reshape: repeat_interleave's
            # export bakes the traced sequence length into the graph)
            kr = k[:, None].expand(Hkv, H // Hkv, k.shape[1], D).reshape(H, -1, D)
            vr = v[:, None].expand(Hkv, H // Hkv, v.shape[1], D).reshape(H, -1, D)
            s = (q @ kr.transpose(-1, -2)) / math.sqrt(D)
            s = s.masked_fill(~keep, float('-inf'))
            o = (torch.softmax(s, -1) @ vr).transpose(0, 1).reshape(n, H * D)
            x = x + o @ self.p(pre + 'self_attn.o_proj.weight').t()
            h = rms(x, self.p(pre + 'post_attention_layernorm.weight'))
            g = h @ self.p(pre + 'mlp.gate_proj.weight').t()
            u = h @ self.p(pre + 'mlp.up_proj.weight').t()
            x = x + (torch.nn.functional.silu(g) * u) @ self.p(pre + 'mlp.down_proj.weight').t()
        x = rms(x[-1:], self.p('model.norm.weight'))
        if self.tied_t is not None:  # the one [E, V] table: the LM head as is
            return x @ self.tied_t, torch.stack(presents)
        return x @ self.p('lm_head.weight').t(), torch.stack(presents)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--model', required=True)
    ap.add_argument('--out', required=True)
    args = ap.parse_args()
    torch.set_num_threads(2)
    cfg = json.load(open(os.path.join(args.model, 'config.json')))
    tensors = read_safetensors(os.path.join(args.model, 'model.safetensors'))
    m = KVLlama(cfg, tensors).eval()
    D, Hkv, NL = ref.head_dim(cfg), cfg['num_key_value_heads'], cfg['num_hidden_layers']
    ids = torch.tensor([[1, 5, 9, 200, 7]])
    with torch.no_grad():
        logits, present = m(ids[:, :-1], torch.zeros(NL, 2, Hkv, 0, D))
        step, _ = m(ids[:, -1:], present)
        reference = qwen3_ref if cfg.get('model_type') == 'qwen3' else ref
        want = reference.forward(cfg, tensors, ids[0].tolist())[0]
    err = max(float((logits[0] - want[-2]).abs().max()), float((step[0] - want[-1]).abs().max()))
    print(f'KV export vs the float64 reference: max |logits error| {err:.2e}')
    assert err < 1e-3
    out = os.path.abspath(args.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    # 1. export into a scratch directory (past 2 GB torch writes one external file per tensor)
    tmp = tempfile.mkdtemp(dir=os.path.dirname(out), prefix='.export-')
    try:
        torch.onnx.export(m, (ids[:, :2], torch.zeros(NL, 2, Hkv, 3, D)), os.path.join(tmp, 'model.onnx'), opset_version=14,
                          input_names=['input_ids', 'past'], output_names=['logits', 'present'],
                          dynamic_axes={'input_ids': {1: 'n'}, 'past': {3: 'T'}, 'present': {3: 'T_plus_n'}},
                          do_constant_folding=True)
        del m, tensors  # the torch copy of the weights: the onnx copy below is the only one left
        gc.collect()
        # 2. the graph and one external data file <out>.data holding every initializer over 1 KB
        model = onnx.load(os.path.join(tmp, 'model.onnx'))
        data = os.path.basename(out) + '.data'
        if os.path.exists(out + '.data'):
            os.remove(out + '.data')  # onnx.save appends to an existing file
        onnx.save(model, out, save_as_external_data=True, all_tensors_to_one_file=True, location=data, size_threshold=1024)
    finally:
        shutil.rmtree(tmp)
    print(f'wrote {args.out} ({os.path.getsize(out)} bytes) and {data} ({os.path.getsize(out + ".data")} bytes)')


if __name__ == '__main__':
    main()
