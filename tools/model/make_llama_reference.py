"""Small random Llama-family checkpoints and the outputs of an independent PyTorch forward,
for the C++ and JS tests (tests/data/llama/).

The forward below is written from the Hugging Face modeling files' semantics, not from
qkv's C++: RMSNorm, rotary embedding (rotate_half, the llama3 rope_scaling), SwiGLU, grouped-
query attention (K/V repeated per query head here, as HF's repeat_kv does), the sliding
window (key j visible to query i when i - window < j <= i), q/k/v biases. It runs in float64;
the same forward in float32 measures PyTorch's own float32 error, recorded beside the data.

One checkpoint per model_type:
  llama-rope3  llama, GQA 4:2, head_dim 16 given explicitly (hidden 48 / 4 heads would be 12),
               rope_scaling llama3 with frequencies in all three bands (wavelengths 6.3 < 8, 19.9 in [8, 32], >= 62.8 > 32), untied lm_head
  mistral-win  mistral, GQA 4:1 (one kv head), sliding_window 5 < the test length 12, tied
  qwen2-bias   qwen2, GQA 4:2, q/k/v biases, use_sliding_window with max_window_layers 1
               (layer 0 full, layers 1-2 windowed), tied
  llama-narrow llama, 4 heads = 4 kv heads (no GQA), head_dim 8 (heads x head_dim = 32 <
               hidden 48), attention_bias (q/k/v/o biases), rope_theta 500000, tied

Writes tests/data/llama/<name>/{config.json, model.safetensors} and
tests/data/llama/<name>-ref/{ref.json, logits.bin, attentions.bin, queries.bin, keys.bin}.
Run with /usr/bin/python3 (PyTorch 1.13): /usr/bin/python3 tools/model/make_llama_reference.py
Also importable: `forward(cfg, tensors, ids)` is the reference the benchmark's ONNX export uses.
"""
import argparse
import json
import math
import os
import struct

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, '..', '..', 'tests', 'data', 'llama')


# ----------------------------------------------------------------------------- checkpoints

def make_config(name):
    base = dict(hidden_act='silu', hidden_size=48, intermediate_size=72, num_attention_heads=4,
                num_hidden_layers=2, vocab_size=67, max_position_embeddings=64, rms_norm_eps=1e-5,
                torch_dtype='float32')
    if name == 'llama-rope3':
        return dict(base, model_type='llama', architectures=['LlamaForCausalLM'], num_key_value_heads=2,
                    head_dim=16, rope_theta=10000.0, attention_bias=False, tie_word_embeddings=False,
                    rope_scaling=dict(rope_type='llama3', factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                      original_max_position_embeddings=32))
    if name == 'mistral-win':
        return dict(base, model_type='mistral', architectures=['MistralForCausalLM'], num_key_value_heads=1,
                    rope_theta=1000.0, sliding_window=5, tie_word_embeddings=True)
    if name == 'qwen2-bias':
        return dict(base, model_type='qwen2', architectures=['Qwen2ForCausalLM'], num_key_value_heads=2,
                    num_hidden_layers=3, rope_theta=1000000.0, use_sliding_window=True, sliding_window=4,
                    max_window_layers=1, tie_word_embeddings=True)
    if name == 'llama-narrow':
        return dict(base, model_type='llama', architectures=['LlamaForCausalLM'], num_key_value_heads=4,
                    head_dim=8, rope_theta=500000.0, attention_bias=True, tie_word_embeddings=True)
    raise ValueError(name)


def head_dim(cfg):
    return cfg.get('head_dim') or cfg['hidden_size'] // cfg['num_attention_heads']


