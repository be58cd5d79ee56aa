#!/usr/bin/python3
"""Generates the shared attention test cases in tests/data/sdpa/ with PyTorch (Debian's
python3-torch 1.13, CPU; run with /usr/bin/python3).

Inputs are float32 (seeded); expected results are computed in float64 from those exact float32
values: torch 1.13 has no F.scaled_dot_product_attention, so its maths are written out here
(bottom-right causal, sliding window, bool/float masks broadcast right-aligned, GQA, rows with
no visible key -> 0), and multi-head attention goes through nn.MultiheadAttention itself.

Each case is one JSON file:
  { "name", "kind": "sdpa" | "kvcache" | "mha", "source",
    "inputs":   { <name>: { "shape": [...], "dtype": "float32" | "bool", "data": [...] }, ... },
    "options":  { ... the JS API's options ... },
    "steps":    [n0, n1, ...]                 (kvcache: positions appended per step)
    "expected": { "output": {...}, "weights": {...} } }
Numbers are decimal (9 significant digits: float32 round-trips); the strings "Infinity",
"-Infinity" and "NaN" stand for those values. Usage: /usr/bin/python3 tools/data/gen_cases.py
"""
import json
import math
import os
import sys

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tests', 'data', 'sdpa')
SOURCE = f'PyTorch {torch.__version__} (float64 maths over float32 inputs)'


def num(x):
    if math.isnan(x):
        return 'NaN'
    if math.isinf(x):
        return 'Infinity' if x > 0 else '-Infinity'
    return float('%.9g' % x)


def enc(t, dtype=None):
    if t.dtype == torch.bool:
        return {'shape': list(t.shape), 'dtype': 'bool', 'data': [int(v) for v in t.reshape(-1).tolist()]}
    return {'shape': list(t.shape), 'dtype': 'float32', 'data': [num(v) for v in t.reshape(-1).tolist()]}


def rand(g, *shape):
    return torch.randn(*shape, generator=g, dtype=torch.float32)


