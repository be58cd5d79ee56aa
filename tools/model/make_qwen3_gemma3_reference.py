"""Small random Qwen3 and Gemma 3 checkpoints and the outputs of an independent float64 PyTorch
forward, for the C++ and JS tests (tests/data/llama/, beside the other Llama-family models).

The forward follows transformers' modeling_qwen3.py and modeling_gemma3.py line by line
(transformers is not installed here): Qwen3 = Llama + RMSNorm over each head of q and k before
the rotary embedding (q_norm / k_norm); Gemma 3 = those q/k norms, RMSNorm as x * (1 + w) in
float32 (Gemma3RMSNorm), embeddings times sqrt(hidden_size) cast to the weights' dtype
(Gemma3TextScaledWordEmbedding), GeGLU with the tanh GELU, softmax scale
query_pre_attn_scalar^-0.5, sliding-window layers rotating with rope_local_base_freq and
global ones with rope_theta (and a linear rope_scaling), the four norms of Gemma3DecoderLayer,
final logit soft-capping. Every weight, norm weights included, is drawn with std 0.2 (Gemma's
norms around 0, so that 1 + w matters; Qwen3's around 1, as RMSNorm multiplies by w itself).

Checkpoints:
  qwen3-tied    qwen3, GQA 4:2, head_dim 16 given (hidden 32 / 4 heads would be 8), tied, F32
  qwen3-window  qwen3, untied lm_head, attention_bias (q/k/v/o), head_dim 6 (4 x 6 = 24 <
                hidden 32), use_sliding_window 4 with max_window_layers 1 (layer 1 windowed), F32
  gemma3-text   gemma3_text, 3 layers by layer_types [sliding, sliding, full], sliding_window 4
                < the test length 12, GQA 4:1, head_dim 8, query_pre_attn_scalar 12,
                final_logit_softcapping 2.5, BF16 weights (embed scale sqrt(32) rounded to
                bfloat16: 5.65625, not 5.656854)
  gemma3-mm     gemma3 (Gemma3ForConditionalGeneration): the text model in text_config, tensors
                under language_model.model. beside a vision tower's; sliding_window_pattern 2
                (layers 0 and 2 local, 1 global), sliding_window 5, rope_scaling linear factor 4
                on the global layer, no soft-capping, F16 weights (the scale rounded to a half)

Writes tests/data/llama/<name>/{config.json, model.safetensors} and
tests/data/llama/<name>-ref/{ref.json, logits.bin, attentions.bin, queries.bin, keys.bin}.
Run with /usr/bin/python3 (PyTorch 1.13): /usr/bin/python3 tools/model/make_qwen3_gemma3_reference.py
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_llama_reference import DATA, rotate_half, write_f32, write_safetensors  # noqa: E402

STD = 0.2


# ----------------------------------------------------------------------------- checkpoints

def make_config(name):
    base = dict(hidden_size=32, intermediate_size=24, num_attention_heads=4, vocab_size=96,
                max_position_embeddings=64, rms_norm_eps=1e-6)
    if name == 'qwen3-tied':
        return dict(base, model_type='qwen3', architectures=['Qwen3ForCausalLM'], hidden_act='silu',
                    num_hidden_layers=2, num_key_value_heads=2, head_dim=16, rope_theta=1000000.0,
                    attention_bias=False, tie_word_embeddings=True, use_sliding_window=False,
                    sliding_window=None, max_window_layers=28, torch_dtype='float32')
    if name == 'qwen3-window':
        return dict(base, model_type='qwen3', architectures=['Qwen3ForCausalLM'], hidden_act='silu',
                    num_hidden_layers=2, num_key_value_heads=4, head_dim=6, rope_theta=10000.0,
                    attention_bias=True, tie_word_embeddings=False, use_sliding_window=True,
                    sliding_window=4, max_window_layers=1, torch_dtype='float32')
    if name == 'gemma3-text':
        return dict(base, model_type='gemma3_text', architectures=['Gemma3ForCausalLM'],
                    hidden_activation='gelu_pytorch_tanh', num_hidden_layers=3, num_key_value_heads=1,
                    head_dim=8, query_pre_attn_scalar=12, sliding_window=4,
                    layer_types=['sliding_attention', 'sliding_attention', 'full_attention'],
                    rope_theta=1000000.0, rope_local_base_freq=10000.0, rope_scaling=None,
                    final_logit_softcapping=2.5, attn_logit_softcapping=None, attention_bias=False,
                    tie_word_embeddings=True, torch_dtype='bfloat16')
    if name == 'gemma3-mm':
        text = dict(base, model_type='gemma3_text', hidden_activation='gelu_pytorch_tanh', num_hidden_layers=3,
                    num_key_value_heads=2, head_dim=12, query_pre_attn_scalar=12, sliding_window=5,
                    sliding_window_pattern=2, rope_theta=100000.0, rope_local_base_freq=1000.0,
                    rope_scaling=dict(rope_type='linear', factor=4.0), final_logit_softcapping=None,
                    attn_logit_softcapping=None)
        return dict(model_type='gemma3', architectures=['Gemma3ForConditionalGeneration'], text_config=text,
                    vision_config=dict(model_type='siglip_vision_model', hidden_size=8, image_size=16, patch_size=8),
                    mm_tokens_per_image=4, torch_dtype='float16')
    raise ValueError(name)


def text_config(cfg):
    """The text model's config with Gemma3TextConfig's / Qwen3Config's layer types resolved."""
    c = dict(cfg['text_config']) if cfg['model_type'] == 'gemma3' else dict(cfg)
    n = c['num_hidden_layers']
    if c['model_type'] == 'gemma3_text':
        if 'layer_types' not in c:  # Gemma3TextConfig: every sliding_window_pattern-th layer is global
            pattern = c.get('sliding_window_pattern', 6)
            c['layer_types'] = ['sliding_attention' if (i + 1) % pattern else 'full_attention' for i in range(n)]
    else:  # Qwen3Config: sliding_window only with use_sliding_window, from max_window_layers on
        sw = c['sliding_window'] if c.get('use_sliding_window') else None
        c['sliding_window'] = sw
        c['layer_types'] = ['sliding_attention' if sw is not None and i >= c['max_window_layers'] else 'full_attention'
                            for i in range(n)]
    return c


