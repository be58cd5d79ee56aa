#!/usr/bin/python3
"""Train the tiny bidirectional encoder (BERT, masked-LM) on the KJV and export it in HF's layout.

    /usr/bin/python3 tools/model/train_bert.py --quick          # pipeline check, exports to /tmp
    /usr/bin/python3 tools/model/train_bert.py --time-steps 10  # seconds per step
    /usr/bin/python3 tools/model/train_bert.py --steps N        # -> web/models/tiny-bert-kjv

The text: the verses of the KJV (train_tiny.kjv_text(), verse numbers and chapter headings
dropped), the last 5 % of the verses held out. The vocabulary: wordpiece.train() over the
training verses. An example is a pair of consecutive verses, "[CLS] A [SEP] B [SEP]" with
token types 0 for A (and its [CLS]/[SEP]) and 1 for B, cut to --block tokens. Masking as BERT:
15 % of the non-special tokens are predicted; of those 80 % become [MASK], 10 % a random
token, 10 % stay. Validation: a fixed set of held-out pairs, 15 % of the tokens replaced by
[MASK] (all of them), accuracy = top-1 of the MLM head at the masked positions.
"""

import argparse
import json
import math
import os
import re
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from train_tiny import kjv_text, load_safetensors, save_safetensors, warn_if_reference_blas  # noqa: E402
import wordpiece  # noqa: E402
from bert_torch import BertForMaskedLM, bert_config, from_hf_state_dict, hf_state_dict  # noqa: E402

HEADING = re.compile(r'^(\d )?[A-Z][A-Za-z ]+ \d+$')     # "Genesis 1", "1 Samuel 3"


def kjv_verses():
    verses = []
    for ln in kjv_text().splitlines():
        if HEADING.match(ln):
            continue
        m = re.match(r'^\d+ (.*)$', ln)
        if not m:
            raise SystemExit(f'train_bert: unexpected line {ln!r}')
        verses.append(m.group(1))
    if len(verses) != 31102:
        raise SystemExit(f'train_bert: expected 31102 verses, got {len(verses)}')
    return verses


