"""Training windows with repeated spans, and the induction measures train_tiny.py logs.

An induction head attends from a token to the token that followed that token's earlier
occurrence, and the model copies it: "... A B ... A" -> "B". Text alone rarely rewards it in a
128-token window of the KJV, so `add_repeats` rewrites a share of a training batch: in each chosen
window a span of n tokens (n drawn in [min_len, max_len]) is followed by a copy of itself. Half
of the spans are tokens drawn uniformly from the vocabulary (only the copy can be predicted, so
the targets inside the first copy and at the copy's first token are ignored), half are the
window's own text (a passage said twice). The rest of the window stays text.
`add_random_repeats` (--random-frac) makes a share of the other windows the measure's own test:
from a random start to the window's end, a sequence of distinct tokens repeated, so that copying
arbitrary tokens is what pays. `head_dropout_mask` (--head-dropout) removes one head other than
the induction head in a share of the windows, so that no other single head is load-bearing.

With --induction-head L,H, `attention_loss` adds an auxiliary term that trains that head's
attention to the induction pattern on those spans: from each token of a later occurrence to the
token after its previous occurrence (`induction_targets`); the next-token loss then learns to
use what the head brings. The weights stay an ordinary GPT-2.

`induction_report` is the measure the issue asks for, in PyTorch: sequences of `length`
distinct tokens repeated twice; per head, the mean attention from each token of the second copy
to the token after its first occurrence (qkv's headProbes induction score), and the mean loss on
the second copy with every head and with each single head removed (its probabilities times 0,
qkv's headMask).
"""
import torch
import torch.nn.functional as F

IGNORE = -100


def add_arguments(ap):
    """train_tiny.py's options for repeated spans and the induction-head loss."""
    ap.add_argument('--repeat-frac', type=float, default=0.0,
                    help='share of training windows rewritten with a span followed by its copies (add_repeats)')
    ap.add_argument('--repeat-min', type=int, default=8, help='shortest repeated span (tokens)')
    ap.add_argument('--repeat-max', type=int, default=48, help='longest repeated span (tokens)')
    ap.add_argument('--repeat-copies', type=int, default=2, help='most occurrences of a span (2: the span and one copy)')
    ap.add_argument('--induction-head', default=None, help='LAYER,HEAD: add an auxiliary loss that trains this head to '
                    'attend to the token after the previous occurrence on the repeated spans (attention_loss)')
    ap.add_argument('--random-frac', type=float, default=0.0,
                    help='share of training windows (besides --repeat-frac) rewritten from a random start to their end '
                         'with a sequence of distinct tokens of the training text repeated (add_random_repeats)')
    ap.add_argument('--head-dropout', type=float, default=0.0,
                    help='in this share of training windows one head, drawn uniformly from all but --induction-head, is '
                         'removed (its probabilities times 0, as headMask) (head_dropout_mask)')
    ap.add_argument('--induction-weight', type=float, default=1.0, help='weight of that loss')
    ap.add_argument('--prev-head', default=None, help='LAYER,HEAD: the same kind of loss training this head to attend '
                    'to the previous token, at every position of every window (the head an induction head reads)')


def record(args):
    """Those options for config.json's qkv object (empty when unused)."""
    info = {}
    if args.repeat_frac:
        info.update(repeat_frac=args.repeat_frac, repeat_len=[args.repeat_min, args.repeat_max],
                    repeat_copies=args.repeat_copies,
                    repeat_note='that share of training windows holds a span followed by up to repeat_copies - 1 '
                                'copies: half random tokens (targets inside the first occurrence ignored), half the '
                                "window's own text (tools/model/repeats.py)")
    if args.random_frac:
        info.update(random_frac=args.random_frac,
                    random_note='that share of training windows holds, from a random start to its end, a sequence of '
                                'repeat_len distinct tokens of the training text repeated; targets inside its first '
                                'occurrence ignored (tools/model/repeats.py add_random_repeats)')
    if args.head_dropout:
        info.update(head_dropout=args.head_dropout,
                    head_dropout_note='in that share of training windows one head other than induction_head is removed '
                                      '(probabilities times 0, as headMask), so no other single head is load-bearing '
                                      '(tools/model/repeats.py head_dropout_mask)')
    if args.induction_head:
        info.update(induction_head=[int(v) for v in args.induction_head.split(',')], induction_weight=args.induction_weight,
                    induction_note='an auxiliary loss, induction_weight x mean -log of the weight this head puts on the '
                                   'token after the previous occurrence, on the repeated spans (repeats.attention_loss)')
    if args.prev_head:
        info.update(prev_head=[int(v) for v in args.prev_head.split(',')],
                    prev_note='an auxiliary loss, induction_weight x mean -log of the weight this head puts on the '
                              'previous token, at every position (repeats.attention_loss)')
    return info


