#!/usr/bin/python3
"""Reference outputs for the residual stream's API (tests/js/model-residual*.test.js), from a
float64 PyTorch forward whose hooks are written here from their definitions (docs/residual.md;
TransformerLens is not installable here), not from qkv's C++.

    /usr/bin/python3 tools/model/make_residual_reference.py

Models: committed random checkpoints (weights of std 0.2):
  gpt2          tests/data/interventions/gpt2  (GPT-2, 2 layers x 4 heads, d 32, LayerNorm)
  qwen2-bias    tests/data/llama/qwen2-bias    (GQA 4:2, q/k/v biases, a windowed layer, RMSNorm)
  llama-narrow  tests/data/llama/llama-narrow  (an output projection bias, H*D < d)
  gemma3-text   tests/data/llama/gemma3-text   (Gemma 3: the norms around attention and MLP,
                                                scaled embeddings, BF16 weights, soft-capping)

Per model, under tests/data/residual/<model>/ (float32 .bin files, row-major) and residual.json:
  hidden.bin         [NL + 1, T, d]  Hugging Face's hidden states (last: after the final norm)
  <site>.bin         [NL, T, d]      each of the five sites; final_scale.bin [T]
  patched.*          logits and resid_post after patchActivations (the case in residual.json)
  steered.*          logits after steer
  lens.bin           [NL + 1, T, V]  the final norm (own statistics) + unembedding of each
                                     block's resid_pre, and of the last block's output
  attribution        parts (names, values) and total at a position, for a token pair
  sweep_<over>.bin   activationPatching's normalised values by brute force (a full patched
                     forward per cell) for clean / corrupted ids of the same length
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import make_llama_reference as llama_ref  # noqa: E402

OUT = os.path.join(ROOT, 'tests', 'data', 'residual')
SITES = ['hook_resid_pre', 'hook_attn_out', 'hook_resid_mid', 'hook_mlp_out', 'hook_resid_post']
MODELS = {
    'gpt2': 'tests/data/interventions/gpt2',
    'qwen2-bias': 'tests/data/llama/qwen2-bias',
    'llama-narrow': 'tests/data/llama/llama-narrow',
    'gemma3-text': 'tests/data/llama/gemma3-text',
}


def read_safetensors(path):
    """name -> float64 tensor (F32, BF16)."""
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    header = json.loads(b[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == '__metadata__':
            continue
        lo, hi = t['data_offsets']
        raw = b[8 + n + lo:8 + n + hi]
        if t['dtype'] == 'F32':
            a = np.frombuffer(raw, dtype=np.float32)
        elif t['dtype'] == 'BF16':
            a = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(t['dtype'])
        out[name] = torch.tensor(a.copy(), dtype=torch.float64).view(t['shape'])
    return out


class Hooks:
    """What one forward records and changes, by the JS API's names."""

    def __init__(self, patches=(), steer=(), head_patch=None):
        self.patches = list(patches)  # (name, positions, values [P, d])
        self.steer = list(steer)  # (layer, vector [d] scaled, positions or None)
        self.head_patch = head_patch  # (layer, head, positions, values [P, D])
        self.acts = {}
        self.heads = {}  # layer -> head outputs [H, T, D]

    def at(self, name, x, layer=None):
        x = x.clone()
        if layer is not None and name.endswith('hook_resid_pre'):
            for lay, vec, pos in self.steer:
                if lay == layer:
                    rows = range(x.shape[0]) if pos is None else pos
                    for t in rows:
                        x[t] = x[t] + vec
        for n, pos, vals in self.patches:
            if n == name:
                for i, t in enumerate(pos):
                    x[t] = vals[i]
        self.acts[name] = x
        return x

    def head_out(self, l, o):
        o = o.clone()
        if self.head_patch and self.head_patch[0] == l:
            _, h, pos, vals = self.head_patch
            for i, t in enumerate(pos):
                o[h, t] = vals[i]
        self.heads[l] = o
        return o


def attend(q, k, v, visible, scale):
    scores = (q @ k.transpose(-1, -2)) * scale
    return torch.softmax(scores.masked_fill(~visible, float('-inf')), -1) @ v