def make_pairs(enc, block, cls, sep):
    """Consecutive verses -> (ids [N, block], types [N, block], lengths [N]), padded with 0."""
    n = len(enc) - 1
    ids = np.zeros((n, block), np.int64)
    types = np.zeros((n, block), np.int64)
    lens = np.zeros(n, np.int64)
    room = block - 3
    for i in range(n):
        a, b = enc[i], enc[i + 1]
        a = a[:max(room // 2, room - len(b))]
        b = b[:room - len(a)]
        seq = [cls] + a + [sep] + b + [sep]
        ids[i, :len(seq)] = seq
        types[i, len(a) + 2:len(seq)] = 1
        lens[i] = len(seq)
    return ids, types, lens


def mask_batch(ids, lens, gen, vocab_size, mask_id, n_special, train=True, rate=0.15):
    """-> (input ids, labels with -100 where not predicted)."""
    B, L = ids.shape
    pos = torch.arange(L)[None]
    real = (pos > 0) & (pos < lens[:, None] - 1) & (ids >= n_special)   # not [CLS]/[SEP]/pad
    pick = (torch.rand(B, L, generator=gen) < rate) & real
    labels = torch.where(pick, ids, torch.full_like(ids, -100))
    x = ids.clone()
    if not train:
        x[pick] = mask_id
        return x, labels
    r = torch.rand(B, L, generator=gen)
    x[pick & (r < 0.8)] = mask_id
    rnd = pick & (r >= 0.8) & (r < 0.9)
    x[rnd] = torch.randint(n_special, vocab_size, (B, L), generator=gen)[rnd]
    return x, labels


@torch.no_grad()
def neighbour_init(model, train_tokens, gen):
    """A start that already routes each token's neighbours to it, so training need not first
    discover attention to nearby positions (the long plateau at unigram accuracy):
      - the last 32 hidden dimensions carry positions only: sinusoids of 16 frequencies
        (geometric, 0.05 .. 3 rad per token) in position_embeddings, zero in the word table;
        the first 96 carry words only (random rows of equal norm, so LayerNorm scales the
        positions alike for every token); both at BERT's 0.02 per dimension;
      - layer 0, head h reads only the position dimensions: query = the position rotated by
        d = (-1, +1, -2, +2)[h] tokens, key = the position, so it attends to the token d away;
        its value copies a 32-wide slice of that token's word dimensions and its output adds
        it to the same slice (d = -2 and +2 share the third slice);
      - every other residual branch (layer 0's FFN, layers 1.. attention and FFN) starts at zero
        (an identity layer, as Fixup/ReZero), the MLM head as BERT initializes it, its bias at
        log unigram frequencies (the best context-free guess).
    Every weight stays trainable; only the starting point differs."""
    e = model.bert.embeddings
    V, E = e.word_embeddings.weight.shape
    P = e.position_embeddings.weight.shape[0]
    W, D = E - 32, 32
    w = torch.randn(V, W, generator=gen)
    e.word_embeddings.weight.zero_()
    e.word_embeddings.weight[:, :W] = w / w.norm(dim=1, keepdim=True) * (0.02 * math.sqrt(W))   # BERT's scale
    f = 0.05 * (3.0 / 0.05) ** (torch.arange(16.) / 15)
    pos = torch.arange(float(P))[:, None]
    e.position_embeddings.weight.zero_()
    amp = 0.02 * math.sqrt(2)                            # the word dimensions' per-dimension scale
    e.position_embeddings.weight[:, W::2] = amp * torch.sin(pos * f)
    e.position_embeddings.weight[:, W + 1::2] = amp * torch.cos(pos * f)
    e.token_type_embeddings.weight.zero_()

    def shift(d):  # [sin(x + a), cos(x + a)] from [sin x, cos x], a = f d, per frequency
        R = torch.zeros(D, D)
        for i in range(16):
            ca, sa = math.cos(f[i] * d), math.sin(f[i] * d)
            R[2 * i, 2 * i], R[2 * i, 2 * i + 1], R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = ca, sa, -sa, ca
        return R

    layers = model.bert.encoder.layer
    H = E // D
    s, o = layers[0].attention.self, layers[0].attention.output.dense
    for lin in (s.query, s.key, s.value, o):
        lin.weight.zero_()
        lin.bias.zero_()
    for h, d in enumerate((-1, 1, -2, 2)[:H]):
        s.query.weight[D * h:D * (h + 1), W:] = shift(d)
        s.key.weight[D * h:D * (h + 1), W:] = torch.eye(D)
        src = D * min(h, W // D - 1)
        s.value.weight[D * h:D * (h + 1), src:src + D] = torch.eye(D)
        o.weight[src:src + D, D * h:D * (h + 1)] = torch.eye(D)
    for i, layer in enumerate(layers):
        layer.output.dense.weight.zero_()
        layer.output.dense.bias.zero_()
        if i > 0:
            layer.attention.output.dense.weight.zero_()
            layer.attention.output.dense.bias.zero_()
    counts = torch.bincount(torch.tensor(train_tokens), minlength=V).double() + 1
    model.cls.predictions.bias.copy_(torch.log(counts / counts.sum()).float())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--steps', type=int, default=3000)
    ap.add_argument('--out', default=None)
    ap.add_argument('--seed', type=int, default=1234)
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--block', type=int, default=64)
    ap.add_argument('--vocab', type=int, default=4096)
    ap.add_argument('--hidden', type=int, default=128)
    ap.add_argument('--layers', type=int, default=2)
    ap.add_argument('--heads', type=int, default=4)
    ap.add_argument('--max-pos', type=int, default=128)
    ap.add_argument('--lr', type=float, default=1e-3)
    ap.add_argument('--warmup', type=int, default=200)
    ap.add_argument('--weight-decay', type=float, default=0.01)
    ap.add_argument('--intermediate', type=int, default=0, help='FFN width (default 4 x hidden)')
    ap.add_argument('--dropout', type=float, default=0.1, help='hidden and attention dropout while training')
    ap.add_argument('--mask-rate', type=float, default=0.15, help='share of tokens predicted while training '
                    '(validation always masks 15 %%)')
    ap.add_argument('--min-lr', type=float, default=0.0, help='the linear decay ends here (a fraction of --lr)')
    ap.add_argument('--time-budget', type=float, default=0,
                    help='seconds: the schedule runs on max(step / steps, elapsed / budget) and training '
                         'ends when that reaches 1 (for a shared machine whose speed varies)')
    ap.add_argument('--pos-init', type=float, default=0.0,
                    help='start the position embeddings as sinusoids of this std (0: random, as BERT), so attention '
                         'can find neighbours from the first step')
    ap.add_argument('--neighbour-init', action='store_true',
                    help="start layer 0's heads attending to the tokens at -1, +1, -2, +2 (see neighbour_init), the "
                         'other residual branches at zero and the decoder bias at log unigram frequencies')
    ap.add_argument('--resume', action='store_true', help='continue from --ckpt (model, optimizer, RNG, clock)')
    ap.add_argument('--init-from', default=None,
                    help='start from an exported model folder (its weights; a fresh optimizer; its log and '
                         'segments carried on), e.g. web/models/tiny-bert-kjv when the --ckpt is gone')
    ap.add_argument('--eval-every', type=int, default=250)
    ap.add_argument('--eval-pairs', type=int, default=512)
    ap.add_argument('--time-steps', type=int, default=0)
    ap.add_argument('--ckpt', default='/tmp/qkv-tiny-bert.pt')
    ap.add_argument('--export-ckpt', default=None,
                    help='export the checkpoint saved at an evaluation (e.g. a run stopped at its time budget) '
                         'instead of training')
    args = ap.parse_args()
    if args.out is None:
        args.out = '/tmp/qkv-quick/tiny-bert-kjv' if args.quick else os.path.join(ROOT, 'web', 'models', 'tiny-bert-kjv')
    if args.quick:
        args.steps, args.eval_every, args.warmup, args.eval_pairs = 30, 15, 5, 64

    torch.set_num_threads(1)
    warn_if_reference_blas()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    t0 = time.time()

    verses = kjv_verses()
    n_val = len(verses) // 20
    train_v, val_v = verses[:-n_val], verses[-n_val:]
    counts = {}
    for v in train_v:
        for w in wordpiece.basic_tokenize(v):
            counts[w] = counts.get(w, 0) + 1
    vocab = wordpiece.train(counts, args.vocab)
    wp = wordpiece.WordPiece(vocab)
    cls, sep, mask_id = wp.ids['[CLS]'], wp.ids['[SEP]'], wp.ids['[MASK]']
    n_special = len(wordpiece.SPECIAL)
    enc_t = [wp.encode(v) for v in train_v]
    enc_v = [wp.encode(v) for v in val_v]
    tr_ids, tr_types, tr_lens = (torch.from_numpy(a) for a in make_pairs(enc_t, args.block, cls, sep))
    va_ids, va_types, va_lens = (torch.from_numpy(a) for a in make_pairs(enc_v, args.block, cls, sep))
    n_tok = sum(map(len, enc_t))
    unk = sum(t.count(wp.unk) for t in enc_t)
    print(f'vocab {len(vocab)}; train {len(train_v)} verses, {n_tok} tokens ({unk} [UNK]); '
          f'val {len(val_v)} verses; {time.time() - t0:.0f}s', flush=True)

    cfg = bert_config(len(vocab), args.hidden, args.layers, args.heads, args.intermediate or 4 * args.hidden,
                      args.max_pos)
    cfg['hidden_dropout_prob'] = cfg['attention_probs_dropout_prob'] = args.dropout
    model = BertForMaskedLM(cfg)
    if args.pos_init:
        with torch.no_grad():
            P, E = model.bert.embeddings.position_embeddings.weight.shape
            pos = torch.arange(P, dtype=torch.float64)[:, None]
            freq = torch.exp(-math.log(10000.0) * torch.arange(0, E, 2, dtype=torch.float64) / E)[None]
            pe = torch.zeros(P, E, dtype=torch.float64)
            pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
            model.bert.embeddings.position_embeddings.weight.copy_(pe / pe.std() * args.pos_init)
    if args.neighbour_init:
        neighbour_init(model, [t for v in train_v for t in wp.encode(v)], gen)
    n_params = sum(p.numel() for p in model.parameters())
    print(f'model: {n_params} parameters', flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{'params': decay, 'weight_decay': args.weight_decay},
                             {'params': no_decay, 'weight_decay': 0.0}], lr=args.lr, betas=(0.9, 0.98), eps=1e-6)

    def progress(step, elapsed):
        p = step / args.steps
        return max(p, elapsed / args.time_budget) if args.time_budget else p

    def lr_at(step, p):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        p0 = args.warmup / args.steps                          # linear decay, as BERT, from the warmup's end
        t = min(1.0, max(0.0, (p - p0) / max(1e-9, 1 - p0)))
        return args.lr * (args.min_lr + (1 - args.min_lr) * (1.0 - t))

    # fixed validation set: evenly spread held-out pairs, masks from their own seed
    vsel = torch.linspace(0, len(va_ids) - 1, min(args.eval_pairs, len(va_ids))).long()
    vx, vy = mask_batch(va_ids[vsel], va_lens[vsel], torch.Generator().manual_seed(99), len(vocab),
                        mask_id, n_special, train=False)
    vt, vm = va_types[vsel], (torch.arange(args.block)[None] < va_lens[vsel][:, None]).long()

    @torch.no_grad()
    def evaluate():
        model.eval()
        hit = tot = 0
        loss = 0.0
        for i in range(0, len(vx), 64):
            logits, _ = model(vx[i:i + 64], vt[i:i + 64], vm[i:i + 64])
            y = vy[i:i + 64]
            sel = y != -100
            loss += F.cross_entropy(logits[sel], y[sel], reduction='sum').item()
            hit += (logits[sel].argmax(-1) == y[sel]).sum().item()
            tot += sel.sum().item()
        model.train()
        return loss / tot, hit / tot, tot

    def step_fn(step):
        sel = torch.randint(0, len(tr_ids), (args.batch,), generator=gen)
        L = int(tr_lens[sel].max())                            # trim the batch to its longest pair
        ids, lens = tr_ids[sel, :L], tr_lens[sel]
        x, y = mask_batch(ids, lens, gen, len(vocab), mask_id, n_special, rate=args.mask_rate)
        am = (torch.arange(L)[None] < lens[:, None]).long()
        hidden, _ = model(x, tr_types[sel, :L], am, head=False)
        pick = y != -100                                       # the MLM head only where predicted
        loss = F.cross_entropy(model.head(hidden[pick]), y[pick])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    if args.export_ckpt:
        ck = torch.load(args.export_ckpt)
        if ck['vocab'] != vocab:
            raise SystemExit('train_bert: the checkpoint was trained with another vocabulary')
        model.load_state_dict(ck['model'])
        vl, acc, ntok = evaluate()
        log = ck.get('log', []) or [{'step': ck['step'], 'val_loss': round(vl, 4), 'val_masked_accuracy': round(acc, 4)}]
        print(f'checkpoint at step {ck["step"]}: val {vl:.3f}, val acc {acc:.4f} ({ntok} masked)', flush=True)
        export(args, model, cfg, vocab, n_params, log, ntok, ck['step'], ck.get('elapsed_s'))
        return

    model.train()
    if args.time_steps:
        step_fn(0)
        t1 = time.time()
        for i in range(args.time_steps):
            step_fn(i)
        print(f'{(time.time() - t1) / args.time_steps:.3f} s/step (batch {args.batch} x <= {args.block})')
        return

    log, start, spent, offset = [], 0, 0.0, 0           # offset: seconds trained before this run (logged)
    prior = None                                               # the --init-from model's config
    seg0 = 0                                                   # the step this segment's schedule starts at
    if args.init_from:
        with open(os.path.join(args.init_from, 'config.json')) as f:
            prior = json.load(f)
        with open(os.path.join(args.init_from, 'vocab.txt')) as f:
            if f.read().splitlines() != vocab:
                raise SystemExit('train_bert: --init-from: the model has another vocabulary')
        tensors, _ = load_safetensors(os.path.join(args.init_from, 'model.safetensors'))
        src = from_hf_state_dict(prior, {k: v.float() for k, v in tensors.items()})
        model.load_state_dict(src.state_dict())
        q = prior['qkv']
        log, start, offset = list(q['log']), q['train_steps'], q['train_seconds']
        seg0 = start
        print(f'initialised from {args.init_from} (step {start}); fresh optimizer', flush=True)
    if args.resume:
        ck = torch.load(args.ckpt)
        if ck['vocab'] != vocab or ck['cfg'] != cfg:
            raise SystemExit('train_bert: --resume: the checkpoint has another vocabulary or config')
        model.load_state_dict(ck['model'])
        opt.load_state_dict(ck['opt'])
        gen.set_state(ck['gen'])
        log, start, spent = ck['log'], ck['step'], ck['elapsed_s']
        seg0, offset = ck.get('seg0', 0), ck.get('offset', 0)
        prior = ck.get('prior', prior)
        print(f'resumed at step {start}, {spent:.0f}s trained', flush=True)
    t1 = time.time() - spent
    run, run_n = 0.0, 0
    step = start
    while True:
        elapsed = time.time() - t1
        k = step - seg0                                        # --init-from: warmup and schedule start afresh
        p = progress(k, elapsed)
        done = p >= 1
        if (step % args.eval_every == 0 and step != start) or done or (step == start and not args.resume):
            vl, acc, ntok = evaluate()
            tl = run / run_n if run_n else float('nan')
            if not (prior and step == seg0):                  # --init-from: its last entry is this one
                log.append({'step': step, 'lr': round(lr_at(k, p), 6),
                            'train_loss': None if tl != tl else round(tl, 4),
                            'val_loss': round(vl, 4), 'val_masked_accuracy': round(acc, 4),
                            'elapsed_s': round(offset + time.time() - t1)})
            print(f'step {step:5d}  lr {lr_at(k, p):.2e}  train {tl:.3f}  val {vl:.3f}  val acc {acc:.4f} '
                  f'({ntok} masked)  {time.time() - t1:.0f}s', flush=True)
            run, run_n = 0.0, 0
            torch.save({'model': model.state_dict(), 'opt': opt.state_dict(), 'gen': gen.get_state(), 'cfg': cfg,
                        'vocab': vocab, 'step': step, 'log': log, 'elapsed_s': time.time() - t1,
                        'args': vars(args), 'seg0': seg0, 'offset': offset, 'prior': prior}, args.ckpt + '.tmp')
            os.replace(args.ckpt + '.tmp', args.ckpt)         # a kill mid-save leaves the last one whole
        if done:
            break
        for g in opt.param_groups:
            g['lr'] = lr_at(k, p)
        run += step_fn(step)
        run_n += 1
        step += 1

    segments = None
    if prior:
        segments = prior['qkv'].get('segments', []) + [{
            'steps': f'{seg0}-{step}', 'lr': args.lr, 'min_lr': args.min_lr, 'warmup': args.warmup,
            'time_budget_s': args.time_budget,
            'note': f'--init-from {args.init_from}: its weights, a fresh AdamW'}]
    export(args, model, cfg, vocab, n_params, log, ntok, step, round(offset + time.time() - t1), segments)


def export(args, model, cfg, vocab, n_params, log, ntok, steps, seconds, segments=None):
    model.eval()
    os.makedirs(args.out, exist_ok=True)
    cfg_out = dict(cfg)
    cfg_out['qkv'] = {
        'text': 'King James Bible (Debian bible-kjv 4.38), verse text only; last 5% of verses held out',
        'objective': f'masked LM ({args.mask_rate:.0%}: 80% [MASK], 10% random, 10% kept), pairs of consecutive verses',
        'train_steps': steps, 'planned_steps': args.steps, 'time_budget_s': args.time_budget, 'batch': args.batch,
        'block': args.block, 'seed': args.seed, 'lr': args.lr, 'min_lr': args.min_lr, 'warmup': args.warmup,
        'weight_decay': args.weight_decay, 'dropout': args.dropout, 'pos_init': args.pos_init,
        'neighbour_init': args.neighbour_init,
        'train_seconds': seconds, 'parameters': n_params,
        'val_masked_tokens': ntok,
        'val_masked_accuracy': log[-1]['val_masked_accuracy'], 'val_loss': log[-1]['val_loss'],
        'log': log, 'quick': bool(args.quick),
    }
    if segments:
        cfg_out['qkv']['segments'] = segments
    with open(os.path.join(args.out, 'config.json'), 'w') as f:
        json.dump(cfg_out, f, indent=2)
        f.write('\n')
    sd = {k: v.float() for k, v in hf_state_dict(model).items()}
    save_safetensors(os.path.join(args.out, 'model.safetensors'), sd, {'format': 'pt'})
    with open(os.path.join(args.out, 'vocab.txt'), 'w') as f:
        f.write(''.join(t + '\n' for t in vocab))
    with open(os.path.join(args.out, 'tokenizer_config.json'), 'w') as f:
        json.dump({'tokenizer_class': 'BertTokenizer', 'do_lower_case': True, 'strip_accents': None,
                   'tokenize_chinese_chars': True, 'model_max_length': args.max_pos,
                   'unk_token': '[UNK]', 'sep_token': '[SEP]', 'pad_token': '[PAD]',
                   'cls_token': '[CLS]', 'mask_token': '[MASK]'}, f, indent=2)
        f.write('\n')
    print(f'exported to {args.out}; val masked accuracy {log[-1]["val_masked_accuracy"]}', flush=True)


if __name__ == '__main__':
    main()