def head_losses(args, atts, spans, B, T):
    """The auxiliary losses of --induction-head and --prev-head (atts: every layer's [B, H, T, T])."""
    total = 0
    if args.induction_head:
        layer, head = map(int, args.induction_head.split(','))
        total = total + attention_loss(atts[layer], head, induction_targets(spans, T))
    if args.prev_head:
        layer, head = map(int, args.prev_head.split(','))
        total = total + attention_loss(atts[layer], head, previous_targets(B, T))
    return total


def previous_targets(B, T):
    """(windows, queries, keys): every position 1..T-1 of every window and the token before it."""
    q = torch.arange(1, T).repeat(B)
    return torch.arange(B).repeat_interleave(T - 1), q, q - 1


def add_repeats(x, y, frac, min_len, max_len, vocab, gen, max_copies=2):
    """Rewrite a share `frac` of the windows x, y ([B, T] inputs and targets, y = x shifted by
    one) in place with a span followed by its copies (2..max_copies occurrences in all); returns
    the spans as (window, start, length, occurrences). Ignored targets are IGNORE
    (F.cross_entropy's ignore_index)."""
    B, T = x.shape
    w = torch.cat([x, y[:, -1:]], dim=1)                                  # [B, T+1] the windows' tokens
    # x and y may be views of one buffer (train_tiny.batch): write whole rows of both from w
    chosen = torch.nonzero(torch.rand(B, generator=gen) < frac).flatten().tolist()
    spans = []
    for b in chosen:
        n = int(torch.randint(min_len, min(max_len, (T + 1) // 2) + 1, (1,), generator=gen))
        c = int(torch.randint(2, max(2, min(max_copies, (T + 1) // n)) + 1, (1,), generator=gen))
        s = int(torch.randint(0, T + 2 - c * n, (1,), generator=gen))     # span at [s, s+n), copies up to s+c*n
        random_span = bool(torch.rand(1, generator=gen) < 0.5)
        if random_span:
            w[b, s:s + n] = torch.randint(0, vocab, (n,), generator=gen)
        for k in range(1, c):
            w[b, s + k * n:s + (k + 1) * n] = w[b, s:s + n]
        spans.append((b, s, n, c))
        x[b], y[b] = w[b, :-1], w[b, 1:].clone()
        if random_span:                                                   # unpredictable targets: the span, the copy's first token
            y[b, max(0, s - 1):s + n] = IGNORE
    return spans


def add_random_repeats(x, y, frac, min_len, max_len, pool, gen, skip=()):
    """Rewrite a share `frac` of the windows x, y (not those in `skip`) in place: from a random
    start s to the window's end, a sequence of n distinct tokens drawn from `pool` (a 1-D tensor of
    token ids), repeated (at least twice). The classic induction test, as training data: only the
    copies can be predicted, so the targets up to the first copy's first token are IGNORE. Returns
    the spans as add_repeats does."""
    B, T = x.shape
    w = torch.cat([x, y[:, -1:]], dim=1)                                  # [B, T+1]
    chosen = [b for b in torch.nonzero(torch.rand(B, generator=gen) < frac).flatten().tolist() if b not in skip]
    spans = []
    for b in chosen:
        n = int(torch.randint(min_len, min(max_len, (T + 1) // 2) + 1, (1,), generator=gen))
        s = int(torch.randint(0, T + 2 - 2 * n, (1,), generator=gen))
        c = (T + 1 - s + n - 1) // n                                      # occurrences, the last one cut at the end
        seq = pool[torch.randperm(len(pool), generator=gen)[:n]]
        w[b, s:] = seq.repeat(c)[:T + 1 - s]
        spans.append((b, s, n, c))
        x[b], y[b] = w[b, :-1], w[b, 1:].clone()
        y[b, max(0, s - 1):s + n] = IGNORE
    return spans


def rewrite_batch(args, x, y, vocab, pool, gen):
    """train_tiny.py's batch x, y with --repeat-frac's spans and --random-frac's sequences written
    in (copies when either is asked); returns (x, y, spans)."""
    spans = []
    if args.repeat_frac > 0 or args.random_frac > 0:
        x, y = x.clone(), y.clone()
    if args.repeat_frac > 0:
        spans = add_repeats(x, y, args.repeat_frac, args.repeat_min, args.repeat_max, vocab, gen, args.repeat_copies)
    if args.random_frac > 0:
        spans += add_random_repeats(x, y, args.random_frac, args.repeat_min, args.repeat_max, pool, gen,
                                    skip={sp[0] for sp in spans})
    return x, y, spans


def set_head_dropout(model, args, B, gen):
    """Set every layer's per-window head mask for a batch of B windows (--head-dropout), or clear
    them (args None or no --head-dropout)."""
    if args is None or not args.head_dropout:
        _set_mask(model, None)
        return
    keep = tuple(map(int, args.induction_head.split(','))) if args.induction_head else None
    _set_mask(model, head_dropout_mask(B, len(model.h), model.cfg['n_head'], args.head_dropout, keep, gen))


def head_dropout_mask(B, n_layer, n_head, frac, keep, gen):
    """[n_layer, B, n_head] of ones, but in a share `frac` of the windows one head, drawn
    uniformly from all heads except `keep` ((layer, head) or None), is 0."""
    mask = torch.ones(n_layer, B, n_head)
    heads = [(l, h) for l in range(n_layer) for h in range(n_head) if (l, h) != keep]
    for b in torch.nonzero(torch.rand(B, generator=gen) < frac).flatten().tolist():
        l, h = heads[int(torch.randint(0, len(heads), (1,), generator=gen))]
        mask[l, b, h] = 0
    return mask


def induction_targets(spans, T):
    """(windows, queries, keys): for every token p of a later occurrence of a span, the key an
    induction head attends to: p - n + 1, the token after p's previous occurrence."""
    b_, q_, k_ = [], [], []
    for b, s, n, c in spans:
        for p in range(s + n, min(s + c * n, T)):
            b_.append(b)
            q_.append(p)
            k_.append(p - n + 1)
    return torch.tensor(b_, dtype=torch.long), torch.tensor(q_, dtype=torch.long), torch.tensor(k_, dtype=torch.long)


def attention_loss(probs, head, targets):
    """Mean -log of the weight one head ([B, H, L, L] probs of its layer) puts on the targets'
    keys: the auxiliary loss that trains it to the induction pattern (--induction-head)."""
    b, q, k = targets
    if len(b) == 0:
        return probs.sum() * 0
    return -torch.log(probs[b, head, q, k] + 1e-9).mean()


def repeated_sequences(tokens, count, length, seed=0):
    """[count, 2*length]: `length` distinct tokens drawn from `tokens`, then the same again."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.as_tensor(tokens)
    firsts = torch.stack([tokens[torch.randperm(len(tokens), generator=g)[:length]] for _ in range(count)])
    return torch.cat([firsts, firsts], dim=1)


def _set_mask(model, mask):
    """mask [layers, heads] or [layers, B, heads] (per window), or None, on every Attention."""
    for i, block in enumerate(model.h):
        block.attn.head_mask = None if mask is None else mask[i]


@torch.no_grad()
def induction_report(model, seqs):
    """{'induction': [layers, heads] scores, 'second_loss': loss on the second copies (nats/token),
    'first_loss', 'ablation': [layers, heads] second-copy loss with that head removed minus
    second_loss}. seqs [N, 2n] from repeated_sequences."""
    was_training = model.training
    model.eval()
    NL, H = model.cfg['n_layer'], model.cfg['n_head']
    n = seqs.shape[1] // 2
    logits, atts = model(seqs, output_attentions=True)
    q = torch.arange(n, 2 * n)                                            # second-copy queries
    induction = torch.stack([a[:, :, q, q - n + 1].mean(dim=(0, 2)) for a in atts])   # [NL, H]

    def copy_losses(lg):
        nll = F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), seqs[:, 1:].reshape(-1),
                              reduction='none').view(seqs.shape[0], -1)   # [N, 2n-1]: target t+1
        return nll[:, :n - 1].mean().item(), nll[:, n:].mean().item()     # first copy (from its 2nd token), second copy (from its 2nd)

    first, second = copy_losses(logits)
    ablation = torch.zeros(NL, H)
    for l in range(NL):
        for h in range(H):
            mask = torch.ones(NL, H)
            mask[l, h] = 0
            _set_mask(model, mask)
            ablation[l, h] = copy_losses(model(seqs))[1] - second
    _set_mask(model, None)
    model.train(was_training)
    return {'induction': induction, 'first_loss': first, 'second_loss': second, 'ablation': ablation}


def summary(rep):
    """One line: the best induction head, its score, the largest and second-largest ablation."""
    NL, H = rep['induction'].shape
    k = int(rep['induction'].flatten().argmax())
    a = rep['ablation'].flatten()
    top = torch.topk(a, 2)
    name = lambda i: f'L{i // H}H{i % H}'
    return (f'induction best {name(k)} {rep["induction"].flatten()[k]:.3f}; copy loss {rep["first_loss"]:.2f} -> '
            f'{rep["second_loss"]:.2f}; ablation top {name(int(top.indices[0]))} +{top.values[0]:.3f}, '
            f'{name(int(top.indices[1]))} +{top.values[1]:.3f}')