def gelu_new(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b, torch.sqrt(var + eps)[:, 0]


class Model:
    def __init__(self, name):
        self.name = name
        d = os.path.join(ROOT, MODELS[name])
        self.cfg = json.load(open(os.path.join(d, 'config.json')))
        self.w = read_safetensors(os.path.join(d, 'model.safetensors'))
        c = self.cfg
        self.gpt2 = c['model_type'] == 'gpt2'
        self.gemma = c['model_type'] == 'gemma3_text'
        if self.gpt2:
            self.NL, self.H, self.d, self.V = c['n_layer'], c['n_head'], c['n_embd'], c['vocab_size']
            self.D, self.Hkv = self.d // self.H, self.H
        else:
            self.NL, self.H, self.d, self.V = c['num_hidden_layers'], c['num_attention_heads'], c['hidden_size'], c['vocab_size']
            self.Hkv, self.D = c['num_key_value_heads'], llama_ref.head_dim(c)

    # ------------------------------------------------------------------ the pieces
    def final_norm(self, x):
        """x [n, d] -> (normed, divisor [n])."""
        if self.gpt2:
            return layer_norm(x, self.w['ln_f.weight'], self.w['ln_f.bias'], self.cfg['layer_norm_epsilon'])
        return self.rms(x, self.w['model.norm.weight'])

    def rms(self, x, weight):
        s = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg['rms_norm_eps'])
        return x / s * ((1.0 + weight) if self.gemma else weight), s[..., 0]

    def unembed(self, xn):
        if self.gpt2:
            return xn @ self.w['wte.weight'].T
        head = self.w.get('lm_head.weight', self.w['model.embed_tokens.weight'])
        logits = xn @ head.T
        cap = self.cfg.get('final_logit_softcapping')
        return torch.tanh(logits / cap) * cap if self.gemma and cap else logits

    def unembed_row(self, tok):
        if self.gpt2:
            return self.w['wte.weight'][tok]
        return self.w.get('lm_head.weight', self.w['model.embed_tokens.weight'])[tok]

    def embed(self, ids):
        if self.gpt2:
            T = len(ids)
            return self.w['wte.weight'][ids], self.w['wpe.weight'][:T]
        x = self.w['model.embed_tokens.weight'][ids]
        if self.gemma:  # sqrt(d) rounded to the weights' dtype (bfloat16)
            x = x * torch.tensor(self.d ** 0.5, dtype=torch.float32).to(torch.bfloat16).double()
        return x, None

    def window(self, l):
        if self.gemma:
            return self.cfg['sliding_window'] if self.cfg['layer_types'][l] == 'sliding_attention' else 0
        return llama_ref.layer_window(self.cfg, l)

    def rope(self, l, T):
        c = self.cfg
        if self.gemma:
            local = c['layer_types'][l] == 'sliding_attention'
            theta = c['rope_local_base_freq'] if local else c['rope_theta']
            inv = 1.0 / (theta ** (torch.arange(0, self.D, 2, dtype=torch.float64) / self.D))
        else:
            inv = llama_ref.rope_inv_freq(c)
        ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
        return torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)

    # ------------------------------------------------------------------ the forward
    def forward(self, ids, hk):
        """ids [T] -> logits [T, V]; hk records acts (by name), head outputs, hidden states,
        final divisors and Gemma's output norms' divisors."""
        w, T, H, Hkv, D, d = self.w, len(ids), self.H, self.Hkv, self.D, self.d
        tok, pos = self.embed(ids)
        x = tok + pos if pos is not None else tok
        hk.embed_parts = (tok, pos)
        hidden = [x.clone()]
        i = torch.arange(T)[:, None]
        j = torch.arange(T)[None, :]
        hk.sub = {}
        for l in range(self.NL):
            x = hk.at(f'blocks.{l}.hook_resid_pre', x, l)
            if self.gpt2:
                p = f'h.{l}.'
                h, _ = layer_norm(x, w[p + 'ln_1.weight'], w[p + 'ln_1.bias'], self.cfg['layer_norm_epsilon'])
                q, k, v = (h @ w[p + 'attn.c_attn.weight'] + w[p + 'attn.c_attn.bias']).split(d, -1)
                split = lambda t, n: t.view(T, n, D).transpose(0, 1)  # noqa: E731
                o = attend(split(q, H), split(k, H), split(v, H), j <= i, D ** -0.5)
                o = hk.head_out(l, o)
                a = o.transpose(0, 1).reshape(T, H * D) @ w[p + 'attn.c_proj.weight'] + w[p + 'attn.c_proj.bias']
            else:
                p = f'model.layers.{l}.'
                lin = lambda t, n: t @ w[p + n + '.weight'].T + (w[p + n + '.bias'] if p + n + '.bias' in w else 0)  # noqa: E731
                h, _ = self.rms(x, w[p + 'input_layernorm.weight'])
                q = lin(h, 'self_attn.q_proj').view(T, H, D).transpose(0, 1)
                k = lin(h, 'self_attn.k_proj').view(T, Hkv, D).transpose(0, 1)
                v = lin(h, 'self_attn.v_proj').view(T, Hkv, D).transpose(0, 1)
                if p + 'self_attn.q_norm.weight' in w:
                    q, _ = self.rms(q, w[p + 'self_attn.q_norm.weight'])
                    k, _ = self.rms(k, w[p + 'self_attn.k_norm.weight'])
                cos, sin = self.rope(l, T)
                q = q * cos + llama_ref.rotate_half(q) * sin
                k = k * cos + llama_ref.rotate_half(k) * sin
                visible = j <= i
                if self.window(l):
                    visible = visible & (j > i - self.window(l))
                scale = self.cfg['query_pre_attn_scalar'] ** -0.5 if self.gemma else D ** -0.5
                rep = lambda t: t.repeat_interleave(H // Hkv, dim=0)  # noqa: E731
                o = hk.head_out(l, attend(q, rep(k), rep(v), visible, scale))
                a = lin(o.transpose(0, 1).reshape(T, H * D), 'self_attn.o_proj')
                if self.gemma:
                    a, hk.sub[(l, 0)] = self.rms(a, w[p + 'post_attention_layernorm.weight'])
            a = hk.at(f'blocks.{l}.hook_attn_out', a)
            x = hk.at(f'blocks.{l}.hook_resid_mid', x + a)
            if self.gpt2:
                h, _ = layer_norm(x, w[p + 'ln_2.weight'], w[p + 'ln_2.bias'], self.cfg['layer_norm_epsilon'])
                m = gelu_new(h @ w[p + 'mlp.c_fc.weight'] + w[p + 'mlp.c_fc.bias']) @ w[p + 'mlp.c_proj.weight'] + w[p + 'mlp.c_proj.bias']
            else:
                h, _ = self.rms(x, w[p + ('pre_feedforward_layernorm.weight' if self.gemma else 'post_attention_layernorm.weight')])
                g = lin(h, 'mlp.gate_proj')
                act = torch.nn.functional.gelu(g, approximate='tanh') if self.gemma else torch.nn.functional.silu(g)
                m = lin(act * lin(h, 'mlp.up_proj'), 'mlp.down_proj')
                if self.gemma:
                    m, hk.sub[(l, 1)] = self.rms(m, w[p + 'post_feedforward_layernorm.weight'])
            m = hk.at(f'blocks.{l}.hook_mlp_out', m)
            x = hk.at(f'blocks.{l}.hook_resid_post', x + m)
            if l + 1 < self.NL:
                hidden.append(x.clone())
        hk.final_resid = x
        xn, hk.final_scale = self.final_norm(x)
        hidden.append(xn)
        hk.hidden = hidden
        return self.unembed(xn)

    # ------------------------------------------------------------------ the measures
    def lens(self, ids):
        hk = Hooks()
        self.forward(ids, hk)
        rows = [hk.acts[f'blocks.{l}.hook_resid_pre'] for l in range(self.NL)] + [hk.final_resid]
        return torch.stack([self.unembed(self.final_norm(r)[0]) for r in rows])

    def attribution(self, ids, position, a, b):
        """(names, values, total before the soft-cap) by the definitions."""
        hk = Hooks()
        self.forward(ids, hk)
        w = self.w
        u = self.unembed_row(a) - (self.unembed_row(b) if b is not None else 0)
        s = hk.final_scale[position]
        if self.gpt2:
            fw, fb = w['ln_f.weight'], w['ln_f.bias']
            through = lambda p: ((p - p.mean()) / s * fw) @ u  # noqa: E731
        else:
            fw = w['model.norm.weight'] + (1.0 if self.gemma else 0.0)
            fb = None
            through = lambda p: (p / s * fw) @ u  # noqa: E731
        names, vals = ['embed'], [through(hk.embed_parts[0][position])]
        if self.gpt2:
            names.append('pos_embed')
            vals.append(through(hk.embed_parts[1][position]))
        H, D = self.H, self.D
        for l in range(self.NL):
            if self.gpt2:
                Wo, bo, norm = w[f'h.{l}.attn.c_proj.weight'].T, w[f'h.{l}.attn.c_proj.bias'], None
            else:
                p = f'model.layers.{l}.'
                Wo, bo = w[p + 'self_attn.o_proj.weight'], w.get(p + 'self_attn.o_proj.bias')
                norm = (w[p + 'post_attention_layernorm.weight'] + 1.0, hk.sub[(l, 0)][position]) if self.gemma else None
            sub = (lambda y: y / norm[1] * norm[0]) if norm else (lambda y: y)  # noqa: E731
            for h in range(H):
                y = Wo[:, h * D:(h + 1) * D] @ hk.heads[l][h, position]
                names.append(f'L{l}H{h}')
                vals.append(through(sub(y)))
            if bo is not None:
                names.append(f'L{l}.attn_bias')
                vals.append(through(sub(bo)))
            names.append(f'L{l}.mlp')
            vals.append(through(hk.acts[f'blocks.{l}.hook_mlp_out'][position]))
        if fb is not None:
            names.append('ln_final.bias')
            vals.append(fb @ u)
        total = (self.final_norm(hk.final_resid)[0][position] @ u)
        return names, [float(v) for v in vals], float(total)

    def metric(self, ids, hk, answer):
        logits = self.forward(ids, hk)[-1]
        return float(logits[answer[0]] - logits[answer[1]])

    def sweeps(self, clean, corrupted, answer):
        """over -> normalised values by brute force, one full patched forward per cell."""
        c = Hooks()
        m_clean = self.metric(clean, c, answer)
        m_corr = self.metric(corrupted, Hooks(), answer)
        norm = lambda m: (m - m_corr) / (m_clean - m_corr)  # noqa: E731
        T, NL, H = len(clean), self.NL, self.H
        out = {}
        out['heads'] = [[norm(self.metric(corrupted, Hooks(head_patch=(l, h, range(T), c.heads[l][h])), answer))
                         for h in range(H)] for l in range(NL)]
        out['headPositions'] = [[[norm(self.metric(corrupted, Hooks(head_patch=(l, h, [t], c.heads[l][h, t:t + 1])), answer))
                                  for t in range(T)] for h in range(H)] for l in range(NL)]
        for over, site in [('residPre', 'hook_resid_pre'), ('attnOut', 'hook_attn_out'), ('mlpOut', 'hook_mlp_out')]:
            out[over] = [[norm(self.metric(corrupted, Hooks(patches=[(f'blocks.{l}.{site}', [t], c.acts[f'blocks.{l}.{site}'][t:t + 1])]), answer))
                          for t in range(T)] for l in range(NL)]
        return out, m_clean, m_corr


def write_f32(path, t):
    with open(path, 'wb') as f:
        f.write(torch.as_tensor(t, dtype=torch.float64).float().contiguous().numpy().tobytes())


def make(name, seed):
    m = Model(name)
    out = os.path.join(OUT, name)
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    T = 10
    ids = torch.randint(0, m.V, (T,), generator=g).tolist()
    entry = {'dir': MODELS[name], 'ids': ids, 'layers': m.NL, 'd': m.d, 'vocab': m.V}

    # the plain forward's records
    hk = Hooks()
    logits = m.forward(ids, hk)
    write_f32(os.path.join(out, 'logits.bin'), logits)
    write_f32(os.path.join(out, 'hidden.bin'), torch.stack(hk.hidden))
    for s in SITES:
        write_f32(os.path.join(out, f'{s}.bin'), torch.stack([hk.acts[f'blocks.{l}.{s}'] for l in range(m.NL)]))
    write_f32(os.path.join(out, 'final_scale.bin'), hk.final_scale)

    # patches: two sites (one of them with a row taken from another run's whole record)
    vals_a = 0.5 * torch.randn(2, m.d, generator=g, dtype=torch.float64)
    vals_b = 0.5 * torch.randn(1, m.d, generator=g, dtype=torch.float64)
    patches = [{'name': 'blocks.0.hook_attn_out', 'positions': [2, 5], 'values': vals_a.flatten().tolist()},
               {'name': f'blocks.{m.NL - 1}.hook_resid_pre', 'positions': [7], 'values': vals_b.flatten().tolist()}]
    ph = Hooks(patches=[(p['name'], p['positions'], torch.tensor(p['values'], dtype=torch.float64).view(-1, m.d)) for p in patches])
    write_f32(os.path.join(out, 'patched_logits.bin'), m.forward(ids, ph))
    write_f32(os.path.join(out, 'patched_resid_post.bin'), torch.stack([ph.acts[f'blocks.{l}.hook_resid_post'] for l in range(m.NL)]))
    entry['patch'] = patches

    # steering: one vector at every position, one at chosen positions
    v0 = torch.randn(m.d, generator=g, dtype=torch.float64)
    v1 = torch.randn(m.d, generator=g, dtype=torch.float64)
    steer = [{'layer': 0, 'vector': v0.tolist(), 'scale': 0.75},
             {'layer': m.NL - 1, 'vector': v1.tolist(), 'scale': -1.5, 'positions': [3, 4, 9]}]
    sh = Hooks(steer=[(s['layer'], s['scale'] * torch.tensor(s['vector'], dtype=torch.float64), s.get('positions')) for s in steer])
    write_f32(os.path.join(out, 'steered_logits.bin'), m.forward(ids, sh))
    entry['steer'] = steer
    # steering vector: mean over positions of resid_pre at layer 1 for A minus B
    ids_b = torch.randint(0, m.V, (7,), generator=g).tolist()
    ha, hb = Hooks(), Hooks()
    m.forward(ids, ha)
    m.forward(ids_b, hb)
    sv = ha.acts['blocks.1.hook_resid_pre'].mean(0) - hb.acts['blocks.1.hook_resid_pre'].mean(0)
    write_f32(os.path.join(out, 'steering_vector.bin'), sv)
    entry['steering_b'] = ids_b

    # the lens
    write_f32(os.path.join(out, 'lens.bin'), m.lens(ids))

    # attribution: a token and a token pair at two positions
    entry['attribution'] = []
    for position, a, b in [(T - 1, ids[1], None), (4, ids[2], ids[3] if ids[3] != ids[2] else (ids[2] + 1) % m.V)]:
        names, vals, total = m.attribution(ids, position, a, b)
        entry['attribution'].append({'position': position, 'tokens': [a] if b is None else [a, b],
                                     'names': names, 'values': vals, 'total': total})

    # sweeps: corrupted differs from clean at one position
    corrupted = list(ids)
    corrupted[3] = (ids[3] + 7) % m.V
    # correct: the clean run's top token; wrong: the one the corruption raises most against it
    logits_c = m.forward(ids, Hooks())[-1]
    logits_x = m.forward(corrupted, Hooks())[-1]
    correct = int(torch.argmax(logits_c))
    gain = logits_x - logits_c
    gain[correct] = -float('inf')
    answer = [correct, int(torch.argmax(gain))]
    sweeps, m_clean, m_corr = m.sweeps(ids, corrupted, answer)
    for over, vals in sweeps.items():
        write_f32(os.path.join(out, f'sweep_{over}.bin'), torch.tensor(vals, dtype=torch.float64))
    entry['sweep'] = {'clean': ids, 'corrupted': corrupted, 'answer': answer, 'clean_metric': m_clean,
                      'corrupted_metric': m_corr}
    print(f'{name}: T {T}, |logits| {float(logits.abs().max()):.2f}, metric clean {m_clean:.3f} corrupted {m_corr:.3f}')
    return entry


def main():
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    manifest = {name: make(name, 4700 + i) for i, name in enumerate(MODELS)}
    with open(os.path.join(OUT, 'residual.json'), 'w') as f:
        json.dump(manifest, f, indent=1)


if __name__ == '__main__':
    main()