def random_tensors(cfg, seed):
    """HF names -> float32 tensors ([out, in] for every projection)."""
    g = torch.Generator().manual_seed(seed)
    E, I, V = cfg['hidden_size'], cfg['intermediate_size'], cfg['vocab_size']
    H, Hkv, D = cfg['num_attention_heads'], cfg['num_key_value_heads'], head_dim(cfg)

    def rnd(*shape, scale):
        return (torch.randn(*shape, generator=g) * scale).float()

    t = {'model.embed_tokens.weight': rnd(V, E, scale=1.0)}
    for l in range(cfg['num_hidden_layers']):
        p = f'model.layers.{l}.'
        t[p + 'input_layernorm.weight'] = 1.0 + rnd(E, scale=0.1)
        t[p + 'self_attn.q_proj.weight'] = rnd(H * D, E, scale=0.6 / math.sqrt(E))
        t[p + 'self_attn.k_proj.weight'] = rnd(Hkv * D, E, scale=0.6 / math.sqrt(E))
        t[p + 'self_attn.v_proj.weight'] = rnd(Hkv * D, E, scale=1 / math.sqrt(E))
        if cfg['model_type'] == 'qwen2' or cfg.get('attention_bias'):
            t[p + 'self_attn.q_proj.bias'] = rnd(H * D, scale=0.2)
            t[p + 'self_attn.k_proj.bias'] = rnd(Hkv * D, scale=0.2)
            t[p + 'self_attn.v_proj.bias'] = rnd(Hkv * D, scale=0.2)
        t[p + 'self_attn.o_proj.weight'] = rnd(E, H * D, scale=1 / math.sqrt(H * D))
        if cfg.get('attention_bias'):  # Llama's attention_bias: o_proj too (Qwen2's o_proj has none)
            t[p + 'self_attn.o_proj.bias'] = rnd(E, scale=0.2)
        t[p + 'post_attention_layernorm.weight'] = 1.0 + rnd(E, scale=0.1)
        t[p + 'mlp.gate_proj.weight'] = rnd(I, E, scale=1 / math.sqrt(E))
        t[p + 'mlp.up_proj.weight'] = rnd(I, E, scale=1 / math.sqrt(E))
        t[p + 'mlp.down_proj.weight'] = rnd(E, I, scale=1 / math.sqrt(I))
    t['model.norm.weight'] = 1.0 + rnd(E, scale=0.1)
    if not cfg.get('tie_word_embeddings', False):
        t['lm_head.weight'] = rnd(V, E, scale=1 / math.sqrt(E))
    return t


