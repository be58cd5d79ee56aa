#!/usr/bin/python3
"""Train the tiny GPT-2s used by the qkv demo (byte-level, or GPT-2 BPE), and export them.

Runs with Debian's PyTorch (CPU) under /usr/bin/python3, on one thread:

    /usr/bin/python3 tools/model/train_tiny.py --quick            # pipeline check, < 1 min
    /usr/bin/python3 tools/model/train_tiny.py                    # web/models/tiny-kjv (~70 min)
    /usr/bin/python3 tools/model/train_tiny.py --bpe-vocab 3000 --n-positions 128 --block 128 \
        --steps 1600 --eval-every 200                             # web/models/tiny-kjv-bpe
    /usr/bin/python3 tools/model/train_tiny.py --init-from web/models/tiny-kjv-bpe --repeat-frac 0.5 ...  # see README

Towards an induction head (web/models/tiny-kjv-induction), repeats.py's options: repeated spans
(--repeat-*), repeated random sequences (--random-frac), an attention loss (--induction-head,
--prev-head) and head dropout (--head-dropout); each option's help says what it does.

With --bpe-vocab N it first learns a GPT-2 byte-level BPE of N tokens on the training text
(bpe.py), trains on those tokens and writes vocab.json + merges.txt beside the weights. Losses
are reported in bits per byte either way (nats over the predicted tokens / their bytes / ln 2).

The text is the King James Bible from the Debian packages `bible-kjv` (the `bible`
command) and `bible-kjv-text` (its data), extracted by `kjv_text()` below.

This module also holds what the other scripts in this folder share: the GPT-2 model in
plain PyTorch (gpt2_torch.py, re-exported here: module and parameter names exactly as Hugging
Face's GPT2Model, so the state_dict *is* an HF GPT-2 checkpoint without the "transformer."
prefix), a minimal safetensors writer and reader, and the config.json export.
"""
import argparse
import csv
import hashlib
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))


# ----------------------------------------------------------------------------- text

def kjv_text():
    """The whole KJV (31102 verses) as one str, from the Debian `bible` command.

    `bible -l100000 Gen1:1-Rev22:21` prints every chapter as a heading line ("Genesis 1")
    followed by one line per verse ("  1 In the beginning ..."); -l100000 turns off its
    line wrapping. We strip the indentation and the blank lines, so the text reads:

        Genesis 1
        1 In the beginning God created the heaven and the earth.
        2 And the earth was without form, ...
    """
    exe = shutil.which('bible')
    if exe is None:
        sys.exit('train_tiny: the `bible` command is missing; run: apt-get install -y bible-kjv')
    raw = subprocess.run([exe, '-l100000', 'Gen1:1-Rev22:21'], check=True,
                         stdout=subprocess.PIPE).stdout.decode('utf-8')
    nverses = sum(1 for ln in raw.splitlines() if re.match(r'\s+\d+ ', ln))
    lines = [ln.strip() for ln in raw.splitlines()]
    text = '\n'.join(ln for ln in lines if ln) + '\n'
    if nverses != 31102:
        sys.exit(f'train_tiny: expected 31102 verses from `bible`, got {nverses}')
    return text


def split_text(text):
    """(training text, held-out text): the held-out part is the last 5 % of the bytes
    (the text is ASCII, so bytes and characters agree)."""
    n_val = len(text.encode('utf-8')) // 20
    assert len(text) == len(text.encode('utf-8')), 'split_text: the KJV text should be ASCII'
    return text[:-n_val], text[-n_val:]


# ----------------------------------------------------------------------------- model

from gpt2_torch import GPT2, MLP, Attention, Block, Conv1D, gelu_new, gpt2_config  # noqa: E402,F401


# ----------------------------------------------------------------------------- safetensors

_DTYPES = {'F32': (np.float32, '<f4'), 'F16': (np.float16, '<f2'), 'I64': (np.int64, '<i8'),
           'I32': (np.int32, '<i4'), 'U8': (np.uint8, 'u1')}
_NP2ST = {np.dtype('float32'): 'F32', np.dtype('float16'): 'F16', np.dtype('int64'): 'I64',
          np.dtype('int32'): 'I32', np.dtype('uint8'): 'U8'}