def prefix(cfg):
    return 'language_model.model.' if cfg['model_type'] == 'gemma3' else 'model.'


def random_tensors(cfg, seed):
    """HF names -> float32 tensors ([out, in] for every projection), every one with std 0.2."""
    g = torch.Generator().manual_seed(seed)
    c = text_config(cfg)
    gemma = c['model_type'] == 'gemma3_text'
    E, I, V = c['hidden_size'], c['intermediate_size'], c['vocab_size']
    H, Hkv, D = c['num_attention_heads'], c['num_key_value_heads'], c['head_dim']

    def rnd(*shape):
        return (torch.randn(*shape, generator=g) * STD).float()

    def norm(n):  # Gemma3RMSNorm scales by 1 + w (weights around 0); Qwen3RMSNorm by w
        return rnd(n) if gemma else 1.0 + rnd(n)

    p0 = prefix(cfg)
    t = {p0 + 'embed_tokens.weight': rnd(V, E)}
    for l in range(c['num_hidden_layers']):
        p = f'{p0}layers.{l}.'
        t[p + 'input_layernorm.weight'] = norm(E)
        for proj, rows in [('q_proj', H * D), ('k_proj', Hkv * D), ('v_proj', Hkv * D)]:
            t[p + f'self_attn.{proj}.weight'] = rnd(rows, E)
            if c.get('attention_bias'):
                t[p + f'self_attn.{proj}.bias'] = rnd(rows)
        t[p + 'self_attn.q_norm.weight'] = norm(D)
        t[p + 'self_attn.k_norm.weight'] = norm(D)
        t[p + 'self_attn.o_proj.weight'] = rnd(E, H * D)
        if c.get('attention_bias'):
            t[p + 'self_attn.o_proj.bias'] = rnd(E)
        t[p + 'post_attention_layernorm.weight'] = norm(E)
        if gemma:
            t[p + 'pre_feedforward_layernorm.weight'] = norm(E)
            t[p + 'post_feedforward_layernorm.weight'] = norm(E)
        t[p + 'mlp.gate_proj.weight'] = rnd(I, E)
        t[p + 'mlp.up_proj.weight'] = rnd(I, E)
        t[p + 'mlp.down_proj.weight'] = rnd(E, I)
    t[p0 + 'norm.weight'] = norm(E)
    if not c.get('tie_word_embeddings', gemma):
        t['lm_head.weight'] = rnd(V, E)
    if cfg['model_type'] == 'gemma3':  # a vision tower and projector the text model does not read
        t['vision_tower.vision_model.embeddings.patch_embedding.weight'] = rnd(8, 3, 8, 8)
        t['multi_modal_projector.mm_input_projection_weight'] = rnd(8, E)
    return t


