#!/usr/bin/python3
"""Reference outputs of forwards with head interventions, for tests/js/model-interventions*.test.js.

    /usr/bin/python3 tools/model/make_interventions_reference.py

Interventions (docs/interventions.md), written here from their definitions, not from qkv's C++:
  head mask   Hugging Face head_mask: each head's softmax probabilities times its factor; the
              returned attentions are the scaled ones (modeling_gpt2.py / modeling_bert.py:
              attn_weights = attn_weights * head_mask, then attn_weights @ value).
  knockout    the blocked query -> key scores are -inf before the softmax (Geva et al. 2023); a
              row with every key blocked gives weights 0 and output 0 (qkv's fully-masked rule).
  patching    rows of a head's output (probabilities @ values, before the output projection)
              replaced by given values; head outputs are recorded after the patch.

Four small seeded random checkpoints (weights ~N(0, 0.2^2), LayerNorm/RMSNorm weights
1 + N(0, 0.1^2)) in Hugging Face layouts, under tests/data/interventions/:
  gpt2/    GPT-2, 2 layers x 4 heads, n_embd 32, vocab 256 (byte-level: no tokenizer files), 16 positions
  llama/   Llama, 2 layers, 4 query heads over 2 kv heads (GQA), head_dim 8, vocab 40
  bert/    BERT masked LM, 2 layers x 4 heads, hidden 32, vocab 60 (+ vocab.txt)
  bart/    BART, 2 + 2 layers x 4 heads, d_model 32, vocab 40 (+ placeholder vocab.txt)
and interventions.json: per model, cases of { ids, options as the JS API takes them, and the
float64 forward's outputs rounded once to float32 in <model>-ref/<case>.<what>.bin }.
The forwards are the project's own PyTorch models (tools/model/train_tiny.py, bert_torch.py,
tools/seq2seq/bart.py, and make_llama_reference.py's pieces) with their attention replaced by
`attend` below.
"""
import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, 'tools', 'seq2seq'))
import bart as bart_py  # noqa: E402
import bert_torch  # noqa: E402
import make_llama_reference as llama_ref  # noqa: E402
import train_tiny as tt  # noqa: E402
from make_bert_reference import write_model as write_bert  # noqa: E402

OUT = os.path.join(ROOT, 'tests', 'data', 'interventions')
STD = 0.2


# ----------------------------------------------------------------------------- the interventions

class Interventions:
    """One attention stack's interventions, in the JS API's form (what the test passes)."""

    def __init__(self, layers, heads, head_mask=None, knockout=(), patches=()):
        self.NL, self.H = layers, heads
        self.head_mask = None
        if head_mask is not None:
            m = torch.tensor(head_mask, dtype=torch.float64)
            self.head_mask = m.expand(layers, heads) if m.dim() == 1 else m
        self.knockout = list(knockout)
        self.patches = list(patches)
        self.outputs = [None] * layers

    def blocked(self, l, Lq, Lk):
        """[H, Lq, Lk] bool, True = blocked."""
        b = torch.zeros(self.H, Lq, Lk, dtype=torch.bool)
        for e in self.knockout:
            if e['layer'] != l:
                continue
            heads = e.get('heads', range(self.H))
            for q, k in e['block']:
                for h in heads:
                    b[h, q, k] = True
        return b


def attend(q, k, v, visible, iv, l):
    """q [H, Lq, D] (already scaled), k, v [H, Lk, D], visible [Lq, Lk] bool ->
    (output [H, Lq, D], probabilities [H, Lq, Lk])."""
    H, Lq, Lk = q.shape[0], q.shape[1], k.shape[1]
    ok = visible[None].expand(H, Lq, Lk)
    if iv is not None:
        ok = ok & ~iv.blocked(l, Lq, Lk)
    scores = (q @ k.transpose(-1, -2)).masked_fill(~ok, float('-inf'))
    p = torch.softmax(scores, dim=-1)
    p = torch.where(ok.any(-1, keepdim=True), p, torch.zeros_like(p))  # no key left: 0, not NaN
    if iv is not None and iv.head_mask is not None:
        p = p * iv.head_mask[l][:, None, None]
    o = p @ v
    if iv is not None:
        o = o.clone()
        for e in iv.patches:
            if e['layer'] != l:
                continue
            pos = e.get('positions', list(range(Lq)))
            vals = torch.tensor(e['values'], dtype=o.dtype).view(len(pos), -1)
            for i, t in enumerate(pos):
                o[e['head'], t] = vals[i]
        iv.outputs[l] = o
    return o, p


