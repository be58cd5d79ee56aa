#!/usr/bin/python3
"""Float64 references for web/lib/interpret/ (attention rollout, attention flow, head probes).

    /usr/bin/python3 tools/interpret/make_reference.py      # -> tests/data/interpret/

Written independently of the TypeScript, from the definitions:

  rollout   Abnar & Zuidema 2020: A'_l = rownorm((1 - r) fuse_h(A_l) + r I), fuse = mean/max/min
            over heads; rollout = A'_{N-1} ... A'_0 (numpy, float64).
  flow      the same paper: the layered graph of its code (node (t, p), t = 0..N; edge
            (t, i) -> (t-1, k) with capacity A'_{t-1}[i][k]); flow[i][j] = max flow from (N, i)
            to (0, j) by networkx (preflow-push), each row divided by its sum. Checked here
            against scipy's integer maximum_flow on capacities scaled by 1e9.
  probes    per head, on fixed token ids: previous-token (mean A[i, i-1], i >= 1), sink (mean
            A[i, 0], i >= 1), entropy (mean -sum_j A[i,j] ln A[i,j], i >= 1), induction (first
            copy x of T tokens, input x x: mean over t of A[T + t, t + 1]), ablation (mean
            next-token cross-entropy with that head's probabilities multiplied by 0, HF
            head_mask semantics, minus the loss without).

Cases: random attentions (softmax of N(0, 2^2) scores, causal and bidirectional), and the real
attentions of web/models/tiny-kjv-bpe on a verse (PyTorch, float64). Attentions are stored as
float32 (.bin, little-endian), and the references are computed from those float32 values.
"""
import json
import os
import sys

import networkx as nx
import numpy as np
import scipy.sparse
from scipy.sparse.csgraph import maximum_flow
import torch

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
OUT = os.path.join(ROOT, 'tests', 'data', 'interpret')
sys.path.insert(0, os.path.join(ROOT, 'tools', 'model'))
import train_tiny as tt  # noqa: E402
from make_reference import model_tokenizer  # noqa: E402


# ----------------------------------------------------------------------------- definitions

def fuse(att, fusion, residual):
    """att [N, H, L, L] -> A' [N, L, L]."""
    f = {'mean': att.mean(axis=1), 'max': att.max(axis=1), 'min': att.min(axis=1)}[fusion]
    L = att.shape[-1]
    a = (1 - residual) * f + residual * np.eye(L)[None]
    s = a.sum(axis=-1, keepdims=True)
    return np.where(s > 0, a / np.where(s > 0, s, 1), a)


def rollout(att, fusion='mean', residual=0.5):
    a = fuse(att, fusion, residual)
    r = a[0]
    cum = [r]
    for l in range(1, a.shape[0]):
        r = a[l] @ r
        cum.append(r)
    return np.stack(cum)


def flow_graph(a):
    N, L, _ = a.shape
    G = nx.DiGraph()
    G.add_nodes_from(range((N + 1) * L))
    for t in range(1, N + 1):
        for i in range(L):
            for k in range(L):
                if a[t - 1, i, k] > 0:
                    G.add_edge(t * L + i, (t - 1) * L + k, capacity=float(a[t - 1, i, k]))
    return G


def flow(att, fusion='mean', residual=0.5, normalize=True):
    a = fuse(att, fusion, residual)
    N, L, _ = a.shape
    G = flow_graph(a)
    out = np.zeros((L, L))
    for i in range(L):
        for j in range(L):
            out[i, j] = nx.maximum_flow_value(G, N * L + i, j)
        if normalize and out[i].sum() > 0:
            out[i] /= out[i].sum()
    return out, a


def check_with_scipy(a, raw):
    """scipy's maximum_flow (integer capacities: scaled by 1e9) must agree with networkx."""
    N, L, _ = a.shape
    n = (N + 1) * L
    rows, cols, caps = [], [], []
    for t in range(1, N + 1):
        for i in range(L):
            for k in range(L):
                c = int(round(a[t - 1, i, k] * 1e9))
                if c > 0:
                    rows.append(t * L + i)
                    cols.append((t - 1) * L + k)
                    caps.append(c)
    g = scipy.sparse.csr_matrix((np.array(caps, dtype=np.int32), (rows, cols)), shape=(n, n))
    worst = 0.0
    for i in range(L):
        for j in range(L):
            v = maximum_flow(g, N * L + i, j).flow_value / 1e9
            worst = max(worst, abs(v - raw[i, j]))
    assert worst < 1e-6 * N * L, f'networkx and scipy max-flow disagree by {worst}'
    return worst


def random_attentions(rng, N, H, L, causal):
    s = rng.normal(0, 2, size=(N, H, L, L))
    if causal:
        s = np.where(np.tril(np.ones((L, L), dtype=bool))[None, None], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)).astype(np.float32)


def write_f32(name, a):
    a = np.ascontiguousarray(a, dtype='<f4')
    with open(os.path.join(OUT, name), 'wb') as f:
        f.write(a.tobytes())
    return name


def r(x, digits=10):
    return [round(float(v), digits) for v in np.asarray(x).ravel()]


# ----------------------------------------------------------------------------- cases

def attention_case(name, att32, opts, want_flow=True):
    att = att32.astype(np.float64)
    N, H, L, _ = att.shape
    case = {'name': name, 'layers': N, 'heads': H, 'L': L, 'file': write_f32(f'{name}.bin', att32), 'options': opts}
    ro = rollout(att, **opts)
    if want_flow:
        case['rollout_cumulative'] = r(ro)
    else:  # a long case: the final rollout only, as float32 (.bin)
        case['rollout_file'] = write_f32(f'{name}.rollout.bin', ro[-1])
    if want_flow:
        fl, _ = flow(att, normalize=True, **opts)
        raw, a = flow(att, normalize=False, **opts)
        case['flow'] = r(fl)
        case['flow_raw'] = r(raw)
        case['scipy_agreement'] = check_with_scipy(a, raw)
    return case