def write_safetensors(path, tensors, dtype='F32'):
    """The safetensors format by hand (the safetensors package is not installed here)."""
    header, blobs, offset = {}, [], 0
    for name, x in tensors.items():
        if dtype == 'F32':
            b = x.float().contiguous().numpy().tobytes()
        elif dtype == 'F16':
            b = x.half().contiguous().numpy().tobytes()
        else:  # BF16: the top 16 bits of float32 after round-to-nearest-even
            b = x.bfloat16().view(torch.int16).contiguous().numpy().tobytes()
        header[name] = {'dtype': dtype, 'shape': list(x.shape), 'data_offsets': [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# ----------------------------------------------------------------------------- the forward

def rope_inv_freq(cfg):
    D = head_dim(cfg)
    inv = 1.0 / (cfg['rope_theta'] ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    rs = cfg.get('rope_scaling')
    if rs and rs.get('rope_type', rs.get('type')) == 'llama3':
        factor, lo, hi = rs['factor'], rs['low_freq_factor'], rs['high_freq_factor']
        old = rs['original_max_position_embeddings']
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > old / lo, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= old / hi) & (wavelen <= old / lo)
        inv = torch.where(medium, blended, scaled)
    return inv


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def layer_window(cfg, l):
    """0 = full causal attention."""
    if cfg['model_type'] == 'mistral':
        return cfg.get('sliding_window', 4096) or 0
    if cfg['model_type'] == 'qwen2' and cfg.get('use_sliding_window'):
        return cfg['sliding_window'] if l >= cfg.get('max_window_layers', 28) else 0
    return 0


def forward(cfg, tensors, ids, dtype=torch.float64):
    """ids [L] -> logits [L, V], attentions [NL, H, L, L], queries [NL, H, L, D] and keys
    [NL, Hkv, L, D] (after rotation, queries unscaled)."""
    w = {k: v.to(dtype) for k, v in tensors.items()}
    E, H, Hkv, D = cfg['hidden_size'], cfg['num_attention_heads'], cfg['num_key_value_heads'], head_dim(cfg)
    eps, L = cfg['rms_norm_eps'], len(ids)

    def rmsnorm(x, weight):
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def linear(x, name, bias=None):
        y = x @ w[name].T
        return y + w[bias] if bias and bias in w else y

    pos = torch.arange(L, dtype=torch.float64)
    ang = torch.outer(pos, rope_inv_freq(cfg))            # [L, D/2]
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(dtype)  # [L, D]
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(dtype)

    x = w['model.embed_tokens.weight'][torch.tensor(ids)]  # [L, E]
    atts, qs, ks = [], [], []
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    for l in range(cfg['num_hidden_layers']):
        p = f'model.layers.{l}.'
        h = rmsnorm(x, w[p + 'input_layernorm.weight'])
        q = linear(h, p + 'self_attn.q_proj.weight', p + 'self_attn.q_proj.bias').view(L, H, D).transpose(0, 1)
        k = linear(h, p + 'self_attn.k_proj.weight', p + 'self_attn.k_proj.bias').view(L, Hkv, D).transpose(0, 1)
        v = linear(h, p + 'self_attn.v_proj.weight', p + 'self_attn.v_proj.bias').view(L, Hkv, D).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin  # [H, L, D]
        k = k * cos + rotate_half(k) * sin  # [Hkv, L, D]
        qs.append(q)
        ks.append(k)
        k_rep = k.repeat_interleave(H // Hkv, dim=0)  # [H, L, D]: query head h reads kv head h // group
        v_rep = v.repeat_interleave(H // Hkv, dim=0)
        visible = j <= i
        win = layer_window(cfg, l)
        if win:
            visible = visible & (j > i - win)
        scores = (q @ k_rep.transpose(-1, -2)) / math.sqrt(D)
        scores = scores.masked_fill(~visible, float('-inf'))
        a = torch.softmax(scores, dim=-1)  # [H, L, L]
        atts.append(a)
        o = (a @ v_rep).transpose(0, 1).reshape(L, H * D)
        x = x + linear(o, p + 'self_attn.o_proj.weight', p + 'self_attn.o_proj.bias')
        h = rmsnorm(x, w[p + 'post_attention_layernorm.weight'])
        gate = linear(h, p + 'mlp.gate_proj.weight')
        up = linear(h, p + 'mlp.up_proj.weight')
        x = x + linear(torch.nn.functional.silu(gate) * up, p + 'mlp.down_proj.weight')
    x = rmsnorm(x, w['model.norm.weight'])
    head = w['lm_head.weight'] if 'lm_head.weight' in w else w['model.embed_tokens.weight']
    return x @ head.T, torch.stack(atts), torch.stack(qs), torch.stack(ks)


# ----------------------------------------------------------------------------- data

def write_f32(path, t):
    with open(path, 'wb') as f:
        f.write(t.float().contiguous().numpy().tobytes())


def greedy(cfg, tensors, ids, n_new):
    """Greedy continuation by full recompute, with the top-2 margin of each choice."""
    ids, margins = list(ids), []
    for _ in range(n_new):
        logits = forward(cfg, tensors, ids)[0][-1]
        top = torch.topk(logits, 2).values
        margins.append(float(top[0] - top[1]))
        ids.append(int(torch.argmax(logits)))
    return ids, margins


def make(name, seed, out):
    cfg = make_config(name)
    tensors = random_tensors(cfg, seed)
    model_dir = os.path.join(out, name)
    ref_dir = os.path.join(out, name + '-ref')
    os.makedirs(model_dir, exist_ok=True)
    os.makedirs(ref_dir, exist_ok=True)
    with open(os.path.join(model_dir, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(model_dir, 'model.safetensors'), tensors)

    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, cfg['vocab_size'], (12,), generator=g).tolist()
    logits, att, q, k = forward(cfg, tensors, ids)
    l32, a32, q32, k32 = forward(cfg, tensors, ids, torch.float32)
    for fname, t in [('logits.bin', logits), ('attentions.bin', att), ('queries.bin', q), ('keys.bin', k)]:
        write_f32(os.path.join(ref_dir, fname), t)
    gen, margins = greedy(cfg, tensors, ids[:4], 8)
    ref = {
        'model': name,
        'ids': ids,
        'logits_shape': list(logits.shape),
        'attentions_shape': list(att.shape),
        'queries_shape': list(q.shape),
        'keys_shape': list(k.shape),
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
          f'attentions {ref["torch_f32_error"]["attentions"]:.2e}, min greedy margin {min(margins):.3f}')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--out', default=DATA)
    args = ap.parse_args()
    torch.set_num_threads(1)
    for i, name in enumerate(['llama-rope3', 'mistral-win', 'qwen2-bias', 'llama-narrow']):
        make(name, 1000 + i, args.out)


if __name__ == '__main__':
    main()