# ----------------------------------------------------------------------------- the models

class Hooks:
    """The interventions of the forward being run (one per stack kind)."""
    current = {}


def gpt2_attention_forward(self, x, want_probs=False):  # replaces train_tiny.Attention.forward
    B, L, E = x.shape
    H, D = self.n_head, E // self.n_head
    q, k, v = self.c_attn(x).split(E, dim=2)
    split = lambda t: t.view(L, H, D).transpose(0, 1)  # noqa: E731  [H, L, D] (B = 1)
    o, p = attend(split(q) / math.sqrt(D), split(k), split(v), self.causal[:L, :L], Hooks.current.get('self'), self._layer)
    return self.c_proj(o.transpose(0, 1).reshape(1, L, E)), p[None]


def bert_self_attention(x, q_lin, k_lin, v_lin, n_heads, mask_add, drop_p, training):  # replaces bert_torch.self_attention
    B, L, E = x.shape
    D = E // n_heads
    split = lambda t: t.view(L, n_heads, D).transpose(0, 1)  # noqa: E731
    visible = torch.ones(L, L, dtype=torch.bool)  # the cases have no padding
    o, p = attend(split(q_lin(x)) / math.sqrt(D), split(k_lin(x)), split(v_lin(x)), visible, Hooks.current.get('self'), q_lin._layer)
    return o.transpose(0, 1).reshape(1, L, E), p[None]


def bart_attention_forward(self, x, kv, mask):  # replaces bart.Attention.forward
    B, Lq, E = x.shape
    Lk = kv.shape[1]
    H, D = self.heads, E // self.heads
    q = (self.q_proj(x) * D ** -0.5).view(Lq, H, D).transpose(0, 1)
    k = self.k_proj(kv).view(Lk, H, D).transpose(0, 1)
    v = self.v_proj(kv).view(Lk, H, D).transpose(0, 1)
    visible = torch.ones(Lq, Lk, dtype=torch.bool) if mask is None else mask[0, 0]
    kind, layer = self._kind
    o, p = attend(q, k, v, visible, Hooks.current.get(kind), layer)
    return self.out_proj(o.transpose(0, 1).reshape(1, Lq, E)), p[None]


tt.Attention.forward = gpt2_attention_forward
bert_torch.self_attention = bert_self_attention
bart_py.Attention.forward = bart_attention_forward


