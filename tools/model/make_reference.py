#!/usr/bin/python3
"""Reference outputs of the PyTorch GPT-2 forward, for the C++/JS tests (tests/data/model/).

    /usr/bin/python3 tools/model/make_reference.py              # all three parts below
    /usr/bin/python3 tools/model/make_reference.py --samples    # also print README samples
    /usr/bin/python3 tools/model/make_reference.py --only bpe   # one part

1. tiny: reads web/models/tiny-kjv (as exported: config.json + model.safetensors) and
   writes tests/data/model/tiny-kjv.json + tests/data/model/tiny-kjv/*.bin: for 3 prompts the
   input ids, logits, attentions and a 64-token greedy continuation.
   bpe: the same for web/models/tiny-kjv-bpe (+ vocab.json, merges.txt) into tiny-kjv-bpe.json
   and tiny-kjv-bpe/, plus the tokenizer's fixture: the held-out text (heldout.txt.gz), the
   sha256 of its ids as the training script encodes it, and some of its lines with their ids.
3. random-gpt2: a seeded, untrained GPT-2 of another shape (3 layers, 6 heads, n_embd 192,
   n_positions 64, vocab 300) with a GPT-2-format byte-level BPE tokenizer (vocab.json,
   merges.txt: 256 byte tokens + 44 merges learned on the KJV text), written to
   tests/data/model/random-gpt2/, and its references to tests/data/model/random-gpt2.json +
   tests/data/model/random-gpt2-ref/*.bin, including expected token ids from GPT-2's encoder.

Every .bin is raw little-endian float32, row-major, with its shape in the JSON manifest.
References are computed in float64 from the float32 weights and rounded once to float32, so
they do not depend on the BLAS library; a float32 implementation should match them to ~1e-5.
"""
import argparse
import gzip
import hashlib
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_tiny as tt  # noqa: E402
from bpe import GPT2Encoder, learn_bpe, load_tokenizer, save_tokenizer  # noqa: E402

DATA = os.path.join(tt.ROOT, 'tests', 'data', 'model')

TINY_PROMPTS = [
    ('beginning', 'In the beginning'),
    ('verse', 'For God so loved the world, that he gave his only begotten Son'),
    ('utf8', 'And Jesus went into the café, and the people followed him.'),
]
N_GREEDY = 64


