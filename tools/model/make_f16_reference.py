#!/usr/bin/python3
"""Random F16 checkpoints with weights as large as real ones get, and their float64 forward,
for the test that every `weights` option of loadModel keeps float32's accuracy
(tests/js/model-f16-accuracy.test.js, stage 50).

    /usr/bin/python3 tools/model/make_f16_reference.py

Two checkpoints, stored IEEE half (safetensors dtype F16), every weight N(0, 0.2^2)
(norm weights 1 + N(0, 0.2^2)), under tests/data/f16/:
  gpt2-f16/     GPT-2 layout: 3 layers, 6 heads, n_embd 192, vocab 256 (byte-level: no tokenizer files), 62 tokens
  mistral-f16/  Mistral layout: 3 layers, 8 query / 2 KV heads, width 256, sliding window 16,
                40 tokens
Small weights (std 0.02) hide lost bits: products of such weights sit far from where a
float32 sum drops them. The references are computed in float64 from the half values exactly
as stored (widened), written as float32: logits [L, V] and attentions [n_layer, H, L, L].
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_llama_reference as ml  # noqa: E402
import train_tiny as tt  # noqa: E402

OUT = os.path.join(tt.ROOT, 'tests', 'data', 'f16')
STD = 0.2


def halves(tensors):
    """float tensors -> the F16 values (as float64) they are stored as"""
    return {k: v.half().double() for k, v in tensors.items()}


def gpt2_case(seed):
    cfg = tt.gpt2_config(vocab_size=256, n_positions=64, n_embd=192, n_layer=3, n_head=6)
    model = tt.GPT2(cfg)
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, p in model.named_parameters():
        base = 1.0 if name.endswith(('ln_1.weight', 'ln_2.weight', 'ln_f.weight')) else 0.0
        tensors[name] = base + STD * torch.randn(p.shape, generator=g)
    tensors = halves(tensors)
    model = model.double()
    model.load_state_dict(tensors, strict=True)  # the exact half values, in float64
    model.eval()
    ids = torch.randint(0, cfg['vocab_size'], (62,), generator=g).tolist()
    with torch.no_grad():
        logits, atts = model(torch.tensor([ids]), output_attentions=True)
    return cfg, tensors, ids, logits[0], torch.stack([a[0] for a in atts])


def mistral_case(seed):
    cfg = dict(model_type='mistral', architectures=['MistralForCausalLM'], hidden_act='silu', hidden_size=256,
               intermediate_size=512, num_attention_heads=8, num_key_value_heads=2, num_hidden_layers=3,
               vocab_size=320, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0,
               sliding_window=16, tie_word_embeddings=False, torch_dtype='float16')
    g = torch.Generator().manual_seed(seed)
    shapes = ml.random_tensors(cfg, seed)  # the layout and names; values drawn again below
    tensors = {}
    for name, t in shapes.items():
        base = 1.0 if name.endswith('norm.weight') else 0.0
        tensors[name] = base + STD * torch.randn(t.shape, generator=g)
    tensors = halves(tensors)
    ids = torch.randint(0, cfg['vocab_size'], (40,), generator=g).tolist()
    logits, atts, _, _ = ml.forward(cfg, tensors, ids)
    return cfg, tensors, ids, logits, atts


def write(name, cfg, tensors, ids, logits, atts):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
        f.write('\n')
    ml.write_safetensors(os.path.join(d, 'model.safetensors'), tensors, 'F16')
    ml.write_f32(os.path.join(d, 'logits.bin'), logits)
    ml.write_f32(os.path.join(d, 'attentions.bin'), atts)
    return {'dir': name, 'ids': ids, 'logits_shape': list(logits.shape), 'attentions_shape': list(atts.shape)}


def main():
    torch.set_num_threads(1)
    cases = [write('gpt2-f16', *gpt2_case(25)), write('mistral-f16', *mistral_case(26))]
    manifest = {
        'about': 'tools/model/make_f16_reference.py: random F16 checkpoints (weights N(0, 0.2^2), norm '
                 'weights 1 + N(0, 0.2^2)) and their float64 forward from the stored half values, '
                 'written as little-endian float32 (logits [L, V], attentions [n_layer, H, L, L]).',
        'cases': cases,
    }
    with open(os.path.join(OUT, 'f16.json'), 'w') as f:
        json.dump(manifest, f, indent=1)
        f.write('\n')
    for c in cases:
        print(c['dir'], 'L =', len(c['ids']), 'logits', c['logits_shape'])


if __name__ == '__main__':
    main()