def llama_forward(cfg, w, ids, iv):
    """make_llama_reference.forward with its attention through `attend`."""
    E, H, Hkv, D = cfg['hidden_size'], cfg['num_attention_heads'], cfg['num_key_value_heads'], llama_ref.head_dim(cfg)
    eps, L = cfg['rms_norm_eps'], len(ids)
    rms = lambda x, g: g * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))  # noqa: E731
    ang = torch.outer(torch.arange(L, dtype=torch.float64), llama_ref.rope_inv_freq(cfg))
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    x = w['model.embed_tokens.weight'][torch.tensor(ids)]
    atts = []
    causal = torch.tril(torch.ones(L, L, dtype=torch.bool))
    for l in range(cfg['num_hidden_layers']):
        p = f'model.layers.{l}.'
        h = rms(x, w[p + 'input_layernorm.weight'])
        q = (h @ w[p + 'self_attn.q_proj.weight'].T).view(L, H, D).transpose(0, 1)
        k = (h @ w[p + 'self_attn.k_proj.weight'].T).view(L, Hkv, D).transpose(0, 1)
        v = (h @ w[p + 'self_attn.v_proj.weight'].T).view(L, Hkv, D).transpose(0, 1)
        q = q * cos + llama_ref.rotate_half(q) * sin
        k = k * cos + llama_ref.rotate_half(k) * sin
        rep = lambda t: t.repeat_interleave(H // Hkv, dim=0)  # noqa: E731  query head h reads kv head h // group
        o, a = attend(q / math.sqrt(D), rep(k), rep(v), causal, iv, l)
        atts.append(a)
        x = x + o.transpose(0, 1).reshape(L, H * D) @ w[p + 'self_attn.o_proj.weight'].T
        h = rms(x, w[p + 'post_attention_layernorm.weight'])
        g = torch.nn.functional.silu(h @ w[p + 'mlp.gate_proj.weight'].T) * (h @ w[p + 'mlp.up_proj.weight'].T)
        x = x + g @ w[p + 'mlp.down_proj.weight'].T
    x = rms(x, w['model.norm.weight'])
    return x @ w['model.embed_tokens.weight'].T, torch.stack(atts)


# ----------------------------------------------------------------------------- checkpoints

def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            norm = any(s in name for s in ('ln_', 'LayerNorm', 'layer_norm', 'layernorm'))
            if norm and name.endswith('weight'):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            else:
                p.copy_(STD * torch.randn(p.shape, generator=gen, dtype=torch.float64))


def make_gpt2(gen):
    cfg = tt.gpt2_config(vocab_size=256, n_positions=16, n_embd=32, n_layer=2, n_head=4)
    m = tt.GPT2(cfg)
    randomize(m, gen)
    tt.export_model(m, os.path.join(OUT, 'gpt2'), {'note': 'random (std 0.2), tools/model/make_interventions_reference.py'})
    m = tt.load_model(os.path.join(OUT, 'gpt2')).double()
    for l, b in enumerate(m.h):
        b.attn._layer = l

    def run(ids, ivs):
        Hooks.current = ivs
        with torch.no_grad():
            logits, atts = m(torch.tensor([ids]), output_attentions=True)
        return logits, {'self': torch.stack(atts)[:, 0]}
    return cfg['n_layer'], cfg['n_head'], run


def make_llama(gen):
    cfg = dict(model_type='llama', architectures=['LlamaForCausalLM'], hidden_act='silu', hidden_size=32,
               intermediate_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_hidden_layers=2,
               vocab_size=40, max_position_embeddings=16, rms_norm_eps=1e-5, rope_theta=10000.0,
               attention_bias=False, tie_word_embeddings=True, torch_dtype='float32')
    E, I, V, H, Hkv, D = 32, 48, 40, 4, 2, 8
    rnd = lambda *s: (STD * torch.randn(*s, generator=gen, dtype=torch.float64)).float()  # noqa: E731
    t = {'model.embed_tokens.weight': rnd(V, E)}
    for l in range(2):
        p = f'model.layers.{l}.'
        t[p + 'input_layernorm.weight'] = 1 + rnd(E) / 2
        t[p + 'self_attn.q_proj.weight'] = rnd(H * D, E)
        t[p + 'self_attn.k_proj.weight'] = rnd(Hkv * D, E)
        t[p + 'self_attn.v_proj.weight'] = rnd(Hkv * D, E)
        t[p + 'self_attn.o_proj.weight'] = rnd(E, H * D)
        t[p + 'post_attention_layernorm.weight'] = 1 + rnd(E) / 2
        t[p + 'mlp.gate_proj.weight'] = rnd(I, E)
        t[p + 'mlp.up_proj.weight'] = rnd(I, E)
        t[p + 'mlp.down_proj.weight'] = rnd(E, I)
    t['model.norm.weight'] = 1 + rnd(E) / 2
    d = os.path.join(OUT, 'llama')
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
    llama_ref.write_safetensors(os.path.join(d, 'model.safetensors'), t)
    w = {k: v.double() for k, v in t.items()}

    def run(ids, ivs):
        logits, att = llama_forward(cfg, w, ids, ivs.get('self'))
        return logits[None], {'self': att}
    return 2, H, run


def make_bert(gen):
    m = bert_torch.BertForMaskedLM(bert_torch.bert_config(60, hidden=32, layers=2, heads=4, intermediate=48, max_pos=16)).double()
    randomize(m, gen)
    d = os.path.join(OUT, 'bert')
    write_bert(m, d)
    cfg = json.load(open(os.path.join(d, 'config.json')))
    tensors, _ = tt.load_safetensors(os.path.join(d, 'model.safetensors'))
    m = bert_torch.from_hf_state_dict(cfg, tensors).double()
    for l, layer in enumerate(m.bert.encoder.layer):
        layer.attention.self.query._layer = l

    def run(ids, ivs):
        Hooks.current = ivs
        L = len(ids)
        with torch.no_grad():
            logits, atts = m(torch.tensor([ids]), torch.zeros(1, L, dtype=torch.long), torch.ones(1, L, dtype=torch.long))
        return logits, {'self': torch.stack(atts)[:, 0]}
    return 2, 4, run


def make_bart(gen):
    cfg = bart_py.bart_config(vocab_size=40, d_model=32, layers=2, heads=4, ffn=48, max_positions=16,
                              pad=0, bos=1, eos=2, decoder_start=2)
    m = bart_py.Bart(cfg)
    randomize(m, gen)
    with torch.no_grad():
        m.final_logits_bias.copy_(STD * torch.randn(m.final_logits_bias.shape, generator=gen, dtype=torch.float64))
    d = os.path.join(OUT, 'bart')
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
        f.write('\n')
    tt.save_safetensors(os.path.join(d, 'model.safetensors'),
                        {k: v.float().contiguous() for k, v in m.hf_state_dict().items()}, {'format': 'pt'})
    with open(os.path.join(d, 'vocab.txt'), 'w') as f:  # loadModel wants a tokenizer: placeholder words
        f.write('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(35)]) + '\n')
    m = bart_py.Bart(cfg)
    m.load_hf_state_dict(tt.load_safetensors(os.path.join(d, 'model.safetensors'))[0])
    m = m.double().eval()
    for l, layer in enumerate(m.model.encoder.layers):
        layer.self_attn._kind = ('encoder', l)
    for l, layer in enumerate(m.model.decoder.layers):
        layer.self_attn._kind = ('decoder', l)
        layer.encoder_attn._kind = ('cross', l)

    def run(ids, ivs):
        src, tgt = ids
        Hooks.current = ivs
        with torch.no_grad():
            out = m(torch.tensor([src]), torch.tensor([tgt]))
        st = lambda a: torch.stack([x[0] for x in a])  # noqa: E731
        return out['logits'], {'encoder': st(out['encoder_attentions']), 'decoder': st(out['decoder_attentions']),
                               'cross': st(out['cross_attentions'])}
    return 2, 4, run


# ----------------------------------------------------------------------------- cases

def write_f32(path, t):
    np.ascontiguousarray(t.detach().numpy().astype('<f4')).tofile(path)


def rand_values(gen, n):
    return [round(float(x), 6) for x in torch.randn(n, generator=gen, dtype=torch.float64)]


def decoder_cases(gen, NL, H, L, D, causal):
    """Option sets for one self-attention stack (JS option names)."""
    mask = [[round(float(x), 4) for x in row] for row in torch.rand(NL, H, generator=gen, dtype=torch.float64) * 1.5]
    mask[0][1] = 0.0
    mask[1][3] = 0.0
    last = L - 1
    # layer 0, heads 0 and 2: row `last` loses keys 0..2; row 1 loses every key it can see
    # (causal: keys 0, 1; bidirectional: all) -> weights 0, output 0
    row1 = [[1, k] for k in range(2 if causal else L)]
    knock = [{'layer': 0, 'heads': [0, 2], 'block': [[last, 0], [last, 1], [last, 2]] + row1},
             {'layer': 1, 'block': [[last, last - 1], [last - 2, 0]]}]
    patch = [{'layer': 0, 'head': 1, 'positions': [2, last], 'values': rand_values(gen, 2 * D)},
             {'layer': 1, 'head': 3, 'values': rand_values(gen, L * D)}]
    return [
        ('headmask', {'headMask': mask}),
        ('headmask1d', {'headMask': [1.0, 0.0, 0.5, 1.25][:H]}),
        ('knockout', {'knockout': knock}),
        ('patch', {'patchHeadOutputs': patch, 'outputHeadOutputs': True}),
        ('all', {'headMask': mask, 'knockout': knock, 'patchHeadOutputs': patch, 'outputHeadOutputs': True}),
    ]


def to_iv(NL, H, opts, prefix=''):
    names = {'': ('headMask', 'knockout', 'patchHeadOutputs'),
             'decoder': ('decoderHeadMask', 'decoderKnockout', 'decoderPatchHeadOutputs'),
             'cross': ('crossAttnHeadMask', 'crossAttnKnockout', 'crossAttnPatchHeadOutputs')}[prefix]
    return Interventions(NL, H, opts.get(names[0]), opts.get(names[1], ()), opts.get(names[2], ()))


def run_cases(name, NL, H, run, ids, cases, kinds):
    ref_dir = os.path.join(OUT, name + '-ref')
    os.makedirs(ref_dir, exist_ok=True)
    out = []
    for case, opts in [('plain', {})] + cases:
        ivs = {kind: to_iv(NL, H, opts, prefix) for kind, prefix in kinds}
        logits, atts = run(ids, ivs)
        entry = {'name': case, 'options': opts}
        files = {'logits': logits[0]}
        for kind, _ in kinds:
            files[f'{kind}_attentions'] = atts[kind]
            if opts.get('outputHeadOutputs'):
                files[f'{kind}_head_outputs'] = torch.stack(ivs[kind].outputs)
        for what, t in files.items():
            rel = f'{name}-ref/{case}.{what}.bin'
            write_f32(os.path.join(OUT, rel), t)
            entry[what] = {'file': rel, 'shape': list(t.shape)}
        out.append(entry)
    return out


def main():
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    gen = torch.Generator().manual_seed(2026)
    manifest = {'about': __doc__.split('\n')[0] + ' Paths relative to this file; .bin = float32 little-endian, '
                'row-major; attentions [layers, H, Lq, Lk]; head outputs [layers, H, Lq, head_dim].',
                'models': {}}
    for name, make, D, causal in [('gpt2', make_gpt2, 8, True), ('llama', make_llama, 8, True), ('bert', make_bert, 8, False)]:
        NL, H, run = make(gen)
        V = {'gpt2': 256, 'llama': 40, 'bert': 60}[name]
        ids = torch.randint(5, V, (9,), generator=gen).tolist()
        cases = decoder_cases(gen, NL, H, len(ids), D, causal)
        manifest['models'][name] = {'dir': name, 'ids': ids,
                                    'cases': run_cases(name, NL, H, run, ids, cases, [('self', '')])}
    NL, H, run = make_bart(gen)
    src = torch.randint(3, 40, (7,), generator=gen).tolist()
    tgt = [2] + torch.randint(3, 40, (5,), generator=gen).tolist()
    mask = lambda: [[round(float(x), 4) for x in r] for r in torch.rand(NL, H, generator=gen, dtype=torch.float64) * 1.5]  # noqa: E731
    enc_m, dec_m, cross_m = mask(), mask(), mask()
    enc_m[0][2] = dec_m[1][0] = cross_m[0][3] = 0.0
    cases = [('headmask', {'headMask': enc_m}), ('decoderheadmask', {'decoderHeadMask': dec_m}),
             ('crossheadmask', {'crossAttnHeadMask': cross_m}),
             ('allmasks', {'headMask': enc_m, 'decoderHeadMask': dec_m, 'crossAttnHeadMask': cross_m}),
             ('crossknockout', {'crossAttnKnockout': [{'layer': 1, 'heads': [1], 'block': [[5, 0], [5, 1], [2, 6]]}],
                                'decoderKnockout': [{'layer': 0, 'block': [[4, 0], [4, 1]]}], 'outputHeadOutputs': True})]
    manifest['models']['bart'] = {'dir': 'bart', 'ids': [src, tgt],
                                  'cases': run_cases('bart', NL, H, run, (src, tgt), cases,
                                                     [('encoder', ''), ('decoder', 'decoder'), ('cross', 'cross')])}
    with open(os.path.join(OUT, 'interventions.json'), 'w') as f:
        json.dump(manifest, f, indent=1)
        f.write('\n')
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(OUT) for f in fs)
    print(f'{OUT}: {total} bytes')


if __name__ == '__main__':
    main()