def sha256_file(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def dump_json(obj, path):
    """Indented JSON, but lists of numbers (ids, shapes, margins) on one line."""
    def enc(o, ind):
        pad = ' ' * ind
        if isinstance(o, dict):
            if not o:
                return '{}'
            items = [f'{pad} {json.dumps(k, ensure_ascii=False)}: {enc(v, ind + 1)}' for k, v in o.items()]
            return '{\n' + ',\n'.join(items) + '\n' + pad + '}'
        if isinstance(o, list) and any(isinstance(v, (dict, list)) for v in o):
            return '[\n' + ',\n'.join(f'{pad} {enc(v, ind + 1)}' for v in o) + '\n' + pad + ']'
        return json.dumps(o, ensure_ascii=False)
    with open(path, 'w', encoding='utf-8') as f:
        f.write(enc(obj, 0) + '\n')


def write_f32(path, t):
    a = t.detach().cpu().numpy().astype('<f4')     # rounded once from float64
    with open(path, 'wb') as f:
        f.write(np.ascontiguousarray(a).tobytes())
    return list(a.shape)


@torch.no_grad()
def forward_case(model, ids, name, bin_dir, rel_dir):
    """Run ids through model; write logits and attentions; return the manifest entry."""
    x = torch.tensor([ids], dtype=torch.long)
    logits, atts = model(x, output_attentions=True)
    os.makedirs(bin_dir, exist_ok=True)
    lf = f'{name}.logits.bin'
    af = f'{name}.attentions.bin'
    lshape = write_f32(os.path.join(bin_dir, lf), logits)
    ashape = write_f32(os.path.join(bin_dir, af), torch.stack(atts))    # [n_layer, 1, H, L, L]
    return {
        'ids': list(ids),
        'logits': {'file': f'{rel_dir}/{lf}', 'shape': lshape},
        'attentions': {'file': f'{rel_dir}/{af}', 'shape': ashape,
                       'note': 'all layers stacked: [n_layer, 1, n_head, L, L]; layer i is '
                               'attentions[i] of shape [1, n_head, L, L]'},
        'last_logits_argmax': int(torch.argmax(logits[0, -1])),
    }


@torch.no_grad()
def greedy_with_margins(model, ids, n_new):
    """Greedy continuation; also the gap between the best and second-best logit per step."""
    ids = list(ids)
    margins = []
    P = model.cfg['n_positions']
    for _ in range(n_new):
        logits = model(torch.tensor([ids[-P:]], dtype=torch.long))[0, -1]
        top = torch.topk(logits, 2).values
        margins.append(float(top[0] - top[1]))
        ids.append(int(torch.argmax(logits)))
    return ids, margins


# ----------------------------------------------------------------------------- tiny-kjv

def model_tokenizer(model_dir):
    """(encode, decode, description) of a model folder: GPT-2 BPE when it has vocab.json, else bytes."""
    if os.path.exists(os.path.join(model_dir, 'vocab.json')):
        enc = load_tokenizer(model_dir)
        prefix = '; add_prefix_space (tokenizer_config.json): a space before a text that does not start with one' \
            if enc.add_prefix_space else ''
        return enc.encode, enc.decode, f'GPT-2 byte-level BPE (vocab.json + merges.txt, {len(enc.encoder)} tokens{prefix})'
    return (lambda s: list(s.encode('utf-8'))), tt.decode_bytes, 'bytes (id = UTF-8 byte)'


def make_tiny(model_dir, name, samples=False):
    """tests/data/model/<name>.json + <name>/*.bin for a trained KJV model (bytes or BPE)."""
    model = tt.load_model(model_dir).double()     # float64 forward: the reference is the exact value
    cfg = model.cfg
    encode, decode, tok_desc = model_tokenizer(model_dir)
    rel_model = os.path.relpath(model_dir, DATA).replace(os.sep, '/')
    bin_dir = os.path.join(DATA, name)
    cases = []
    for case_name, prompt in TINY_PROMPTS:
        ids = encode(prompt)
        case = {'name': case_name, 'prompt': prompt}
        case.update(forward_case(model, ids, case_name, bin_dir, name))
        full, margins = greedy_with_margins(model, ids, N_GREEDY)
        new = full[len(ids):]
        case['greedy'] = {
            'max_new_tokens': N_GREEDY,
            'new_ids': new,
            'text': decode(full),
            'new_text': decode(new),
            'min_margin': min(margins),
            'margins': [round(m, 5) for m in margins],
        }
        cases.append(case)
    manifest = {
        'about': f'PyTorch reference (float64 forward of the float32 weights, stored as float32) for the tiny KJV GPT-2 {name} (tools/model/make_reference.py). '
                 'Paths are relative to this file. .bin files: little-endian float32, row-major. '
                 'logits [1, L, vocab]; attentions = softmax probabilities like HF output_attentions. '
                 'greedy: argmax each step, whole-window recompute; margins = top1 - top2 logit per step.',
        'model_dir': rel_model,
        'model_sha256': sha256_file(os.path.join(model_dir, 'model.safetensors')),
        'config': {k: cfg[k] for k in ('vocab_size', 'n_positions', 'n_embd', 'n_layer', 'n_head')},
        'tokenizer': tok_desc,
        'cases': cases,
    }
    if os.path.exists(os.path.join(model_dir, 'vocab.json')):
        manifest.update(bpe_fixture(model_dir, bin_dir, name))
    dump_json(manifest, os.path.join(DATA, f'{name}.json'))
    for c in cases:
        print(f"{name} {c['name']}: L={len(c['ids'])} greedy min margin {c['greedy']['min_margin']:.4f}: "
              f"{c['greedy']['text']!r}")
    if samples:
        print_samples(model, encode, decode)


N_HELDOUT_CASES = 24


def bpe_fixture(model_dir, bin_dir, name):
    """The BPE model's tokenizer checks: the held-out text (gzipped), the sha256 of its ids as
    the training script encodes it (vocab.json + merges.txt alone) and as the model's tokenizer
    does (with tokenizer_config.json's add_prefix_space), and a few of its lines with their ids."""
    enc = load_tokenizer(model_dir)                  # the model's tokenizer (tokenizer_config.json)
    raw = load_tokenizer(model_dir, config=False)    # train_tiny.py's encoding
    _, val_text = tt.split_text(tt.kjv_text())
    os.makedirs(bin_dir, exist_ok=True)
    with open(os.path.join(bin_dir, 'heldout.txt.gz'), 'wb') as f:
        with gzip.GzipFile(fileobj=f, mode='wb', mtime=0, filename='') as g:
            g.write(val_text.encode('utf-8'))
    sha = lambda ids: hashlib.sha256(','.join(map(str, ids)).encode('ascii')).hexdigest()  # noqa: E731
    train_ids = raw.encode(val_text)
    assert raw.decode(train_ids) == val_text
    ids = enc.encode(val_text)
    assert enc.decode(ids) == enc.prefixed(val_text)
    lines = val_text.split('\n')
    step = max(1, len(lines) // N_HELDOUT_CASES)
    picked = [ln for ln in lines[::step] if ln][:N_HELDOUT_CASES]
    cases = []
    for text in picked + [t for t in TOKENIZER_STRINGS if t]:
        cases.append({'text': text, 'ids': enc.encode(text), 'pieces': enc.pieces(text), 'train_ids': raw.encode(text)})
    return {
        'heldout': {
            'file': f'{name}/heldout.txt.gz',
            'note': 'the held-out text (last 5% of the KJV bytes, tools/model/train_tiny.py split_text), gzipped; '
                    'ids_sha256 = sha256 of its ids as train_tiny.py encodes it (vocab.json + merges.txt, no prefix space), '
                    'joined by "," (ASCII); model_ids_sha256 = the same for the ids of the model\'s tokenizer '
                    f'(add_prefix_space {str(enc.add_prefix_space).lower()} in tokenizer_config.json: the ids of \' \' + text)',
            'bytes': len(val_text.encode('utf-8')),
            'lines': len(lines),
            'sha256': hashlib.sha256(val_text.encode('utf-8')).hexdigest(),
            'n_ids': len(train_ids),
            'ids_sha256': sha(train_ids),
            'model_n_ids': len(ids),
            'model_ids_sha256': sha(ids),
        },
        'tokenizer_cases_note': 'ids and pieces: the model\'s tokenizer (tokenizer_config.json add_prefix_space: '
                                'the text with a space before it unless it starts with one); train_ids: train_tiny.py\'s '
                                'encoding of the text itself',
        'tokenizer_cases': cases,
    }


def print_samples(model, encode, decode):
    """Markdown for tools/model/README.md: greedy and T=0.8 top-k 40 samples of about 200 bytes."""
    prompts = ['In the beginning', 'And Jesus said unto them,', 'The LORD is my shepherd']
    n_new = 200 if model.cfg['vocab_size'] == 256 else 56     # ~3.6 bytes per BPE token
    print(f'\n### Greedy (argmax), {n_new} tokens\n')
    for p in prompts:
        ids = tt.generate(model, encode(p), n_new)
        print('```\n' + decode(ids) + '\n```')
    print(f'\n### Temperature 0.8, top-k 40, seed 0, {n_new} tokens\n')
    for p in prompts:
        g = torch.Generator().manual_seed(0)
        ids = tt.generate(model, encode(p), n_new, temperature=0.8, top_k=40, generator=g)
        print('```\n' + decode(ids) + '\n```')


TOKENIZER_STRINGS = [
    'In the beginning God created the heaven and the earth.',
    "And the LORD said unto Moses, I'll go; they've said it's theirs, we're here.",
    'Hello  world   with   spaces\n\nand\nnewlines \n',
    'Numbers 3:16 and 1234567 and 3.14',
    'café, naïve, Ünïcödé — “quotes” and 日本語 and emoji 🙂!',
    '   leading and trailing   ',
    "'s'S'T 'RE don't",
    '',
]


# ----------------------------------------------------------------------------- random-gpt2

def random_gpt2(seed, n_inner=None):
    cfg = tt.gpt2_config(vocab_size=300, n_positions=64, n_embd=192, n_layer=3, n_head=6, n_inner=n_inner)
    torch.manual_seed(seed)
    model = tt.GPT2(cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        # larger-than-GPT-2 init so attention is far from uniform and every parameter
        # (including LayerNorm and bias terms) matters to the output
        for name, p in model.named_parameters():
            if name.endswith('ln_1.weight') or name.endswith('ln_2.weight') or name.endswith('ln_f.weight'):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    model.eval()
    return model


def make_random(seed, n_inner=None):
    out_dir = os.path.join(DATA, 'random-gpt2')
    os.makedirs(out_dir, exist_ok=True)
    # tokenizer: 256 byte tokens in GPT-2's order + 44 merges learned on the KJV
    text = tt.kjv_text()
    merges = learn_bpe(text, 300 - 256)
    vocab = save_tokenizer(out_dir, merges)
    assert len(vocab) == 300
    enc = GPT2Encoder(vocab, merges)

    model = random_gpt2(seed, n_inner)
    tt.export_model(model, out_dir, {
        'note': 'random, untrained (seeded) GPT-2 for loader tests; tokenizer = GPT-2 byte-level BPE '
                '(vocab.json, merges.txt: 256 byte tokens + 44 merges learned on the KJV)',
        'seed': seed,
    })
    tt.check_round_trip(model, out_dir)
    model = model.double()     # float64 forward for the references

    tok_cases = []
    for s in TOKENIZER_STRINGS:
        ids = enc.encode(s)
        assert enc.decode(ids) == s
        tok_cases.append({'text': s, 'ids': ids, 'pieces': enc.pieces(s),
                          'tokens': [enc.decoder[i] for i in ids]})

    g = torch.Generator().manual_seed(seed + 1)
    seqs = [
        ('kjv', enc.encode('In the beginning God created the heaven and the earth.')),
        ('random64', torch.randint(0, 300, (64,), generator=g).tolist()),   # fills n_positions
    ]
    bin_dir = os.path.join(DATA, 'random-gpt2-ref')
    cases = []
    for name, ids in seqs:
        case = {'name': name}
        case.update(forward_case(model, ids, name, bin_dir, 'random-gpt2-ref'))
        cases.append(case)
    full, margins = greedy_with_margins(model, seqs[0][1], 16)
    cases[0]['greedy'] = {'max_new_tokens': 16, 'new_ids': full[len(seqs[0][1]):],
                          'min_margin': min(margins), 'margins': [round(m, 5) for m in margins]}
    manifest = {
        'about': 'PyTorch reference (float64 forward, stored as float32) for a random GPT-2 (tools/model/make_reference.py). '
                 'Paths relative to this file; .bin = little-endian float32, row-major. '
                 'tokenizer: expected ids from GPT-2\'s encoder (regex pre-tokenizer + BPE) with '
                 'random-gpt2/vocab.json and merges.txt; byte tokens use GPT-2\'s bytes_to_unicode '
                 'order, so id != byte value (e.g. "!" = 0, " " = 220 via "\u0120").',
        'model_dir': 'random-gpt2',
        'model_sha256': sha256_file(os.path.join(out_dir, 'model.safetensors')),
        'config': {k: model.cfg[k] for k in ('vocab_size', 'n_positions', 'n_embd', 'n_layer', 'n_head', 'n_inner')},
        'tokenizer_cases': tok_cases,
        'cases': cases,
    }
    dump_json(manifest, os.path.join(DATA, 'random-gpt2.json'))
    print('random-gpt2 merges:', ' '.join(a + b for a, b in merges))
    for c in tok_cases:
        print(f"  {c['text']!r} -> {c['ids']}")


def main():
    global DATA
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--model', default=os.path.join(tt.ROOT, 'web', 'models', 'tiny-kjv'), help='the byte-level model')
    ap.add_argument('--bpe-model', default=os.path.join(tt.ROOT, 'web', 'models', 'tiny-kjv-bpe'), help='the BPE model')
    ap.add_argument('--seed', type=int, default=7)
    ap.add_argument('--random-n-inner', type=int, default=None,
                    help='n_inner of random-gpt2 (default null = 4 n_embd)')
    ap.add_argument('--only', choices=['tiny', 'bpe', 'random'], default=None)
    ap.add_argument('--data', default=DATA, help='output folder (default tests/data/model)')
    ap.add_argument('--samples', action='store_true', help='print README samples')
    args = ap.parse_args()
    torch.set_num_threads(1)
    DATA = os.path.abspath(args.data)
    os.makedirs(DATA, exist_ok=True)
    if args.only in (None, 'tiny'):
        make_tiny(os.path.abspath(args.model), 'tiny-kjv', args.samples)
    if args.only in (None, 'bpe'):
        make_tiny(os.path.abspath(args.bpe_model), 'tiny-kjv-bpe', args.samples)
    if args.only in (None, 'random'):
        make_random(args.seed, args.random_n_inner)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(DATA) for f in fs)
    print(f'{DATA}: {total} bytes')


if __name__ == '__main__':
    main()