def masked_forward(model, ids, head_mask=None):
    """tt.GPT2's forward (float64) with HF head_mask semantics: probs[l, h] *= head_mask[l, h]."""
    cfg = model.cfg
    x_ids = torch.tensor([ids])
    L = len(ids)
    x = model.wte(x_ids) + model.wpe(torch.arange(L))[None]
    atts = []
    for l, block in enumerate(model.h):
        at = block.attn
        h = block.ln_1(x)
        E, H = cfg['n_embd'], cfg['n_head']
        D = E // H
        q, k, v = at.c_attn(h).split(E, dim=2)
        q, k, v = (t.view(1, L, H, D).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-1, -2)) / np.sqrt(D)
        s = s.masked_fill(~torch.tril(torch.ones(L, L, dtype=torch.bool)), float('-inf'))
        p = torch.softmax(s, dim=-1)
        atts.append(p)
        if head_mask is not None:
            p = p * head_mask[l][None, :, None, None]
        y = (p @ v).transpose(1, 2).reshape(1, L, E)
        x = x + at.c_proj(y)
        x = x + block.mlp(block.ln_2(x))
    logits = model.ln_f(x) @ model.wte.weight.t()
    return logits[0], [a[0] for a in atts]


def loss_of(logits, ids):
    return float(torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:])))


def probe_case(model, text_ids, first_copy):
    cfg = model.cfg
    N, H = cfg['n_layer'], cfg['n_head']
    with torch.no_grad():
        logits, atts = masked_forward(model, text_ids)
        base = loss_of(logits, text_ids)
        A = torch.stack(atts).numpy()                     # [N, H, L, L]
        L = len(text_ids)
        i = np.arange(1, L)
        prev = A[:, :, i, i - 1].mean(axis=-1)
        sink = A[:, :, i, 0].mean(axis=-1)
        with np.errstate(divide='ignore', invalid='ignore'):
            plogp = np.where(A > 0, A * np.log(np.where(A > 0, A, 1)), 0)
        entropy = -plogp.sum(axis=-1)[:, :, 1:].mean(axis=-1)
        T = len(first_copy)
        _, ratts = masked_forward(model, list(first_copy) + list(first_copy))
        R = torch.stack(ratts).numpy()
        t = np.arange(T)
        induction = R[:, :, T + t, t + 1].mean(axis=-1)
        ablation = np.zeros((N, H))
        for l in range(N):
            for h in range(H):
                m = torch.ones(N, H, dtype=torch.float64)
                m[l, h] = 0
                lg, _ = masked_forward(model, text_ids, m)
                ablation[l, h] = loss_of(lg, text_ids) - base
    return {'ids': list(map(int, text_ids)), 'induction_tokens': list(map(int, first_copy)), 'base_loss': base,
            'previous_token': r(prev), 'sink': r(sink), 'entropy': r(entropy), 'induction': r(induction),
            'ablation': r(ablation)}


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(2026)
    cases = []
    for name, N, H, L, causal, opts in [
        ('causal-mean', 3, 4, 9, True, {'fusion': 'mean', 'residual': 0.5}),
        ('causal-max', 4, 3, 7, True, {'fusion': 'max', 'residual': 0.5}),
        ('causal-min-r03', 2, 4, 8, True, {'fusion': 'min', 'residual': 0.3}),
        ('dense-mean', 3, 2, 8, False, {'fusion': 'mean', 'residual': 0.5}),
        ('dense-max-r07', 2, 3, 6, False, {'fusion': 'max', 'residual': 0.7}),
        ('one-layer', 1, 2, 5, True, {'fusion': 'mean', 'residual': 0.5}),
    ]:
        cases.append(attention_case(name, random_attentions(rng, N, H, L, causal), opts))
        print(f'{name}: N {N} H {H} L {L}, networkx vs scipy {cases[-1]["scipy_agreement"]:.2e}', flush=True)
    # rollout only, long enough for the wasm block product (L > 64: two blocks and a partial one)
    cases.append(attention_case('causal-long', random_attentions(rng, 2, 1, 80, True), {'fusion': 'mean', 'residual': 0.5}, want_flow=False))

    # the real model: tiny-kjv-bpe on a verse (its float64 attentions, rounded to float32)
    model_dir = os.path.join(ROOT, 'web', 'models', 'tiny-kjv-bpe')
    model = tt.load_model(model_dir).double()
    encode, _, _ = model_tokenizer(model_dir)
    text = 'In the beginning God created the heaven and the earth. And the earth was without form, and void'
    ids = encode(text)
    with torch.no_grad():
        _, atts = masked_forward(model, ids)
    att32 = torch.stack(atts).numpy().astype(np.float32)
    real = attention_case('tiny-kjv-bpe', att32, {'fusion': 'mean', 'residual': 0.5})
    real['ids'] = list(map(int, ids))
    real['text'] = text
    cases.append(real)
    print(f'tiny-kjv-bpe: L {len(ids)}, networkx vs scipy {real["scipy_agreement"]:.2e}', flush=True)

    first = np.random.default_rng(7).choice(model.cfg['vocab_size'], size=12, replace=False)
    probes = probe_case(model, ids, first)
    probes['model'] = 'web/models/tiny-kjv-bpe'
    with open(os.path.join(OUT, 'reference.json'), 'w') as f:
        json.dump({'generator': 'tools/interpret/make_reference.py', 'cases': cases, 'probes': probes}, f)
        f.write('\n')
    print('wrote', os.path.relpath(OUT, ROOT))


if __name__ == '__main__':
    main()
