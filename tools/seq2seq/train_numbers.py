#!/usr/bin/python3
"""Train the tiny BART that spells numbers ("1907" -> "one thousand nine hundred seven") and
export it in the Hugging Face BART layout under web/models/tiny-numbers/.

    nice -n 5 /usr/bin/python3 tools/seq2seq/train_numbers.py --minutes 20   # the committed model
    /usr/bin/python3 tools/seq2seq/train_numbers.py --quick        # pipeline check

Data: synthetic and seeded. Each training number has a uniformly drawn digit count (1..4),
then a uniform value with that many digits, so short numbers are as common as long ones.
The held-out numbers (1000 of the 9000 four-digit ones, drawn once from seed 1234) are never
trained on; the exported accuracy is greedy exact match on them (the whole spelled string).

Size: 2 + 2 layers, d_model 64, 4 heads, FFN 256. Debian's PyTorch runs on a generic
(reference) BLAS, so on the shared 2-core machine a 128-wide model trained at ~1.3 s per
step of 64 examples; 64 wide, ~0.3 s, fits the 25-minute training budget.
"""
import argparse
import json
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, 'tools', 'model'))

from bart import Bart, bart_config  # noqa: E402
from number_words import (CLS, PAD, SEP, VOCAB, MAX_NUMBER, decode_words, encode_number, encode_words,  # noqa: E402
                          spell, vocab_txt)
from train_tiny import save_safetensors  # noqa: E402


def held_out_numbers(count=1000):
    rng = random.Random(1234)
    return sorted(rng.sample(range(1000, MAX_NUMBER + 1), count))


def draw_number(rng, exclude):
    while True:
        digits = rng.randint(1, len(str(MAX_NUMBER)))
        lo = 0 if digits == 1 else 10 ** (digits - 1)
        n = rng.randint(lo, 10 ** digits - 1)
        if n not in exclude:
            return n


def batch(numbers):
    """-> src [B, Ls], src_mask [B, Ls] bool, dec_in [B, Lt], labels [B, Lt] (PAD = ignored)."""
    srcs = [encode_number(n) for n in numbers]
    tgts = [encode_words(spell(n)) for n in numbers]
    Ls = max(map(len, srcs))
    Lt = max(map(len, tgts))
    src = torch.full((len(numbers), Ls), PAD, dtype=torch.long)
    dec_in = torch.full((len(numbers), Lt), PAD, dtype=torch.long)
    labels = torch.full((len(numbers), Lt), PAD, dtype=torch.long)
    for i, (s, t) in enumerate(zip(srcs, tgts)):
        src[i, :len(s)] = torch.tensor(s)
        dec_in[i, :len(t)] = torch.tensor([CLS] + t[:-1])
        labels[i, :len(t)] = torch.tensor(t)
    return src, src != PAD, dec_in, labels


@torch.no_grad()
def exact_match(model, numbers, max_new=8):
    """Greedy, batched (right-padded decoder inputs never matter under the causal mask)."""
    model.eval()
    src, mask, _, _ = batch(numbers)
    enc, _ = model.encode(src, mask)
    out = torch.full((len(numbers), 1), CLS, dtype=torch.long)
    for _ in range(max_new):
        logits, _, _ = model.decode(out, enc, mask)
        out = torch.cat([out, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    ok = sum(decode_words(out[i, 1:].tolist()) == ' '.join(spell(n)) for i, n in enumerate(numbers))
    model.train()
    return ok / len(numbers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--minutes', type=float, default=20.0, help='wall-clock training budget')
    ap.add_argument('--steps', type=int, default=8000)
    ap.add_argument('--batch', type=int, default=64)
    ap.add_argument('--lr', type=float, default=2e-3)
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--out', default=os.path.join(ROOT, 'web', 'models', 'tiny-numbers'))
    args = ap.parse_args()
    if args.quick:
        args.steps, args.minutes = 30, 1.0
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rng = random.Random(0)
    held = held_out_numbers()
    exclude = set(held)
    cfg = bart_config(len(VOCAB), d_model=64, layers=2, heads=4, ffn=256, max_positions=16,
                      pad=PAD, bos=CLS, eos=SEP, decoder_start=CLS)
    model = Bart(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    warm = 200
    t0 = time.time()
    # linear warm-up, then linear decay over whichever budget (steps or minutes) runs out first
    progress = lambda s: max(s / args.steps, (time.time() - t0) / (args.minutes * 60))  # noqa: E731
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.03, 1.0 - progress(s)))
    log = []
    step = 0
    for step in range(1, args.steps + 1):
        src, mask, dec_in, labels = batch([draw_number(rng, exclude) for _ in range(args.batch)])
        logits = model(src, dec_in, mask)['logits']
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        elapsed = time.time() - t0
        if step % 100 == 0 or step == 1:
            line = f'step {step} loss {loss.item():.4f} {elapsed / step * 1000:.0f} ms/step'
            if step % 500 == 0:
                acc = exact_match(model, held[:300])
                line += f' held-out exact {acc:.3f}'
                log.append({'step': step, 'loss': loss.item(), 'held_out_300': acc, 'seconds': round(elapsed)})
            print(line, flush=True)
        if elapsed > args.minutes * 60:
            print(f'time budget reached at step {step}', flush=True)
            break
    acc = exact_match(model, held)
    print(f'final: step {step}, held-out exact match {acc:.4f} on {len(held)} numbers', flush=True)

    os.makedirs(args.out, exist_ok=True)
    cfg = dict(cfg)
    cfg['qkv'] = {'task': 'spell numbers 0..9999 in English words', 'steps': step,
                  'held_out_exact_match': round(acc, 4), 'held_out_count': len(held),
                  'held_out': '1000 of the numbers 1000..9999 drawn by random.Random(1234).sample, never trained on',
                  'trainer': 'tools/seq2seq/train_numbers.py'}
    with open(os.path.join(args.out, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
        f.write('\n')
    save_safetensors(os.path.join(args.out, 'model.safetensors'),
                     {k: v.float().contiguous() for k, v in model.hf_state_dict().items()},
                     metadata={'format': 'pt'})
    with open(os.path.join(args.out, 'vocab.txt'), 'w') as f:
        f.write(vocab_txt())
    with open(os.path.join(args.out, 'tokenizer_config.json'), 'w') as f:
        json.dump({'tokenizer_class': 'BertTokenizer', 'do_lower_case': True, 'model_max_length': 16,
                   'cls_token': '[CLS]', 'sep_token': '[SEP]', 'pad_token': '[PAD]', 'unk_token': '[UNK]',
                   'mask_token': '[MASK]'}, f, indent=2)
        f.write('\n')
    with open(os.path.join(HERE, 'train_log.json'), 'w') as f:
        json.dump({'log': log, 'final_step': step, 'held_out_exact_match': acc}, f, indent=1)
    print('wrote', args.out)


if __name__ == '__main__':
    main()