def save_safetensors(path, tensors, metadata=None):
    """Write {name: tensor/ndarray} as safetensors. Tensors in the given order, contiguous."""
    header = {}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        dtype = _NP2ST[a.dtype]
        b = np.ascontiguousarray(a).astype(_DTYPES[dtype][1], copy=False).tobytes()
        header[name] = {'dtype': dtype, 'shape': list(a.shape), 'data_offsets': [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    if metadata:
        header['__metadata__'] = {str(k): str(v) for k, v in metadata.items()}
    hjson = json.dumps(header, separators=(',', ':')).encode('utf-8')
    hjson += b' ' * ((-(8 + len(hjson))) % 8)      # data starts at an 8-byte aligned offset
    tmp = path + '.tmp'
    with open(tmp, 'wb') as f:
        f.write(struct.pack('<Q', len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def load_safetensors(path):
    """Read a safetensors file -> ({name: torch.Tensor}, metadata dict)."""
    with open(path, 'rb') as f:
        buf = f.read()
    (n,) = struct.unpack('<Q', buf[:8])
    header = json.loads(buf[8:8 + n].decode('utf-8'))
    meta = header.pop('__metadata__', {})
    base = 8 + n
    out = {}
    for name, info in header.items():
        b, e = info['data_offsets']
        np_dtype, le = _DTYPES[info['dtype']]
        a = np.frombuffer(buf, dtype=le, count=(e - b) // np.dtype(le).itemsize, offset=base + b)
        out[name] = torch.from_numpy(a.astype(np_dtype).reshape(info['shape']).copy())
    return out, meta


def export_model(model, out_dir, qkv_info=None, config_extra=None):
    """Write config.json and model.safetensors (HF GPT-2 names, F32) into out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    cfg = dict(model.cfg)
    if config_extra:
        cfg.update(config_extra)
    if qkv_info is not None:
        cfg['qkv'] = qkv_info
    with open(os.path.join(out_dir, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
        f.write('\n')
    sd = {k: v.float() for k, v in model.state_dict().items()}
    save_safetensors(os.path.join(out_dir, 'model.safetensors'), sd, {'format': 'pt'})


def load_model(model_dir):
    """A GPT2 built from model_dir/config.json and model_dir/model.safetensors."""
    with open(os.path.join(model_dir, 'config.json')) as f:
        cfg = json.load(f)
    tensors, _ = load_safetensors(os.path.join(model_dir, 'model.safetensors'))
    tensors = {(k[len('transformer.'):] if k.startswith('transformer.') else k): v
               for k, v in tensors.items()}
    model = GPT2(cfg)
    model.load_state_dict(tensors, strict=True)
    model.eval()
    return model


def check_round_trip(model, out_dir, text_ids=None):
    """Reload out_dir into a fresh model; parameters and logits must be bit-identical."""
    fresh = load_model(out_dir)
    sd_a, sd_b = model.state_dict(), fresh.state_dict()
    assert sd_a.keys() == sd_b.keys()
    for k in sd_a:
        assert torch.equal(sd_a[k], sd_b[k]), f'round trip: {k} differs'
    ids = text_ids if text_ids is not None else torch.arange(min(64, model.cfg['n_positions']))[None] % model.cfg['vocab_size']
    model.eval()
    with torch.no_grad():
        a = model(ids)
        b = fresh(ids)
    assert torch.equal(a, b), 'round trip: logits differ'
    return fresh


# ----------------------------------------------------------------------------- sampling

@torch.no_grad()
def generate(model, ids, n_new, temperature=0.0, top_k=None, generator=None):
    """Greedy (temperature 0) or sampled continuation; recomputes the whole window each step."""
    ids = list(ids)
    P = model.cfg['n_positions']
    for _ in range(n_new):
        x = torch.tensor([ids[-P:]], dtype=torch.long)
        logits = model(x)[0, -1]
        if temperature == 0:
            nxt = int(torch.argmax(logits))
        else:
            logits = logits / temperature
            if top_k:
                kth = torch.topk(logits, top_k).values[-1]
                logits = logits.masked_fill(logits < kth, float('-inf'))
            nxt = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=generator))
        ids.append(nxt)
    return ids


def decode_bytes(ids):
    return bytes(ids).decode('utf-8', errors='replace')


# ----------------------------------------------------------------------------- training

def warn_if_reference_blas():
    """Debian's torch calls libblas.so.3, by default the (slow) reference BLAS; see README."""
    try:
        maps = open('/proc/self/maps').read()
    except OSError:
        return
    libs = {ln.split()[-1] for ln in maps.splitlines() if 'libblas.so' in ln}
    if any('/blas/libblas.so' in p for p in libs):
        print('train_tiny: WARNING: torch is using the reference BLAS (~7x slower). Run with\n'
              '  LD_LIBRARY_PATH=<dir of OpenBLAS libblas.so.3> (see tools/model/README.md)', flush=True)


@torch.no_grad()
def heldout_bits_per_byte(model, ids, tok_bytes, batch=16):
    """Bits per byte of a whole token sequence (the held-out text): total nats / bytes / ln 2.

    The sequence is cut into windows of n_positions + 1 tokens that overlap by one token, so
    every token but the first is predicted exactly once (with the window's tokens before it
    as context); `tok_bytes[id]` is the number of UTF-8 bytes of token id, so the byte count
    is that of the predicted tokens. Returns (bits per byte, nats per token, bytes, tokens)."""
    model.eval()
    P = model.cfg['n_positions']
    ids = torch.as_tensor(ids, dtype=torch.long)
    starts = list(range(0, len(ids) - 1, P))
    nats, nbytes, ntok = 0.0, 0, 0
    full = [s for s in starts if s + P + 1 <= len(ids)]
    for k in range(0, len(full), batch):
        w = torch.stack([ids[s:s + P + 1] for s in full[k:k + batch]])      # [B, P+1]
        x, y = w[:, :-1], w[:, 1:]
        nats += F.cross_entropy(model(x).reshape(-1, model.cfg['vocab_size']), y.reshape(-1), reduction='sum').item()
        nbytes += int(tok_bytes[y].sum())
        ntok += y.numel()
    for s in starts[len(full):]:                                              # the shorter last window
        w = ids[s:][None]
        x, y = w[:, :-1], w[:, 1:]
        nats += F.cross_entropy(model(x).reshape(-1, model.cfg['vocab_size']), y.reshape(-1), reduction='sum').item()
        nbytes += int(tok_bytes[y].sum())
        ntok += y.numel()
    return nats / nbytes / math.log(2), nats / ntok, nbytes, ntok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--steps', type=int, default=4000)
    ap.add_argument('--out', default=None, help='default web/models/tiny-kjv, with --bpe-vocab web/models/tiny-kjv-bpe '
                                                '(--quick: under /tmp/qkv-quick/)')
    ap.add_argument('--bpe-vocab', type=int, default=0,
                    help='train a GPT-2 byte-level BPE of this many tokens on the training text (bpe.py) and '
                         'the model on its tokens; 0 (default): byte-level, vocab 256')
    ap.add_argument('--seed', type=int, default=1234)
    ap.add_argument('--quick', action='store_true', help='a few steps, to check the pipeline')
    ap.add_argument('--batch', type=int, default=16)
    ap.add_argument('--block', type=int, default=256, help='training sequence length (tokens)')
    ap.add_argument('--lr', type=float, default=2e-3)
    ap.add_argument('--min-lr-frac', type=float, default=0.1)
    ap.add_argument('--warmup', type=int, default=200)
    ap.add_argument('--weight-decay', type=float, default=0.1)
    ap.add_argument('--eval-every', type=int, default=250)
    ap.add_argument('--eval-batches', type=int, default=16)
    ap.add_argument('--n-layer', type=int, default=4)
    ap.add_argument('--n-head', type=int, default=4)
    ap.add_argument('--n-embd', type=int, default=128)
    ap.add_argument('--n-positions', type=int, default=256)
    ap.add_argument('--log', default=None, help='default tools/model/train_log.csv, with --bpe-vocab <out>/train_log.csv')
    ap.add_argument('--ckpt', default=None, help='torch checkpoint (not committed); default /tmp/qkv-<name>.pt')
    ap.add_argument('--time-steps', type=int, default=0, help='only time N steps and exit')
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--init-from', default=None,
                    help='start from this model folder: its weights, its shape and (with vocab.json) its BPE '
                         'instead of learning one; a fresh AdamW and the lr schedule of these options')
    import repeats
    repeats.add_arguments(ap)                         # --repeat-*, --induction-head, --induction-weight
    args = ap.parse_args()
    if args.init_from:                                # the starting model's shape and tokenizer
        init_cfg = json.load(open(os.path.join(args.init_from, 'config.json')))
        args.bpe_vocab = init_cfg['vocab_size'] if os.path.exists(os.path.join(args.init_from, 'vocab.json')) else 0
        args.n_positions, args.n_embd, args.n_layer, args.n_head = (init_cfg[k] for k in ('n_positions', 'n_embd', 'n_layer', 'n_head'))
        args.block = min(args.block, args.n_positions)
        if args.out is None and not args.quick:
            sys.exit('train_tiny: --init-from needs --out (a folder beside the model it starts from)')
    name = 'tiny-kjv-bpe' if args.bpe_vocab else 'tiny-kjv'
    if args.out is None:
        args.out = f'/tmp/qkv-quick/{name}' if args.quick else os.path.join(ROOT, 'web', 'models', name)
    if args.log is None:
        args.log = (f'/tmp/qkv-train-quick-{name}.csv' if args.quick else
                    os.path.join(args.out, 'train_log.csv') if args.bpe_vocab else os.path.join(HERE, 'train_log.csv'))
    if args.ckpt is None:
        args.ckpt = f'/tmp/qkv-{name}{"-quick" if args.quick else ""}.pt'
    if args.quick:
        args.steps, args.eval_every, args.eval_batches, args.warmup = 30, 15, 2, 5

    torch.set_num_threads(args.threads)
    warn_if_reference_blas()
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    text = kjv_text()
    sha = hashlib.sha256(text.encode('utf-8')).hexdigest()
    train_text, val_text = split_text(text)
    if args.bpe_vocab:
        # GPT-2 byte-level BPE learned on the training text only
        import bpe
        t0 = time.time()
        if args.init_from:                            # the starting model's BPE, its training encoding
            enc = bpe.load_tokenizer(args.init_from, config=False)
            merges = sorted(enc.bpe_ranks, key=enc.bpe_ranks.get)
        else:
            merges = bpe.learn_bpe(train_text, args.bpe_vocab - 256)
            enc = bpe.GPT2Encoder(bpe.vocab_from_merges(merges), merges)
        V = len(enc.encoder)
        train_ids, val_ids = enc.encode(train_text), enc.encode(val_text)
        tok_bytes = torch.tensor([len(enc.token_bytes(i)) for i in range(V)])
        encode, decode = enc.encode, enc.decode
        print(f'bpe: {len(merges)} merges, {V} tokens in {time.time() - t0:.0f}s; train {len(train_ids)} tokens '
              f'({len(train_text) / len(train_ids):.2f} bytes/token), val {len(val_ids)} tokens', flush=True)
    else:
        V = 256
        train_ids, val_ids = list(train_text.encode('utf-8')), list(val_text.encode('utf-8'))
        tok_bytes = torch.ones(V, dtype=torch.long)
        encode, decode = (lambda s: list(s.encode('utf-8'))), decode_bytes
    print(f'text: {len(text)} bytes (sha256 {sha[:16]}...), train {len(train_text)}, val {len(val_text)}', flush=True)

    cfg = gpt2_config(V, args.n_positions, args.n_embd, args.n_layer, args.n_head)
    model = load_model(args.init_from).train() if args.init_from else GPT2(cfg)
    cfg = model.cfg = {k: v for k, v in model.cfg.items() if k != 'qkv'}
    n_params = sum(p.numel() for p in model.parameters())
    print(f'model: {n_params} parameters ({n_params * 4 / 1e6:.2f} MB as F32)', flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{'params': decay, 'weight_decay': args.weight_decay},
                             {'params': no_decay, 'weight_decay': 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)

    def lr_at(step):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        t = (step - args.warmup) / max(1, args.steps - args.warmup)
        lo = args.lr * args.min_lr_frac
        return lo + 0.5 * (args.lr - lo) * (1 + math.cos(math.pi * min(1.0, t)))

    gen = torch.Generator().manual_seed(args.seed)
    train_t = torch.tensor(train_ids, dtype=torch.long)
    val_t = torch.tensor(val_ids, dtype=torch.long)
    T = args.block

    def batch(src, starts):
        idx = starts[:, None] + torch.arange(T + 1)[None]
        chunk = src[idx]
        return chunk[:, :-1], chunk[:, 1:]

    # fixed validation windows, evenly spread over the held-out text
    n_win = args.eval_batches * args.batch
    val_starts = torch.linspace(0, len(val_t) - T - 2, n_win).long()

    @torch.no_grad()
    def evaluate():
        """(nats per token, nats per byte) over the fixed validation windows."""
        model.eval()
        nats, nbytes, ntok = 0.0, 0, 0
        for i in range(args.eval_batches):
            x, y = batch(val_t, val_starts[i * args.batch:(i + 1) * args.batch])
            nats += F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1), reduction='sum').item()
            nbytes += int(tok_bytes[y].sum())
            ntok += y.numel()
        model.train()
        return nats / ntok, nats / nbytes

    text_tokens = torch.tensor(sorted(set(train_ids)), dtype=torch.long)   # --random-frac draws its sequences from these
    present = sorted(set(val_ids))                    # the induction measure's tokens: those of the held-out text
    rep_seqs = repeats.repeated_sequences(present, 8, 32)

    guided = bool(args.induction_head or args.prev_head)

    def step_loss():
        """(loss, targets y) of one training batch: next-token loss, plus the induction-head loss if asked."""
        x, y = batch(train_t, torch.randint(0, len(train_t) - T - 1, (args.batch,), generator=gen))
        x, y, spans = repeats.rewrite_batch(args, x, y, V, text_tokens, gen)   # repeated spans and sequences
        repeats.set_head_dropout(model, args, len(x), gen)                     # --head-dropout (or none)
        logits, atts = model(x, output_attentions=True) if guided else (model(x), None)
        repeats.set_head_dropout(model, None, 0, gen)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), ignore_index=repeats.IGNORE)
        aux = repeats.head_losses(args, atts, spans, len(x), T) if guided else 0
        return loss, loss + args.induction_weight * aux, y

    if args.time_steps:
        model.train()
        for i in range(args.time_steps + 1):
            if i == 1:
                t0 = time.time()
            _, loss, _ = step_loss()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        dt = (time.time() - t0) / args.time_steps
        print(f'{dt:.3f} s/step (batch {args.batch} x {T})')
        return

    ln2 = math.log(2)
    os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
    logf = open(args.log, 'w', newline='')
    w = csv.writer(logf)
    w.writerow(['step', 'lr', 'train_loss', 'train_bpb', 'val_loss', 'val_bpb', 'elapsed_s', 'induction_best',
                'copy_loss_first', 'copy_loss_second', 'ablation_top', 'ablation_second'])
    t0 = time.time()
    model.train()
    run_nats, run_bytes, run_tok = 0.0, 0, 0
    val_loss = val_npb = train_loss = train_npb = float('nan')
    for step in range(args.steps + 1):
        if step % args.eval_every == 0 or step == args.steps:
            val_loss, val_npb = evaluate()
            train_loss = run_nats / run_tok if run_tok else float('nan')
            train_npb = run_nats / run_bytes if run_bytes else float('nan')
            rep = repeats.induction_report(model, rep_seqs)
            top2 = torch.topk(rep['ablation'].flatten(), 2).values
            el = time.time() - t0
            fmt = lambda v: '' if math.isnan(v) else f'{v:.4f}'
            w.writerow([step, f'{lr_at(step):.6g}', fmt(train_loss), fmt(train_npb / ln2),
                        f'{val_loss:.4f}', f'{val_npb / ln2:.4f}', f'{el:.0f}', f'{rep["induction"].max():.4f}',
                        f'{rep["first_loss"]:.4f}', f'{rep["second_loss"]:.4f}', f'{top2[0]:.4f}', f'{top2[1]:.4f}'])
            logf.flush()
            print(f'step {step:5d}  train {train_npb / ln2:.3f} bpb  val {val_npb / ln2:.3f} bpb  '
                  f'{el:.0f}s  {repeats.summary(rep)}', flush=True)
            run_nats, run_bytes, run_tok = 0.0, 0, 0
            torch.save({'model': model.state_dict(), 'cfg': cfg, 'step': step}, args.ckpt)
        if step == args.steps:
            break
        for g in opt.param_groups:
            g['lr'] = lr_at(step)
        loss, total, y = step_loss()
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        kept = y != repeats.IGNORE                      # the targets the loss counts
        run_nats += loss.item() * int(kept.sum())
        run_bytes += int(tok_bytes[y[kept]].sum())
        run_tok += int(kept.sum())
    logf.close()
    train_time = time.time() - t0
    model.eval()
    heldout_bpb, heldout_npt, heldout_bytes, heldout_tok = heldout_bits_per_byte(model, val_ids, tok_bytes)
    print(f'whole held-out text: {heldout_bpb:.4f} bits/byte ({heldout_tok} tokens, {heldout_bytes} bytes)', flush=True)

    info = {
        'tokenizer': 'bpe' if args.bpe_vocab else 'bytes',
        'tokenizer_note': (f'GPT-2 byte-level BPE (vocab.json + merges.txt, {len(merges)} merges learned on the '
                           'training text by tools/model/bpe.py); no special tokens, no BOS/EOS'
                           if args.bpe_vocab else
                           'byte-level: token id = UTF-8 byte value (vocab 256); no special tokens, '
                           'no BOS/EOS; decode = bytes -> UTF-8'),
        'text': 'King James Bible (Debian bible-kjv 4.38), one verse per line, chapter headings',
        'text_bytes': len(text),
        'text_sha256': sha,
        'val_split': 'last 5% of the bytes',
        'train_steps': args.steps,
        'batch': args.batch,
        'block': T,
        'seed': args.seed,
        'train_seconds': round(train_time),
        'train_bits_per_byte': round(train_npb / ln2, 4),
        'val_bits_per_byte': round(val_npb / ln2, 4),
        'heldout_bits_per_byte': round(heldout_bpb, 4),
        'heldout_note': 'whole held-out text, windows of n_positions (heldout_bits_per_byte in train_tiny.py)',
        'parameters': n_params,
        'quick': bool(args.quick),
    }
    if args.init_from:
        info['init_from'] = os.path.relpath(os.path.abspath(args.init_from), ROOT)
        info['lr'], info['warmup'], info['min_lr_frac'] = args.lr, args.warmup, args.min_lr_frac
    info.update(repeats.record(args))
    if args.bpe_vocab:
        info['train_tokens'] = len(train_ids)
        info['bytes_per_token'] = round(len(train_text) / len(train_ids), 3)
        bpe.save_tokenizer(args.out, merges)
        if args.init_from and os.path.exists(os.path.join(args.init_from, 'tokenizer_config.json')):
            shutil.copy(os.path.join(args.init_from, 'tokenizer_config.json'), args.out)
    export_model(model, args.out, info)
    check_round_trip(model, args.out, val_t[:min(200, args.n_positions)][None])
    size = os.path.getsize(os.path.join(args.out, 'model.safetensors'))
    print(f'exported to {args.out} ({size} bytes); round trip exact', flush=True)
    print(f'trained {args.steps} steps in {train_time:.0f}s; final train {train_npb / ln2:.3f} bpb, '
          f'val {val_npb / ln2:.3f} bpb', flush=True)
    prompt = encode('In the beginning')
    ids = generate(model, prompt, min(120, args.n_positions - len(prompt)))
    print('greedy:', repr(decode(ids)), flush=True)


if __name__ == '__main__':
    main()