def sdpa64(q, k, v, bool_mask=None, float_mask=None, causal=False, window=0, scale=None, gqa=False):
    """Reference maths in float64. q [B,H,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv]; masks any rank <= 4."""
    q, k, v = q.double(), k.double(), v.double()
    B, H, Lq, D = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    if Hkv != H:
        assert gqa and H % Hkv == 0
        k = k.repeat_interleave(H // Hkv, dim=1)
        v = v.repeat_interleave(H // Hkv, dim=1)
    s = (1.0 / math.sqrt(D)) if scale is None else scale
    scores = torch.matmul(q, k.transpose(-1, -2)) * s
    visible = torch.ones(B, H, Lq, Lk, dtype=torch.bool)
    i = torch.arange(Lq).view(Lq, 1)
    j = torch.arange(Lk).view(1, Lk)
    diag = i + (Lk - Lq)
    if causal:
        visible &= (j <= diag)
    if window > 0:
        visible &= (j > diag - window)
    if bool_mask is not None:
        visible &= bool_mask.bool().expand(B, H, Lq, Lk) if bool_mask.dim() == 4 else bool_mask.bool().broadcast_to(B, H, Lq, Lk)
    if float_mask is not None:
        scores = scores + float_mask.double().broadcast_to(B, H, Lq, Lk)
    scores = scores.masked_fill(~visible, -math.inf)
    m = scores.amax(dim=-1, keepdim=True)
    dead = torch.isinf(m) & (m < 0)          # no visible key (or all -inf): output 0, weights 0
    m = torch.where(dead, torch.zeros_like(m), m)
    p = torch.exp(scores - m)
    p = torch.where(dead.expand_as(p), torch.zeros_like(p), p)
    l = p.sum(-1, keepdim=True)
    w = torch.where(l > 0, p / torch.where(l > 0, l, torch.ones_like(l)), torch.zeros_like(p))
    return torch.matmul(w, v), w


def sdpa_case(name, seed, B, H, Hkv, Lq, Lk, D, Dv, shape_rank=4, mask=None, causal=False, window=0, scale=None,
              gqa=False, weights=True):
    g = torch.Generator().manual_seed(seed)
    q, k, v = rand(g, B, H, Lq, D), rand(g, B, Hkv, Lk, D), rand(g, B, Hkv, Lk, Dv)
    bool_mask = float_mask = None
    inputs = {}
    if mask is not None:
        kind, mshape = mask
        if kind == 'bool':
            bm = torch.rand(*mshape, generator=g) > 0.3
            bool_mask = bm
            inputs['attnMask'] = enc(bm)
        else:
            fm = rand(g, *mshape)
            fm[torch.rand(*mshape, generator=g) < 0.2] = -math.inf
            float_mask = fm
            inputs['attnMask'] = enc(fm)
    out, w = sdpa64(q, k, v, bool_mask, float_mask, causal, window, scale, gqa)
    squeeze = 4 - shape_rank
    def sh(t):
        return t.reshape(t.shape[squeeze:]) if squeeze else t
    inputs = {'query': enc(sh(q)), 'key': enc(sh(k)), 'value': enc(sh(v)), **inputs}
    options = {'returnWeights': weights}
    if causal:
        options['isCausal'] = True
    if window:
        options['window'] = window
    if scale is not None:
        options['scale'] = scale
    if gqa:
        options['enableGqa'] = True
    expected = {'output': enc(sh(out.float()))}
    if weights:
        expected['weights'] = enc(sh(w.float()))
    return {'name': name, 'kind': 'sdpa', 'source': SOURCE, 'inputs': inputs, 'options': options, 'expected': expected}


def kv_case(name, seed, B, H, Hkv, T, D, Dv, steps, window=0):
    """Decoding through a KVCache: each step appends n positions and attends their queries
    causally (bottom-right) to everything so far; expected = rows of full causal attention."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = rand(g, B, H, T, D), rand(g, B, Hkv, T, D), rand(g, B, Hkv, T, Dv)
    assert sum(steps) == T
    out, w = sdpa64(q, k, v, causal=True, window=window, gqa=Hkv != H)
    options = {'isCausal': True, 'returnWeights': True}
    if window:
        options['window'] = window
    if Hkv != H:
        options['enableGqa'] = True
    return {'name': name, 'kind': 'kvcache', 'source': SOURCE, 'steps': steps,
            'inputs': {'query': enc(q), 'key': enc(k), 'value': enc(v)},
            'options': options, 'capacity': T + 2,
            'expected': {'output': enc(out.float()), 'weights': enc(w.float())}}


def mha_case(name, seed, B, Lq, Lk, E, H, bias=True, kpm=False, attn_mask=None, need_weights=True, average=True,
             unbatched=False, self_attn=False):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    mha = torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=True).double()
    with torch.no_grad():
        for p in mha.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float32).double() * 0.3)
    mha.eval()
    q = rand(g, B, Lq, E)
    if self_attn:
        assert Lq == Lk
        k = v = q
    else:
        k, v = rand(g, B, Lk, E), rand(g, B, Lk, E)
    kw = {'need_weights': need_weights, 'average_attn_weights': average}
    inputs = {}
    if kpm:
        m = torch.zeros(B, Lk, dtype=torch.bool)
        for b in range(B):
            m[b, Lk - 1 - b % max(1, Lk - 1):] = True   # pad the tail, never every key
        m[:, 0] = False
        kw['key_padding_mask'] = m
        inputs['keyPaddingMask'] = m
    if attn_mask is not None:
        kind, per_head = attn_mask
        shape = (B * H, Lq, Lk) if per_head else (Lq, Lk)
        if kind == 'bool':
            am = torch.rand(*shape, generator=g) < 0.3    # True = ignore
            am[..., 0] = False                            # every row keeps key 0
            kw['attn_mask'] = am
        else:
            am = rand(g, *shape)
            kw['attn_mask'] = am.double()
        inputs['attnMask'] = am
    with torch.no_grad():
        out, w = mha(q.double(), k.double(), v.double(), **kw)
    weights = {
        'inProjWeight': enc(mha.in_proj_weight.float()), 'outProjWeight': enc(mha.out_proj.weight.float()),
    }
    if bias:
        weights['inProjBias'] = enc(mha.in_proj_bias.float())
        weights['outProjBias'] = enc(mha.out_proj.bias.float())
    def sh(t):
        return t[0] if unbatched else t
    enc_inputs = {'query': enc(sh(q)), 'key': enc(sh(k)), 'value': enc(sh(v))}
    for key, t in inputs.items():
        enc_inputs[key] = enc(sh(t) if key == 'keyPaddingMask' else t)
    options = {'needWeights': need_weights, 'averageAttnWeights': average}
    expected = {'output': enc(sh(out.float()))}
    if need_weights:
        expected['weights'] = enc(sh(w.float()))
    return {'name': name, 'kind': 'mha', 'source': SOURCE, 'embedDim': E, 'numHeads': H, 'weights': weights,
            'inputs': enc_inputs, 'options': options, 'expected': expected}


def cases():
    yield sdpa_case('basic', 1, 2, 3, 3, 5, 7, 8, 8)
    yield sdpa_case('causal_square', 2, 1, 2, 2, 6, 6, 16, 16, causal=True)
    yield sdpa_case('causal_bottom_right', 3, 1, 2, 2, 3, 9, 8, 8, causal=True)
    yield sdpa_case('causal_lq_gt_lk_empty_rows', 4, 1, 1, 1, 7, 4, 8, 8, causal=True)
    yield sdpa_case('bool_mask_full', 5, 2, 2, 2, 4, 6, 8, 8, mask=('bool', (2, 2, 4, 6)))
    yield sdpa_case('bool_mask_2d_broadcast', 6, 2, 3, 3, 4, 6, 8, 8, mask=('bool', (4, 6)))
    yield sdpa_case('bool_mask_padding_b11k', 7, 3, 2, 2, 4, 5, 8, 8, mask=('bool', (3, 1, 1, 5)))
    yield sdpa_case('float_mask_3d_heads', 8, 2, 3, 3, 4, 6, 8, 8, mask=('float', (3, 4, 6)))
    yield sdpa_case('float_mask_1d_keys', 9, 1, 2, 2, 3, 7, 8, 8, mask=('float', (7,)))
    yield sdpa_case('float_mask_b1q1', 10, 2, 2, 2, 5, 5, 8, 8, mask=('float', (2, 1, 5, 1)), causal=True)
    yield sdpa_case('gqa_8_2', 11, 1, 8, 2, 5, 9, 16, 16, gqa=True, causal=True)
    yield sdpa_case('mqa_4_1', 12, 2, 4, 1, 3, 6, 8, 8, gqa=True)
    yield sdpa_case('window_causal', 13, 1, 2, 2, 10, 10, 8, 8, causal=True, window=3)
    yield sdpa_case('window_only', 14, 1, 1, 1, 6, 9, 8, 8, window=4)
    yield sdpa_case('scale_explicit', 15, 1, 2, 2, 4, 4, 8, 8, scale=0.3)
    yield sdpa_case('scale_zero', 16, 1, 1, 1, 3, 5, 4, 4, scale=0.0)
    yield sdpa_case('dv_ne_d', 17, 1, 2, 2, 4, 6, 16, 5)
    yield sdpa_case('cross_attention', 18, 2, 2, 2, 3, 11, 8, 8)
    yield sdpa_case('rank3_inputs', 19, 1, 3, 3, 4, 5, 8, 8, shape_rank=3, causal=True)
    yield sdpa_case('rank2_inputs', 20, 1, 1, 1, 5, 7, 8, 8, shape_rank=2, mask=('bool', (5, 7)))
    yield sdpa_case('tiles_d64_l70_causal', 21, 1, 2, 2, 70, 70, 64, 64, causal=True, weights=False)
    yield sdpa_case('tiles_d64_cross_q33_k129', 22, 1, 1, 1, 33, 129, 64, 32, mask=('bool', (33, 129)))
    yield sdpa_case('gqa_window_floatmask', 23, 1, 6, 3, 8, 12, 8, 8, gqa=True, causal=True, window=5,
                    mask=('float', (1, 1, 8, 12)))
    yield sdpa_case('single_row', 24, 1, 1, 1, 1, 1, 3, 2)
    yield kv_case('kvcache_decode', 31, 1, 4, 4, 9, 8, 8, [5, 1, 1, 1, 1])
    yield kv_case('kvcache_decode_gqa', 32, 2, 4, 2, 8, 16, 8, [3, 2, 1, 1, 1])
    yield kv_case('kvcache_decode_window', 33, 1, 2, 1, 10, 8, 8, [4, 1, 1, 1, 1, 1, 1], window=3)
    yield mha_case('mha_self', 41, 2, 5, 5, 16, 4, self_attn=True)
    yield mha_case('mha_cross', 42, 2, 3, 6, 12, 3)
    yield mha_case('mha_no_bias', 43, 1, 4, 4, 8, 2, bias=False)
    yield mha_case('mha_key_padding', 44, 3, 4, 6, 8, 2, kpm=True)
    yield mha_case('mha_bool_attn_mask', 45, 2, 4, 5, 8, 2, attn_mask=('bool', False))
    yield mha_case('mha_float_attn_mask_per_head', 46, 2, 4, 5, 8, 2, attn_mask=('float', True), average=False)
    yield mha_case('mha_kpm_and_mask_per_head_weights', 47, 2, 3, 4, 12, 3, kpm=True, attn_mask=('bool', True),
                   average=False)
    yield mha_case('mha_no_weights', 48, 1, 3, 3, 8, 4, need_weights=False)
    yield mha_case('mha_unbatched', 49, 1, 4, 6, 8, 2, unbatched=True)


def main():
    os.makedirs(OUT, exist_ok=True)
    names = []
    for case in cases():
        with open(os.path.join(OUT, case['name'] + '.json'), 'w') as f:
            json.dump(case, f, separators=(',', ':'))
        names.append(case['name'])
    with open(os.path.join(OUT, 'index.json'), 'w') as f:
        json.dump({'source': SOURCE, 'generator': 'tools/data/gen_cases.py', 'cases': names}, f, indent=1)
    print(f'wrote {len(names)} cases to {os.path.normpath(OUT)}')


if __name__ == '__main__':
    sys.exit(main())