# ----------------------------------------------------------------------------- the forward

def inv_freq(theta, D, linear_factor=1.0):
    return 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D)) / linear_factor


def forward(cfg, tensors, ids, dtype=torch.float64, weights_dtype=torch.float32):
    """ids [L] -> logits [L, V], attentions [NL, H, L, L], queries [NL, H, L, D] and keys
    [NL, Hkv, L, D] (after the q/k norms and the rotation, queries unscaled)."""
    c = text_config(cfg)
    gemma = c['model_type'] == 'gemma3_text'
    w = {k: v.to(dtype) for k, v in tensors.items()}
    E, H, Hkv, D = c['hidden_size'], c['num_attention_heads'], c['num_key_value_heads'], c['head_dim']
    eps, L, p0 = c['rms_norm_eps'], len(ids), prefix(cfg)

    def rmsnorm(x, weight):
        if gemma:  # Gemma3RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w), w in float32 as stored
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + weight)
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))  # Qwen3RMSNorm

    def linear(x, name, bias=None):
        y = x @ w[name].T
        return y + w[bias] if bias and bias in w else y

    pos = torch.arange(L, dtype=torch.float64)

    def rope_tables(freqs):
        ang = torch.outer(pos, freqs)  # [L, D/2]
        return torch.cat([ang.cos(), ang.cos()], -1).to(dtype), torch.cat([ang.sin(), ang.sin()], -1).to(dtype)

    rs = c.get('rope_scaling') or {}
    factor = rs.get('factor', 1.0) if rs.get('rope_type', rs.get('type')) == 'linear' else 1.0
    rope_global = rope_tables(inv_freq(c['rope_theta'], D, factor))
    rope_local = rope_tables(inv_freq(c.get('rope_local_base_freq', 10000.0), D)) if gemma else rope_global

    x = w[p0 + 'embed_tokens.weight'][torch.tensor(ids)]  # [L, E]
    if gemma:  # Gemma3TextScaledWordEmbedding: * embed_scale.to(weight.dtype)
        x = x * torch.tensor(E ** 0.5, dtype=torch.float32).to(weights_dtype).to(dtype)
    scale = c['query_pre_attn_scalar'] ** -0.5 if gemma else D ** -0.5
    atts, qs, ks = [], [], []
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    for l in range(c['num_hidden_layers']):
        p = f'{p0}layers.{l}.'
        sliding = c['layer_types'][l] == 'sliding_attention'
        residual = x
        h = rmsnorm(x, w[p + 'input_layernorm.weight'])
        q = linear(h, p + 'self_attn.q_proj.weight', p + 'self_attn.q_proj.bias').view(L, H, D).transpose(0, 1)
        k = linear(h, p + 'self_attn.k_proj.weight', p + 'self_attn.k_proj.bias').view(L, Hkv, D).transpose(0, 1)
        v = linear(h, p + 'self_attn.v_proj.weight', p + 'self_attn.v_proj.bias').view(L, Hkv, D).transpose(0, 1)
        q = rmsnorm(q, w[p + 'self_attn.q_norm.weight'])  # over each head's D values
        k = rmsnorm(k, w[p + 'self_attn.k_norm.weight'])
        cos, sin = rope_local if sliding else rope_global
        q = q * cos + rotate_half(q) * sin  # [H, L, D]
        k = k * cos + rotate_half(k) * sin  # [Hkv, L, D]
        qs.append(q)
        ks.append(k)
        k_rep = k.repeat_interleave(H // Hkv, dim=0)  # repeat_kv: query head h reads kv head h // group
        v_rep = v.repeat_interleave(H // Hkv, dim=0)
        visible = j <= i
        if sliding and c.get('sliding_window'):  # masking_utils: kv_idx > q_idx - sliding_window
            visible = visible & (j > i - c['sliding_window'])
        scores = (q @ k_rep.transpose(-1, -2)) * scale
        scores = scores.masked_fill(~visible, float('-inf'))
        a = torch.softmax(scores, dim=-1)  # [H, L, L]
        atts.append(a)
        o = (a @ v_rep).transpose(0, 1).reshape(L, H * D)
        o = linear(o, p + 'self_attn.o_proj.weight', p + 'self_attn.o_proj.bias')
        if gemma:
            o = rmsnorm(o, w[p + 'post_attention_layernorm.weight'])
        x = residual + o
        residual = x
        h = rmsnorm(x, w[p + ('pre_feedforward_layernorm.weight' if gemma else 'post_attention_layernorm.weight')])
        gate = linear(h, p + 'mlp.gate_proj.weight')
        up = linear(h, p + 'mlp.up_proj.weight')
        act = torch.nn.functional.gelu(gate, approximate='tanh') if gemma else torch.nn.functional.silu(gate)
        m = linear(act * up, p + 'mlp.down_proj.weight')
        if gemma:
            m = rmsnorm(m, w[p + 'post_feedforward_layernorm.weight'])
        x = residual + m
    x = rmsnorm(x, w[p0 + 'norm.weight'])
    head = w['lm_head.weight'] if 'lm_head.weight' in w else w[p0 + 'embed_tokens.weight']
    logits = x @ head.T
    cap = c.get('final_logit_softcapping')
    if gemma and cap is not None:
        logits = torch.tanh(logits / cap) * cap
    return logits, torch.stack(atts), torch.stack(qs), torch.stack(ks)


# ----------------------------------------------------------------------------- data

def greedy(cfg, tensors, ids, n_new, weights_dtype):
    """Greedy continuation by full recompute, with the top-2 margin of each choice."""
    ids, margins = list(ids), []
    for _ in range(n_new):
        logits = forward(cfg, tensors, ids, weights_dtype=weights_dtype)[0][-1]
        top = torch.topk(logits, 2).values
        margins.append(float(top[0] - top[1]))
        ids.append(int(torch.argmax(logits)))
    return ids, margins


def make(name, seed, out):
    cfg = make_config(name)
    tensors = random_tensors(cfg, seed)
    wdt = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[cfg['torch_dtype']]
    tensors = {k: v.to(wdt).float() for k, v in tensors.items()}  # the forward reads them as the file holds them
    model_dir = os.path.join(out, name)
    ref_dir = os.path.join(out, name + '-ref')
    os.makedirs(model_dir, exist_ok=True)
    os.makedirs(ref_dir, exist_ok=True)
    with open(os.path.join(model_dir, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
    st_dtype = {torch.float32: 'F32', torch.bfloat16: 'BF16', torch.float16: 'F16'}[wdt]
    write_safetensors(os.path.join(model_dir, 'model.safetensors'), tensors, st_dtype)

    g = torch.Generator().manual_seed(seed + 1)
    V = text_config(cfg)['vocab_size']
    ids = torch.randint(0, V, (12,), generator=g).tolist()
    logits, att, q, k = forward(cfg, tensors, ids, weights_dtype=wdt)
    l32, a32, _, _ = forward(cfg, tensors, ids, torch.float32, weights_dtype=wdt)
    for fname, t in [('logits.bin', logits), ('attentions.bin', att), ('queries.bin', q), ('keys.bin', k)]:
        write_f32(os.path.join(ref_dir, fname), t)
    gen, margins = greedy(cfg, tensors, ids[:4], 8, wdt)
    ref = {
        'model': name,
        'ids': ids,
        'logits_shape': list(logits.shape),
        'attentions_shape': list(att.shape),
        'queries_shape': list(q.shape),
        'keys_shape': list(k.shape),
        'windows': [text_config(cfg)['sliding_window'] if t == 'sliding_attention' else 0
                    for t in text_config(cfg)['layer_types']],
        # PyTorch's own float32 error against float64 on this input (the tests' floor)
        'torch_f32_error': {'logits': float((l32 - logits).abs().max()), 'attentions': float((a32 - att).abs().max())},
        'greedy_prompt': ids[:4],
        'greedy_ids': gen,
        'greedy_margins': margins,
    }
    with open(os.path.join(ref_dir, 'ref.json'), 'w') as f:
        json.dump(ref, f, indent=1)
    print(f'{name}: logits {list(logits.shape)} |max| {float(logits.abs().max()):.3f}, '
          f'torch f32 error logits {ref["torch_f32_error"]["logits"]:.2e} '
          f'attentions {ref["torch_f32_error"]["attentions"]:.2e}, min greedy margin {min(margins):.3f}, '
          f'windows {ref["windows"]}')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--out', default=DATA)
    args = ap.parse_args()
    torch.set_num_threads(1)
    for i, name in enumerate(['qwen3-tied', 'qwen3-window', 'gemma3-text', 'gemma3-mm']):
        make(name, 2000 + i, args.out)


if __name__ == '__main__':
    main()
