"""GPT-2 in plain PyTorch, with module and parameter names exactly as Hugging Face's GPT2Model
(so a state_dict is an HF GPT-2 checkpoint without the "transformer." prefix), and its
config.json. train_tiny.py re-exports these for the other scripts in this folder (tt.GPT2, ...).
"""
import math

import torch
import torch.nn as nn


class Conv1D(nn.Module):
    """HF GPT-2's Conv1D: weight [nx, nf], y = x @ W + b."""

    def __init__(self, nf, nx):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        shape = x.shape[:-1] + (self.weight.shape[1],)
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(shape)


def gelu_new(x):
    """GPT-2's "gelu_new": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg['n_head']
        self.n_embd = cfg['n_embd']
        self.c_attn = Conv1D(3 * self.n_embd, self.n_embd)
        self.c_proj = Conv1D(self.n_embd, self.n_embd)
        self.head_mask = None                             # [H], [B, H] (per window) or None: scales each head's probabilities
        P = cfg['n_positions']
        self.register_buffer('causal', torch.tril(torch.ones(P, P, dtype=torch.bool)), persistent=False)

    def forward(self, x, want_probs=False):
        B, L, E = x.shape
        H = self.n_head
        D = self.n_embd // H
        q, k, v = self.c_attn(x).split(E, dim=2)
        q = q.view(B, L, H, D).transpose(1, 2)          # [B, H, L, D]
        k = k.view(B, L, H, D).transpose(1, 2)
        v = v.view(B, L, H, D).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D)
        scores = scores.masked_fill(~self.causal[:L, :L], float('-inf'))
        probs = torch.softmax(scores, dim=-1)             # [B, H, L, L]
        if self.head_mask is not None:                    # qkv's headMask: 0 removes a head
            probs = probs * self.head_mask.view(-1, H, 1, 1)
        y = torch.matmul(probs, v).transpose(1, 2).reshape(B, L, E)
        return self.c_proj(y), (probs if want_probs else None)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        inner = cfg.get('n_inner') or 4 * cfg['n_embd']
        self.c_fc = Conv1D(inner, cfg['n_embd'])
        self.c_proj = Conv1D(cfg['n_embd'], inner)

    def forward(self, x):
        return self.c_proj(gelu_new(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        eps = cfg['layer_norm_epsilon']
        self.ln_1 = nn.LayerNorm(cfg['n_embd'], eps=eps)
        self.attn = Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg['n_embd'], eps=eps)
        self.mlp = MLP(cfg)

    def forward(self, x, want_probs=False):
        a, probs = self.attn(self.ln_1(x), want_probs)
        x = x + a
        x = x + self.mlp(self.ln_2(x))
        return x, probs


class GPT2(nn.Module):
    """GPT-2 with HF GPT2Model parameter names; the LM head is tied to wte."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        self.wte = nn.Embedding(cfg['vocab_size'], cfg['n_embd'])
        self.wpe = nn.Embedding(cfg['n_positions'], cfg['n_embd'])
        self.h = nn.ModuleList([Block(cfg) for _ in range(cfg['n_layer'])])
        self.ln_f = nn.LayerNorm(cfg['n_embd'], eps=cfg['layer_norm_epsilon'])
        # GPT-2 initialisation
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.01)
        for name, p in self.named_parameters():
            if name.endswith('c_proj.weight'):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg['n_layer']))

    def forward(self, ids, output_attentions=False):
        """ids [B, L] (long) -> logits [B, L, V], and a list of [B, H, L, L] if asked."""
        B, L = ids.shape
        pos = torch.arange(L, device=ids.device)
        x = self.wte(ids) + self.wpe(pos)[None]
        atts = []
        for block in self.h:
            x, probs = block(x, output_attentions)
            atts.append(probs)
        x = self.ln_f(x)
        logits = torch.matmul(x, self.wte.weight.t())
        return (logits, atts) if output_attentions else logits


def gpt2_config(vocab_size=256, n_positions=256, n_embd=128, n_layer=4, n_head=4, n_inner=None):
    """An HF-style GPT-2 config.json dict."""
    return {
        'architectures': ['GPT2LMHeadModel'],
        'model_type': 'gpt2',
        'vocab_size': vocab_size,
        'n_positions': n_positions,
        'n_ctx': n_positions,
        'n_embd': n_embd,
        'n_layer': n_layer,
        'n_head': n_head,
        'n_inner': n_inner,
        'activation_function': 'gelu_new',
        'layer_norm_epsilon': 1e-5,
        'initializer_range': 0.02,
        'resid_pdrop': 0.0,
        'embd_pdrop': 0.0,
        'attn_pdrop': 0.0,
        'scale_attn_weights': True,
        'tie_word_embeddings': True,
        'bos_token_id': None,
        'eos_token_id': None,
        'torch_dtype': 'float32',
    }
